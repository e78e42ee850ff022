"""The pinned serving configuration of one serving case row (the `inference` kind's rules,
validate/inference_cases.py's docstring), shared by the `inference` and `loaded` kinds: both build the
row's RunConfig here, so neither imports the other for it."""

from __future__ import annotations

from .cases import DEFAULT_HARDWARE, as_int, get, model_of, overlap_of


BATCH_WAIT_COLUMNS = ("batch_wait_timeout_iters", "batch_wait_max_tokens_ratio")


def with_batch_wait(row, engine):
    """The engine with a serving row's optional batch_wait_timeout_iters / batch_wait_max_tokens_ratio
    columns (TensorRT-LLM's batch waiting where the run's script sets it, cost/batch_wait.py; blank:
    the engine file's), checked against the engine's bounds: a bad value is one sentence."""
    from pydantic import ValidationError

    from ..errors import UserError, format_validation_error

    given = {k: get(row, k) for k in BATCH_WAIT_COLUMNS if get(row, k) is not None}
    if not given:
        return engine
    try:
        return type(engine).model_validate({**engine.model_dump(), **given})
    except ValidationError as exc:
        raise UserError(f"case {row.get('case')!r}: " + format_validation_error(exc)) from None


def inference_run_of(row, shipped_models: dict, hardware_of, base_output, engine_of, stack_of=None):
    """RunConfig with a fully pinned serving layout for one case row (engine_of: engine name -> EngineSpec; stack_of: training only)."""
    from pydantic import ValidationError

    from ..errors import UserError, format_validation_error
    from ..specs import GridSpec, InferenceWorkload, RunConfig

    model = model_of(row, shipped_models)
    hw = hardware_of(get(row, "accelerator", DEFAULT_HARDWARE))
    engine = engine_of(None if get(row, "engine") is None else str(get(row, "engine")).lower())
    if overlap_of(row) is not None:
        engine = engine.model_copy(update={"overlap_scheduler": overlap_of(row)})
    engine = with_batch_wait(row, engine)
    tp, pp, ep, sp = (as_int(row, k, 1) for k in ("tp", "pp", "ep", "sp"))
    gpus = as_int(row, "gpus", tp * pp * sp)
    weights = str(get(row, "precision", "bf16")).lower()
    compute = weights if weights in ("bf16", "fp16", "fp8") else "bf16"
    dp = max(gpus // (tp * pp * sp), 1)
    batch = -(-as_int(row, "concurrency", 1) // dp)
    spec = {
        k: get(row, k)
        for k in (
            "spec_method",
            "spec_tokens",
            "spec_acceptance",
            "moe_dispatcher",
            "eplb_redundant_experts",
            "moe_routing",
            "scheduler_steps",
            "prefill_chunk_tokens",
        )
        if get(row, k) is not None
    }
    try:
        wl = InferenceWorkload(
            input_len=as_int(row, "input_len"),
            output_len=as_int(row, "output_len"),
            batch=batch,
            weight_dtype=weights,
            **spec,
            kv_dtype=str(get(row, "kv_cache_precision", "bf16")).lower(),
            precision=compute,
            batching=str(get(row, "batching", "continuous")).lower(),
            chunked_prefill=str(get(row, "chunked_prefill", "true")).lower(),
        )
        grid = GridSpec(ngpus=[gpus], tp=[tp], pp=[pp], ep=[ep], sp=[sp], batch=[batch], cross_node_tp=True)
        return RunConfig(model=model, hardware=hw, workload=wl, grid=grid, output=base_output, engine=engine)
    except ValidationError as exc:
        raise UserError(f"case {row.get('case')!r}: " + format_validation_error(exc)) from None

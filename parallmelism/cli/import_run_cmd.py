"""`parallmelism import-run FILE`: a framework's launch configuration read back into the overrides that pin it."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .options import CONFIG_DIR


def import_run(
    file: Path = typer.Argument(
        ...,
        help="a Megatron or Megatron-Bridge script or command line, torchtitan TOML, ds_config JSON, vllm, sglang or trtllm-serve command, MaxText yml, Dynamo manifest",
    ),
    frm: Optional[str] = typer.Option(None, "--from", "-f", help="the file's target (default: told from its content)"),
    model: Optional[str] = typer.Option(None, "--model", help="model name (default: the export's header)"),
    hardware: Optional[str] = typer.Option(None, "--hardware", help="accelerator name (default: the export's header)"),
    ngpus: Optional[int] = typer.Option(None, "--ngpus", min=1, help="world size, where the file does not say it"),
    show_it: bool = typer.Option(False, "--show", help="run `show` on the layout instead of printing the overrides"),
    config_dir: Optional[List[str]] = CONFIG_DIR,
):
    """Read a training or serving configuration into pinned overrides (`show` takes them)."""
    from ..errors import UserError, require_file
    from .common import fail

    try:
        from ..export import TARGETS, target_module
        from ..export.layout import header_fields, override_strings

        if frm is not None and frm not in TARGETS:  # (target_module's sentence names export's --to)
            raise UserError(f"--from {frm!r} is not a target; choose one of {', '.join(TARGETS)}")
        path = require_file(file, "run file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise UserError(f"run file {str(path)!r} is not UTF-8 text") from None
        target = frm or _guess(path, text)
        head = header_fields(text)
        model = model or head.get("model")
        hardware = hardware or head.get("hardware")
        if target == "dynamo":  # two pools: one line of overrides each
            _pools(target_module(target).parse_pools(text), show_it, config_dir)
            return
        _check_holds_a_setting(path, text, target, target_module(target))
        layers = _layers(model, config_dir) if model else None
        pinned = target_module(target).parse(text, ngpus, layers)
        domain = _domain_size(hardware, config_dir) if hardware else None
        if domain and int(str(pinned.get("grid.tp", 1))) > domain:  # show keeps such a layout only when asked
            pinned["grid.cross_node_tp"] = True
        lead: dict = {}
        if "workload" in pinned:
            lead["workload"] = pinned.pop("workload")
        if model:
            lead["model"] = model
        if hardware:
            lead["hardware"] = hardware
        overrides = override_strings({**lead, **pinned})
        if not show_it:
            typer.echo(" ".join(overrides))
            return
        missing = [name for name, value in (("--model", model), ("--hardware", hardware)) if not value]
        if missing:  # show would silently take the default model or accelerator
            raise UserError(f"the file names no model or hardware: pass {' and '.join(missing)} to show it")
        from .show_run import show

        show(overrides=overrides, config_dir=config_dir)
    except UserError as exc:
        fail(str(exc))


def _pools(pools: dict, show_it: bool, config_dir) -> None:
    """Each pool of a disaggregated manifest: 'prefill workers 13: OVERRIDES', and `show` of each."""
    from ..export.layout import override_strings

    for pool, (pinned, replicas) in pools.items():
        overrides = override_strings(pinned)
        typer.echo(f"{pool} workers {replicas}: {' '.join(overrides)}")
        if show_it:
            from .show_run import show

            show(overrides=overrides, config_dir=config_dir)


def _check_holds_a_setting(path: Path, text: str, target: str, module) -> None:
    """A file that names none of the target's settings (its FIELDS; NeMo's also as Megatron-Bridge
    keys) is refused: its parse gave the framework's defaults, exit 0, as if a layout had been read
    (`import-run notes.txt --from megatron` printed tp 1, pp 1, ...)."""
    from ..errors import UserError

    names = list(module.FIELDS) + [v for v in module.FIELDS.values() if isinstance(v, str) and target == "nemo"]
    names += list(getattr(module, "CONFIG_FIELDS", ()))
    # a flag as written (--tensor-parallel-size), a dotted key by its last part (parallelism.tensor_parallel_degree)
    words = {n if n.startswith("-") else n.rsplit(".", 1)[-1] for n in names}
    if not any(w in text for w in words):
        raise UserError(
            f"{str(path)!r} holds none of {target}'s settings (e.g. {next(iter(module.FIELDS))}); "
            "give the launch script, command line or config file, or the right --from"
        )


def _guess(path: Path, text: str) -> str:
    """The target a file is written for, from its name and content."""
    from ..errors import UserError

    suffix = path.suffix.lower()
    if suffix == ".json":
        return "deepspeed"
    if suffix == ".toml":
        return "torchtitan"
    if "DynamoGraphDeployment" in text:
        return "dynamo"
    if suffix in (".yml", ".yaml") and "ici_" in text:
        return "maxtext"
    for target, marks in (
        ("vllm", ("vllm serve", "VLLM_ARGS", "--tensor-parallel-size")),
        ("sglang", ("sglang.launch_server", "SGLANG_ARGS", "--tp-size")),
        ("trtllm", ("trtllm-serve", "TRTLLM_ARGS", "--tp_size")),
        ("megatron", ("pretrain_gpt", "MEGATRON_ARGS", "--tensor-model-parallel-size")),
        ("nemo", ("BRIDGE_OVERRIDES", "run_recipe.py", "train.sh", "model.tensor_model_parallel_size")),
    ):
        if any(m in text for m in marks):
            return target
    raise UserError(f"cannot tell which framework {str(path)!r} is for; name it with --from")


def _layers(model: str, config_dir) -> int | None:
    """The model's layer count (torchtitan's virtual stages need it), None if it does not load."""
    from ..errors import UserError

    try:
        from .common import load_runs

        return int(load_runs([f"model={model}"], config_dir)[0].model.layers)
    except UserError:
        return None


def _domain_size(hardware: str, config_dir) -> int | None:
    """GPUs of the accelerator's scale-up domain, None if it does not load (show says why later)."""
    from ..errors import UserError

    try:
        from .common import load_runs

        return int(load_runs([f"hardware={hardware}"], config_dir)[0].hardware.scale_up.domain_size)
    except UserError:
        return None

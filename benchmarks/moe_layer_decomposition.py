"""TensorRT-LLM's per-MoE-layer decode overhead (conf/engine/trtllm.yaml moe_layer_overhead_us, 45 us fitted on
DeepSeek-R1) taken apart op by op: the model's time per part of a decode layer against aiconfigurator's
measurement of the same op, for one DeepSeek-R1 row and one Qwen3-235B-A22B row at the same concurrency and layout.

    python benchmarks/moe_layer_decomposition.py AICONFIGURATOR_CORE_DIR

AICONFIGURATOR_CORE_DIR: the installed `aiconfigurator_core` package of the aiconfigurator 0.12.0 wheel (NVIDIA,
Apache-2.0, github.com/ai-dynamo/aiconfigurator; pip install aiconfigurator==0.12.0), as for
benchmarks/build_engine_moe_table.py. Its systems/data/{h200_sxm,h100_sxm}/*/trtllm/1.3.0rc20/ op tables, each
one op on one GPU under a CUDA graph:
  attention   DeepSeek: mla/mla_generation_module_perf (TensorRT-LLM's MLA module forward: the fused q_a/kv_a
              GEMM, the latent norms, q_b, the absorption BMMs, RoPE and the cache write, attention, the output
              BMM and o_proj; collector/trtllm/collect_mla_module.py), fp8 block-scaled GEMMs, the row's cache dtype;
              Qwen3: gemm/gemm_perf fp8_block qkv and o_proj + attention/generation_attention_perf
  router      gemm/gemm_perf bf16 (hidden -> experts)
  experts     moe/moe_perf `moe_torch_flow_cutlass` fp8_block, balanced routing (the op the engine tables hold)
  shared      DeepSeek's shared expert: gemm/gemm_perf fp8_block gate+up and down (TensorRT-LLM runs it on an
              auxiliary stream beside the routed experts: its time is at most this)
  dense mlp   DeepSeek's first 3 layers: gemm/gemm_perf fp8_block gate+up and down
  all-reduce  comm/custom_allreduce_perf, 2 a layer (message: tokens x hidden bf16 elements)
The model's side is cost.inference.decode_terms with the row's engine (the kernel model at the mean context;
the TP all-reduces as the engine runs them), per layer of each kind, without the engine's iteration and per-MoE-layer
overheads. The rows:
  DeepSeek-R1 fp8, H200, TP 8 EP 8, 4 clients, 1k/1k, TensorRT-LLM 1.1.0rc2.post2 (in the fit)
  Qwen3-235B-A22B-FP8, H100, TP 8 EP 8, 4 clients, 1k/128, TensorRT-LLM 1.0.0rc3 (held out, never fitted)
Residual per MoE layer = (measured ITL - the model's stall (prompt passes' share) - lm_head, embedding, final norm)
minus the measured layer parts, over the MoE layers: the time neither op inventory holds, which the fitted
moe_layer_overhead_us stands for. Prints figures only (microseconds); nothing is fitted here.

What it showed (this checkout, 2026-11-28; `--all`): no DeepSeek op is short in the model. Against the measured
ops the model is 17-25 us a layer slow on DeepSeek-R1 (the MLA module 9-12 us: 66-71 us modelled, 54-63 measured;
router 3, routed experts 3-8, all-reduce 1-2) and 5-6 us on Qwen3-235B at TP 8. What neither inventory holds, per MoE
layer: DeepSeek-R1 TP 8 EP 8 71 us at 4 clients and 63 at 8 (issue 5929's 0.21 rows 50-60), Qwen3-235B TP 8 EP 8
23 and 20, Qwen3-235B TP 4 EP 4 1 and -10 (its routed experts at 8 tokens stream fewer experts than balanced
routing's). So some 40-50 us a layer is DeepSeek's and 0-20 us is common. The DeepSeek-only kernels that no measured
op times: its gate (TensorRT-LLM's Deepseekv3Gate: dsv3_router_gemm_op to fp32 logits, then the routing the fused
op calls, Deepseekv3RoutingImpl: sigmoid, bias add, noaux_tc_op group top-k, two casts), where aiconfigurator's
fused-MoE collector routes every shape with RenormalizeMoeRoutingMethod (softmax top-k inside the op;
collector/trtllm/collect_moe.py and its per-release copies: DeepseekV3Gate only in Blackwell's min-latency mode), and the shared expert's fork/join to its auxiliary stream and the add of its
output (Deepseekv3MoE.forward). About six launch-bound kernels, 2-4 us each under a CUDA graph: 10-25 us of the
40-50, by estimate, not measurement (no published timing of those kernels; no GPU here). At EP 1 (issue 5929's
tp8ep1 row) the measured fused-MoE op alone (191 us at 8 tokens, the model 115) leaves -6 us: there the fitted
overhead stands for the tp-8-split experts' slowness, which the model's decode experts do not have (cost/inference.py
fused_moe_times: decode passes keep the kernel model).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from parallmelism.config.kernel_tables import kernel_model  # noqa: E402
from parallmelism.cost.inference import decode_terms  # noqa: E402
from parallmelism.cost.layout import ServingLayout  # noqa: E402
from parallmelism.schema import INFERENCE_LAYOUT_COLUMNS  # noqa: E402
from parallmelism.validate.inference_cases import inference_run_of, predicted_quantities  # noqa: E402
from parallmelism.validate.runner import _context, _evaluate_one  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RELEASE = "1.3.0rc20"
SYSTEMS = {"h200-sxm-141gb": "h200_sxm", "h100-sxm-80gb": "h100_sxm"}
# (case file, case): the two rows (module docstring)
ROWS = (
    ("inference_engines.csv", "aic-trtllm-dsr1-h200-tp8-1024-1024-c4"),
    ("inference_heldout.csv", "aicho-trtllm1.0.0rc3-q235b-h100-tp8ep8-1024-128-c4"),
)
# --all: the same two at 8 clients, Qwen3-235B at TP 4 EP 4 (whether the residual is a per-layer constant), and
# TensorRT-LLM issue 5929's DeepSeek-R1 rows (0.21) at EP 8 and at EP 1 (each expert split 8 ways)
MORE_ROWS = (
    ("inference_engines.csv", "aic-trtllm-dsr1-h200-tp8-1024-1024-c8"),
    ("inference_heldout.csv", "aicho-trtllm1.0.0rc3-q235b-h100-tp8ep8-1024-128-c8"),
    ("inference_heldout.csv", "aicho-trtllm1.0.0rc3-q235b-h100-tp4ep4-1024-128-c4"),
    ("inference_heldout.csv", "aicho-trtllm1.0.0rc3-q235b-h100-tp4ep4-1024-128-c8"),
    ("inference_engines.csv", "trt5929-dsr1-fp8-h200-tp8ep8-1600-600-c8"),
    ("inference_engines.csv", "trt5929-dsr1-fp8-h200-tp8ep1-1600-600-c8"),
)
# the model's decode ops by part of the layer (names of cost/inference_ops.py's serving ops; this script only
# reads them, no cost code keys on them)
PARTS = {
    "attention": (
        "qkv_proj", "attention_qk", "attention_pv", "output_proj", "q_a_proj", "q_a_norm", "q_b_proj",
        "kv_a_proj", "kv_a_norm", "kv_b_proj", "q_absorb", "attention_latent_qk", "attention_latent_pv", "v_up",
    ),
    "norms": ("attn_norm", "mlp_norm"),
    "router": ("router",),
    "experts": ("experts_gate_up", "experts_down"),
    "shared": ("shared_gate_up", "shared_down"),
    "dense mlp": ("gate_up_proj", "down_proj"),
    "head": ("embedding", "final_norm", "lm_head"),
}  # fmt: skip


class Measured:
    """aiconfigurator's TensorRT-LLM op tables of one system (module docstring), ms -> us."""

    def __init__(self, core: Path, system: str):
        d = core / "systems" / "data" / system

        def read(rel):
            return pd.read_parquet(d / rel.format(r=RELEASE))

        self.gemm = read("gemm/trtllm/{r}/gemm_perf.parquet")
        self.moe = read("moe/trtllm/{r}/moe_perf.parquet")
        self.ar = read("comm/trtllm/{r}/custom_allreduce_perf.parquet")
        self.attn = read("attention/trtllm/{r}/generation_attention_perf.parquet")
        mla = d / f"mla/trtllm/{RELEASE}/mla_generation_module_perf.parquet"
        self.mla = pd.read_parquet(mla) if mla.exists() else None

    def gemm_us(self, m, n, k, dtype):
        """One GEMM (m tokens, n outputs, k inputs) at this m: log-linear in n, then in k, between the
        measured sizes that bracket them."""
        g = self.gemm[(self.gemm.m == m) & (self.gemm.gemm_dtype == dtype)]
        ks = np.sort(g.k.unique().astype(float))
        lo, hi = ks[ks <= k].max(), ks[ks >= k].min()

        def at_k(kk):
            s = g[g.k == kk].groupby("n").latency.median()
            return float(np.interp(np.log(n), np.log(s.index.to_numpy(float)), s.to_numpy()))

        t_lo, t_hi = at_k(lo), at_k(hi)
        w = 0.0 if hi == lo else (np.log(k) - np.log(lo)) / (np.log(hi) - np.log(lo))
        return 1e3 * ((1 - w) * t_lo + w * t_hi)

    def moe_us(self, tokens, hidden, ffn, top_k, experts, moe_tp, moe_ep):
        q = self.moe[
            (self.moe.num_tokens == tokens)
            & (self.moe.hidden_size == hidden)
            & (self.moe.inter_size == ffn)
            & (self.moe.topk == top_k)
            & (self.moe.num_experts == experts)
            & (self.moe.moe_tp_size == moe_tp)
            & (self.moe.moe_ep_size == moe_ep)
            & (self.moe.moe_dtype == "fp8_block")
            & (self.moe.distribution == "balanced")
        ]
        return 1e3 * float(q.latency.median())

    def all_reduce_us(self, elements, gpus):
        q = self.ar[self.ar.num_gpus == gpus].groupby("message_size").latency.median()
        return 1e3 * float(np.interp(np.log(elements), np.log(q.index.to_numpy(float)), q.to_numpy()))

    def attention_us(self, batch, context, heads, kv_heads, head_dim, kv_dtype):
        a = self.attn
        q = (
            a[
                (a.batch_size == batch)
                & (a.num_heads == heads)
                & (a.num_key_value_heads == kv_heads)
                & (a.head_dim == head_dim)
                & (a.window_size == 0)
                & (a.kv_cache_dtype == kv_dtype)
            ]
            .groupby("step")
            .latency.median()
        )
        return 1e3 * float(np.interp(np.log(context), np.log(q.index.to_numpy(float)), q.to_numpy()))

    def mla_us(self, batch, context, heads, kv_dtype):
        a = self.mla
        q = (
            a[
                (a.batch_size == batch)
                & (a.num_heads == heads)
                & (a.kv_cache_dtype == kv_dtype)
                & (a.gemm_type == "fp8_block")
            ]
            .groupby("step")
            .latency.median()
        )
        return 1e3 * float(np.interp(np.log(context), np.log(q.index.to_numpy(float)), q.to_numpy()))


def model_parts_us(run, pred) -> tuple[dict, dict]:
    """(per-layer microseconds of each part, layer counts) of the row's decode step in the model."""
    hw, model, wl = run.hardware, run.model, run.workload
    cols = {k: np.array([int(pred[k])], dtype=np.int64) for k in INFERENCE_LAYOUT_COLUMNS}
    terms = decode_terms(model, hw, wl, ServingLayout.of(cols), km=kernel_model(hw), engine=run.serving_engine())
    part_of = {name: part for part, names in PARTS.items() for name in names}
    us: dict = {}
    counts: dict = {}
    for op, (t, _) in zip(terms["ops"], terms["times"]):
        count = float(np.asarray(op.count).reshape(-1)[0])
        part = part_of[op.name]
        us[part] = us.get(part, 0.0) + count * float(np.asarray(t).reshape(-1)[0]) * 1e6
        counts[part] = max(counts.get(part, 0.0), count)
    us["all-reduce"] = float(np.asarray(terms["comm_s"]).reshape(-1)[0]) * 1e6
    counts["all-reduce"] = float(cols["layers_per_stage"][0])
    return {p: us[p] / counts[p] if counts[p] else 0.0 for p in us}, counts


def measured_parts_us(run, pred, meas: Measured) -> dict:
    """Per-layer microseconds of each part as aiconfigurator measured the op (module docstring)."""
    model, wl = run.model, run.workload
    tp, ep, b = int(pred["tp"]), int(pred["ep"]), int(pred["batch"])
    h, moe = model.hidden, model.moe
    ctx = wl.input_len + wl.output_len / 2
    kv = "fp8" if wl.kv_dtype == "fp8" else "bfloat16"
    out = {}
    if model.mla is not None:
        out["attention"] = meas.mla_us(b, ctx, model.heads // tp, kv)
    else:
        kvh = max(model.g // tp, 1)
        qkv = (model.heads // tp + 2 * kvh) * model.d
        out["attention"] = (
            meas.gemm_us(b, qkv, h, "fp8_block")
            + meas.attention_us(b, ctx, model.heads // tp, kvh, model.d, kv)
            + meas.gemm_us(b, h, model.heads * model.d // tp, "fp8_block")
        )
    out["router"] = meas.gemm_us(b, moe.num_experts, h, "bfloat16")
    out["experts"] = meas.moe_us(b, h, moe.ffn_hidden, moe.top_k, moe.num_experts, tp // ep, ep)
    if moe.num_shared_experts:
        f = moe.num_shared_experts * moe.shared_expert_ffn // tp
        out["shared"] = meas.gemm_us(b, 2 * f, h, "fp8_block") + meas.gemm_us(b, h, f, "fp8_block")
    if model.num_moe_layers < model.layers:
        f = model.ffn_hidden // tp
        out["dense mlp"] = meas.gemm_us(b, 2 * f, h, "fp8_block") + meas.gemm_us(b, h, f, "fp8_block")
    out["all-reduce"] = 2 * meas.all_reduce_us(b * h, tp)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("core", type=Path, help="aiconfigurator_core package directory (aiconfigurator 0.12.0)")
    ap.add_argument("--all", action="store_true", help="also the rows at 8 clients and Qwen3-235B at TP 4 EP 4")
    args = ap.parse_args(argv)
    ctx = _context([], None)
    for file, case in ROWS + (MORE_ROWS if args.all else ()):
        df = pd.read_csv(ROOT / "parallmelism" / "cases" / file, dtype=str, keep_default_na=False).replace({"": None})
        row = next(r for r in df.to_dict("records") if r["case"] == case)
        run = inference_run_of(row, *ctx)
        pred = _evaluate_one(run)
        itl = predicted_quantities(row, pred, ctx)["itl_ms"]
        model = run.model
        engine = run.serving_engine()
        meas = Measured(args.core, SYSTEMS[run.hardware.name])
        mine, counts = model_parts_us(run, pred)
        theirs = measured_parts_us(run, pred, meas)
        moe_layers, layers = model.num_moe_layers, model.layers
        print(f"\n{case}: {model.name} on {run.hardware.name}, tp {pred['tp']} ep {pred['ep']}, batch {pred['batch']}")
        print(f"  {'part (us a layer)':18s} {'layers':>6s} {'model':>8s} {'measured':>8s} {'model-meas':>10s}")
        model_layers_us = meas_layers_us = 0.0
        for part in ("attention", "norms", "router", "experts", "shared", "dense mlp", "all-reduce"):
            if part not in mine:
                continue
            n = counts[part]
            m = theirs.get(part, float("nan"))
            print(f"  {part:18s} {n:6.0f} {mine[part]:8.2f} {m:8.2f} {mine[part] - m:10.2f}")
            model_layers_us += n * mine[part]
            meas_layers_us += n * (m if not np.isnan(m) else mine[part])
        step_ms = float(pred["decode_step_ms"])
        overhead_us = engine.iteration_overhead_ms * 1e3 + engine.moe_layer_overhead_us * moe_layers
        stall_us = (itl - step_ms) * 1e3
        head_us = mine["head"] * counts["head"]
        measured_itl_us = float(row["measured_itl_ms"]) * 1e3
        residual = (measured_itl_us - stall_us - head_us - meas_layers_us) / moe_layers
        residual_model = (measured_itl_us - stall_us - head_us - model_layers_us) / moe_layers
        print(
            f"  layers: model {model_layers_us / 1e3:.2f} ms, measured ops {meas_layers_us / 1e3:.2f} ms "
            f"({layers} layers, {moe_layers} MoE); head {head_us / 1e3:.2f} ms; stall {stall_us / 1e3:.2f} ms; "
            f"engine overheads {overhead_us / 1e3:.2f} ms ({engine.moe_layer_overhead_us:g} us a MoE layer)"
        )
        print(
            f"  ITL: measured {measured_itl_us / 1e3:.2f} ms, model {itl:.2f} ms "
            f"({100 * (itl * 1e3 - measured_itl_us) / measured_itl_us:+.1f} %)"
        )
        print(
            f"  residual per MoE layer: {residual:.1f} us over the measured ops, {residual_model:.1f} us over "
            f"the model's ops (the per-step sum of the model's parts and the engine overheads is the decode step: "
            f"{(model_layers_us + head_us + overhead_us) / 1e3:.2f} vs {step_ms:.2f} ms)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

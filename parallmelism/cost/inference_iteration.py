"""Iteration-level serving under continuous (in-flight) batching, as vLLM / TensorRT-LLM run it.

An engine runs one forward pass ("iteration") after another over the sequences in flight. Each
iteration has a token budget C (`workload.prefill_chunk_tokens`, vLLM max_num_batched_tokens,
TensorRT-LLM max_num_tokens); decode tokens are scheduled first and a waiting prompt fills the
rest of the budget with a prefill chunk (chunked prefill). Two kinds of iteration result:

  decode iteration   b decode tokens (one per sequence in flight):
                        t_dec = pp·(stage time of one micro-batch + hop) + t_iter
  mixed iteration    the other b−1 sequences' decode tokens + a chunk of c = S/n_p prompt tokens,
                     n_p = ceil(S / max(C − (b−1), 1)) chunks per prompt:
                        t_mix = t_dec(b−1) + pp·(stage(decode + chunk) − stage(decode))
                     (the chunk rides in one of the m decode micro-batches and passes every stage once;
                     its increment is at least 0, and the decode tokens' sp attention merge is in both)
Stage times are the ops' kernel times (`cost.inference.stage_terms`: the kernel model's forward
kernels, summed, plus the layer collectives). The weights are read once per iteration for all its
tokens. t_iter = engine.iteration_overhead_ms (scheduler, sampling, launches, host sync) +
engine.moe_layer_overhead_us per MoE layer whose gate or shared expert runs outside the engine's fused-MoE op
(DeepSeek-V3's sigmoid gate with bias and group-limited top-k, a shared expert's stream fork/join: specs/model.py
MoESpec.gate_outside_fused_moe; a softmax top-k router runs inside the op): named
constants per serving engine (specs/engine.py) fitted on serving ITL (benchmarks/fit_serving_overhead.py). Each
chunk is the prompt's MEAN chunk (later chunks attend to more keys; the sum over chunks is exact).

Steady state of a closed loop with b sequences per replica (Little: request rate λ = b / e2e):
  other requests' prompts arrive at λ_o = λ·(b−1)/b and each takes n_p mixed iterations, so the
  fraction of iterations that are mixed is q = λ_o·n_p·ITL and
    ITL   = (1−q)·t_dec + q·t_mix = t_dec / (1 − λ_o·n_p·(t_mix − t_dec))            MEAN
    TTFT  = W_iter + H + W_queue + P + request_overhead + D                          MEAN
      P       = (n_p + pp − 1)·t_mix/pp, the prompt's chunks pipelined through the pp stages (the
                seed's sequence pipeline; pp = 1: n_p·t_mix)
      W_iter  = E[t²]/(2·E[t]) over the iteration mix: mean residual of the iteration in flight
                when the request arrives (0 with b = 1: the engine is idle); with multi-step
                scheduling (workload.scheduler_steps = m) decode iterations come in runs of m that
                no prompt enters, so their part is that of runs m·t_dec long: rate_dec·m·t_dec²/2
      W_queue = ρ_p·P / (2(1−ρ_p)), ρ_p = λ_o·n_p·t_mix: M/D/1 wait behind other
                prompts being prefilled (Poisson arrivals assumed)
      H       = cost.batch_wait.mean_hold_s: the engine's batch waiting (engine.batch_wait_*,
                TensorRT-LLM) holds a prompt up to `timeout` decode iterations t_dec, in a window
                that the other prompts arriving at λ_o join; 0 without it
      D       = cost.first_token.first_token_delay_s: with overlap scheduling
                (engine.overlap_scheduler) the first token is sent when the next iteration ends, the
                mean iteration 1/(rate of iterations) (b = 1: t_dec; 0 when no iteration follows,
                b = 1 with one output token); else 0
    e2e   = TTFT − D + (out − 1)·ITL  (the last token is sent when computed; out = 1: TTFT)  MEAN
  λ solves λ·e2e(λ) = b (e2e grows with λ; bisection on (0, 1/(n_p·t_mix·(b−1)/b))).
Not means: t_dec and t_mix are the times of one iteration of each kind (deterministic here);
W_iter is the mean residual; nothing here models tail (p90/p99) latencies.
"""

from __future__ import annotations

import numpy as np

from ..units import MS, US
from .batch_wait import mean_hold_s
from .first_token import first_token_delay_s
from .inference_ops import causal_pairs
from .layout import ServingLayout
from .ops import ACT_BYTES
from .pipeline import chunked_prefill_s

BISECTION_STEPS = 40  # halvings of λ's bracket: it ends 2^-40 (~1e-12) of its first width wide


def iteration_overhead_s(model, engine) -> float:
    """Fixed seconds of one serving iteration: the engine's iteration_overhead_ms + its
    moe_layer_overhead_us per MoE layer whose gate or shared expert runs outside the fused-MoE op (all stages:
    the iteration passes every layer once; model.num_moe_layers_gate_outside)."""
    return engine.iteration_overhead_ms * MS + engine.moe_layer_overhead_us * US * model.num_moe_layers_gate_outside


def prefill_chunk_plan(wl, batch):
    """(chunks per prompt n_p, mean prompt tokens per chunk) under the iteration token budget:
    chunked prefill schedules the other b−1 sequences' decode tokens first and gives the prompt the
    rest (at least 1); separate prefill passes get the whole budget."""
    b = np.asarray(batch, dtype=np.float64)
    budget = np.maximum(wl.prefill_chunk_tokens - ((b - 1) if wl.chunked_prefill else 0 * b), 1.0)
    new_tokens = wl.input_len * (1 - wl.prefix_cache_hit)  # the prefix cache serves the rest
    n_p = np.ceil(new_tokens / budget)
    return n_p, new_tokens / n_p


def mixed_stage_terms(stage_terms, model, hw, wl, lay: ServingLayout, decode_tokens, n_p):
    """Stage terms of one micro-batch carrying `decode_tokens` decode tokens (per micro-batch) and
    the mean prefill chunk of one prompt split into n_p chunks (`stage_terms` of cost.inference)."""
    sp = np.asarray(lay.sp, dtype=np.float64)
    S = wl.input_len
    Td = np.asarray(decode_tokens, dtype=np.float64)
    ctx = S + wl.output_len / 2
    hit = wl.prefix_cache_hit * S  # cached prefix: attended to, not recomputed
    chunk = (S - hit) / n_p / sp  # prompt tokens of the mean chunk on one sp rank
    # key positions read: decode tokens read their context from the cache (kv_dtype, `decode_part`);
    # the chunk reads the cached prefix, the new keys before it and its own (16-bit, the prefill
    # convention), hit + (S−hit)(n+1)/(2n) on average
    dec_pairs = Td * ctx / sp
    kv_read = dec_pairs + hit + (S - hit) * (n_p + 1) / (2 * n_p)
    return stage_terms(
        model,
        hw,
        wl,
        lay,
        tokens=Td + chunk,
        attn_pairs=dec_pairs + (causal_pairs(S) - causal_pairs(hit)) / n_p / sp,
        kv_read_tokens=kv_read,
        kv_write_tokens=Td / sp + chunk,
        kv_read_bytes=ACT_BYTES,
        head_tokens=Td + 1.0 / n_p,
        prefill=True,
        decode_part=(Td, dec_pairs, dec_pairs),
        prompt_tokens=S / n_p,
    )


def closed_loop(
    t_dec,
    t_mix,
    n_p,
    batch,
    output_len,
    request_s,
    fused: bool = True,
    pp=1,
    tokens_per_iter=1.0,
    steps=1,
    overlap: bool = False,
    batch_wait: tuple[int, float, float, float, int] | None = None,
):
    """Steady state of b sequences in flight (module docstring). Arrays in seconds; `fused`: the
    prefill iterations also carry the others' decode tokens (chunked prefill), else they stall them;
    `overlap`: the engine's overlap scheduling (engine.overlap_scheduler); `batch_wait`: (timeout
    iterations, tokens ratio, token budget, prompt tokens, draft tokens per decoding sequence) of the engine's batch waiting
    (cost/batch_wait.py; None: none). Returns a dict with itl_s,
    ttft_s, e2e_s, wait_s (W_iter + W_queue), hold_s (H: batch waiting's mean hold), prefill_s (P), computed_s (TTFT − D: when the first
    token is computed), send_s (D: its send delay), mixed_fraction (share of iterations that carry a prefill chunk) and request_rate λ (1/s),
    per replica."""
    b = np.asarray(batch, dtype=np.float64)
    others = (b - 1) / b
    # with pp stages the prompt's chunks follow each other through the stages (the seed's sequence
    # pipeline): n_p + pp − 1 stage slots of t_mix/pp each; pp = 1: n_p iterations
    prefill_s = chunked_prefill_s(n_p, pp, t_mix)
    stall = np.maximum(t_mix - t_dec, 0.0) if fused else t_mix

    def at(lam):
        r = lam * others * n_p  # prefill iterations per second (other requests' prompts)
        gap = t_dec / (1 - r * stall)  # mean time between the iterations that give a sequence tokens
        itl = gap / tokens_per_iter  # speculative decoding: E tokens per iteration (cost.inference_spec)
        rate_dec = 1 / gap - r if fused else 1 / gap  # iterations per second without a chunk
        q = r / (r + rate_dec)
        rho = r * t_mix  # share of the engine's time spent on prefill chunks
        # the engine is always busy: Σ rate·t = 1, so the mean residual E[t²]/(2E[t]) = Σ rate·t²/2
        residual = np.where(b > 1, (r * t_mix**2 + rate_dec * steps * t_dec**2) / 2, 0.0)
        queue = rho * prefill_s / (2 * (1 - rho))
        # batch waiting, the others' prompts arriving at λ_o
        hold = 0.0 if batch_wait is None else mean_hold_s(*batch_wait, b, t_dec, lam * others)
        computed = residual + hold + queue + prefill_s + request_s  # the first token computed
        # the next iteration: the mean one, 1/(iterations per second); none at b = 1 with one token
        follows = (b > 1) | (output_len > 1)
        send = first_token_delay_s(overlap, np.where(follows, 1 / (r + rate_dec), 0.0))
        ttft = computed + send
        e2e = computed + (output_len - 1) * itl if output_len > 1 else ttft
        return {
            "itl_s": itl,
            "ttft_s": ttft,
            "e2e_s": e2e,
            "wait_s": residual + queue,
            "hold_s": hold + 0 * b,
            "prefill_s": prefill_s + 0 * b,
            "computed_s": computed,
            "send_s": send + 0 * b,
            "mixed_fraction": q,
            "request_rate": lam,
        }

    with np.errstate(divide="ignore", invalid="ignore"):
        # b = 1: nothing interferes, λ = 1/e2e directly
        solo = at(np.zeros_like(b))
        lo = np.zeros_like(b)
        hi = np.where(b > 1, 1.0 / (n_p * t_mix * others), 0.0)
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            over = mid * at(mid)["e2e_s"] > b
            hi = np.where(over, mid, hi)
            lo = np.where(over, lo, mid)
        out = at(lo)
    single = b <= 1
    for k in out:
        out[k] = np.where(single, solo[k], out[k])
    out["request_rate"] = np.where(single, 1.0 / solo["e2e_s"], out["request_rate"])
    return out

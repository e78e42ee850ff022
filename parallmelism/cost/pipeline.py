"""Pipeline schedules: training's 1F1B family and serving's prefill and decode pipelines, in one place.

Pure functions over arrays (one element per layout row); the stage and hop seconds they place come
from the stage models (cost/steptime.py, cost/inference.py) and the link model (cost/comm.py).
p = pp stages, v = vpp virtual stages (chunks) per rank, m micro-batches per step.

Training (steptime.py calls these)
  bubble rate       bubble time / ideal compute time (Narayanan et al. 2021, §2.2; Qi et al. 2023):
                      1F1B and GPipe        (p−1)/m
                      interleaved 1F1B      (p−1)/(v·m)
                      zero bubble (ZB-H1)   (p−1)/(3·m)  (backward split into B and W fills two thirds)
                    The bubble fraction of the step is rate/(1 + rate) = (p−1)/(m + p−1) for 1F1B
                    (GPipe, Huang et al. 2019), always in [0, 1).
  fill/drain pace   warm-up and cool-down run through the other stages at a middle stage's T_mb
                    (the mean of first and last when p <= 2: there is no middle stage)
  bubble seconds    rate·m·T_mb(typical) + the fill/drain chain's P2P hops
  P2P hops          per step on one stage: link 2·m·v hops (activation forward, gradient
                    backward); exposed 0 with asynchronous P2P (Megatron-Core overlap_p2p_comm),
                    the whole link with blocking send/recv; fill/drain 2·(p−1)·v hops the chain
                    waits for on the other stages' links, part of the bubble
  in flight         micro-batches of activations a stage holds: 1F1B min(p − i, m) on rank i;
                    interleaved min(2(p−i−1) + (v−1)·p + 1, m·v) chunks of L/(p·v) layers
                    (Narayanan et al. 2021 §2.2.2; Korthikanti et al. 2022); GPipe all m

Serving (inference.py, inference_iteration.py and inference_spec.py call these)
  prefill           the prompt cut into n_c chunks that follow each other through the stages
                    (a sequence pipeline, TeraPipe, Li et al. 2021; GPipe's fill and drain):
                      (n_c + p − 1)·(stage time of one chunk + one hop)
  decode            the b sequences form m = min(b, p) micro-batches (vLLM's pp virtual engines);
                    each token passes every stage:  step = p·(stage time of one micro-batch + hop);
                    with b < p a share 1 − m/p of the stages idles
  continuous        a prompt's n_p chunks ride in iterations of t_mix, each a pass of p stage
                    slots: prefill = (n_p + p − 1)·t_mix/p; a mixed iteration is the decode
                    iteration plus the chunk's increment on each of the p stages its micro-batch
                    passes, p·(stage(mixed) − stage(decode)), never shorter than it
"""

from __future__ import annotations

import numpy as np

# ZB-H1 splits the backward into input (B) and weight (W) gradient passes and fills the 1F1B
# bubble with W: a third of 1F1B's bubble is left (Qi et al. 2023, "Zero Bubble Pipeline
# Parallelism", §3.1 and Table 2).
ZB_H1_BUBBLE_DIVISOR = 3.0


def bubble_rate(pp, vpp, m, schedule: str) -> np.ndarray:
    """Bubble time ÷ ideal compute time: (p−1)/(v·m) for 1F1B (v = 1) and interleaved 1F1B,
    (p−1)/m for GPipe, (p−1)/(3·m) for ZB-H1 (module docstring)."""
    pp, vpp, m = (np.asarray(x, dtype=np.float64) for x in (pp, vpp, m))
    rate = (pp - 1) / (vpp * m)
    if schedule == "zero_bubble":
        rate = (pp - 1) / (ZB_H1_BUBBLE_DIVISOR * m)
    elif schedule == "gpipe":
        rate = (pp - 1) / m
    return rate


def fill_drain_stage_s(pp, t_mb_first_s, t_mb_middle_s, t_mb_last_s):
    """Seconds of one micro-batch on the stage whose pace the warm-up and cool-down run at: a
    middle stage's, or the mean of the first and last when p <= 2 (no middle stage)."""
    return np.where(np.asarray(pp) > 2, t_mb_middle_s, 0.5 * (t_mb_first_s + t_mb_last_s))


def pp_times_s(hop_s, pp, vpp, m, overlap: bool = True):
    """(link, exposed, fill_drain) seconds of pipeline send/recv per step on one stage, from the
    seconds of one hop (`comm.pp_hop_s`).

    link: this GPU's 2·m·v transfers (activation forward, gradient backward). exposed (<= link):
    with asynchronous P2P (overlap) none of its own transfers waits on the wire; with blocking
    send/recv every one of them does. fill_drain: the 2·(p−1)·v hops the warm-up and cool-down
    chain waits for on the other stages' links, part of the pipeline bubble (module docstring)."""
    link = 2.0 * m * vpp * hop_s
    fill_drain = 2.0 * (pp - 1) * vpp * hop_s
    exposed = np.zeros_like(link) if overlap else link
    return link, exposed, fill_drain


def training_bubble_s(rate, m, t_mb_typical_s, fill_drain_s):
    """Seconds of the step's bubble: rate·m·T_mb(typical stage), the stages' idle compute, plus
    the fill/drain chain's P2P hops (`pp_times_s`)."""
    return rate * m * t_mb_typical_s + fill_drain_s


def inflight_micro_batches(pp, vpp, m, schedule: str, rank) -> np.ndarray:
    """Layer-micro-batches of activations a stage holds, in units of (L/pp layers x 1 micro-batch).

    1F1B: stage i holds min(pp - i, m) micro-batches (first stage: pp). Interleaved 1F1B with
    v chunks: rank i holds min(2(pp-i-1) + (v-1)·pp + 1, m·v) chunks of L/(pp·v) layers, so the
    first stage holds L·(1 + (pp-1)/(pp·v)) layers' worth (Korthikanti eq. for interleaving).
    GPipe holds all m micro-batches. Zero-bubble (ZB-H1) keeps 1F1B's in-flight count.
    `rank` is the pipeline rank (array), or "first" / "last".
    """
    pp, vpp, m = (np.asarray(x, dtype=np.float64) for x in (pp, vpp, m))
    rank = {"first": np.zeros_like(pp), "last": pp - 1}.get(rank, rank) if isinstance(rank, str) else rank
    rank = np.asarray(rank, dtype=np.float64)
    if schedule == "gpipe":
        return m.copy()
    plain = np.minimum(pp - rank, m)
    chunks = np.minimum(2 * (pp - rank - 1) + (vpp - 1) * pp + 1, m * vpp)
    return np.where(vpp > 1, chunks / vpp, plain)


def prefill_pipeline_s(chunks, pp, chunk_stage_s, hop_s):
    """Seconds to push a prompt cut into n_c chunks through p stages: (n_c + p − 1)·(stage time
    of one chunk + one hop); p = 1: n_c chunk times."""
    return (chunks + pp - 1) * (chunk_stage_s + hop_s)


def decode_micro_batches(batch, pp):
    """Decode micro-batches in flight, m = min(b, p): one per stage while there are sequences."""
    return np.minimum(batch, pp)


def decode_pp_idle(batch, pp):
    """Share of the stages idle in a decode step, 1 − m/p (b < p leaves stages without a
    micro-batch)."""
    return 1.0 - decode_micro_batches(batch, pp) / pp


def decode_step_s(pp, stage_s, hop_s):
    """Seconds of one decode step: each token passes all p stages, p·(stage time of one
    micro-batch + one hop); p = 1: one stage time (the hop is 0 without a pipeline). Any single
    pass through every stage takes this (a prompt chunk's own iteration without chunked prefill)."""
    return pp * (stage_s + hop_s)


def chunked_prefill_s(n_p, pp, iteration_s):
    """Seconds to prefill a prompt cut into n_p chunks, one per iteration of `iteration_s` that
    passes p stage slots of iteration_s/p each: (n_p + p − 1)·iteration_s/p; p = 1: n_p·iteration_s."""
    return (n_p + np.asarray(pp, dtype=np.float64) - 1) * iteration_s / pp


def mixed_iteration_s(decode_iteration_s, pp, mixed_stage_s, decode_stage_s):
    """Seconds of an iteration whose micro-batch carries a prefill chunk: the decode iteration plus
    the chunk's increment on every stage, p·max(0, stage(mixed) − stage(decode)). The micro-batch
    with the chunk passes all p stages before its next token, each in its mixed stage time: its
    round trip is p·(stage(mixed) + hop) = decode iteration + p·increment (`decode_step_s`); with
    b >= p the m = p micro-batches fill the ring and each pipeline step waits for the stage that
    holds the chunk, so every micro-batch's iteration is that. The increment had been (p/m)·Δ, the
    chunk's extra work spread over the stages' idle share: with m = p it counted the chunk once
    per iteration instead of once per stage, and a prompt's chunked prefill (p slots of
    iteration/p each, `chunked_prefill_s`) came out faster than the chunk's FLOPs at the spec peak
    (Llama-3.1-8B, 8192-token prompt, A100, pp 4, batch 4: 100 ms for 106 ms of peak FLOPs)."""
    return decode_iteration_s + pp * np.maximum(mixed_stage_s - decode_stage_s, 0.0)


__all__ = [
    "ZB_H1_BUBBLE_DIVISOR",
    "bubble_rate",
    "fill_drain_stage_s",
    "pp_times_s",
    "training_bubble_s",
    "inflight_micro_batches",
    "prefill_pipeline_s",
    "decode_micro_batches",
    "decode_pp_idle",
    "decode_step_s",
    "chunked_prefill_s",
    "mixed_iteration_s",
]

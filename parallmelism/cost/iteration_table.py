"""Seconds of one serving iteration by its decode and prompt tokens, from the per-iteration cost
model (cost.inference_iteration), as a table the request-level simulation reads
(cost.serving_load.IterationTimes).

For one layout (the first row of `lay`) and d = 0..max_batch decode tokens, k prompt tokens:
  d ≥ 1, k = 0   t_dec(d) = pp·(decode stage of ceil(d/m) sequences + hop) + t_iter, m = min(d, pp)
  d ≥ 1, k > 0   chunked prefill: t_dec(d) + pp·max(0, stage(decode + chunk) − stage(decode))
                 (`pipeline.mixed_iteration_s`); the chunk is k tokens of prompts of workload.input_len,
                 i.e. the prompt cut into n_p = S·(1 − hit)/k chunks (n_p < 1: k/S whole prompts)
  d = 0, k > 0   a prompt-only pass: pp·(prefill stage of the chunk + hop) + t_iter
t_iter = the engine's iteration_overhead_ms + MoE layers with a gate outside the fused op · moe_layer_overhead_us
(`iteration_overhead_s`).
Decode attention reads the mean context S + output_len/2, as the closed-loop model does. The prompt
tokens are sampled at 0 and on a geometric grid up to the token budget (linear in between: the
iteration's time is close to linear in its tokens between the samples); every decode count is
evaluated once. All rows go through the cost model as one vectorized evaluation.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from . import pipeline
from .inference import decode_terms, prefill_terms, stage_terms
from .inference_iteration import iteration_overhead_s, mixed_stage_terms
from .layout import ServingLayout
from .serving_load import IterationTimes

PROMPT_TOKEN_SAMPLES = 12  # geometric samples of the prompt tokens between 16 and the budget


def prompt_token_grid(budget: int) -> np.ndarray:
    """0, then PROMPT_TOKEN_SAMPLES geometric points from min(16, budget) to the budget."""
    return np.unique(np.concatenate([[0.0], np.geomspace(min(16.0, budget), budget, PROMPT_TOKEN_SAMPLES)]))


def _repeat(lay: ServingLayout, batch: np.ndarray) -> ServingLayout:
    """The first row of `lay` repeated len(batch) times with batch set to `batch`."""
    one = lay.rows(1)
    n = len(batch)
    return replace(
        one,
        **{f: np.repeat(np.asarray(getattr(one, f)), n) for f in ("tp", "pp", "sp", "ep", "dp", "layers_per_stage")},
        batch=np.asarray(batch, dtype=np.int64),
        first_layer=None if one.first_layer is None else np.repeat(one.first_layer, n),
    )


def iteration_times(model, hw, wl, lay: ServingLayout, km, engine, max_batch: int, budget: int) -> IterationTimes:
    """The module's table for the first layout row of `lay`: decode tokens 0..max_batch × prompt
    tokens on `prompt_token_grid(budget)`."""
    k = prompt_token_grid(budget)
    d = np.arange(1, max_batch + 1, dtype=np.float64)
    t_iter = iteration_overhead_s(model, engine)
    new_tokens = wl.input_len * (1 - wl.prefix_cache_hit)

    dlay = _repeat(lay, d)
    pp = np.asarray(dlay.pp, dtype=np.float64)
    dec = decode_terms(model, hw, wl, dlay, 1, km=km, engine=engine)
    t_dec = pipeline.decode_step_s(pp, dec["stage_s"], dec["hop_s"]) + t_iter
    seconds = np.empty((max_batch + 1, len(k)))
    seconds[1:, 0] = t_dec

    kk = k[1:]
    # prompt-only passes (d = 0): the prompt cut into S/k chunks
    play = _repeat(lay, np.ones(len(kk)))
    pre = prefill_terms(model, hw, wl, play, new_tokens / kk, km=km, engine=engine)
    seconds[0, 1:] = (
        pipeline.decode_step_s(np.asarray(play.pp, dtype=np.float64), pre["stage_s"], pre["hop_s"]) + t_iter
    )
    seconds[0, 0] = seconds[0, 1]
    if wl.chunked_prefill:
        # every (d, k) pair as one row: d varies slowest
        D = np.repeat(d, len(kk))
        K = np.tile(kk, len(d))
        mlay = _repeat(lay, D)
        mm = pipeline.decode_micro_batches(D, np.asarray(mlay.pp, dtype=np.float64))
        mix = mixed_stage_terms(
            partial(stage_terms, km=km, engine=engine), model, hw, wl, mlay, np.ceil(D / mm), new_tokens / K
        )
        t = pipeline.mixed_iteration_s(
            np.repeat(t_dec, len(kk)),
            np.asarray(mlay.pp, dtype=np.float64),
            mix["stage_s"],
            np.repeat(dec["stage_s"], len(kk)),
        )
        seconds[1:, 1:] = t.reshape(len(d), len(kk))
    else:  # prefill priority: the decodes never share an iteration with prompt tokens
        seconds[1:, 1:] = seconds[0, 1:]
    return IterationTimes(prompt_tokens=k, seconds=seconds)

"""Batch waiting: TensorRT-LLM's scheduler holding new prompts back to batch them (issue 33).

TensorRT-LLM's PyTorch executor (LLM API `batch_wait_timeout_iters`, `batch_wait_max_tokens_ratio`;
NVIDIA/TensorRT-LLM PR 7287, in trtllm-serve 1.1; engine.batch_wait_* here) runs, once per
iteration after its scheduler picked the iteration's context (prompt) and generation requests
(PyExecutor._schedule -> _waiting_requests):

  asked       only when the iteration has both context and generation requests (no attention DP):
              with nothing decoding the prompts run at once ("to avoid dead waiting") and the
              counter is left as it is
  tokens      scheduled = Σ the context requests' prompt tokens (len(get_tokens(0))) + Σ over the
              generation requests of 1 + draft tokens (1 each without speculative decoding)
  release     count ≥ batch_wait_timeout_iters  or  scheduled ≥ batch_wait_max_tokens_ratio ·
              max_num_tokens: the context requests run in this iteration and count = 0;
  hold        otherwise: the iteration runs the generation requests alone and count += 1

So with both knobs above 0 a prompt that arrives while others decode, when no prompt is being held,
waits `timeout` decode iterations (prompts arriving meanwhile join it) unless the tokens reach the
ratio first; either knob at 0 holds nothing (the release test passes at once). InferenceX's
Llama-70B TensorRT-LLM script sets 20 and 0.9 at 1k/1k below TP8 with max_num_tokens 16384
(benchmarks/surveys/engines/sources.md, section H): 1k prompts at concurrency 4-8 never reach 14,746
tokens, so each waits the 20 iterations.

The request-level simulation (cost/serving_load.py) applies `release` iteration by iteration with
its counter. The closed form (cost/inference_iteration.py, `show`, light-load TTFT) takes the mean
hold of `mean_hold_s`: a hold window of `timeout` decode iterations opened by a prompt and joined by
the prompts arriving in it (Poisson at the others' rate λ_o, as its M/D/1 queue term assumes), so a
prompt waits on average W(1 + λ_o·W/2)/(1 + λ_o·W), W = timeout·t_dec; 0 where one prompt and the
others' decode tokens (1 + draft tokens each) already reach the ratio, at one sequence in flight, or with either knob at 0.
"""

from __future__ import annotations

import numpy as np


def holds(timeout_iters: int, max_tokens_ratio: float) -> bool:
    """Whether batch waiting can hold a prompt at all (module docstring: either knob at 0 holds nothing)."""
    return timeout_iters > 0 and max_tokens_ratio > 0


def scheduled_tokens(prompt_tokens, decoding, draft_tokens: int):
    """The iteration's tokens that TensorRT-LLM weighs against the ratio (module docstring, `tokens`):
    the context requests' prompt tokens + (1 + draft tokens) per decoding sequence; arrays or scalars."""
    return prompt_tokens + decoding * (1 + draft_tokens)


def tokens_reach_ratio(scheduled_tokens, max_tokens_ratio: float, max_num_tokens):
    """release's token half (module docstring): scheduled ≥ batch_wait_max_tokens_ratio · max_num_tokens;
    arrays or scalars."""
    return scheduled_tokens >= max_tokens_ratio * max_num_tokens


def release(count: int, timeout_iters: int, scheduled_tokens: float, max_tokens_ratio: float, max_num_tokens) -> bool:
    """TensorRT-LLM's release test for an iteration with context and generation requests: `count`
    iterations held so far, `scheduled_tokens` the iteration's prompt tokens + decode tokens."""
    return count >= timeout_iters or bool(tokens_reach_ratio(scheduled_tokens, max_tokens_ratio, max_num_tokens))


def mean_hold_s(
    timeout_iters: int,
    max_tokens_ratio: float,
    max_num_tokens,
    prompt_tokens,
    draft_tokens: int,
    batch,
    t_dec,
    rate_others,
):
    """Mean seconds a prompt is held (module docstring, the closed form's rule): arrays in batch,
    t_dec (s) and rate_others (prompts/s of the other sequences); `draft_tokens` per decoding
    sequence and step (speculative decoding; 0 without)."""
    b = np.asarray(batch, dtype=np.float64)
    if not holds(timeout_iters, max_tokens_ratio):
        return np.zeros_like(b * t_dec)
    window = timeout_iters * np.asarray(t_dec, dtype=np.float64)
    joined = rate_others * window  # prompts arriving in a window besides the one that opened it
    mean = window * (1 + joined / 2) / (1 + joined)
    reached = tokens_reach_ratio(scheduled_tokens(prompt_tokens, b - 1, draft_tokens), max_tokens_ratio, max_num_tokens)
    return np.where((b > 1) & ~reached, mean, 0.0)

"""When a prompt's first token is sent: the overlap scheduler's delay (issue 33 item 3, issue 27).

An engine with overlap scheduling (engine.overlap_scheduler: SGLang since 0.4, sgl-project/sglang
PR 2067; TensorRT-LLM's PyTorch executor, LLM API disable_overlap_scheduler default False) launches
iteration i+1 before the host processes iteration i's output, so the first token of a prompt whose
last chunk ran in iteration i is sent when i+1 ends: launching an eager prompt pass takes the host
about as long as the pass (sgl-project/sglang PR 11856: a prefill's output waits for the next
prefill's launch; NVIDIA/TensorRT-LLM PR 14061 adds an opt-in early first-token emission), and the
model takes every next iteration's launch as its end. When no iteration follows (nothing left to
run) the token is sent at once. Without overlap scheduling it is sent when it is computed.

    delay = next iteration's seconds   (overlap scheduling, an iteration follows)
            0                          (otherwise)

Only TTFT carries it: the later tokens' gaps, the ITL and the request's end count from when the
tokens were computed. Both serving models call this: the request-level simulation
(cost/serving_load.py) with the iteration that ran next, the closed form (cost/inference_iteration.py,
`show`, `plan serve`, validate's light-load rows) with the mean iteration of its steady state.
"""

from __future__ import annotations

import numpy as np


def first_token_delay_s(overlap: bool, next_iteration_s):
    """Seconds from a prompt's first token being computed to its being sent (module docstring):
    `next_iteration_s` (a float or an array; 0 where no iteration follows) under overlap
    scheduling, else 0 of the same shape."""
    if overlap:
        return next_iteration_s
    return np.zeros_like(next_iteration_s) if isinstance(next_iteration_s, np.ndarray) else 0.0

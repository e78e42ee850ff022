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

A stream interval (a server sending a streaming request's tokens every N iterations) adds nothing here:
in the engine versions the shipped rows ran, the first token is sent at once and the interval only
groups the later ones. SGLang streams at len(output_ids) % N == 1 for N > 1
(srt/managers/scheduler_output_processor_mixin.py, stream_output_generation; checked in the 0.4.9.post6,
0.5.3, 0.5.7 and 0.5.9 wheels; 0.4.3 and 0.4.6 streamed at % N == 0, the first token after N, and 0.4.0
at once); TensorRT-LLM's PyTorch executor answers at py_decoding_iter == 1 (NVIDIA/TensorRT-LLM PR 5836,
"Return context response immediately when stream_interval > 1", merged 2025-07-08, before the
1.1.0rc2.post2 the DeepSeek-R1 rows ran); vLLM's output
processor sends when nothing was sent yet (vllm-project/vllm PR 27869). InferenceX's DeepSeek-R1 H200
scripts run SGLang 0.5.9 with --stream-interval 10 and TensorRT-LLM 1.1.0rc2.post2 with stream_interval 10.

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

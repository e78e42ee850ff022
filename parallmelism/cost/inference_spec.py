"""Speculative decoding (draft model or multi-token-prediction heads) for the serving model.

Each decode step a proposer drafts k tokens per sequence (k sequential proposer steps), then the
model verifies the k+1 positions in one forward pass (Leviathan et al. 2023; DeepSeek-V3 §2.2 MTP
used as the proposer; vLLM / SGLang / TensorRT-LLM). With per-token acceptance rate a (independent,
the paper's assumption) a step yields on average
    E = (1 − a^(k+1)) / (1 − a)   tokens per sequence   (a = 1: k + 1; a = 0: 1)
Costs per step, on the same GPUs as the model:
  verify    the model's decode pass with (k+1) tokens per sequence: (k+1)× the GEMM rows and
            query positions, the KV cache read once per sequence, k+1 positions written
  proposer  k decode steps of the draft model (its own weights, layers ceil(L_d/pp) per stage,
            same tp/ep) or of one MTP module (one decoder layer of the model + its output head)
Step time = verify + k·proposer; the inter-token latency is step time / E (a MEAN: E is the
expected number of accepted tokens). The iteration overhead is paid once per step.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np

from .layout import ServingLayout
from .pipeline import decode_step_s
from .shapes import layers_on_busiest_stage


def expected_tokens_per_step(acceptance: float, k: int) -> float:
    """(1 − a^(k+1)) / (1 − a): expected tokens one verify step yields per sequence."""
    a = float(acceptance)
    if a >= 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def proposer_step_s(model, draft, hw, wl, cols: ServingLayout | Mapping[str, np.ndarray], decode_terms):
    """Seconds of ONE proposer step for the batch (array over rows); 0 without speculation."""
    lay = ServingLayout.of(cols)
    if wl.spec_method == "none":
        return np.zeros(len(lay))
    pp = np.asarray(lay.pp, dtype=np.float64)
    if wl.spec_method == "draft":
        c = replace(lay, layers_per_stage=layers_on_busiest_stage(draft.layers, pp))
        d = decode_terms(draft, hw, wl, c, tokens_per_seq=1)
        return decode_step_s(pp, d["stage_s"], d["hop_s"])
    # MTP module: one layer of the model plus the shared embedding and output head, on one stage;
    # its block follows the last layer (DeepSeek-V3 §2.2: layer L, a MoE layer like the ones before it)
    c = replace(
        lay,
        layers_per_stage=np.ones_like(pp),
        first_layer=np.full(np.shape(pp), model.layers),
        pp=np.ones_like(np.asarray(lay.pp)),
    )
    d = decode_terms(model, hw, wl, c, tokens_per_seq=1)
    return d["stage_s"]

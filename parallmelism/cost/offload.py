"""Activation offload to host memory (Megatron-Core --cpu-offloading --cpu-offloading-num-layers N,
Transformer Engine's layer-level CPU offload): which layers leave HBM, what stays, what it costs.

Rule implemented, from the sources:
  - Megatron-Core (megatron/core/transformer/transformer_config.py: cpu_offloading,
    cpu_offloading_num_layers "the number of transformer layers for which activations has to be
    offloaded", cpu_offloading_activations; it refuses cpu_offloading_num_layers >= num_layers)
    builds one offload context per TransformerBlock, i.e. per pipeline stage, over the block's
    first N layers: a stage of n layers offloads min(N, n - 1) (its last layer never).
  - Transformer Engine (transformer_engine/pytorch/cpu_offload.py, the asynchronous double-buffer
    group handler): layer i's saved tensors are copied device->host on a side stream once its
    forward ends, overlapping layer i+1's forward, which waits for that copy at its own end; in
    backward layer i's tensors are reloaded host->device while layer i+1's backward runs. So
    one offloaded layer's buffers are resident at a time (`RESIDENT_OFFLOADED_LAYERS`).
Bytes moved per offloaded layer and micro-batch, each way: the layer's saved activations
(cost/activations.py, Korthikanti et al. 2022). Time: the copy hides under the next layer's
forward (device->host) and the neighbouring layer's backward (host->device); only the excess is
exposed, once per offloaded layer per micro-batch in each direction.
"""

from __future__ import annotations

import numpy as np

RESIDENT_OFFLOADED_LAYERS = 1  # TE: one group in flight (offloading in forward, prefetched in backward)


def offloaded_layers(requested: int, stage_layers) -> np.ndarray:
    """Layers of a stage of `stage_layers` layers whose activations go to host: min(N, n - 1)."""
    n = np.asarray(stage_layers, dtype=np.float64)
    return np.minimum(float(requested), np.maximum(n - 1.0, 0.0))


def resident_offloaded_layers(offloaded) -> np.ndarray:
    """Offloaded layers whose activation buffers are in HBM at the peak: the one in flight."""
    return np.minimum(np.asarray(offloaded, dtype=np.float64), RESIDENT_OFFLOADED_LAYERS)


def transfer_s(layer_bytes, host_link_gbps: float) -> np.ndarray:
    """Seconds one offloaded layer's saved activations take over the host link, one direction."""
    return np.asarray(layer_bytes, dtype=np.float64) / (host_link_gbps * 1e9)


def offload_exposed_s(layer_bytes, host_link_gbps: float, fwd_layer_s, bwd_layer_s, offloaded) -> np.ndarray:
    """Exposed seconds per micro-batch of a stage's offloaded layers: each copy out hides under one
    layer's forward, each copy back under one layer's backward (with its recompute); the excess
    of either is on the critical path."""
    x = transfer_s(layer_bytes, host_link_gbps)
    per_layer = np.maximum(0.0, x - fwd_layer_s) + np.maximum(0.0, x - bwd_layer_s)
    return np.asarray(offloaded, dtype=np.float64) * per_layer

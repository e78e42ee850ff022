"""Quantized serving schemes (workload.quantization): what a checkpoint stores per linear-layer weight
and what dtype its GEMMs run in.

A scheme sets the workload's weight_dtype and precision (the GEMM dtype) and adds its scales' bytes to
every weight element the GEMMs stream and the GPU holds:

  scheme      weights  GEMM   scales (per element)                                     B / element
  fp8_tensor  fp8      fp8    one fp32 per tensor (negligible: 0)                      1
  fp8_block   fp8      fp8    one fp32 per 128x128 block (DeepSeek-V3): 4/16384          1.000244
  nvfp4       fp4      fp4    one fp8 (E4M3) per 16 elements: 1/16 (+ one fp32 per     0.5625
                              tensor, negligible)
  int4_awq    int4     bf16   per group of 128 along k: one fp16 scale and one 4-bit   0.519531
  int4_gptq                   zero point (AutoAWQ / GPTQ packed qzeros): 2.5/128

fp8 and nvfp4 run both operands on the narrow tensor cores (W8A8, W4A4: the activations are cast per
token or per 16 elements by the GEMM's own prologue, not priced as a kernel of its own); int4 is
weight-only (W4A16): Marlin/Machete (vLLM, SGLang) and TensorRT-LLM's W4A16 kernels dequantize the
weights in registers and multiply in bf16. The dequantization is not a term of its own: it overlaps
the weight loads (Frantar et al., "MARLIN: Mixed-Precision Auto-Regressive Parallel Inference on
Large Language Models", PPoPP 2025: close to the ideal 4x over fp16 up to 16-32 tokens, falling
off towards 64-128 as the GEMM turns compute-bound), which the roofline gives by itself: a decode
GEMM streams 0.52 B per weight instead of 2, a large one runs at the bf16 peak
(cost.kernels.gemm_physics_s). Norms, router, embedding and output head stay 16-bit
(cost.inference_memory), the KV cache is workload.kv_dtype.

What each engine runs and each accelerator needs is checked where the run is assembled
(specs.run.RunConfig): the engine file lists its `quantization` schemes, the accelerator must list
a tensor-core peak for the GEMM dtype (fp8: Hopper, Ada and later; fp4: Blackwell)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .dtypes import BYTES_PER_ELEMENT, QuantScheme

__all__ = ["SCHEMES", "QuantScheme", "Scheme", "linear_weight_bytes"]

FP32_SCALE_BYTES = 4.0
FP8_SCALE_BYTES = 1.0  # NVFP4's E4M3 block scale
FP16_SCALE_BYTES = 2.0
INT4_ZERO_BYTES = 0.5  # one 4-bit zero point per group (AutoAWQ/GPTQ qzeros, 8 packed per int32)
FP8_BLOCK = 128.0 * 128.0  # elements per scale of DeepSeek-V3's block-scaled fp8 (weight_block_size [128, 128])
NVFP4_BLOCK = 16.0  # elements per fp8 scale of NVFP4
INT4_GROUP = 128.0  # elements along k per scale of AWQ/GPTQ checkpoints (group_size 128)


@dataclass(frozen=True)
class Scheme:
    """One quantization scheme: stored weight dtype, GEMM dtype, scale (+ zero point) bytes and the
    elements each covers, and what it is called in words."""

    weight_dtype: str
    precision: str
    scale_bytes: float
    elements_per_scale: float
    what: str

    @property
    def scale_bytes_per_element(self) -> float:
        return self.scale_bytes / self.elements_per_scale

    @property
    def bytes_per_element(self) -> float:
        """Bytes per stored weight element: the element plus its share of the scales."""
        return BYTES_PER_ELEMENT[self.weight_dtype] + self.scale_bytes_per_element


SCHEMES: dict[str, Scheme] = {
    "fp8_tensor": Scheme("fp8", "fp8", FP32_SCALE_BYTES, math.inf, "fp8 weights, one scale per tensor (W8A8 fp8)"),
    "fp8_block": Scheme("fp8", "fp8", FP32_SCALE_BYTES, FP8_BLOCK, "fp8 weights, one fp32 scale per 128x128 block"),
    "nvfp4": Scheme("fp4", "fp4", FP8_SCALE_BYTES, NVFP4_BLOCK, "NVFP4: fp4 weights, one fp8 scale per 16"),
    "int4_awq": Scheme(
        "int4", "bf16", FP16_SCALE_BYTES + INT4_ZERO_BYTES, INT4_GROUP, "AWQ int4 weights, group 128 (W4A16)"
    ),
    "int4_gptq": Scheme(
        "int4", "bf16", FP16_SCALE_BYTES + INT4_ZERO_BYTES, INT4_GROUP, "GPTQ int4 weights, group 128 (W4A16)"
    ),
}


def linear_weight_bytes(wl) -> float:
    """Bytes per linear-layer weight element of a serving workload: its scheme's (element + scales),
    else its weight_dtype's (per-tensor scales, negligible)."""
    scheme = SCHEMES.get(getattr(wl, "quantization", "none"))
    return scheme.bytes_per_element if scheme is not None else float(BYTES_PER_ELEMENT[wl.weight_dtype])

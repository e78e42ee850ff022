"""Bytes per element of each dtype and the names of the serving weight schemes: the leaf that
specs.workload and specs.quantization both read (neither imports the other at import time)."""

from __future__ import annotations

from typing import Literal

# serving weight schemes (specs/quantization.py SCHEMES: dtypes and scale bytes of each)
QuantScheme = Literal["none", "fp8_tensor", "fp8_block", "nvfp4", "int4_awq", "int4_gptq"]

BYTES_PER_ELEMENT = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5, "int8": 1, "int4": 0.5}

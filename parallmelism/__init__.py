"""parallmelism: an analytical cost model for LLM parallelism.

Conventions used everywhere (stated once, used one way):
- Memory is in GiB (2**30 bytes); columns say `_gib`.
- Bandwidth is in GB/s (1e9 bytes/s) **per direction**; link specs that vendors quote
  bidirectionally are halved when configs are written.
- FLOPs count a multiply-add as 2 FLOPs. Model FLOPs (for MFU) exclude recomputation;
  hardware FLOPs (for HFU) include it. The attention convention is named per column.
"""

__version__ = "0.1.0"
# Bumped whenever a column is added, removed, renamed or changes meaning.
SCHEMA_VERSION = 1

"""Unit constants. Memory in GiB, bandwidth in GB/s per direction, FLOP/s in TFLOP/s."""

GIB = float(2**30)  # bytes in a GiB: every `_gib` column divides by this
MIB = float(2**20)
GB = 1e9  # bytes in a GB: bandwidths (`_gbps`) are GB/s = 1e9 bytes/s
TFLOP = 1e12
US = 1e-6  # seconds in a microsecond
MS = 1e-3  # seconds in a millisecond

"""Arrow arrays built from numpy buffers, without pyarrow's pandas check (the table writer's
version columns and search/frames.py's Arrow tables)."""

from __future__ import annotations


def numpy_to_arrow(values, missing=None):
    """A numeric or boolean numpy array as an Arrow array over the same values, `missing` rows null
    (what `pyarrow.array(values, from_pandas=True)` gives for NaN). Built from buffers: pyarrow's
    own conversion imports pandas to check the argument's type (~0.5 s)."""
    import numpy as np
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    n = len(values)
    if values.dtype == np.bool_:
        t, data = pa.bool_(), pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        t, data = pa.from_numpy_dtype(values.dtype), pa.py_buffer(values)
    validity, nulls = None, 0
    if missing is not None and missing.any():
        validity = pa.py_buffer(np.packbits(~missing, bitorder="little"))
        nulls = int(missing.sum())
    return pa.Array.from_buffers(t, n, [validity, data], null_count=nulls)


def string_array(labels: list[str]):
    """Arrow string array of a few labels, without pyarrow's pandas check (numpy_to_arrow)."""
    import numpy as np
    import pyarrow as pa

    data = [s.encode() for s in labels]
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum([len(b) for b in data])
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])

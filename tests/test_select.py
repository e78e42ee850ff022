"""cost/select.py: argmax3 and argmax4 are np.argmax over the stacked columns (first of equal
maxima, NaN wins), dtype included, on ties, NaNs and infinities."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from parallmelism.cost.select import argmax3, argmax4

# few distinct values, so ties are common; NaN and both infinities among them
VALUES = st.sampled_from([0.0, -0.0, 1.0, 2.0, -3.5, np.inf, -np.inf, np.nan])


def _columns(k: int):
    return st.integers(1, 40).flatmap(
        lambda n: st.lists(st.lists(VALUES, min_size=n, max_size=n), min_size=k, max_size=k)
    )


@settings(max_examples=300, deadline=None)
@given(_columns(3))
def test_argmax3_is_argmax_of_the_stack(cols):
    a, b, c = (np.array(x, dtype=np.float64) for x in cols)
    got = argmax3(a, b, c)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.argmax(np.stack([a, b, c]), axis=0))


@settings(max_examples=300, deadline=None)
@given(_columns(4))
def test_argmax4_is_argmax_of_the_stack(cols):
    a, b, c, d = (np.array(x, dtype=np.float64) for x in cols)
    got = argmax4(a, b, c, d)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, np.argmax(np.stack([a, b, c, d]), axis=0))


def test_argmax3_broadcasts_a_scalar_column():
    a = np.array([1.0, 5.0, 2.0])
    assert argmax3(a, np.float64(3.0), np.array([0.0, 0.0, 4.0])).tolist() == [1, 0, 2]

"""Pipeline bubble rate (Narayanan et al. 2021; Qi et al. 2023 for zero bubble).

bubble rate = bubble time / ideal compute time:
  1F1B and GPipe        (p-1)/m
  interleaved 1F1B      (p-1)/(v·m)
  zero bubble (ZB-H1)   (p-1)/(3·m)   (backward split into B and W fills two thirds)
The bubble fraction of the step is rate/(1 + rate), always in [0, 1).
"""

from __future__ import annotations

import numpy as np


def bubble_rate(pp, vpp, m, schedule: str) -> np.ndarray:
    pp, vpp, m = (np.asarray(x, dtype=np.float64) for x in (pp, vpp, m))
    rate = (pp - 1) / (vpp * m)
    if schedule == "zero_bubble":
        rate = (pp - 1) / (3 * m)
    elif schedule == "gpipe":
        rate = (pp - 1) / m
    return rate

"""The busiest EP rank's routed tokens over the mean under a named routing (workload.moe_routing).

`balanced`: every expert gets tokens x top_k / experts, ratio 1. `power_law_1.01`: aiconfigurator's
routing for its MoE measurements and its DeepSeek estimates (collector power_law_logits_v3: each of the
E experts' loads drawn from a power law P(x) ~ x^-alpha on [x_min, x_max], x_min = 1 and x_max = 0.8 N for
N tokens on the rank when N top_k > E, else [0.01, 2]; rescaled to N top_k; the EP rank holding the
largest group timed). Where an engine's table measured the op under that routing (cost.fused_moe) the
table's time stands; elsewhere the routing is this ratio, the one formula here:

    m      = (1-a)/(2-a) (x_max^(2-a) - x_min^(2-a)) / (x_max^(1-a) - x_min^(1-a))     the mean load
    x_top  = F^-1(1 - 1/(2E)),  F^-1(u) = ((x_max^(1-a) - x_min^(1-a)) u + x_min^(1-a))^(1/(1-a))
    ratio  = ep (x_top + (E/ep - 1) (E m - x_top)/(E - 1)) / (E m)

the busiest rank holds the expected largest expert (the median of the top order statistic's quantile)
and E/ep - 1 experts at the others' mean; 1 at ep 1. Pure: arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np

# workload.moe_routing -> the power law's exponent (None: balanced)
ROUTING_ALPHA: dict[str, float | None] = {"balanced": None, "power_law_1.01": 1.01}


def routing_imbalance(routing: str, experts: int, top_k: int, ep, tokens):
    """Busiest EP rank's routed tokens / mean under `routing` (module docstring); arrays broadcast."""
    alpha = ROUTING_ALPHA[routing]
    ep, tokens = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (ep, tokens)))
    if alpha is None:
        return np.ones(ep.shape)
    many = tokens * top_k > experts
    lo = np.where(many, 1.0, 0.01)
    hi = np.where(many, 0.8 * tokens, 2.0)
    a1, a2 = 1.0 - alpha, 2.0 - alpha
    span = hi**a1 - lo**a1
    mean = a1 / a2 * (hi**a2 - lo**a2) / span
    top = (span * (1.0 - 0.5 / experts) + lo**a1) ** (1.0 / a1)
    total = experts * mean
    busiest = top + (experts / ep - 1.0) * (total - top) / (experts - 1.0)
    return np.where(ep > 1, ep * busiest / total, 1.0)

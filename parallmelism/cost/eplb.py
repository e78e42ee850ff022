"""Expert-parallel load balancing (EPLB) in serving: redundant experts as physical slots.

DeepSeek's EPLB (github.com/deepseek-ai/EPLB), as SGLang (`--ep-num-redundant-experts`) and
Dynamo deploy it, replicates the hottest experts into R extra slots and packs the E + R slots
onto the EP ranks so each rank's load is near the mean (SGLang's EPLB page: 256 experts + 32
redundant = 288 slots, e.g. 4 per GPU on EP72). Two consequences, and only these, are modelled:

  slots     every rank holds (E + R)/ep experts' weights, the grid's ep must divide E + R, and
            the k routed copies of a token land on k of the E + R slots (`physical_experts_model`)
  balance   the busiest rank's load over the mean is at most 1 + ep/(E + R): greedy packing of
            items no heavier than one slot's share (hot experts split over their replicas, so
            each replica carries about total/(E + R)) ends within one item of the mean
            (Graham 1969, list scheduling: max <= mean + largest item, with a rank's mean load
            (E + R)/ep items). The workload's moe_imbalance (without EPLB) is capped there
            (`eplb_imbalance`); with the default moe_imbalance = 1 nothing changes but the slots.

Which experts are hot, the routing statistics EPLB is fitted on, and its rebalancing pauses are
not modelled.
"""

from __future__ import annotations

import numpy as np


def physical_experts_model(model, redundant: int):
    """`model` with its routed experts counted as E + R physical slots (R = 0: `model` itself)."""
    if not redundant or model.moe is None:
        return model
    moe = model.moe.model_copy(update={"num_experts": model.moe.num_experts + int(redundant)})
    return model.model_copy(update={"moe": moe})


def eplb_imbalance(imbalance: float, slots: int, ep, redundant: int):
    """The busiest EP rank's load over the mean: `imbalance` without EPLB (redundant = 0), else
    min(imbalance, 1 + ep/slots) with slots = E + R (module docstring)."""
    if not redundant:
        return imbalance
    return np.minimum(imbalance, 1.0 + np.asarray(ep, dtype=np.float64) / float(slots))


__all__ = ["physical_experts_model", "eplb_imbalance"]

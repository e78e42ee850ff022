"""Typed layouts: the parallel layout of every row as one frozen dataclass of arrays, checked by
mypy, instead of a dict of columns looked up by string (issue 27, item 4; the serving cost model
takes it; the training model's columns are next).

A `ServingLayout` holds one element per layout row (grid/inference.py), all arrays of one length:
  tp                tensor-parallel ranks of a replica (attention heads, FFN split)
  pp                pipeline stages
  sp                prompt-sharding (sequence-parallel) ranks
  ep                expert-parallel ranks (inside TP when ep | tp, else across replicas)
  dp                replicas
  batch             sequences in flight per replica
  layers_per_stage  layers on the busiest stage, ceil(L/pp)
  first_layer       the stage's first layer where it is placed explicitly (the MTP module: the
                    layer after the last); None: the busiest stage of the uneven split
                    (`shapes.busiest_stage_first_layer`)
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Mapping, Optional, Union

import numpy as np


@dataclass(frozen=True)
class ServingLayout:
    tp: np.ndarray
    pp: np.ndarray
    sp: np.ndarray
    ep: np.ndarray
    dp: np.ndarray
    batch: np.ndarray
    layers_per_stage: np.ndarray
    first_layer: Optional[np.ndarray] = None

    @classmethod
    def of(cls, cols: Union["ServingLayout", Mapping[str, np.ndarray]]) -> "ServingLayout":
        """The layout of serving layout columns (a dict with at least the fields above but
        first_layer); a ServingLayout is returned as it is."""
        if isinstance(cols, ServingLayout):
            return cols
        optional = {f.name for f in fields(cls) if f.default is None}
        values = {f.name: np.asarray(cols[f.name]) for f in fields(cls) if f.name not in optional or f.name in cols}
        return cls(**values)  # a missing layout column is a KeyError naming it

    def rows(self, stop: int) -> "ServingLayout":
        """The first `stop` rows."""
        return replace(
            self,
            **{
                f.name: np.asarray(getattr(self, f.name))[:stop]
                for f in fields(self)
                if getattr(self, f.name) is not None
            },
        )

    def __len__(self) -> int:
        return len(self.tp)


__all__ = ["ServingLayout"]

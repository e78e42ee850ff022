"""Typed layouts: the parallel layout of every row as one frozen dataclass of arrays, checked by
mypy, instead of a dict of columns looked up by string (issue 27, item 4): the serving cost model
reads a `ServingLayout`, the training step time and memory a `TrainingLayout`.

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

A `TrainingLayout` holds one element per layout row (grid/layouts.py), all arrays of one length:
  ngpus                  GPUs of the job
  tp, pp, cp, ep, dp     tensor-, pipeline-, context-, expert- and data-parallel ranks
  vpp                    virtual pipeline stages per rank (interleaved 1F1B)
  micro_batch            sequences per micro-batch
  num_micro_batches      micro-batches per step per DP rank, global_batch / (dp·micro_batch)
  sequence_parallel      Megatron sequence parallelism (bool)
  recompute              activation recompute code (specs.Recompute)
  dp_sharding            DP sharding code (specs.DPSharding)
  layers_first_stage, layers_per_stage, layers_last_stage
                         layers on the first, a middle and the last pipeline stage
                         (shapes.stage_layer_split)
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Mapping, Optional, Union

import numpy as np

from .keys import gather


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


@dataclass(frozen=True)
class TrainingLayout:
    ngpus: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    dp: np.ndarray
    vpp: np.ndarray
    micro_batch: np.ndarray
    num_micro_batches: np.ndarray
    sequence_parallel: np.ndarray
    recompute: np.ndarray
    dp_sharding: np.ndarray
    layers_first_stage: np.ndarray
    layers_per_stage: np.ndarray
    layers_last_stage: np.ndarray

    @classmethod
    def of(cls, cols: Union["TrainingLayout", Mapping[str, np.ndarray]]) -> "TrainingLayout":
        """The layout of training layout columns (a dict with at least the fields above; other
        columns are left out); a TrainingLayout is returned as it is."""
        if isinstance(cols, TrainingLayout):
            return cols
        return cls(**{name: np.asarray(cols[name]) for name in TRAINING_FIELDS})  # a missing one: KeyError

    def take(self, idx) -> "TrainingLayout":
        """The rows at `idx` (an index array or a slice), in that order. A column is gathered when
        it is first read (`_TakenRows`): a cost term evaluated per distinct key reads a few."""
        taken = object.__new__(_TakenRows)
        object.__setattr__(taken, "_rows_of", (self, idx))
        return taken

    def rows(self, stop: int) -> "TrainingLayout":
        """The first `stop` rows."""
        return self.take(slice(0, stop))

    def column(self, name: str) -> np.ndarray:
        """A field by its column name (the distinct-key helpers of cost/keys.py name their columns)."""
        return getattr(self, name)

    def __len__(self) -> int:
        return len(self.tp)


TRAINING_FIELDS = tuple(f.name for f in fields(TrainingLayout))


class _TakenRows(TrainingLayout):
    """Rows of another TrainingLayout (`TrainingLayout.take`), each column gathered from it on
    first read and kept."""

    def __getattr__(self, name: str) -> np.ndarray:  # only for a column not read yet
        if name not in TRAINING_FIELDS:
            raise AttributeError(name)
        source, idx = object.__getattribute__(self, "_rows_of")
        value = getattr(source, name)[idx] if isinstance(idx, slice) else gather(getattr(source, name), idx)
        object.__setattr__(self, name, value)
        return value


__all__ = ["ServingLayout", "TrainingLayout", "TRAINING_FIELDS"]

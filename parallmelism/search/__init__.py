"""Search at scale: the one evaluation driver, collectors that keep what was asked, and sinks.

Layout: partitions.py (a run's grid cut into sub-grids) -> chunks.py (cost model on a chunk of
rows; bounded.py: for top-k searches by step time, the step-time model only on the rows whose
lower bound, cost/step_bound.py, a collector could still keep) -> driver.py (`stream_runs`,
workers) -> collectors.py / sinks.py (what is kept or written) -> frames.py (DataFrames). pareto.py, explain.py, plan.py and serve_disagg.py build the searches'
answers on top.
"""

from .collectors import Collector, CountCollector, ParetoCollector, RowsCollector, TopKCollector
from .driver import StreamResult, evaluate_table, stream_runs
from .frames import frame_of_kept
from .pareto import pareto_mask
from .sinks import ParquetDatasetSink, TableSink

__all__ = [
    "Collector",
    "CountCollector",
    "ParetoCollector",
    "ParquetDatasetSink",
    "RowsCollector",
    "StreamResult",
    "TableSink",
    "TopKCollector",
    "evaluate_table",
    "frame_of_kept",
    "pareto_mask",
    "stream_runs",
]

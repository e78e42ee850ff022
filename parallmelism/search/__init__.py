"""Search at scale: stream a grid through the cost model in chunks and keep only what was asked."""

from .pareto import pareto_mask
from .stream import Collector, FitsCollector, ParetoCollector, ParquetSink, StreamResult, TopKCollector, stream_runs

__all__ = [
    "pareto_mask",
    "Collector",
    "FitsCollector",
    "ParetoCollector",
    "ParquetSink",
    "StreamResult",
    "TopKCollector",
    "stream_runs",
]

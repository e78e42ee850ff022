"""Imports the modules that register case kinds beyond memory (step time, inference)."""

from . import steptime  # noqa: F401,E402  (registers the step_time case kind)
from . import inference_cases  # noqa: F401,E402  (registers the inference case kind)

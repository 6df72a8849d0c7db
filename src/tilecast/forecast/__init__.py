"""Graph + predictors -> per-op and end-to-end latency; kernel-row forecasts.

Vectorised building blocks (the grid scorer reuses them): :func:`op_kernel_rows`,
:func:`op_latency_ms`, :func:`summarise`; one workload end to end: :func:`forecast`.
"""

from tilecast.forecast.comm import CommModel
from tilecast.forecast.kernels import FamilyPredictor, forecast_kernels
from tilecast.forecast.ops import op_family, op_kernel_rows, op_latency_ms, roofline_predictor
from tilecast.forecast.summary import GROUPS, SUMMARY_KEYS, op_groups, summarise, summarise_many
from tilecast.forecast.workload import (
    Forecast,
    forecast,
    forecast_frame,
    graph_frame,
    stack_frames,
    summary_row,
    workload_frame,
)

__all__ = ["GROUPS", "SUMMARY_KEYS", "CommModel", "FamilyPredictor", "Forecast", "forecast", "forecast_frame",
           "forecast_kernels", "graph_frame", "op_family", "op_groups", "op_kernel_rows", "op_latency_ms",
           "roofline_predictor", "stack_frames", "summarise", "summarise_many", "summary_row", "workload_frame"]

"""Graph + predictors -> per-op and end-to-end latency; kernel-row forecasts."""

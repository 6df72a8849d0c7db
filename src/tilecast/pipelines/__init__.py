"""The jobs' orchestration: each module runs one job end to end on top of the library packages (specs,
graph, tiles, predictors, forecast, registry, evaluation, scoring, reports), which never import it.

- :mod:`~tilecast.pipelines.score`: validate a matrix, score it on Dask, publish ``<output_dir>/<date>/``;
- :mod:`~tilecast.pipelines.report`: the report of a scored run (and the comparison with the previous one);
- :mod:`~tilecast.pipelines.nightly`: bootstrap champions, score, report, log to MLflow;
- :mod:`~tilecast.pipelines.evaluate`: forecasts against measured labels, logged to MLflow;
- :mod:`~tilecast.collect.job`: measure a GPU (kernels, end-to-end labels, a spec draft).
"""

"""Config matrix -> cells -> Dask scoring -> the score table, written atomically per run date.

Entry points: :func:`tilecast.pipelines.score.run_score` (``jobs/score.py``) and
:func:`tilecast.pipelines.nightly.run_nightly` (``jobs/nightly.py``). Modules: ``matrix`` (configs and
expansion), ``pricing``, ``graphs`` + ``graph_cache`` (distinct graphs, deduplicated ops),
``predictors`` (pinned registry versions, shipped to workers), ``engine`` (the Dask run),
``aggregate`` (ops -> cells), ``metrics`` (throughput, fit, cost), ``memory`` + ``fitcheck`` (memory
model, checked against the labels), ``schema``, ``store`` (date-partitioned atomic outputs).
"""

"""A plan's files and its MLflow run: ``<name>.csv`` (the kept candidates,
:data:`~tilecast.planning.result.PLAN_COLUMNS` first), ``<name>.json`` (the decision, runners-up, Pareto
front, search) and ``<name>.png`` (the front with the plan marked), logged as a run of the ``plan``
experiment."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilecast.io import write_atomic
from tilecast.planning.result import Plan


@dataclass(frozen=True)
class PlanFiles:
    csv: Path
    json: Path
    png: Path | None


def write_plan(plan: Plan, csv_path: Path, top: int = 20) -> PlanFiles:
    """Write the three files beside each other (``csv_path`` with ``.json`` / ``.png`` suffixes)."""
    from tilecast.reports.plan_plots import plan_figure

    csv_path = Path(csv_path)
    base = csv_path.with_suffix("")
    out_json, out_png = base.with_suffix(".json"), base.with_suffix(".png")
    table = plan.candidates.drop(columns=["status_rank"], errors="ignore")
    write_atomic(csv_path, lambda tmp: table.to_csv(tmp, index=False))
    write_atomic(out_json, lambda tmp: tmp.write_text(json.dumps(plan.to_dict(top), indent=2, default=str) + "\n"))
    png = plan_figure([plan], out_png, columns=1, dpi=120)
    return PlanFiles(csv_path, out_json, png)


def _params(plan: Plan) -> dict[str, Any]:
    return {f"question.{k}": (",".join(v) if isinstance(v, list) else v)
            for k, v in plan.question.to_dict().items() if v is not None and v != []}


def metrics(plan: Plan) -> dict[str, float]:
    """The plan's figures as MLflow metrics (the chosen configuration's, and the search's)."""
    out: dict[str, float] = {"feasible": float(plan.feasible)}
    for key in ("candidates", "answered", "seconds", "assembled", "ruled_out", "graphs", "fitting", "step_tables"):
        value = plan.search.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[f"search.{key}"] = float(value)
    chosen = plan.chosen or {}
    for key in ("n_gpus", "replicas", "concurrency", "usd_per_month", "usd_per_1m_tokens", "ttft_ms", "tpot_ms",
                "ttft_hi_ms", "tpot_hi_ms", "margin_pct", "tokens_per_s_per_gpu", "usd_to_train", "days_to_train",
                "days_to_train_hi", "step_s", "mfu_pct"):
        value = chosen.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[f"plan.{key}"] = float(value)
    return out


def log_plan(plan: Plan, files: PlanFiles | None, experiment: str = "plan", tracking_uri: str | None = None,
             config_yaml: str | None = None) -> str:
    """Log ``plan`` as one run of ``experiment`` (parameters: the question; metrics: :func:`metrics`; tags: the
    decision in words and the predictor; artifacts: the files); returns the run id."""
    import mlflow

    from tilecast.registry.lineage import log_lineage
    from tilecast.registry.tracking import configure, ensure_experiment

    configure(tracking_uri)
    name = f"plan-{plan.kind}-{plan.question.model.key}"
    with mlflow.start_run(experiment_id=ensure_experiment(experiment), run_name=name) as run:
        log_lineage(config_yaml, job="plan", task=plan.kind)
        mlflow.log_params(_params(plan))
        mlflow.log_metrics(metrics(plan))
        mlflow.set_tags({"tilecast.plan": plan.summary()[:5000], "tilecast.predictor": plan.predictor,
                         "tilecast.versions": json.dumps(plan.versions, sort_keys=True)})
        if files is not None:
            for path in (files.csv, files.json, files.png):
                if path is not None:
                    mlflow.log_artifact(str(path), artifact_path="plan")
        return run.info.run_id


__all__ = ["PlanFiles", "log_plan", "metrics", "write_plan"]

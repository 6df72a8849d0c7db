"""End-to-end accuracy benchmark: ``python benchmarks/e2e.py [--alias champion] [--output benchmarks/e2e.md]``.

Evaluates the registered predictors (``tilecast-<family>@alias``) on every shipped label, spec-only and
calibrated, beside our roofline and the paper's published per-cell errors, and writes the Markdown
page plus a CSV of every label. Needs trained models: ``python jobs/train.py`` then
``python jobs/promote.py`` (``champion`` falls back to ``challenger``).
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from tilecast.data import load_paper
from tilecast.evaluation.benchmark import render, with_roofline
from tilecast.evaluation.suite import forecast_labels
from tilecast.forecast import roofline_predictor
from tilecast.io import write_atomic, write_table
from tilecast.paths import ROOT
from tilecast.pipelines.evaluate import EvaluationSettings, evaluate
from tilecast.registry.tracking import configure


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alias", default="champion")
    ap.add_argument("--tracking-uri", default=None, help="MLflow store (default: $MLFLOW_TRACKING_URI or mlruns/)")
    ap.add_argument("--output", default=str(ROOT / "benchmarks" / "e2e.md"))
    ap.add_argument("--csv", default=str(ROOT / "benchmarks" / "e2e.csv"))
    ap.add_argument("--calibration-rows", type=int, default=20)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    uri = configure(args.tracking_uri)
    settings = EvaluationSettings(alias=args.alias, calibration_rows=args.calibration_rows)
    t0 = time.perf_counter()
    result = evaluate(settings)
    roofline = forecast_labels(result.labels.labels, roofline_predictor)
    seconds = time.perf_counter() - t0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    meta = {"date": datetime.now(UTC).strftime("%Y-%m-%d"), "command": f"python benchmarks/e2e.py --alias {args.alias}",
            "models": ", ".join(f"tilecast-{f} v{v}" for f, v in result.versions.items()) + f" (@{args.alias})",
            "git commit": commit, "labels": f"{len(result.table)} shipped label files "
            f"({len(result.labels.skipped)} skipped)", "wall time": f"{seconds:.0f} s on this machine's CPUs",
            "tracking store": uri}
    for note in result.notes:
        meta["note"] = note
    text = render(result, roofline, meta, settings.unseen_gpus, load_paper("perop"))
    write_atomic(Path(args.output), lambda p: p.write_text(text + "\n", encoding="utf-8"))
    write_table(with_roofline(result.table, roofline), Path(args.csv))
    print(text.split("## Training GPUs")[0])
    print(f"wrote {args.output} and {args.csv}")


if __name__ == "__main__":
    main()

"""Planning benchmark: how many candidate configurations the deployment planner searches, how fast, in how much
memory; and the nightly report's page weight and write time.

    python benchmarks/planning.py [--tracking-uri <store>] [--forecaster auto] [--workers 2]
                                  [--report-run <nightly run dir>] [--nightly] [--out benchmarks/planning.md]

Each planning case runs the real ``jobs/plan.py`` in a subprocess (RSS sampled every 50 ms over its whole
process tree: client, nanny and Dask worker processes, as ``benchmarks/scoring.py`` does) and reads the plan's
JSON: what the search counted (candidates, by status), its own clock, and the decision.

- ``serve``: Llama-3.1-70B, 1,024 in / 1,024 out, 2,000 requests/min, TTFT <= 1 s, TPOT <= 40 ms over the whole
  catalog with the default search (vLLM / SGLang / TRT-LLM x bf16 / fp8 / fp4 x tp 1-8 x every concurrency from 1 to
  1,024), forecast from the engines' step tables in process (no graph cache, no Dask);
- ``serve_moe``: Qwen3-30B-A3B (mixture of experts), 1,024 in / 1,024 out, 2,000 requests/min, TTFT <= 1 s,
  TPOT <= 40 ms over the whole catalog, SGLang only, fp8, with the MoE layouts (tp 1-8 x attention dp 1, 8 x ep
  1, 8) x every concurrency from 1 to 1,024;
- ``train``: Llama-3.1-70B on 2T tokens in 30 days over the whole catalog with the widest search
  (1-16,384 GPUs x 4 shardings x tp 1-8 x pp 1-8 x cp 1-4 x 3 checkpointing x micro-batch 1-8).

``--report-run``: the report job on a copy of that run directory (the nightly's tables): wall time of the job
and size of ``report.html``. ``--nightly``: ``jobs/nightly.py`` end to end on a fresh output directory (twice: an
empty graph cache, then the one it left), its wall time and report size.

The peer's search (NVIDIA AIConfigurator) is not run here: it answers only from its bundled measured
performance tables, which include the GPUs this project holds back, and the project never installs it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024
_spec = importlib.util.spec_from_file_location("bench_scoring", ROOT / "benchmarks" / "scoring.py")
bench_scoring = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_scoring)

SERVE = ["model=llama31_70b", "isl=1024", "osl=1024", "ttft_ms=1000", "tpot_ms=40", "rate=33.333"]
SERVE_MOE = ["model=qwen3_30b_a3b", "isl=1024", "osl=1024", "ttft_ms=1000", "tpot_ms=40", "rate=33.333",
             "dtypes=[fp8]", "search.serve.engines=[sglang]", "search.serve.attention_dp=[1,8]",
             "search.serve.ep=[1,8]"]
TRAIN = ["model=llama31_70b", "tokens=2e12", "days=30",
         "search.train.n_gpus=[1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384]", "search.train.cp=[1,2,4]",
         "search.train.micro_batch=[1,2,4,8]"]


def run(job: str, args: list[str]) -> tuple[dict, str]:
    """One job in a subprocess (:func:`benchmarks.scoring.measure`); its stats and stdout."""
    cmd = [sys.executable, f"jobs/{job}.py", *args]
    stats, proc = bench_scoring.measure(cmd)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return stats, proc.stdout


def plan_case(name: str, args: list[str], common: list[str], tmp: Path, cache: str) -> dict:
    out = tmp / f"{name}.csv"
    stats, stdout = run("plan", [*args, *common, f"output={out}", f"cache_dir={tmp / 'cache'}", "log=false",
                                 f"hydra.run.dir={tmp / '.hydra'}"])
    record = json.loads(out.with_suffix(".json").read_text())
    s = record["search"]
    answered = sum(n for k, n in s["by_status"].items() if k not in ("not supported", "not modelled", "failed"))
    return {"case": name, "cache": cache, "candidates": s["candidates"], "answered": answered,
            "by_status": s["by_status"], "search_s": s.get("seconds"), "assembled": s.get("assembled"),
            "ruled_out": s.get("ruled_out"), "graphs": s.get("graphs"), "cached_graphs": s.get("cached_graphs"),
            "fitting": s.get("fitting"), "step_tables": s.get("step_tables"),
            "plan": record["summary"],
            "predictor": record["predictor"], "versions": record["versions"], **stats}


def report_case(run_dir: Path, tmp: Path, common: list[str]) -> dict:
    """The report job on a copy of a scored run (its tables), timed; the page's size."""
    out = tmp / "reports"
    shutil.copytree(run_dir, out / run_dir.name, ignore=shutil.ignore_patterns("report*", "plots", "tables"))
    stats, _ = run("report", [f"output_dir={out}", f"run={run_dir.name}", "compare=false",
                              f"hydra.run.dir={tmp / '.hydra'}"])
    html = out / run_dir.name / "report.html"
    # the report's own clock: reading the tables, answering the plans, writing every file (no imports, no Hydra)
    code = ("import time, sys; from pathlib import Path; from tilecast.pipelines.report import run_report, "
            "settings_from_config; from tilecast.cli import conf_defaults; "
            "s, f = settings_from_config(conf_defaults('report')); t = time.perf_counter(); "
            f"run_report(Path({str(out)!r}), {run_dir.name!r}, s, f, compare=False); "
            "print(time.perf_counter() - t)")
    _, stdout = run_code(code)
    return {"case": "report", "html_mb": html.stat().st_size / 1e6, "build_s": float(stdout.split()[-1]), **stats}


def run_code(code: str) -> tuple[dict, str]:
    stats, proc = bench_scoring.measure([sys.executable, "-c", code])
    if proc.returncode != 0:
        raise RuntimeError(f"python -c failed:\n{proc.stderr[-3000:]}")
    return stats, proc.stdout


def nightly_case(tmp: Path, common: list[str], cache: str) -> dict:
    out = tmp / "nightly"
    stats, _ = run("nightly", [f"output_dir={out}", "date=2000-01-01", "progress=false",
                               f"hydra.run.dir={tmp / '.hydra'}", *[c for c in common if not c.startswith("dask")]])
    run_dir = out / "2000-01-01"
    meta = json.loads((run_dir / "run.json").read_text())
    return {"case": "nightly", "cache": cache, "html_mb": (run_dir / "report.html").stat().st_size / 1e6,
            "score_total_s": meta["stats"].get("total_s"), **stats}


def _fmt(rows: list[dict], cols: list[tuple[str, str]]) -> str:
    out = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join("" if r.get(c) is None else f.format(r[c]) for c, f in cols) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tracking-uri", default=None, help="MLflow store with the champions (default: the project's)")
    ap.add_argument("--forecaster", default="auto", choices=["auto", "registry", "roofline"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cases", nargs="*", default=["serve", "serve_moe", "train"],
                    choices=["serve", "serve_moe", "train"])
    ap.add_argument("--report-run", type=Path, default=None, help="a nightly run directory to time the report on")
    ap.add_argument("--nightly", action="store_true", help="time jobs/nightly.py end to end (cold and warm)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    forecaster = args.forecaster
    if forecaster == "auto":
        forecaster = "registry" if bench_scoring.champion_available(args.tracking_uri) else "roofline"
    common = [f"forecaster={forecaster}", f"dask.n_workers={args.workers}"]
    if args.tracking_uri:
        common.append(f"mlflow.tracking_uri={args.tracking_uri}")
    plans, others = [], []
    with tempfile.TemporaryDirectory(prefix="tilecast-plan-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for case, question in (("serve", SERVE), ("serve_moe", SERVE_MOE)):
            if case in args.cases:
                plans.append(plan_case(case, question, common, tmp, "-"))
                print(json.dumps(plans[-1], default=str), flush=True)
        if "train" in args.cases:
            plans.append(plan_case("train", TRAIN, common, tmp, "-"))
            print(json.dumps(plans[-1], default=str), flush=True)
        if args.report_run is not None:
            others.append(report_case(args.report_run, tmp, common))
            print(json.dumps(others[-1], default=str), flush=True)
        if args.nightly:
            for cache in ("cold", "warm"):
                others.append(nightly_case(tmp, common, cache))
                print(json.dumps(others[-1], default=str), flush=True)
    load = os.getloadavg()
    predictor = plans[0]["predictor"] if plans else forecaster
    versions = plans[0]["versions"] if plans else {}
    text = [f"Run {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')} on {platform.node()} "
            f"({psutil.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB; load average at the end "
            f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}); predictor `{predictor}`"
            f"{' ' + json.dumps(versions, sort_keys=True) if versions else ''}; {args.workers} Dask workers.", ""]
    if plans:
        text += [_fmt(plans, [("case", "{}"), ("cache", "{}"), ("candidates", "{:,}"), ("answered", "{:,}"),
                              ("fitting", "{:,}"), ("step_tables", "{:,}"), ("assembled", "{:,}"),
                              ("ruled_out", "{:,}"), ("search_s", "{:.1f}"),
                              ("wall_s", "{:.1f}"), ("cpu_s", "{:.0f}"), ("client_rss_mb", "{:,.0f}"),
                              ("tree_rss_mb", "{:,.0f}"), ("load", "{}")]), ""]
        text += [f"- `{p['case']}` ({p['cache']}): {p['plan']}; by status {json.dumps(p['by_status'])}"
                 for p in plans] + [""]
    if others:
        text += [_fmt(others, [("case", "{}"), ("cache", "{}"), ("html_mb", "{:.2f}"), ("build_s", "{:.1f}"),
                               ("score_total_s", "{:.1f}"),
                               ("wall_s", "{:.1f}"), ("cpu_s", "{:.0f}"), ("tree_rss_mb", "{:,.0f}"),
                               ("load", "{}")]), ""]
    out = "\n".join(text)
    if args.out:
        args.out.write_text(out)
    print(out)


if __name__ == "__main__":
    main()

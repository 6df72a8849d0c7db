"""Scoring benchmark: cells/s, time split and peak RSS of ``jobs/score.py`` for a few matrices and worker counts.

    python benchmarks/scoring.py [--matrices smoke nightly] [--workers 1 2] [--forecaster auto]
                                 [--out benchmarks/scoring.md]

Each (matrix, workers) runs the real job in a subprocess twice on a fresh output directory: ``cold``
(empty graph cache: every graph is built) then ``warm`` (the nightly case: graphs from the cache of
the previous night, ops and cells forecast again). RSS is sampled every 50 ms over the job's whole
process tree (client, nanny and worker processes); the client's own peak is reported too. ``wall_s``
is the job process from start to exit (imports, validation, Dask, writing), ``total_s`` the run's own
clock from starting the cluster to the written table, ``cpu_s`` the CPU seconds of the job and all its
processes (a load-independent measure on a shared machine), ``load`` the 1-minute load average when the
run started and when it ended. The time split comes from ``run.json``.
``--forecaster auto`` uses the registered champions
when the registry has every family, the roofline otherwise (the table says which).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from tilecast.tiles.ops import FP32_FAMILIES

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024


def _sample_rss(proc: psutil.Process, stop: threading.Event, peaks: dict[str, float]) -> None:
    while not stop.is_set():
        try:
            own = proc.memory_info().rss
            tree = own + sum(_rss(c) for c in proc.children(recursive=True))
        except psutil.NoSuchProcess:
            break
        peaks["client"] = max(peaks.get("client", 0), own)
        peaks["tree"] = max(peaks.get("tree", 0), tree)
        stop.wait(0.05)


def _rss(p: psutil.Process) -> int:
    try:
        return p.memory_info().rss
    except psutil.NoSuchProcess:
        return 0


def measure(cmd: list[str], env_extra: dict | None = None) -> tuple[dict, subprocess.CompletedProcess]:
    """Run ``cmd`` from the repository root: wall, CPU seconds of it and every process it reaped, peak RSS of
    it alone (``client``) and of its whole process tree, the 1-minute load before and after."""
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CI": "1", **(env_extra or {})})
    peaks: dict[str, float] = {}
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_rss, args=(psutil.Process(proc.pid), stop, peaks), daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    stop.set()
    sampler.join()
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)  # the job and every process it reaped
    return ({"wall_s": wall, "cpu_s": cpu, "load": f"{load0:.1f}-{os.getloadavg()[0]:.1f}",
             "client_rss_mb": peaks.get("client", 0) / MB, "tree_rss_mb": peaks.get("tree", 0) / MB},
            subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr))


def run_job(matrix: str, workers: int, forecaster: str, out: Path, tracking_uri: str | None = None) -> dict:
    """One ``jobs/score.py`` run: wall time, peak RSS and the run's own stats."""
    cmd = [sys.executable, "jobs/score.py", f"matrix={matrix}", f"dask.n_workers={workers}",
           f"forecaster={forecaster}", f"output_dir={out}", "date=2000-01-01", "progress=false",
           f"hydra.run.dir={out / '.hydra'}"]
    if tracking_uri:
        cmd.append(f"mlflow.tracking_uri={tracking_uri}")
    stats, proc = measure(cmd)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    meta = json.loads((out / "2000-01-01" / "run.json").read_text())
    return {**stats, "predictor": meta["predictor"], "versions": meta.get("versions", {}), **meta["stats"]}


def champion_available(tracking_uri: str | None = None) -> bool:
    """Every family has a registered version behind @champion (no fallback)."""
    try:
        from tilecast.registry.tracking import configure
        from tilecast.training.promotion import CHAMPION, alias_versions

        configure(tracking_uri)
        return all(v is not None for v in alias_versions(CHAMPION, FP32_FAMILIES).values())
    except Exception:  # noqa: BLE001 - no registry here: the roofline stands in
        return False


def table(rows: list[dict]) -> str:
    cols = [("matrix", "{}"), ("workers", "{}"), ("cache", "{}"), ("cells", "{:,}"), ("serve_cells", "{:,}"),
            ("forecast_cells", "{:,}"), ("graphs", "{:,}"),
            ("distinct_ops", "{:,}"), ("wall_s", "{:.1f}"), ("cpu_s", "{:.0f}"), ("total_s", "{:.1f}"),
            ("cells_per_s", "{:,.0f}"),
            ("cluster_s", "{:.1f}"), ("graphs_s", "{:.1f}"), ("predict_s", "{:.1f}"), ("aggregate_s", "{:.2f}"),
            ("train_runs_s", "{:.2f}"), ("write_s", "{:.2f}"), ("client_rss_mb", "{:,.0f}"),
            ("tree_rss_mb", "{:,.0f}"), ("load", "{}")]
    out = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(f.format(r.get(c, 0)) for c, f in cols) + " |")  # train_runs_s: 0 without
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--matrices", nargs="+", default=["smoke", "nightly"])
    ap.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--forecaster", default="auto", choices=["auto", "registry", "roofline"])
    ap.add_argument("--tracking-uri", default=None, help="MLflow store with the champions (default: the project's)")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here (default: print)")
    args = ap.parse_args()
    forecaster = args.forecaster
    if forecaster == "auto":
        forecaster = "registry" if champion_available(args.tracking_uri) else "roofline"
    rows = []
    for matrix in args.matrices:
        for workers in args.workers:
            with tempfile.TemporaryDirectory(prefix="tilecast-bench-") as tmp:
                for cache in ("cold", "warm"):
                    r = run_job(matrix, workers, forecaster, Path(tmp), args.tracking_uri)
                    r.setdefault("serve_cells", 0)
                    scored = r["cells"] + r["serve_cells"]
                    r.update(matrix=matrix, workers=workers, cache=cache, cells_per_s=scored / r["total_s"],
                             forecast_cells=scored - r["failed_cells"] - r.get("failed_serve_cells", 0))
                    rows.append(r)
                    print(f"{matrix:8s} workers={workers} {cache}: {scored} cells ({r['forecast_cells']} with a "
                          f"forecast) in {r['total_s']:.1f} s "
                          f"({r['cells_per_s']:.0f} cells/s), job {r['wall_s']:.1f} s, RSS client "
                          f"{r['client_rss_mb']:.0f} MB / all {r['tree_rss_mb']:.0f} MB", flush=True)
    load = os.getloadavg()
    versions = rows[0].get("versions", {}) if rows else {}
    header = (f"Run {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')} on {platform.node()} "
              f"({psutil.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB; load average at the end "
              f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}); predictor `{rows[0]['predictor'] if rows else '?'}`"
              f"{' ' + json.dumps(versions, sort_keys=True) if versions else ''}.")
    text = header + "\n\n" + table(rows) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

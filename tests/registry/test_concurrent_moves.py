"""Alias moves from several processes at once (issue 17): every move is recorded, none is lost, no writer
crashes, and once they are done the alias points where the last recorded move says. Real MLflow, a throwaway
sqlite store, real processes (spawned: each opens its own connection, as parallel jobs do)."""

from __future__ import annotations

import multiprocessing as mp
import traceback
from itertools import pairwise

import mlflow
from mlflow import MlflowClient

from tilecast.registry.aliases import alias_history
from tilecast.registry.tracking import configure, ensure_experiment

WRITERS, MOVES = 4, 5


def _writer(uri: str, name: str, versions: list[str], worker: int, start, results) -> None:
    """One writer process: ``MOVES`` moves of ``name@champion``, all released at once by ``start``."""
    try:
        from tilecast.registry.aliases import move_alias

        configure(uri)
        MlflowClient().get_registered_model(name)  # connection open before the race starts
        start.wait(timeout=120)
        for i in range(MOVES):
            move_alias(name, "champion", versions[(worker + i) % len(versions)], reason=f"w{worker}.{i}",
                       metrics={"worker": float(worker)})
        results.put((worker, ""))
    except Exception:  # reported by the parent
        results.put((worker, traceback.format_exc()))


def test_parallel_writers_lose_no_move(tmp_path):
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    uri = configure(f"sqlite:///{tmp_path / 'mlflow.db'}")
    try:
        name = "concurrent-alias-test"
        client = MlflowClient()
        client.create_registered_model(name)
        with mlflow.start_run(experiment_id=ensure_experiment("concurrency-test")) as run:
            mlflow.log_text("x", "m/x.txt")
        versions = [str(client.create_model_version(name, source=f"{run.info.artifact_uri}/m",
                                                    run_id=run.info.run_id).version) for _ in range(3)]
        ctx = mp.get_context("spawn")
        start, results = ctx.Barrier(WRITERS), ctx.Queue()
        procs = [ctx.Process(target=_writer, args=(uri, name, versions, w, start, results)) for w in range(WRITERS)]
        for p in procs:
            p.start()
        outcome = dict(results.get(timeout=240) for _ in procs)
        for p in procs:
            p.join(timeout=60)
        failed = {w: tb for w, tb in outcome.items() if tb}
        assert not failed, "writers crashed:\n" + "\n".join(failed.values())

        history = alias_history(name, "champion")
        assert sorted(m.reason for m in history) == sorted(f"w{w}.{i}" for w in range(WRITERS) for i in range(MOVES))
        aliases = client.get_registered_model(name).aliases
        assert str(aliases["champion"]) == history[-1].to_version  # the alias agrees with its history
        assert history[0].from_version is None
        for prev, move in pairwise(history):  # one chain: each move starts where one ended
            assert move.from_version == prev.to_version
        assert [m.seq for m in history] == list(range(1, len(history) + 1))
    finally:
        mlflow.set_tracking_uri(before[0])
        mlflow.set_registry_uri(before[1])

"""The embedded store moved (``mv``), copied (``cp -a``), read-only, or with tampered artifacts (issue 17, items
4, 5 and 11): forecasts load from the store's current place and never write into it or into the original of a
copy; a read-only store serves predict, predict_kernels and score; loading runs no code and unpickles nothing
from the store, and refuses (exit 2, one line) a version whose files are not the ones registered.

One template store (roofline predictors for every other family, a tiny xgboost ``bmm`` with a nearest-neighbour
tile chooser: JSON and npz files) is built once; every test works on a copy or a move of it, so every test
store is a relocated one."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from tests.registry.helpers import compose_job, job_main
from tilecast.data import load_kernels
from tilecast.paths import ROOT
from tilecast.registry import configure, forecast_from_registry, load_predictor
from tilecast.registry.local_store import ReadOnlyStoreError, forget, prepare_store, state_of
from tilecast.registry.models import MANIFEST_TAG, PREDICTOR_ARTIFACT, ModelIntegrityError
from tilecast.tiles.ops import FAMILIES
from tilecast.training.train import TrainSpec, train

TINY_XGB = {"rounds": 10, "max_depth": 3, "tile_chooser": "nearest"}


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """``<tmp>/made-here/store``: the template store, and the bmm xgboost predictions it gives on test rows."""
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    store = tmp_path_factory.mktemp("made-here") / "store"
    store.mkdir()
    configure(f"sqlite:///{store / 'mlflow.db'}")
    train(TrainSpec("roofline", families=tuple(f for f in FAMILIES if f != "bmm"), experiment="safety", logo=False,
                    max_rows=100))
    [bmm] = train(TrainSpec("xgboost", TINY_XGB, families=("bmm",), experiment="safety", max_rows=200, logo=False))
    rows = _rows()
    yield store, rows, np.asarray(bmm.predictor.predict_ms(rows), dtype=float)
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


def _rows() -> pd.DataFrame:
    return load_kernels("test", "bmm").head(6)[["OPName", "B", "M", "N", "K", "Device"]].reset_index(drop=True)


def _copy(src: Path, dst: Path) -> Path:
    """``cp -a``: contents, modes and times."""
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _use(store: Path) -> str:
    return configure(f"sqlite:///{store / 'mlflow.db'}")


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``root``: (mtime ns, size, sha256)."""
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size,
                                       hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def _bmm_dir(store: Path) -> Path:
    """The logged-model directory of the store's tilecast-bmm v1 (found on disk, as a person would)."""
    [mlmodel] = [p for p in store.rglob("MLmodel") if "family: bmm" in p.read_text()]
    return mlmodel.parent


def _locations(store: Path) -> list[str]:
    import sqlite3

    con = sqlite3.connect(f"{(store / 'mlflow.db').as_uri()}?mode=ro", uri=True)
    try:
        return [r[0] for q in ("select artifact_uri from runs", "select storage_location from model_versions",
                               "select artifact_location from experiments where name != 'Default'")
                for r in con.execute(q)]
    finally:
        con.close()


# --- item 4: moved and copied stores ---------------------------------------------------------------------------

def test_a_moved_store_forecasts_and_trains_in_its_new_place(template, tmp_path):
    store, rows, expected = template
    old = _copy(store, tmp_path / "before-mv" / "store")
    _use(old)  # the store as it was used before the move (rebased to before-mv)
    moved = tmp_path / "after-mv" / "store"
    moved.parent.mkdir()
    shutil.move(old, moved)
    _use(moved)
    got = forecast_from_registry(rows, alias="challenger")
    np.testing.assert_allclose(got.table["pred_ms"].to_numpy(float), expected, rtol=1e-9)
    [result] = train(TrainSpec("roofline", families=("softmax",), experiment="safety", max_rows=100, logo=False))
    assert not old.exists(), f"a job wrote under the old location: {sorted(old.rglob('*'))[:5]}"
    assert all(str(moved) in loc for loc in _locations(moved)), _locations(moved)
    run_dir = Path(MlflowClient().get_run(result.run_id).info.artifact_uri.removeprefix("file://"))
    assert moved in run_dir.parents and run_dir.is_dir()
    assert str(load_predictor("softmax", "challenger").version.version) == result.version


def test_a_copy_never_writes_into_the_original(template, tmp_path):
    store, rows, expected = template
    original = snapshot(store)
    copy = _copy(store, tmp_path / "copy" / "store")
    _use(copy)
    uri = f"sqlite:///{copy / 'mlflow.db'}"
    assert state_of(uri).rebased > 0
    forget(uri)
    assert prepare_store(uri, copy / "mlflow.db").rebased == 0  # once rebased, nothing is left to rewrite
    np.testing.assert_allclose(forecast_from_registry(rows, alias="challenger").table["pred_ms"].to_numpy(float),
                               expected, rtol=1e-9)
    train(TrainSpec("roofline", families=("layernorm",), experiment="safety", max_rows=100, logo=False))
    assert snapshot(store) == original, "the copy wrote into the original store"
    assert all(str(copy) in loc for loc in _locations(copy))


# --- item 5: a read-only store ---------------------------------------------------------------------------------

def _read_only(root: Path) -> None:
    """``chmod -R a-w``: as root the bits do not stop a write, so the tests also compare snapshots."""
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)


def _writable(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)


@pytest.fixture
def read_only_store(template, tmp_path):
    store = _copy(template[0], tmp_path / "published" / "store")  # a copy: its locations name the template
    _read_only(store)
    before = snapshot(store)
    yield store, before
    _writable(store)


def test_read_only_store_serves_the_read_jobs_and_is_never_written(read_only_store, template, tmp_path, capsys):
    store, before = read_only_store
    uri = _use(store)
    assert state_of(uri).writable is False and state_of(uri).rebased == 0
    rows_csv = tmp_path / "rows.csv"
    template[1].to_csv(rows_csv, index=False)
    jobs = {"predict_kernels": ["input=" + str(rows_csv), f"output={tmp_path}/kernels.csv", "alias=challenger"],
            "predict": ["model=gpt2_large", "gpu=l4", "batch=1", "seq_len=128", "alias=challenger",
                        f"output={tmp_path}/predict.json"],
            "score": ["alias=challenger", f"output_dir={tmp_path}/scores", "graph_cache=false", "dask.n_workers=1",
                      "dask.processes=false", "progress=false", "matrix.models=[gpt2_large]", "matrix.gpus=[l4]",
                      "matrix.dtypes=[fp32]", "matrix.batch_sizes=[2]", "matrix.parallel=[none]", "~matrix.serve"]}
    for job, overrides in jobs.items():
        job_main(job)(compose_job(job, [*overrides, f"mlflow.tracking_uri={uri}"]))
    out = pd.read_csv(tmp_path / "kernels.csv")
    np.testing.assert_allclose(out["pred_ms"].to_numpy(float), template[2], rtol=1e-9)
    assert json.loads((tmp_path / "predict.json").read_text())["e2e_ms"] > 0
    scores = pd.read_parquet(next((tmp_path / "scores").glob("*/scores.parquet")))
    assert len(scores) and scores["e2e_ms"].notna().all()
    assert snapshot(store) == before, "a read-only job changed the store"
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:  # a job that writes refuses by name, before any run starts
        job_main("train")(compose_job("train", ["families=[softmax]", "max_rows=50", f"mlflow.tracking_uri={uri}"]))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: tracking URI {uri} is a read-only store") and snapshot(store) == before


def test_a_write_to_a_read_only_store_is_refused_by_name(read_only_store):
    from tilecast.registry.tracking import ensure_experiment

    _use(read_only_store[0])
    with pytest.raises(ReadOnlyStoreError, match="read-only store"):
        ensure_experiment("anything")


def test_read_only_mount_predict_kernels(template, tmp_path):
    """The real thing where this machine allows it: a read-only bind mount (writes fail with Errno 30 even
    for root), predict_kernels in a subprocess."""
    store = _copy(template[0], tmp_path / "mounted" / "store")
    rows_csv, out = tmp_path / "rows.csv", tmp_path / "out.csv"
    template[1].to_csv(rows_csv, index=False)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {store} {store} && "
                            f"mount -o remount,ro,bind {store} {store} && ! touch {store}/x"],
                           capture_output=True, text=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("no read-only bind mount here (needs unshare and mount rights)")
    job = (f"mount --bind {store} {store} && mount -o remount,ro,bind {store} {store} && "
           f"{sys.executable} {ROOT / 'jobs' / 'predict_kernels.py'} input={rows_csv} output={out} alias=challenger "
           f"mlflow.tracking_uri=sqlite:///{store / 'mlflow.db'}")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", job], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    np.testing.assert_allclose(pd.read_csv(out)["pred_ms"].to_numpy(float), template[2], rtol=1e-9)


# --- item 11: loading runs nothing from the store and checks what it reads ---------------------------------------

class _Marker:
    """Unpickling this creates ``path`` (what a crafted pickle in the store would do)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return exec, (f"open({self.path!r}, 'w').write('pwned')",)


def _append_code(model: Path, marker: Path) -> str:
    with (model / "pyfunc_entry.py").open("a") as f:
        f.write(f"\nopen({str(marker)!r}, 'w').write('pwned')\n")
    return "pyfunc_entry.py"


def _pickle_flavour(model: Path, marker: Path) -> str:
    """The pyfunc flavour switched to a cloudpickled python_model.pkl that creates ``marker`` when loaded."""
    (model / "python_model.pkl").write_bytes(pickle.dumps(_Marker(marker)))
    pickled = "loader_module: mlflow.pyfunc.model\n    python_model: python_model.pkl"
    text = (model / "MLmodel").read_text().replace("loader_module: mlflow.pyfunc.loaders.code_model", pickled)
    (model / "MLmodel").write_text("\n".join(line for line in text.splitlines() if "model_code_path" not in line))
    return "python_model.pkl"


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _flip_npz(model: Path, marker: Path) -> str:
    _flip(model / PREDICTOR_ARTIFACT / "tile_chooser" / "nearest.npz")
    return "artifacts/predictor/tile_chooser/nearest.npz"


def _flip_json(model: Path, marker: Path) -> str:
    _flip(model / PREDICTOR_ARTIFACT / "model.json")
    return "artifacts/predictor/model.json"


def _add_chooser(model: Path, marker: Path) -> str:
    (model / PREDICTOR_ARTIFACT / "extra.json").write_text("{}")
    return "artifacts/predictor/extra.json"


@pytest.mark.parametrize("tamper", [_append_code, _pickle_flavour, _flip_npz, _flip_json, _add_chooser])
def test_a_tampered_artifact_is_refused_and_runs_nothing(template, tmp_path, capsys, tamper):
    store = _copy(template[0], tmp_path / "tampered" / "store")
    uri = _use(store)
    marker = tmp_path / "marker"
    named = tamper(_bmm_dir(store), marker)
    with pytest.raises(ModelIntegrityError, match=rf"tilecast-bmm v1 \(@challenger\) refused.*{named}"):
        load_predictor("bmm", "challenger")
    rows_csv = tmp_path / "rows.csv"
    template[1].to_csv(rows_csv, index=False)
    for job, overrides in {"predict_kernels": [f"input={rows_csv}", f"output={tmp_path}/out.csv"],
                           "predict": ["model=gpt2_large", "gpu=l4", "batch=1", "seq_len=128"]}.items():
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            job_main(job)(compose_job(job, [*overrides, "alias=challenger", f"mlflow.tracking_uri={uri}"]))
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("error: tilecast-bmm v1") and named in err[-1], err[-3:]
        assert not any("Traceback" in line for line in err)
    # what MLflow's own pyfunc loader does with the same files (tilecast never calls it): the proof that the
    # tamper is live and that refusing it is what kept the marker from being created
    if tamper in (_append_code, _pickle_flavour):
        try:
            mlflow.pyfunc.load_model("models:/tilecast-bmm/1")
        except Exception:  # noqa: BLE001 - a broken flavour may fail after running the code
            pass
        assert marker.exists()
        marker.unlink()
    assert not (tmp_path / "out.csv").exists()


def test_a_version_without_its_manifest_is_refused(template, tmp_path):
    store = _copy(template[0], tmp_path / "unverified" / "store")
    _use(store)
    MlflowClient().delete_model_version_tag("tilecast-bmm", "1", MANIFEST_TAG)
    with pytest.raises(ModelIntegrityError, match=f"tilecast-bmm v1 .* refused, nothing of it was loaded: it has no "
                                                  f"{MANIFEST_TAG} tag"):
        load_predictor("bmm", "challenger")


def test_the_manifest_covers_every_file_of_the_logged_model(template, tmp_path):
    store = _copy(template[0], tmp_path / "manifest" / "store")
    _use(store)
    mv = MlflowClient().get_model_version("tilecast-bmm", "1")
    manifest = json.loads(mv.tags[MANIFEST_TAG])
    model = _bmm_dir(store)
    on_disk = {p.relative_to(model).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in model.rglob("*") if p.is_file()}
    assert manifest["files"] == on_disk
    assert {"MLmodel", "pyfunc_entry.py", "artifacts/predictor/model.json",
            "artifacts/predictor/tile_chooser/nearest.npz"} <= set(on_disk)
    assert (manifest["predictor"], manifest["family"], manifest["format_version"]) == ("xgboost", "bmm", 1)


def test_mlflow_own_loader_writes_into_the_store_and_tilecast_still_loads(template, tmp_path):
    """What made read-only stores fail: ``mlflow.pyfunc.load_model("models:/...")`` on a local store writes
    ``registered_model_meta`` into the model's directory in the store. tilecast's loader writes nothing, and
    tolerates that one MLflow file (it never reads it)."""
    store = _copy(template[0], tmp_path / "mlflow-loader" / "store")
    _use(store)
    before = snapshot(store)
    load_predictor("bmm", "challenger")
    assert snapshot(store) == before
    mlflow.pyfunc.load_model("models:/tilecast-bmm/1")
    added = set(snapshot(store)) - set(before)
    assert [Path(p).name for p in added] == ["registered_model_meta"]
    from tilecast.registry import models

    models._CACHE.clear()
    assert load_predictor("bmm", "challenger").predictor.family == "bmm"

"""A registered version saved in a format this code cannot read: a clear one-line error naming the model, version,
alias, formats and the train command; promotion leaves every alias as it was; every job exits 2 without a
traceback. On a sqlite store of its own, with a version whose artifact is deliberately the old layout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from tests.registry.helpers import compose_job, job_main
from tilecast.paths import ROOT
from tilecast.predictors import fit_predictor, training_rows
from tilecast.predictors.format import FORMAT_KEY
from tilecast.registry import RegistryError, load_predictor, log_predictor, move_alias
from tilecast.registry.aliases import alias_history
from tilecast.registry.models import IncompatibleModelError, log_saved_predictor
from tilecast.registry.tracking import ENV_VAR, configure, ensure_experiment
from tilecast.scoring.predictors import _PROBE_ROWS
from tilecast.tiles.ops import FAMILIES, MOE_MLA_FAMILIES
from tilecast.training.promotion import alias_versions, promote

EXAMPLE = {"bmm": {"OPName": "bmm", "B": 2, "M": 64, "N": 64, "K": 64},
           "linear": {"OPName": "linear", "B": 1, "M": 64, "N": 64, "K": 64},
           "elementwise": {"OPName": "add", "B": 64, "H": 512}, "softmax": {"OPName": "softmax", "B": 64, "H": 512},
           "layernorm": {"OPName": "ln", "B": 64, "H": 512},
           "tc_gemm": {"OPName": "linear", "B": 1, "M": 64, "N": 64, "K": 64, "dtype": "bf16"},
           "attn_prefill": {"OPName": "attn_prefill", "B": 2, "M": 64, "N": 64, "K": 64, "H": 4, "Hkv": 4,
                            "dtype": "bf16"},
           "attn_decode": {"OPName": "attn_decode", "B": 2, "M": 1, "N": 64, "K": 64, "H": 4, "Hkv": 4,
                           "dtype": "bf16"},
           "vec_half": {"OPName": "rmsnorm", "B": 64, "H": 512, "dtype": "bf16"},
           **{fam: _PROBE_ROWS[fam] for fam in MOE_MLA_FAMILIES}}  # the scorer's probe rows: their own dims
FIX = "python jobs/train.py families=[linear]"


def _example(family: str) -> pd.DataFrame:
    return pd.DataFrame([{**EXAMPLE[family], "Device": "NVIDIA L4"}] * 2)


def _old_layout(directory: Path) -> None:
    """Turn a saved xgboost GEMM predictor into the layout before format versions and the per-GPU tile models."""
    for meta in (directory / "meta.json", directory / "tile_chooser" / "chooser.json"):
        d = json.loads(meta.read_text())
        d.pop(FORMAT_KEY)
        d.pop("models", None)
        meta.write_text(json.dumps(d))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Roofline versions @champion and @challenger for every family (v1); ``tilecast-linear`` v2, an xgboost
    predictor in the old layout, takes @challenger; ``tilecast-bmm`` v2 has a newer format (no alias)."""
    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    uri = configure(f"sqlite:///{tmp_path_factory.mktemp('incompatible') / 'mlflow.db'}")
    with mlflow.start_run(experiment_id=ensure_experiment("incompatible")):  # artifacts inside the store
        for fam in FAMILIES:
            mv = log_predictor(fit_predictor("roofline", fam, None), _example(fam))
            for alias in ("champion", "challenger"):
                move_alias(mv.name, alias, mv.version, reason="test")
        old = tmp_path_factory.mktemp("old") / "predictor"
        rows = training_rows("linear").sample(600, random_state=0)
        fit_predictor("xgboost", "linear", rows, rounds=3, tile_chooser="learned").save(old)
        _old_layout(old)
        mv = log_saved_predictor(old, "xgboost", "linear", _example("linear"))
        move_alias(mv.name, "challenger", mv.version, reason="test: old layout")
        newer = tmp_path_factory.mktemp("newer") / "predictor"
        fit_predictor("roofline", "bmm", None).save(newer)
        meta = json.loads((newer / "meta.json").read_text())
        (newer / "meta.json").write_text(json.dumps({**meta, FORMAT_KEY: 99}))
        log_saved_predictor(newer, "roofline", "bmm", _example("bmm"))
    yield uri
    mlflow.set_tracking_uri(before[0])
    mlflow.set_registry_uri(before[1])


def _aliases() -> dict[str, dict[str, str | None]]:
    return {a: alias_versions(a, FAMILIES) for a in ("champion", "challenger")}


def test_loading_names_model_version_alias_formats_and_fix(store):
    with pytest.raises(IncompatibleModelError) as exc:
        load_predictor("linear", "challenger")
    err = exc.value
    assert isinstance(err, RegistryError)
    assert (err.model, err.version, err.alias) == ("tilecast-linear", "2", "challenger")
    text = str(err)
    assert "\n" not in text
    assert text.startswith("tilecast-linear v2 (@challenger) cannot be loaded: its tile chooser has no format version")
    assert "without 'models'" in text and "reads format version 1" in text and f"`{FIX}`" in text
    assert str(load_predictor("linear", "champion").version.version) == "1"  # the loadable one still loads


def test_promote_job_refuses_an_unloadable_challenger_and_moves_nothing(store, monkeypatch):
    before, history = _aliases(), len(alias_history("tilecast-linear"))
    monkeypatch.setenv(ENV_VAR, store)
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "promote.py"), "families=[linear]"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: tilecast-linear v2 (@challenger) cannot be loaded") and FIX in last
    assert _aliases() == before and len(alias_history("tilecast-linear")) == history


def test_promote_refuses_an_unloadable_champion_and_moves_nothing(store):
    move_alias("tilecast-bmm", "champion", "2", reason="test: a champion of a newer format")
    try:
        before, history = _aliases(), len(alias_history("tilecast-softmax"))
        with pytest.raises(IncompatibleModelError, match=r"tilecast-bmm v2 \(@champion\) cannot be loaded: its "
                                                         r"roofline predictor has format version 99"):
            promote(["softmax"])
        assert _aliases() == before and len(alias_history("tilecast-softmax")) == history
    finally:
        move_alias("tilecast-bmm", "champion", "1", reason="test: restore")


@pytest.mark.parametrize("job, overrides", [
    ("predict_kernels", ["input={rows}", "output={tmp}/out.csv", "alias=challenger"]),
    ("predict", ["model=gpt2_large", "gpu=l4", "batch=1", "seq_len=128", "alias=challenger"]),
    ("evaluate", ["alias=challenger", "perop=false", "calibrate=false", "output={tmp}/eval.csv"]),
    ("score", ["matrix=smoke", "alias=challenger", "output_dir={tmp}/scores", "graph_cache=false",
               "dask.n_workers=1", "dask.processes=false", "progress=false"]),
])
def test_jobs_exit_2_with_one_line(store, tmp_path, capsys, job, overrides):
    rows = tmp_path / "rows.csv"
    pd.DataFrame([{**EXAMPLE["linear"], "Device": "NVIDIA L4"}]).to_csv(rows, index=False)
    cfg = compose_job(job, [o.format(rows=rows, tmp=tmp_path) for o in overrides]
                      + [f"mlflow.tracking_uri={store}"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        job_main(job)(cfg)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: tilecast-linear v2 (@challenger) cannot be loaded") and FIX in err[-1]
    assert not any("Traceback" in line for line in err)
    assert not list(tmp_path.glob("*/*.parquet")) and not (tmp_path / "out.csv").exists()

"""Every job exits 2 with one ``error:`` line naming the bad key or value, and no traceback, for every class of bad
input (issue 17, item 12): an unknown key, an unknown or missing config group option, a deleted or added
setting, a value of the wrong type, an unparsable override, an output file that is a directory, an output
directory that is a file, an unreachable Dask scheduler, an integer too large to forecast with.

Every case runs the real job as a subprocess (``python jobs/<job>.py ...``) on otherwise valid arguments, all
cases at once on a thread pool (each fails while the config is checked, before MLflow, Dask or any data: a
second or two of CPU each). The store is a missing directory and every output goes to a temporary directory, so a
case that regressed and went on to work can neither write into the repository nor hang on a store."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tilecast.cli import MAX_INT_SETTING, check_fields, conf_defaults, one_line
from tilecast.paths import ROOT
from tilecast.specs import SpecError

JOBS = sorted(p.stem for p in (ROOT / "jobs").glob("*.py") if not p.stem.startswith("_"))
HUGE = str(10**30)


def _free_port() -> int:
    """A loopback port nothing listens on (bound and released: a connection to it is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_args(job: str, tmp: Path) -> list[str]:
    """Arguments with which ``job`` would run (or fail on the missing store) without any other error."""
    rows = tmp / "rows.csv"
    return {
        "calibrate": ["gpu=l4", f"measurements={rows}"],
        "collect": ["device=cpu", "ops=[bmm]", "limit=1", f"output_dir={tmp / 'collect'}"],
        "evaluate": ["forecaster=roofline", f"output={tmp / 'evaluation.csv'}"],
        "graph": ["model=gpt2_large", "batch=1", "seq_len=128"],
        "ingest": [f"output={tmp / 'ingest'}"],
        "nightly": ["forecaster=roofline", f"output_dir={tmp / 'reports'}", "progress=false"],
        "plan": ["model=llama31_8b", "isl=128", "osl=128", "ttft_ms=1000", "tpot_ms=50", "rate=1", "gpus=[l4]",
                 "forecaster=roofline", "log=false"],
        "predict": ["model=gpt2_large", "gpu=l4", "batch=1", "seq_len=128", "forecaster=roofline"],
        "predict_kernels": ["predictor=roofline", f"input={rows}", f"output={tmp / 'kernels.csv'}"],
        "promote": [],
        "report": [f"output_dir={tmp / 'reports'}"],
        "score": ["forecaster=roofline", "matrix=smoke", f"output_dir={tmp / 'reports'}", "progress=false"],
        "serve": ["dry_run=true"],
        "train": ["families=[softmax]", "max_rows=20"],
    }[job]


# (job, class, arguments added to / replacing the base ones, what the error line must name); ``{tmp}``, ``{dir}``
# (an existing directory), ``{file}`` (an existing file) and ``{port}`` (a closed port) are filled in
UNKNOWN_KEY = [(job, "unknown key", ["bogus_key=1"], "bogus_key") for job in JOBS]
UNKNOWN_OPTION = [
    ("calibrate", "unknown group option", ["mlflow=nope"], "mlflow=nope"),
    ("collect", "unknown group option", ["model=nope"], "'nope'"),
    ("evaluate", "unknown group option", ["mlflow=nope"], "mlflow=nope"),
    ("graph", "unknown group option", ["model=gpt9"], "'gpt9'"),
    ("ingest", "unknown group option", ["mlflow=nope"], "mlflow=nope"),
    ("nightly", "unknown group option", ["dask=nope"], "dask=nope"),
    ("plan", "unknown group option", ["pricing=nope"], "pricing=nope"),
    ("predict", "unknown group option", ["pricing=nope"], "pricing=nope"),
    ("predict_kernels", "unknown group option", ["predictor=nope"], "predictor=nope"),
    ("promote", "unknown group option", ["mlflow=nope"], "mlflow=nope"),
    ("report", "unknown group option", ["fleet=nope"], "fleet=nope"),
    ("score", "unknown group option", ["matrix=nope"], "matrix=nope"),
    ("serve", "unknown group option", ["mlflow=nope"], "mlflow=nope"),
    ("train", "unknown group option", ["predictor=nope"], "predictor=nope"),
]
GROUPS = [
    ("graph", "missing mandatory group", ["model=-"], "'model'"),
    ("calibrate", "missing mandatory group", ["gpu=-"], "'gpu'"),
    ("train", "deleted group", ["~predictor"], "~predictor"),
    ("score", "deleted group", ["~matrix"], "~matrix"),
    ("promote", "deleted setting", ["~families"], "~families"),
    ("report", "added key", ["+bogus=1"], "+bogus=1"),
    ("nightly", "added key", ["+fit.bogus=1"], "+fit.bogus=1"),
    ("report", "unparsable override", ["output_dir=[1"], "'[1'"),
    ("report", "unresolvable interpolation", ["output_dir=${{nope}}"], "output_dir=${{nope}}"),
]
BAD_TYPE = [
    ("calibrate", "bad type", ["gate.min_distinct_rows=abc"], "gate.min_distinct_rows=abc"),
    ("collect", "bad type", ["repeats=abc"], "repeats=abc"),
    ("evaluate", "bad type", ["calibration_rows=abc"], "calibration_rows=abc"),
    ("graph", "bad type", ["batch=abc"], "batch"),
    ("nightly", "bad type", ["fit.usable_fraction=abc"], "fit.usable_fraction=abc"),
    ("plan", "bad type", ["top=abc"], "top=abc"),
    ("plan", "bad value", ["rate=0"], "rate must be a positive number of requests per second, got 0"),
    ("plan", "bad value", ["gpus=[l4,h1000]"], "unknown GPU 'h1000'"),
    ("predict", "bad type", ["fused=no"], "fused=no"),
    ("predict_kernels", "bad type", ["calibrate=maybe"], "calibrate=maybe"),
    ("promote", "bad type", ["rollback=maybe"], "rollback=maybe"),
    ("report", "bad type", ["max_rows=abc"], "max_rows=abc"),
    ("score", "bad type", ["dask.n_workers=abc"], "dask.n_workers=abc"),
    ("score", "bad type", ["progress=maybe"], "progress=maybe"),
    ("train", "bad type", ["val_fraction=abc"], "val_fraction=abc"),
    ("score", "bad value", ["date=2020-13-45"], "'2020-13-45'"),
    ("evaluate", "bad value", ["calibration_margin_pct=-1"], "calibration_margin_pct"),
    ("calibrate", "bad value", ["measurements=x.csv", "gate.model_run_margin_pct=-1"], "gate.model_run_margin_pct"),
]
PATHS = [
    ("evaluate", "output is a directory", ["output={dir}"], "output={dir}"),
    ("graph", "output is a directory", ["output={dir}"], "output={dir}"),
    ("predict", "output is a directory", ["output={dir}"], "output={dir}"),
    ("plan", "output is a directory", ["output={dir}"], "output={dir}"),
    ("predict_kernels", "output is a directory", ["output={dir}"], "output={dir}"),
    ("collect", "output_dir is a file", ["output_dir={file}"], "output_dir={file}"),
    ("ingest", "output is a file", ["output={file}"], "output={file}"),
    ("nightly", "output_dir is a file", ["output_dir={file}"], "output_dir={file}"),
    ("report", "output_dir is a file", ["output_dir={file}"], "output_dir={file}"),
    ("score", "output_dir is a file", ["output_dir={file}"], "output_dir={file}"),
    ("graph", "output under a file", ["output={file}/ops.csv"], "output={file}/ops.csv"),
]
RUNTIME = [
    ("score", "unreachable dask.address", ["dask.address=tcp://127.0.0.1:{port}"], "dask.address=tcp://127.0.0.1:"),
    ("nightly", "unreachable dask.address", ["dask.address=tcp://127.0.0.1:{port}"], "dask.address=tcp://127.0.0.1:"),
    ("plan", "unreachable dask.address", ["dask.address=tcp://127.0.0.1:{port}"], "dask.address=tcp://127.0.0.1:"),
    ("graph", "oversized integer", [f"batch={HUGE}"], f"batch={HUGE}"),
    ("predict", "oversized integer", [f"batch={HUGE}"], f"batch={HUGE}"),
    ("predict", "oversized integer", ["mode=serve", "dtype=bf16", "model=llama31_8b", "isl=128", "osl=128",
                                      f"concurrency={HUGE}"], f"concurrency={HUGE}"),
]
CASES = UNKNOWN_KEY + UNKNOWN_OPTION + GROUPS + BAD_TYPE + PATHS + RUNTIME


def _command(job: str, extra: list[str], tmp: Path, port: int) -> list[str]:
    fill = {"tmp": str(tmp), "dir": str(tmp / "a_dir"), "file": str(tmp / "a_file"), "port": str(port)}
    extra = [a.format(**fill) for a in extra]
    given = {a.split("=", 1)[0].lstrip("+~") for a in extra}
    args = [a for a in base_args(job, tmp) if a.split("=", 1)[0] not in given]  # a case's value replaces the base's
    args += [a for a in extra if not a.endswith("=-")]  # ``key=-``: leave the key out
    return [sys.executable, str(ROOT / "jobs" / f"{job}.py"), *args]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Every case run at once: ``{(job, class, args): (command, CompletedProcess)}``."""
    tmp = tmp_path_factory.mktemp("bad-input")
    (tmp / "a_dir").mkdir()
    (tmp / "a_file").write_text("not a directory\n")
    (tmp / "rows.csv").write_text("OPName,B,M,N,K,Latency,Device\nbmm,8,64,64,64,0.01,NVIDIA L4\n")
    port = _free_port()
    env = {**os.environ, "TILECAST_HOME": str(tmp / "home"), "CI": "1",
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp / 'no-such-dir' / 'mlflow.db'}"}  # refused if ever opened
    env.pop("TILECAST_TRACEBACK", None)
    env.pop("HYDRA_FULL_ERROR", None)

    def run(case):
        cmd = _command(case[0], case[2], tmp, port)
        return case, cmd, subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=env, timeout=240)

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        done = list(pool.map(run, [(j, c, tuple(a), n) for j, c, a, n in CASES]))
    return {(case[0], case[1], case[2]): (cmd, proc, case[3], tmp) for case, cmd, proc in done}


@pytest.mark.parametrize("job, kind, args, named", CASES, ids=[f"{j}-{c}-{' '.join(a)}"[:80] for j, c, a, _ in CASES])
def test_bad_input_exits_2_with_one_error_line(results, job, kind, args, named):
    cmd, proc, _, tmp = results[job, kind, tuple(args)]
    shown = f"$ {' '.join(cmd[1:])}\nrc={proc.returncode}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 2, shown
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, shown
    assert "Traceback" not in proc.stderr + proc.stdout, shown
    fill = {"tmp": str(tmp), "dir": str(tmp / "a_dir"), "file": str(tmp / "a_file"), "port": ""}
    assert named.format(**fill) in errors[0], shown


def test_every_job_is_in_the_table():
    assert {job for job, *_ in CASES} == set(JOBS)
    for kind in ("unknown key", "unknown group option"):
        assert {job for job, k, *_ in CASES if k == kind} == set(JOBS), kind


# ---------------------------------------------------------------- the pieces, in process


def test_a_native_xgboost_error_is_one_line_without_its_stack_trace(tmp_path):
    xgboost = pytest.importorskip("xgboost")
    broken = tmp_path / "model.json"
    broken.write_text('{"learner": {"attr')
    with pytest.raises(xgboost.core.XGBoostError) as got:
        xgboost.Booster(model_file=str(broken))
    assert "Stack trace" in str(got.value)  # the raw message: C++ frames
    line = one_line(got.value)
    assert line.startswith("XGBoost: ") and "Stack trace" not in line and "[bt]" not in line
    assert "json.cc" not in line and "EOF" in line


def test_nightly_bootstrap_sections_are_checked_before_any_work():
    from tilecast.pipelines.nightly import check_bootstrap
    from tilecast.training.promotion import PromotionPolicy

    with pytest.raises(SpecError, match=r"promote\.kernel_tolerance_pct=abc: expected a number"):
        check_bootstrap({}, {"kernel_tolerance_pct": "abc"})
    with pytest.raises(SpecError, match=r"train\.bogus=1: TrainSpec has no field 'bogus'"):
        check_bootstrap({"bogus": 1}, {})
    with pytest.raises(ValueError, match=r"max_rows=1 must be an integer >= 20"):
        check_bootstrap({"max_rows": 1}, {})
    check_bootstrap({"max_rows": 50, "params": {"rounds": 20}}, {"kernel_tolerance_pct": 2})
    check_fields("promote", PromotionPolicy, {"e2e_tolerance_pct": 0.5})


def test_open_sections_take_new_keys_and_scalars_become_lists():
    """``+train.params.rounds=50`` (an empty mapping of the conf file: its keys are checked where read) is
    allowed, ``+fit.bogus=1`` is not; ``families=softmax`` reads as ``[softmax]``
    (:func:`listify`, before Hydra); a float setting written as a
    whole number in a conf file would refuse ``2.5``: the conf files write them as floats."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from tilecast.cli import check_overrides
    from tilecast.paths import CONF_DIR

    def checked(name: str, overrides: list[str]):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(name, overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        check_overrides(cfg)
        return cfg

    try:
        checked("nightly", ["+train.params.rounds=50", "promote.kernel_tolerance_pct=2.0",
                            "dask.connect_timeout_s=2.5", "report.latency_targets_ms.inference=1500.5"])
        with pytest.raises(SpecError, match=r"\+fit\.bogus=1: this job has no setting 'fit\.bogus'"):
            checked("nightly", ["+fit.bogus=1"])
        from tilecast.cli.schema import listify

        assert listify("train", ["families=softmax", "families=[a,b]", "seed=1"]) == [
            "families=[softmax]", "families=[a,b]", "seed=1"]  # before Hydra parses the command line
        assert list(checked("train", listify("train", ["families=softmax"])).families) == ["softmax"]
        assert checked("calibrate", ["gpu=l4", "gate.max_latency_ms=1500.5"]).gate.max_latency_ms == 1500.5
    finally:
        HydraConfig.instance().cfg = None


def test_conf_defaults_merge_the_groups_under_the_primary_file():
    score = conf_defaults("score")
    assert score["dask"]["n_workers"] == 2 and score["output_dir"] == "reports"
    calibrate = conf_defaults("calibrate", {"gpu": "l4"})
    assert calibrate["mlflow"]["experiment"] == "tilecast-calibration"  # the primary file wins over the group
    assert calibrate["gpu"]["key"] == "l4"


def test_an_integer_setting_is_bounded():
    from tilecast.cli import int_setting

    assert int_setting({"batch": MAX_INT_SETTING}, "batch") == MAX_INT_SETTING
    for bad in (0, MAX_INT_SETTING + 1, 2.7, True, "8"):
        with pytest.raises(ValueError, match="batch"):
            int_setting({"batch": bad}, "batch")


def _composed(name: str, overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from tilecast.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(name, overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    return cfg


def test_a_key_missing_after_a_deletion_is_named_and_a_missing_key_otherwise_is_a_bug(capsys):
    from hydra.core.hydra_config import HydraConfig
    from omegaconf.errors import ConfigAttributeError

    from tilecast.cli import user_errors

    @user_errors()
    def job(cfg):
        return cfg.mlflow.experiment

    @user_errors()
    def buggy(cfg):
        return cfg.mlflow.experimnet

    try:
        assert job(_composed("score", ["~matrix.serve"])) == "tilecast-train"  # an optional part may go
        with pytest.raises(SystemExit) as got:
            job(_composed("train", ["~mlflow.experiment"]))
        assert got.value.code == 2
        assert capsys.readouterr().err.splitlines() == [
            "error: mlflow.experiment: Key 'experiment' is not in struct: the job reads it, and ~mlflow.experiment "
            "deleted it or what holds it"]
        with pytest.raises(ConfigAttributeError):  # no deletion: the job's own bug keeps its traceback
            buggy(_composed("train", []))
    finally:
        HydraConfig.instance().cfg = None

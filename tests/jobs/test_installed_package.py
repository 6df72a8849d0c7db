"""Issue 27 item 17: the ``tilecast`` command works from an installed, non-editable package (the jobs, their configs
and the shipped data travel inside it); numpy and scipy are declared; torch is an extra (only the mlp predictor,
the fx tracer and the collector import it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib

import pytest

from tilecast.paths import ROOT


def test_the_dependencies_are_declared_and_torch_is_an_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("<")[0].split("[")[0].strip() for d in project["dependencies"]}
    assert {"numpy", "scipy", "pandas", "pyarrow", "mlflow"} <= names and "torch" not in names
    assert any(d.startswith("torch") for d in project["optional-dependencies"]["torch"])


def test_the_jobs_import_no_torch_until_a_torch_part_is_used():
    code = ("import sys, tilecast.cli, tilecast.pipelines.nightly, tilecast.training.train, "
            "tilecast.registry.forecaster, tilecast.scoring.engine, tilecast.graph; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree to build from")
def test_the_command_runs_from_a_non_editable_install(tmp_path):
    source = tmp_path / "source"  # build from a copy: a build writes build/ and *.egg-info beside the sources
    for name in ("src", "jobs", "conf", "data"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TILECAST_ROOT", "TILECAST_HOME")}
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(wheels), str(source)], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                           env=env)
    assert build.returncode == 0, build.stderr[-3000:]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    wheel = next(wheels.glob("tilecast-*.whl"))
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--no-index", "--force-reinstall",
                    str(wheel)], check=True, timeout=300, capture_output=True, env=env)
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import tilecast.paths as p; print(p.INSTALLED, p.ROOT)"],
                           capture_output=True, text=True, cwd=work, env=env, timeout=120)
    assert where.stdout.startswith(f"True {venv}"), where.stdout + where.stderr
    proc = subprocess.run([str(venv / "bin" / "tilecast"), "predict", "model=gpt2_large", "gpu=l4", "batch=2",
                           "seq_len=128", "forecaster=roofline"], capture_output=True, text=True, cwd=work, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gpt2_large on l4" in proc.stdout and (work / "outputs" / "predict").is_dir()  # outputs: the cwd
    helped = subprocess.run([str(venv / "bin" / "tilecast"), "list", "prices"], capture_output=True, text=True,
                            cwd=work, env=env, timeout=120)
    assert helped.returncode == 0 and "b300" in helped.stdout

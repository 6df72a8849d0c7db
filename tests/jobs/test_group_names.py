"""Issue 27 item 8: a config group option is a catalog name, never a path out of ``conf/``; the error repeats what
was typed and lists the options."""

import subprocess
import sys

import pytest

from tilecast.cli import catalog_argv, check_group_value
from tilecast.paths import ROOT
from tilecast.specs import SpecError


@pytest.mark.parametrize("typed", ["matrix=../../somewhere/outside", "matrix=../score", "pricing=../gpu/l4",
                                   "matrix=smoke,../score", "dask=/etc/passwd"])
def test_a_path_is_not_a_group_option(typed):
    with pytest.raises(SpecError) as got:
        catalog_argv([typed])
    msg = str(got.value)
    assert msg.startswith(f"{typed}: ") and "not a path" in msg and "known: " in msg


def test_catalog_names_and_sweeps_pass():
    assert catalog_argv(["matrix=smoke", "matrix=smoke,nightly", "pricing=default", "dask=default"]) == \
        ["matrix=smoke", "matrix=smoke,nightly", "pricing=default", "dask=default"]
    check_group_value("matrix", "choice(smoke,nightly)", "matrix=choice(smoke,nightly)")
    with pytest.raises(SpecError, match="'nightlyy' is not a matrix config.*did you mean nightly"):
        check_group_value("matrix", "nightlyy", "matrix=nightlyy")


def test_the_score_job_refuses_a_yaml_outside_conf(tmp_path):
    outside = tmp_path / "outside.yaml"
    outside.write_text("name: outside\nmodels: [gpt2_large]\ngpus: [l4]\n")
    rel = "../" * 12 + str(outside).lstrip("/").removesuffix(".yaml")
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "score.py"), f"matrix={rel}", "forecaster=roofline",
                           f"output_dir={tmp_path / 'out'}", f"hydra.run.dir={tmp_path / 'h'}"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=240)
    assert proc.returncode == 2 and f"error: matrix={rel}: " in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "out").exists()

"""Issue 27 item 12: ``<job> --help`` shows the job's own options first, with the comments of its conf file, in a
screenful; the catalogs (GPUs, models, prices) are behind ``tilecast list gpus|models|prices``."""

import subprocess
import sys

import pytest

from tilecast.cli import CATALOGS, job_help, list_catalog
from tilecast.paths import ROOT
from tilecast.specs import SpecError, all_gpus, all_models

JOBS = sorted(p.stem for p in (ROOT / "jobs").glob("*.py") if not p.stem.startswith("_"))


def test_predict_help_is_its_options_first_and_short():
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "predict.py"), "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 60, len(lines)
    text = proc.stdout
    assert text.index("options (conf/predict.yaml") < text.index("config groups")
    assert "  batch: ???               # global batch" in text and "  mode: inference" in text
    assert "usd_per_gpu_hour" not in text and "tesla_p100" not in text  # no catalog in the help
    assert "tilecast list prices" in text and "pricing=<your file>.yaml" in text


@pytest.mark.parametrize("job", JOBS)
def test_every_jobs_help_fits_a_screen(job):
    text = job_help(job)
    assert text.startswith(f"usage: tilecast {job} ") and len(text.splitlines()) <= 80


def test_the_catalogs_are_listed_by_name():
    assert set(CATALOGS) == {"gpus", "models", "prices"}
    gpus = list_catalog("gpus").splitlines()
    assert len(gpus) == len(all_gpus()) + 1 and any(line.startswith("a10g ") for line in gpus)
    assert len(list_catalog("models").splitlines()) == len(all_models()) + 1
    prices = list_catalog("prices")
    assert "b300" in prices and "formula" in prices and "b200 14.24 $/h" in prices
    with pytest.raises(SpecError, match="unknown catalog 'nope'"):
        list_catalog("nope")

"""The collect job as users call it: Hydra config, ``python -m tilecast.collect``, and a hard kill."""

import csv
import json
import signal
import subprocess
import sys
import time

import pytest
import torch
from hydra import compose, initialize_config_dir

from tilecast.collect import CollectError, run
from tilecast.collect.__main__ import parse_args
from tilecast.paths import CONF_DIR, ROOT


def _compose(*overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(compose("collect", overrides=list(overrides)), resolve=True)


def test_composed_config_runs_kernels_and_e2e_with_provenance(tmp_path):
    cfg = _compose("device=cpu", "ops=[add,ln]", "shapes=tiny", f"output_dir={tmp_path}", "warmup=0",
                   "repeats=2", "fastest=1", "limit=1")
    result = run(cfg)
    assert [o["measured"] for o in result["ops"]] == [1, 1]
    cfg = _compose("what=e2e", "device=cpu", "model=bert", "num_layers=1", "batch=1", "seq_len=8",
                   f"output_dir={tmp_path}", "warmup=0", "repeats=1", "fastest=1")
    label = json.loads(open(run(cfg)["label"]).read())
    assert label["num_layer"] == 1 and label["fw_latency"] > 0
    prov = [json.loads(line) for line in (tmp_path / "provenance.jsonl").read_text().splitlines()]
    assert [p["what"] for p in prov] == ["kernels", "e2e"]
    assert prov[0]["device"]["device"] == "cpu" and prov[0]["device"]["torch_version"].startswith("p")
    assert prov[1]["config"]["model"]["key"] == "bert"


def test_unknown_option_and_task_are_named():
    with pytest.raises(CollectError, match="'shape'"):
        run({**parse_args([]), "shape": "tiny"})
    with pytest.raises(CollectError, match="what='measure'"):
        run({**parse_args([]), "what": "measure"})


def test_cli_without_hydra_parses_yaml_values():
    cfg = parse_args(["ops=[bmm, linear]", "budget_s=60", "limit=null", "dtype=bf16", "model=gpt2_large"])
    assert cfg["ops"] == ["bmm", "linear"] and cfg["budget_s"] == 60 and cfg["limit"] is None
    assert cfg["dtype"] == "bf16" and cfg["model"] == "gpt2_large" and cfg["repeats"] == 25
    with pytest.raises(CollectError, match="'opz=add'"):
        parse_args(["opz=add"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_hydra_job_refuses_cuda_without_a_gpu_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "jobs" / "collect.py"), "device=cuda", "ops=[bmm]",
                           f"output_dir={out}"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert "device=cuda but torch sees no CUDA GPU" in proc.stderr
    assert not out.exists()


def test_killed_collection_keeps_its_rows_and_resumes(tmp_path):
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("B,H\n" + "".join(f"512,{1024 + i}\n" for i in range(120)))
    out, table = tmp_path / "out", tmp_path / "out" / "kernels" / "elem.csv"
    args = ["device=cpu", "ops=[add]", f"shapes={shapes}", f"output_dir={out}", "shuffle=false"]
    proc = subprocess.Popen([sys.executable, "-m", "tilecast.collect", *args, "warmup=2", "repeats=25"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 90
        while time.time() < deadline and (not table.exists() or table.read_text().count("\n") < 4):
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    with table.open(newline="") as fh:
        before = [r for r in csv.reader(fh)][1:]
    assert 3 <= len(before) < 120  # killed mid-way, every finished row kept
    result = run(parse_args([*args, "warmup=0", "repeats=1", "fastest=1"]))
    assert result["ops"][0]["already"] == len([r for r in before if len(r) == 20])
    with table.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 120 and len({r["H"] for r in rows}) == 120
    assert [r["H"] for r in rows] == [str(1024 + i) for i in range(120)]

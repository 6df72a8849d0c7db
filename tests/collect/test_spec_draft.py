"""GPU spec drafts: the derived numbers against the catalog's datasheet values, and a loadable file."""

import datetime as dt

import pytest
import yaml

from tilecast.collect import CollectError
from tilecast.collect.job import run, spec_destination
from tilecast.collect.spec_draft import GpuFacts, check_draft, draft_spec, spec_key
from tilecast.paths import CONF_DIR, DATA_DIR
from tilecast.specs import get_gpu, load_gpu_file

#: what torch / nvidia-smi report on an A100-PCIE-40GB (cudaDeviceProp and nvidia-smi --query-gpu)
A100 = GpuFacts(name="NVIDIA A100-PCIE-40GB", num_sm=108, cc=(8, 0), mem_mib=40960.0, l2_bytes=40 * 2**20,
                sm_clock_mhz=1410.0, mem_clock_mhz=1215.0, bus_width_bits=5120, power_limit_w=250.0, pcie_gen=4,
                pcie_width=16, driver="535.104.05")


def test_draft_matches_the_catalog_within_estimate_error(tmp_path):
    text = draft_spec(A100, when=dt.date(2026, 1, 2))
    path = tmp_path / "a100_pcie_40gb.yaml"
    path.write_text(text)
    draft, ref = load_gpu_file(path), get_gpu("a100_pcie_40gb")
    assert draft.device_name == ref.device_name and draft.num_sm == ref.num_sm
    assert draft.architecture == "ampere" and draft.cores_per_sm == 64
    assert draft.fp32_gflops == pytest.approx(ref.fp32_gflops, rel=0.005)
    assert draft.mem_bw_gbs == pytest.approx(ref.mem_bw_gbs, rel=0.005)
    assert (draft.mem_gb, draft.l2_mb, draft.pcie_gbs) == (ref.mem_gb, ref.l2_mb, ref.pcie_gbs)
    assert draft.bf16_tflops is None and draft.nvlink_gbs is None  # datasheet-only: left to the user


def test_estimates_and_datasheet_fields_are_marked_to_confirm():
    text = draft_spec(A100)
    lines = {ln.split(":")[0]: ln for ln in text.splitlines() if ln and not ln.startswith("#")}
    for key in ("fp32_gflops", "mem_bw_gbs", "bf16_tflops", "tf32_tflops", "nvlink_gbs", "tdp_w"):
        assert "CONFIRM" in lines[key], key
    assert "CONFIRM" not in lines["num_sm"]
    assert yaml.safe_load(text)["key"] == "a100_pcie_40gb"


def test_unknown_architecture_leaves_fp32_open_and_the_draft_out_of_the_catalog():
    facts = GpuFacts(name="NVIDIA Future X1", num_sm=200, cc=(11, 0), mem_mib=98304.0, l2_bytes=None,
                     sm_clock_mhz=2000.0, mem_clock_mhz=None, bus_width_bits=None, power_limit_w=None,
                     pcie_gen=None, pcie_width=None)
    text = draft_spec(facts)
    assert yaml.safe_load(text)["fp32_gflops"] is None
    with pytest.raises(CollectError, match="fp32_gflops"):
        check_draft(text, "future_x1")
    assert spec_destination(facts.name, "future_x1", False, None) == CONF_DIR / "gpu" / "future_x1.yaml.draft"
    assert spec_destination(facts.name, "future_x1", True, None) == CONF_DIR / "gpu" / "future_x1.yaml"


def test_a_catalog_gpu_gets_its_draft_beside_its_collected_data():
    """No second catalog file with the same device name (get_gpu would pick either)."""
    dest = spec_destination(A100.name, "a100_pcie_40gb", True, None)
    assert dest == DATA_DIR / "collected" / "a100_pcie_40gb" / "gpu_spec_draft.yaml"


def test_explicit_paths_win(tmp_path):
    assert spec_destination(A100.name, "k", True, None, str(tmp_path)) == tmp_path / "gpu_spec_draft.yaml"
    assert spec_destination(A100.name, "k", True, str(tmp_path / "x.yaml"), str(tmp_path)) == tmp_path / "x.yaml"


@pytest.mark.parametrize("name,key", [("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-80GB", "a100_sxm4_80gb"),
                                      ("Tesla V100-PCIE-32GB", "v100_pcie_32gb"), ("NVIDIA L4", "l4")])
def test_spec_key(name, key):
    assert spec_key(name) == key


def test_spec_needs_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(CollectError):
        run({"what": "spec", "device": "cuda", "spec_path": None, "overwrite": False})
    with pytest.raises(CollectError, match="device=cuda"):
        run({"what": "spec", "device": "cpu", "spec_path": None, "overwrite": False})

"""``tilecast.cli``: what the jobs do to their command line before Hydra parses it."""

import re

import pytest

from tilecast.cli import (
    catalog_argv,
    catalog_value,
    gpu_from_cfg,
    hydra_dir_args,
    model_from_cfg,
    split_joined,
    tilecast_home,
)
from tilecast.paths import ROOT
from tilecast.specs import SpecError, UnknownSpecError, get_gpu, get_model


@pytest.mark.parametrize("argv, expected", [
    # mlflow run -P overrides="..." arrives as one quoted argument
    (["model=gpt2_large gpu=l4 batch=4"], ["model=gpt2_large", "gpu=l4", "batch=4"]),
    (["-m gpu=l4,tesla_t4 +x=1 ~y"], ["-m", "gpu=l4,tesla_t4", "+x=1", "~y"]),
    (['gpu="NVIDIA L4" batch=4'], ["gpu=NVIDIA L4", "batch=4"]),  # quotes group, as in a shell
    (["", "  "], []),  # the empty default of an `overrides` parameter
    # one value with spaces stays whole
    (["gpu=NVIDIA L4"], ["gpu=NVIDIA L4"]),
    (["families=[bmm, linear]"], ["families=[bmm, linear]"]),
    (["gpu=NVIDIA A100 80GB PCIe", "batch=4"], ["gpu=NVIDIA A100 80GB PCIe", "batch=4"]),
    (["note='it s'"], ["note='it s'"]),
])
def test_split_joined(argv, expected):
    assert split_joined(argv) == expected


@pytest.mark.parametrize("value, expected", [
    ("l4", "l4"), ("NVIDIA_L4", "l4"), ("NVIDIA L4", "l4"),
    ("l4,Tesla_T4", "l4,tesla_t4"), ("NVIDIA L4,Tesla T4", "l4,tesla_t4"), ('"NVIDIA L4",tesla_t4', "l4,tesla_t4"),
    ("choice(NVIDIA_L4,tesla_t4)", "choice(l4,tesla_t4)"),
    ("glob(*)", "glob(*)"), ("glob(l4*)", "glob(l4*)"), ("range(1,3)", "range(1,3)"), ("null", "null"),
    ("${oc.env:GPU}", "${oc.env:GPU}"),
])
def test_gpu_names_and_sweeps_become_keys(value, expected):
    assert catalog_value(value, get_gpu) == expected


def test_every_name_of_a_sweep_is_checked():
    with pytest.raises(UnknownSpecError, match="unknown GPU 'l44'; closest known: l4"):
        catalog_value("tesla_t4,l44", get_gpu)
    with pytest.raises(UnknownSpecError, match="unknown model 'gpt9'"):
        catalog_value("gpt2_large,gpt9", get_model)


def test_catalog_argv_rewrites_names_and_what_ifs():
    got = catalog_argv(["-m", "gpu=NVIDIA_L4,tesla_t4", "model=gpt2_large", "batch=4", "gpu.mem_bw_gbs=600",
                        "+gpu.nvlink_gbs=300", "model.config.n_layer=12", "hydra.run.dir=x"], what_if=("gpu", "model"))
    assert got == ["-m", "gpu=l4,tesla_t4", "model=gpt2_large", "batch=4", "++gpu.mem_bw_gbs=600",
                   "++gpu.nvlink_gbs=300", "++model.config.n_layer=12", "hydra.run.dir=x"]


@pytest.mark.parametrize("arg, fragment", [
    ("gpu.bandwidth=1", "'bandwidth' is not a GPU field; choose another GPU with gpu=<key>, or change one of: "),
    ("gpu.key=l5", "'key' names the GPU and cannot be changed"),
    ("model.family=opt", "a model's key, family, source cannot be changed"),
    ("model.n_layer=12", "change its Hugging Face config with model.config.<key>=<value>"),
    ("~gpu.tdp_w", "cannot be deleted"),
])
def test_bad_what_ifs_are_refused_before_hydra(arg, fragment):
    with pytest.raises(SpecError, match=re.escape(fragment)):
        catalog_argv(["gpu=l4", arg], what_if=("gpu", "model"))


def test_jobs_without_what_ifs_refuse_them_instead_of_dropping_them():
    with pytest.raises(SpecError, match=re.escape("this job takes no gpu what-if overrides (gpu.<field>=)")):
        catalog_argv(["gpu=l4", "gpu.mem_bw_gbs=600"])
    with pytest.raises(SpecError, match="this job takes no model what-if overrides"):  # a kernel job has no model
        catalog_argv(["gpu=l4", "gpu.mem_bw_gbs=600", "model.config.n_layer=2"], what_if=("gpu",))
    assert catalog_argv(["gpu=l4", "batch=4"]) == ["gpu=l4", "batch=4"]


def test_hydra_dirs_go_under_the_home_one_per_run(tmp_path):
    first, second = hydra_dir_args(["a=1"], tmp_path), hydra_dir_args(["a=1"], tmp_path)
    assert first[2] == "a=1" and len(first) == 3 and first != second  # same second, different dirs
    run = first[0]
    assert run.startswith(f"hydra.run.dir='{tmp_path}/outputs/${{hydra.job.name}}/${{now:%Y-%m-%d_%H-%M-%S}}_")
    assert first[1].startswith(f"hydra.sweep.dir='{tmp_path}/multirun/")
    only_sweep = hydra_dir_args(["hydra.run.dir=/x"], tmp_path)  # a directory the user names wins
    assert only_sweep[1] == "hydra.run.dir=/x" and len(only_sweep) == 2
    assert only_sweep[0].startswith("hydra.sweep.dir=")


@pytest.mark.parametrize("argv, at", [
    (["-m", "gpu=l4", "batch=4"], 1), (["model=x", "--help"], 0), (["--cfg", "job", "a=1"], 2),
    (["--cfg", "job"], 0), ([], 0), (["-m"], 0),
])
def test_hydra_dirs_join_the_block_of_overrides(tmp_path, argv, at):
    """Hydra's argparse takes the overrides as one block: flags stay before or after it."""
    got = hydra_dir_args(argv, tmp_path)
    assert got[:at] == argv[:at] and got[at + 2:] == argv[at:]
    assert got[at].startswith("hydra.run.dir=") and got[at + 1].startswith("hydra.sweep.dir=")
    kept = hydra_dir_args(["hydra.run.dir=/x", "hydra.sweep.dir=/y"], tmp_path)
    assert kept == ["hydra.run.dir=/x", "hydra.sweep.dir=/y"]


def test_home_defaults_to_the_repository(monkeypatch, tmp_path):
    monkeypatch.delenv("TILECAST_HOME", raising=False)
    assert tilecast_home() == ROOT.resolve()
    monkeypatch.setenv("TILECAST_HOME", str(tmp_path))
    assert tilecast_home() == tmp_path.resolve()


def test_gpu_from_cfg_applies_field_overrides(compose):
    cfg = compose("predict", ["gpu=l4", "model=gpt2_large", "batch=1", "seq_len=8", "++gpu.mem_bw_gbs=600"])
    gpu = gpu_from_cfg(cfg.gpu)
    assert gpu.key == "l4+mem_bw_gbs=600" and gpu.mem_bw_gbs == 600.0
    assert gpu_from_cfg(compose("predict", ["gpu=l4"]).gpu) is get_gpu("l4")
    with pytest.raises(SpecError, match="field 'num_sm' has invalid value 'many'"):
        gpu_from_cfg(compose("predict", ["gpu=l4", "++gpu.num_sm=many"]).gpu)
    with pytest.raises(SpecError, match="name it with gpu=<key"):
        gpu_from_cfg(compose("predict", ["++gpu.mem_bw_gbs=600"]).gpu)


def test_model_from_cfg_applies_config_overrides(compose):
    model = model_from_cfg(compose("graph", ["model=gpt2_large", "++model.config.n_layer=12"]).model)
    assert model.key == "gpt2_large+n_layer=12" and model.num_layers == 12
    assert model_from_cfg(compose("graph", ["model=gpt2_large"]).model) is get_model("gpt2_large")


@pytest.fixture
def compose():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    def run(name, overrides):
        with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
            return hydra_compose(config_name=name, overrides=overrides)

    return run

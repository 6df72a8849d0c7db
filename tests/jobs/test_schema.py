"""Issue 27 item 16, one schema per job: a job's settings dataclasses are its Hydra structured config
(:mod:`tilecast.cli.schema`); its conf file only overrides, so no default is written twice, and a value of the wrong
type is Hydra's own error. In process (compose), a second or two."""

from __future__ import annotations

import dataclasses

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from tilecast.cli import conf_defaults
from tilecast.cli.overrides import _load_yaml
from tilecast.cli.run import hydra_error_line
from tilecast.cli.schema import JOB_SCHEMAS, schema_defaults
from tilecast.paths import CONF_DIR


def _compose(job: str, overrides: list[str] = ()):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(job, overrides=list(overrides))


@pytest.mark.parametrize("job", sorted(JOB_SCHEMAS))
def test_the_conf_file_writes_no_default_of_the_schema(job):
    """Every setting the conf file writes either differs from the schema's default (an override of the job) or is
    not in the schema; the same value in both places is the duplication item 16 removes."""
    schema, primary = schema_defaults(job), _load_yaml(CONF_DIR / f"{job}.yaml")
    assert f"{job}_schema" in primary["defaults"]

    def walk(mine, theirs, prefix=""):
        for key, value in mine.items():
            if key in ("defaults", "hydra") or key not in theirs:
                continue
            if isinstance(value, dict) and isinstance(theirs[key], dict):
                walk(value, theirs[key], f"{prefix}{key}.")
            else:
                assert value != theirs[key], f"conf/{job}.yaml repeats the schema's default {prefix}{key}={value!r}"

    walk(primary, schema)


def test_the_dask_group_is_its_dataclass():
    from tilecast.scoring.cluster import DaskConfig

    assert _load_yaml(CONF_DIR / "dask" / "default.yaml") == {"defaults": ["dask_schema", "_self_"]}  # no value twice
    for job in ("score", "plan", "nightly"):
        assert DaskConfig.from_mapping(OmegaConf.to_container(_compose(job).dask)) == DaskConfig(), job
        assert conf_defaults(job)["dask"]["n_workers"] == DaskConfig.n_workers, job


def test_the_schema_defaults_are_the_settings_dataclasses():
    from tilecast.pipelines.evaluate import EvaluationSettings
    from tilecast.pipelines.score import ScoreSettings
    from tilecast.training.promotion import PromotionPolicy
    from tilecast.training.train import TrainSpec

    for job, cls in (("train", TrainSpec), ("promote", PromotionPolicy), ("evaluate", EvaluationSettings)):
        defaults = conf_defaults(job)
        for f in dataclasses.fields(cls):
            if f.name in defaults and f.default is not dataclasses.MISSING:
                want = list(f.default) if isinstance(f.default, tuple) else f.default
                assert defaults[f.name] == want, (job, f.name)
    score = conf_defaults("score")
    assert score["max_cells"] == ScoreSettings.max_cells and score["fit"]["reserve_gib"] == 0.5
    assert conf_defaults("promote")["families"] == list(TrainSpec.families)  # what train.py trains, promote promotes


def test_the_nightly_bootstrap_overrides_only_what_differs():
    cfg = _compose("nightly")
    assert cfg.train.logo is False and cfg.train.predictor == "xgboost"  # the override, and the bootstrap's predictor
    assert cfg.train.val_fraction == 0.2 and cfg.promote.require_logo is True  # from TrainSpec / PromotionPolicy
    assert OmegaConf.select(cfg, "mlflow.experiment") is not None and cfg.matrix is not None


@pytest.mark.parametrize("job, override, named", [
    ("train", "val_fraction=abc", "could not be converted to Float"),
    ("promote", "rollback=maybe", "is not a valid bool"),
    ("score", "max_cells=2.5", "could not be converted to Integer"),
    ("nightly", "train.logo=perhaps", "is not a valid bool"),
    ("plan", "dask.n_workers=abc", "could not be converted to Integer"),  # a group's schema (DaskConfig)
])
def test_a_bad_type_is_hydras_own_error_on_one_line(job, override, named):
    with pytest.raises(ConfigCompositionException) as got:
        _compose(job, [override])
    line = hydra_error_line(got.value, [override], job)
    assert line.startswith(f"{override}: ") and named in line and "\n" not in line

"""One source of truth for predictor defaults (issue 16, item 4): what ``jobs/train.py`` composes from
``conf/predictor/<name>.yaml`` is exactly what ``fit_predictor`` uses when given no parameters."""

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tilecast.paths import CONF_DIR
from tilecast.predictors import fit_predictor
from tilecast.predictors.design import fit_params, predictor_defaults

LEARNED = ("xgboost", "mlp")


def _defaults(name: str) -> dict:
    module = {"xgboost": "tilecast.predictors.xgboost_predictor", "mlp": "tilecast.predictors.mlp"}[name]
    return __import__(module, fromlist=["DEFAULTS"]).DEFAULTS


def _composed(name: str, overrides: tuple[str, ...] = ()) -> dict:
    """``predictor.params`` exactly as jobs/train.py reads it from the composed config."""
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = compose(config_name="train", overrides=[f"predictor={name}", *overrides])
    return OmegaConf.to_container(cfg.predictor, resolve=True).get("params") or {}


@pytest.mark.parametrize("name", LEARNED)
def test_code_defaults_are_the_yaml_the_train_job_composes(name: str) -> None:
    composed = _composed(name)
    assert _defaults(name) == composed  # a literal dict in the code drifting from the YAML fails here
    assert fit_params(name, "linear", _defaults(name), composed) == fit_params(name, "linear", _defaults(name), {})


@pytest.mark.parametrize("name", LEARNED)
def test_every_yaml_key_is_a_parameter_the_predictor_knows(name: str) -> None:
    raw = yaml.safe_load((CONF_DIR / "predictor" / f"{name}.yaml").read_text())["params"]
    assert set(raw) == set(_defaults(name))
    fit_params(name, "bmm", _defaults(name), raw)  # an unknown or ill-typed value raises


def test_an_override_of_a_listed_key_reaches_the_fit() -> None:
    composed = _composed("xgboost", ("predictor.params.rounds=7",))
    assert composed["rounds"] == 7 and {k: v for k, v in composed.items() if k != "rounds"} == {
        k: v for k, v in predictor_defaults("xgboost").items() if k != "rounds"}


def test_a_fit_without_parameters_records_the_yaml_values(small_rows) -> None:
    model = fit_predictor("xgboost", "softmax", small_rows("softmax", 400), rounds=3)
    expected = {**predictor_defaults("xgboost"), "rounds": 3}
    assert {k: model.params[k] for k in expected if k != "features"} == {
        k: v for k, v in expected.items() if k != "features"}


def test_a_predictor_file_without_params_is_refused(tmp_path, monkeypatch) -> None:
    import tilecast.paths

    (tmp_path / "predictor").mkdir()
    (tmp_path / "predictor" / "xgboost.yaml").write_text("name: xgboost\n")
    monkeypatch.setattr(tilecast.paths, "CONF_DIR", tmp_path)
    with pytest.raises(ValueError, match="no 'params' mapping"):
        predictor_defaults("xgboost")


def test_the_held_out_gpus_are_one_list():
    """train / promote / evaluate configs and their settings' defaults all name predictors.rows.UNSEEN_GPUS."""
    from tilecast.cli import conf_defaults
    from tilecast.pipelines.evaluate import EvaluationSettings
    from tilecast.predictors.rows import UNSEEN_GPUS
    from tilecast.training.promotion import PromotionPolicy
    from tilecast.training.train import TrainSpec

    for job in ("train", "promote", "evaluate"):
        assert tuple(conf_defaults(job)["unseen_gpus"]) == UNSEEN_GPUS, job  # the job's schema and conf file
    for settings in (EvaluationSettings, PromotionPolicy, TrainSpec):
        assert settings.__dataclass_fields__["unseen_gpus"].default == UNSEEN_GPUS, settings.__name__

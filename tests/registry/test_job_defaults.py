"""Issue 27 item 2: ``python jobs/train.py && python jobs/promote.py`` (the documented sequence) gives a registry an
fp32 ``predict`` can use: a job loads only the families its workload needs, and the defaults of a job's YAML and
of the settings it builds agree (one set of defaults)."""

import dataclasses

import pytest
import yaml

from tilecast.paths import CONF_DIR
from tilecast.registry.forecaster import predictor_source
from tilecast.scoring.predictors import families_for
from tilecast.tiles.ops import FP32_FAMILIES
from tilecast.training.promotion import PromotionPolicy, promote, rollback
from tilecast.training.train import TrainSpec

from .helpers import trained


def _yaml(name: str) -> dict:
    return yaml.safe_load((CONF_DIR / f"{name}.yaml").read_text())


@pytest.mark.parametrize("job, cls", [("train", TrainSpec), ("promote", PromotionPolicy)])
def test_the_yaml_and_the_dataclass_give_the_same_defaults(job, cls):
    conf = _yaml(job)
    for f in dataclasses.fields(cls):
        if f.name not in conf or f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        mine = tuple(conf[f.name]) if isinstance(default, tuple) else conf[f.name]
        assert mine == default, (job, f.name, conf[f.name], default)


def test_train_and_promote_default_to_the_same_families():
    assert tuple(_yaml("train")["families"]) == tuple(_yaml("promote")["families"]) == FP32_FAMILIES
    assert TrainSpec("xgboost").families == FP32_FAMILIES
    for fn in (promote, rollback):
        assert fn.__defaults__[0] == FP32_FAMILIES


def test_an_fp32_forecast_loads_only_the_fp32_families(module_store):
    trained(FP32_FAMILIES)  # what `python jobs/train.py` registers by default: no tensor-core family
    predict, versions = predictor_source("registry", "champion", dtypes=("fp32",))
    assert set(versions) == set(FP32_FAMILIES) == set(families_for(["fp32"]))
    with pytest.raises(Exception, match="tilecast-tc_gemm"):
        predictor_source("registry", "champion", dtypes=("bf16",))  # bf16 needs tc_gemm: named

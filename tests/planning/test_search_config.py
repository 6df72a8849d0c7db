"""The search spaces of conf/plan.yaml: validated with the key named; the defaults are the dataclasses'."""

import pytest

from tilecast.cli import conf_defaults
from tilecast.planning.layouts import ServeSearch, serve_layouts
from tilecast.planning.search import settings_from_config
from tilecast.planning.train_plan import TrainSearch


def test_conf_plan_yaml_is_the_default_search():
    settings = settings_from_config(conf_defaults("plan"))
    assert settings.serve == ServeSearch() and settings.train == TrainSearch()
    assert settings.predictor == "registry" and settings.top == 20


@pytest.mark.parametrize("section, cfg, match", [
    ("serve", {"tp": [1, 0]}, r"search\.serve\.tp must be a list of positive integers"),
    ("serve", {"disaggregated": "yes"}, r"search\.serve\.disaggregated must be true or false"),
    ("serve", {"tpp": [1]}, r"search\.serve: unknown key\(s\) tpp"),
    ("serve", {"concurrency": "all"}, r"search\.serve\.concurrency must be a list of positive integers"),
    ("serve", {"engines": ["vllm", "tgi"]}, r"unknown serving engine 'tgi'; known: vllm, sglang, trtllm"),
    ("serve", {"max_concurrency": 0}, r"search\.serve\.max_concurrency must be a positive integer"),
    ("train", {"round_size": 0}, r"search\.train\.round_size must be a positive integer"),
    ("train", {"sharding": []}, r"search\.train\.sharding must not be empty"),
])
def test_bad_search_settings_are_named(section, cfg, match):
    with pytest.raises(ValueError, match=match):
        (ServeSearch if section == "serve" else TrainSearch).from_mapping(cfg)


def test_layout_rows_answered_or_not():
    rows = serve_layouts(["l4"], ["bf16"], ServeSearch(tp=(1, 2), pp=(1, 2), ep=(1, 4), disaggregated=True,
                                                       prefill_workers=(1,), decode_workers=(1, 2)))
    answered = rows.loc[rows["layout_error"].isna(), "layout"].tolist()
    assert answered == ["tp1", "tp1 ep4", "tp2", "tp2 ep4"]  # the model decides whether it runs ep (MoE only)
    disagg = rows.loc[rows["mode"] == "disagg"]
    assert len(disagg) == 2 * 2 * 2 and disagg["layout_error"].str.contains("disaggregated").all()
    assert (disagg["gpus_per_replica"] == disagg["prefill_tp"] + disagg["decode_workers"] * disagg["decode_tp"]).all()
    assert rows.loc[rows["layout"] == "tp2 pp2 ep4", "gpus_per_replica"].item() == 4

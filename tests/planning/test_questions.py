"""Planning questions: validated on construction, bad input as named errors (a job exits 2 on them)."""

import pytest

from tilecast.planning.questions import (
    DeadlineError,
    PlanError,
    RateError,
    ServeQuestion,
    ServiceLevelError,
    TrainQuestion,
    question_from,
)
from tilecast.specs import UnknownSpecError, all_gpus

SERVE = {"model": "llama31_8b", "isl": 1024, "osl": 256, "ttft_ms": 500, "tpot_ms": 30}


def test_a_serving_question_from_a_rate_or_tokens_per_second():
    q = question_from({**SERVE, "rate": 2.0})
    assert isinstance(q, ServeQuestion) and q.rate_rps == 2.0 and q.tokens_per_s == 512.0
    assert q.gpus == tuple(all_gpus()) and q.dtypes == ("bf16", "fp8", "fp4")
    assert question_from({**SERVE, "tokens_per_s": 512.0}).rate_rps == 2.0
    assert question_from({**SERVE, "rate_per_min": 120}).rate_rps == 2.0
    assert question_from({**SERVE, "rate": 1, "gpus": ["NVIDIA L4", "h100_sxm"]}).gpus == ("l4", "h100_sxm_80gb")
    assert "120 requests/min, TTFT ≤ 500 ms, TPOT ≤ 30 ms" in q.describe()


@pytest.mark.parametrize("extra, error, match", [
    ({"rate": 0}, RateError, "rate must be a positive number of requests per second, got 0"),
    ({"rate": -3}, RateError, "got -3"),
    ({"tokens_per_s": 0}, RateError, "tokens_per_s must be a positive number"),
    ({}, RateError, "rate=<requests per second> or tokens_per_s"),
    ({"rate": 1, "tokens_per_s": 5}, RateError, "one of the two"),
    ({"rate": 1, "ttft_ms": 0}, ServiceLevelError, "ttft_ms must be a positive number of ms"),
    ({"rate": 1, "dtypes": ["fp32"]}, PlanError, "dtypes must be some of bf16, fp16, fp8, fp4"),
    ({"rate": 1, "max_gpus": 0}, PlanError, "max_gpus must be a positive integer"),
    ({"rate": 1, "isl": 200_000}, PlanError, "exceeds llama31_8b's"),
    ({"rate": 1, "speed": 3}, PlanError, r"unknown key\(s\) speed"),
])
def test_bad_serving_questions_are_named(extra, error, match):
    with pytest.raises(error, match=match):
        question_from({**SERVE, **extra})


def test_unknown_gpus_name_the_closest_known_ones():
    with pytest.raises(UnknownSpecError, match="unknown GPU 'h1000'; closest known: "):
        question_from({**SERVE, "rate": 1, "gpus": ["l4", "h1000"]})


def test_a_training_question():
    q = question_from({"model": "llama31_70b", "tokens": 2e12, "days": 30})
    assert isinstance(q, TrainQuestion) and q.deadline_s == 30 * 86400 and q.dtype == "amp_bf16"
    assert q.describe() == "train llama31_70b on 2T tokens in 30 days"
    assert question_from({"model": "llama31_8b", "tokens": 1e9, "budget_usd": 5000}).deadline_s is None
    with pytest.raises(PlanError, match="days=<days> or a budget budget_usd=<USD>, one of the two"):
        TrainQuestion("llama31_8b", 1e9)
    with pytest.raises(DeadlineError, match="days must be a positive number of days, got -1"):
        TrainQuestion("llama31_8b", 1e9, days=-1)
    with pytest.raises(PlanError, match="tokens must be a positive number"):
        TrainQuestion("llama31_8b", 0, days=1)
    with pytest.raises(PlanError, match="a serving question needs isl=<n>"):
        question_from({"model": "llama31_8b", "rate": 1})

"""The training plan (roofline kernels, a small search): the bounds rule out only runs that cannot win, the plan
is the cheapest run meeting the deadline at the high end (the fastest within a budget), bad deadlines named."""

import numpy as np
import pandas as pd
import pytest

from tilecast.planning.questions import DeadlineError, TrainQuestion
from tilecast.planning.train_plan import TrainSearch, assemble_many, enumerate_runs, micro_batch_table, train_plan
from tilecast.specs import get_gpu

GPUS = ("h100_sxm_80gb", "a100_sxm4_80gb", "l40s", "tesla_t4")
PRICES = {"h100_sxm_80gb": 4.0, "a100_sxm4_80gb": 2.5, "l40s": 1.9, "tesla_t4": 0.35}
SEARCH = TrainSearch(n_gpus=(8, 16, 32, 64), sharding=("zero1", "zero3"), tp=(1, 2), pp=(1, 2),
                     activation_checkpointing=("none", "full"), micro_batch=(1, 2), round_size=8)


def _q(**kw):
    return TrainQuestion("llama31_8b", 2e10, seq_len=2048, global_batch=256, gpus=GPUS, **{"days": 10, **kw})


def test_runs_that_do_not_split_are_refused_and_counted():
    runs, tried, refused = enumerate_runs(_q(), SEARCH)
    assert tried == 4 * 2 * 2 * 2 * 2 * 2 and len(runs) + sum(refused.values()) == tried
    assert all(r.n_gpus % (r.tp * r.pp) == 0 for r in runs)


def test_the_bounds_rule_out_only_runs_that_cannot_win():
    q = _q()
    plan = train_plan(q, SEARCH, None, PRICES)
    s = plan.search
    assert s["ruled_out"] > 0 and s["assembled"] + s["ruled_out"] == s["fitting"]
    # every fitting run assembled, exhaustively: the same plan
    runs, _, _ = enumerate_runs(q, SEARCH)
    gpus = [get_gpu(g) for g in GPUS if g != "tesla_t4"]
    table = micro_batch_table(runs, gpus, None)
    from tilecast.forecast.train_memory import train_memory

    items = [(r, g.key, table[(r.micro_batch, r.tp, r.cp)][g.key]) for g in gpus for r in runs
             if train_memory(r, g).fits]
    assert len(items) == s["fitting"]
    res = pd.DataFrame(assemble_many(items, PRICES))
    steps = q.tokens / (q.global_batch * q.seq_len)
    n = np.array([r.n_gpus for r, _, _ in items])
    fac = {g: plan.candidates.loc[plan.candidates["gpu"] == g, "step_hi_s"].iloc[0]
           / plan.candidates.loc[plan.candidates["gpu"] == g, "step_s"].iloc[0]
           for g in pd.unique(plan.candidates.loc[plan.candidates["step_s"].notna(), "gpu"])}
    price = np.array([PRICES[g] for _, g, _ in items])
    hi_days = steps * res["step_s"] * np.array([fac.get(g, np.inf) for _, g, _ in items]) / 86400
    cost = steps * res["step_s"] / 3600 * n * price
    ok = res["fits"] & (hi_days <= q.days)
    best = cost[ok].min()
    assert plan.feasible and plan.chosen["usd_to_train"] == pytest.approx(best, rel=1e-9)
    assert plan.chosen["days_to_train_hi"] <= q.days and plan.chosen["status"] == "meets"


def test_a_budget_question_takes_the_fastest_run_within_it():
    cheap = train_plan(_q(), SEARCH, None, PRICES).chosen
    plan = train_plan(_q(days=None, budget_usd=cheap["usd_to_train_hi"] * 1.5), SEARCH, None, PRICES)
    assert plan.feasible and plan.chosen["usd_to_train_hi"] <= cheap["usd_to_train_hi"] * 1.5
    assert plan.chosen["days_to_train"] <= cheap["days_to_train"]
    meets = plan.candidates.loc[plan.candidates["feasible"]]
    assert plan.chosen["days_to_train"] == meets["days_to_train"].min()


def test_an_impossible_deadline_and_one_shorter_than_a_step():
    plan = train_plan(_q(days=1e-3), SEARCH, None, PRICES)  # 86 s: longer than a step, far short of the run
    assert not plan.feasible and len(plan.closest()) and (plan.closest()["miss_pct"] > 0).all()
    assert plan.candidates.loc[plan.candidates["gpu"] == "tesla_t4", "status"].eq("not supported").all()
    with pytest.raises(DeadlineError, match=r"days=1e-07 \(0.0 s\) is shorter than one step: the fastest run"):
        train_plan(_q(days=1e-7), SEARCH, None, PRICES)

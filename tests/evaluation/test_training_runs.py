"""Training-run rows (llm-foundry's mpt_training.csv schema) -> forecasts; bad rows get an error, others answer."""

from __future__ import annotations

import pandas as pd
import pytest

from tilecast.evaluation.training_runs import (
    evaluate_training_runs,
    row_gpu,
    row_network,
    row_run,
    training_summary,
)
from tilecast.paths import LLM_FOUNDRY_DIR
from tilecast.specs.train_run import Network

ROWS = pd.read_csv(LLM_FOUNDRY_DIR / "mpt_training.csv")


def test_a_row_becomes_its_run():
    row = ROWS.iloc[0]  # 70b on 64 A100-80GB, FULL_SHARD, checkpointing, PURE
    run, gpu = row_run(row)
    assert gpu == "a100_sxm4_80gb" and run.model.key == "mpt_70b"  # 2048: the catalog's own positions
    assert row_run(ROWS.iloc[2])[0].model.key == "mpt_30b+max_seq_len=8192"
    assert (run.n_gpus, run.micro_batch, run.grad_accum, run.sharding, run.activation_checkpointing) == (
        64, 8, 4, "zero3", "full")
    assert run.grad_reduce_dtype == "bf16" and run.network == Network("roce", 200.0)
    assert row_run(ROWS.iloc[2])[0].grad_reduce_dtype == "fp32"  # DEFAULT: fp32 reduction
    assert row_gpu({"GPU": None, "section": "A100 40GB with 1600 Gbps node-node interconnect (RoCE)"}) == \
        "a100_sxm4_40gb"
    assert row_network({"section": "H100 80GB with 3200 Gbps node-node interconnect (InfiniBand)"}).gbs == 50.0
    assert row_network({"section": "somewhere"}) is None


def test_rows_are_forecast_and_bad_ones_carry_their_reason():
    rows = ROWS.iloc[[0, 20, 78]].copy()
    offload = rows.iloc[[1]].assign(**{"Activation CPUOffload": True})
    unknown = rows.iloc[[1]].assign(GPU="tpu_v9", section="TPU v9 pod")
    model = rows.iloc[[1]].assign(Model="9t")
    out = evaluate_training_runs(pd.concat([rows, offload, unknown, model], ignore_index=True))
    ok = out["error"] == ""
    assert ok.tolist() == [True, True, True, False, False, False]
    assert "CPUOffload" in out.loc[3, "error"] and "tpu_v9" in out.loc[4, "error"] and "9t" in out.loc[5, "error"]
    assert (out.loc[ok, "pred_step_s"] > 0).all() and out.loc[ok, "pred_fits"].all()
    assert out.loc[~ok, "pred_tokens_per_s_per_gpu"].isna().all()
    assert list(out.columns[: len(ROWS.columns)]) == list(ROWS.columns)
    assert {"ape_tokens_per_s_per_gpu_pct", "ape_mfu_pct", "pred_mfu_pct"} <= set(out.columns)
    summary = training_summary(out)
    assert summary["gpu_key"].tolist() == ["a100_sxm4_40gb", "a100_sxm4_80gb", "all"]
    assert summary.loc[2, "rows"] == 3


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="Sharding Strategy"):
        evaluate_training_runs(ROWS.drop(columns=["Sharding Strategy"]))

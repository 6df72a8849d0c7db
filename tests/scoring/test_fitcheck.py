"""The memory model against the shipped labels: a label is missing exactly where a run did not fit."""

import pandas as pd

from tilecast.data import load_e2e_labels
from tilecast.scoring.fitcheck import attempted_cells, fit_agreement
from tilecast.scoring.metrics import FitPolicy


def test_attempted_cells_are_the_paper_grid_on_the_labelled_gpus():
    cells = attempted_cells()
    labels = load_e2e_labels()
    plain = labels.loc[labels["variant"] == "plain"]
    # every plain label of the grid's models is an attempted cell that ran
    ran = cells.loc[cells["labelled"]]
    assert len(ran) == len(plain.merge(cells[["device", "model", "mode", "batch", "seq_len"]]))
    assert set(cells.loc[cells["mode"] == "inference", "gpu"]) == {
        "a100_pcie_40gb", "l4", "tesla_p100_pcie_16gb", "tesla_p4", "tesla_t4", "tesla_v100_pcie_32gb"}
    assert set(cells.loc[cells["mode"] == "training", "gpu"]) == {"a100_pcie_80gb", "l4", "tesla_v100_pcie_32gb"}
    assert not cells.duplicated(["gpu", "model", "mode", "batch"]).any()
    # the P4 (8 GB) ran only the small cells; the 80 GB A100 ran every training cell
    assert cells.loc[cells["gpu"] == "tesla_p4", "labelled"].sum() == 3
    assert cells.loc[cells["gpu"] == "a100_pcie_80gb", "labelled"].all()


def test_agreement_counts_and_no_false_out_of_memory():
    a = fit_agreement(FitPolicy())
    s = a.summary()
    assert s["agree"] + s["false_fits"] + s["false_oom"] + s["unknown"] == s["cells"] == len(a.cells)
    assert s["unknown"] == 0
    assert s["false_oom"] == 0  # every run that was measured is predicted to fit
    # inference peaks (key / value cache, two attention-score tensors, logits) catch all but 4 out-of-memory
    # cells: opt_13 b8 and switchxl4 b1 / b2 on the L4, gpt3_xl b8 on the 32 GB V100 (within 1-4 GiB)
    assert s["false_fits"] <= 4
    by_cell = a.cells.set_index(["gpu", "model", "batch"])
    assert not by_cell.loc[("tesla_p4", "gpt2_large", 8), "fits"].any()  # the P4 ran batch 4 only
    assert by_cell.loc[("tesla_p4", "gpt2_large", 4), "fits"].all()
    assert not by_cell.loc[("tesla_p100_pcie_16gb", "gpt3_27", 2), "fits"].any()
    wrong = a.cells.loc[~a.cells["agree"].astype(bool)]
    assert (wrong["fits"].astype(bool) & ~wrong["labelled"]).sum() == s["false_fits"]
    # a bigger reserve can only turn "fits" into "does not fit"
    tight = fit_agreement(FitPolicy(reserve_gib=4.0)).summary()
    assert tight["false_fits"] <= s["false_fits"] and tight["false_oom"] >= s["false_oom"]
    assert isinstance(a.cells, pd.DataFrame) and {"mem_required_gib", "capacity_gib"} <= set(a.cells.columns)

"""Issue 27 item 19: the families of a training run are fitted at once (threads, one writer on the store): the
registered versions and their figures are those of fitting one after the other."""

from tilecast.training.train import TrainSpec, fit_families, train

SPEC = TrainSpec("xgboost", {"rounds": 10}, families=("softmax", "layernorm", "linear"), max_rows=300,
                 experiment="parallel-train", logo=False)


def test_parallel_fits_equal_serial_fits():
    serial, parallel = fit_families(SPEC, SPEC.families, 1), fit_families(SPEC, SPEC.families, 3)
    for family in SPEC.families:
        figures = [{k: v for k, v in f[family].metrics.items() if k != "fit_s"} for f in (serial, parallel)]
        assert figures[0] == figures[1]  # every figure but the fit's wall time
        assert serial[family].train_hash == parallel[family].train_hash


def test_train_with_workers_registers_every_family_in_order(module_store):
    results = train(SPEC, workers=2)
    assert [r.family for r in results] == list(SPEC.families)
    assert all(r.version == "1" and r.metrics["val_mape_pct"] > 0 for r in results)

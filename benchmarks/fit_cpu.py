"""CPU-seconds and accuracy of each family's default fit, one after the other (the nightly bootstrap's fits):
``PYTHONPATH=src python3 benchmarks/fit_cpu.py`` (run it on two trees to compare their fit code: the validation and
unseen-GPU MAPE must agree to the last digit when only the speed changed). See benchmarks/scoring.md."""

from __future__ import annotations

import time

from tilecast.tiles.ops import FAMILIES

try:
    from tilecast.training.train import TrainSpec, fit_family
except ImportError:  # a tree before tilecast.training (issue 27 item 15)
    from tilecast.registry.training import TrainSpec, fit_family


def main() -> None:
    spec = TrainSpec(predictor="xgboost", families=tuple(FAMILIES), logo=False)
    total = 0.0
    for family in FAMILIES:
        cpu, wall = time.process_time(), time.perf_counter()
        fitted = fit_family(spec, family)
        cpu = time.process_time() - cpu
        total += cpu
        unseen = fitted.metrics.get("unseen_mape_pct", float("nan"))
        print(f"{family}: {cpu:.1f} CPU-s ({time.perf_counter() - wall:.1f} s wall), val MAPE "
              f"{fitted.metrics['val_mape_pct']:.3f}%, unseen {unseen:.3f}%", flush=True)
    print(f"total {total:.1f} CPU-s")


if __name__ == "__main__":
    main()

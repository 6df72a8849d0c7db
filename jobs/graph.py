"""Operator graph of a workload.

``python jobs/graph.py model=<key> batch=<n> seq_len=<n> mode=inference|training [output=<csv>]``
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from tilecast.cli import int_setting, model_from_cfg, output_file, user_errors, with_catalog_args
from tilecast.specs import Workload


@hydra.main(version_base="1.3", config_path="../conf", config_name="graph")
@user_errors()
def main(cfg: DictConfig) -> None:
    output = output_file(cfg.output)
    batch, seq_len = int_setting(cfg, "batch"), int_setting(cfg, "seq_len")
    workload = Workload(model_from_cfg(cfg.model), batch, seq_len, cfg.mode, bool(cfg.fused), dtype=cfg.dtype)
    from tilecast.graph import build_graph, memory_footprint
    from tilecast.graph.summary import format_summary, op_rows
    from tilecast.io import write_table

    graph = build_graph(workload)
    footprint = memory_footprint(workload, dtype=cfg.dtype, optimizer=cfg.optimizer)
    print(format_summary(graph, footprint, workload.describe()))
    if cfg.output:
        path = write_table(op_rows(graph), output)
        print(f"wrote {len(graph)} ops to {path}")


if __name__ == "__main__":
    with_catalog_args(main, what_if=("model",))()

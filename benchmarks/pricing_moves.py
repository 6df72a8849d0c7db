"""Which recommendations a change of prices moves: the report's decision tables (cheapest GPU and batch per workload
meeting its step-time target; cheapest GPU, tp and concurrency per serve workload meeting the TPOT / TTFT targets)
of one scored run, priced with an old and a new price file.

Costs are linear in the price, so the run is scored once and repriced: ``cost x new / price in the table``.

    python jobs/score.py forecaster=roofline matrix=nightly output_dir=/tmp/nightly_roof date=2026-01-01
    git show <before>:conf/pricing/default.yaml > /tmp/old_pricing.yaml
    python benchmarks/pricing_moves.py --run /tmp/nightly_roof/2026-01-01 --old /tmp/old_pricing.yaml \
        --new conf/pricing/default.yaml --out benchmarks/pricing.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import yaml

from tilecast.paths import CONF_DIR
from tilecast.pipelines.report import settings_from_config
from tilecast.pipelines.score import read_run, read_serve
from tilecast.reports.serve import serve_recommendations
from tilecast.reports.tables import recommendations
from tilecast.scoring.pricing import load_pricing


def _repriced(table: pd.DataFrame, prices: dict[str, float], cost_cols: list[str]) -> pd.DataFrame:
    scale = table["gpu"].map(prices).to_numpy(float) / table["usd_per_gpu_hour"].to_numpy(float)
    out = table.copy()
    for c in cost_cols:
        if c in out:
            out[c] = out[c].to_numpy(float) * scale
    return out


def _markdown(df: pd.DataFrame) -> str:
    def cell(v: object) -> str:
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    head = "| " + " | ".join(df.columns) + " |\n|" + " --- |" * len(df.columns)
    return head + "\n" + "\n".join("| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, type=Path)
    ap.add_argument("--old", required=True, type=Path)
    ap.add_argument("--new", required=True, type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    report_cfg = yaml.safe_load((CONF_DIR / "report.yaml").read_text())
    report_cfg.pop("defaults", None)
    settings, _ = settings_from_config(report_cfg)
    scores, meta = read_run(args.run)
    serve = read_serve(args.run)
    keys, skeys = ["model", "mode", "dtype"], ["model", "dtype", "isl", "osl"]
    picks = {}
    for name, path in (("old", args.old), ("new", args.new)):
        prices = {g: p.usd_per_gpu_hour for g, p in load_pricing(yaml.safe_load(path.read_text())).prices.items()}
        s = _repriced(scores, prices, ["cost_per_step_usd", "cost_per_1m_tokens_usd"])
        rec = recommendations(s, settings.targets_ms, settings.slice)[[*keys, "gpu", "batch", "usd_per_1m_tokens"]]
        srec = None
        if serve is not None:
            sv = _repriced(serve, prices, ["cost_per_1m_output_tokens_usd"])
            srec = serve_recommendations(sv, settings.serve)[[*skeys, "gpu", "tp", "concurrency",
                                                              "usd_per_1m_output_tokens"]]
        picks[name] = (rec, srec)
    lines = ["# Which recommendations the price change moves\n",
             f"Run `{args.run}` (matrix `{meta.get('matrix')}`, predictor `{meta.get('predictor')}`), repriced with "
             f"`{args.old}` (old) and `{args.new}` (new). Command: see `benchmarks/pricing_moves.py`.\n"]
    for label, idx, (old, new) in (("workloads", keys, (picks["old"][0], picks["new"][0])),
                                   ("serve workloads", skeys, (picks["old"][1], picks["new"][1]))):
        if old is None:
            continue
        both = old.merge(new, on=idx, suffixes=("_old", "_new"))
        pick_old = both["gpu_old"].astype(str)
        pick_new = both["gpu_new"].astype(str)
        moved = both.loc[pick_old != pick_new]
        lines.append(f"## {label}: {len(moved)} of {len(both)} picks move\n")
        counts_old = pick_old.value_counts().to_dict()
        counts_new = pick_new.value_counts().to_dict()
        lines.append("| GPU | picks before | picks after |\n| --- | ---: | ---: |")
        for g in sorted(set(counts_old) | set(counts_new), key=lambda g: -counts_new.get(g, 0)):
            lines.append(f"| {g} | {counts_old.get(g, 0)} | {counts_new.get(g, 0)} |")
        lines.append("")
        if len(moved):
            lines.append(_markdown(moved))
            lines.append("")
    text = "\n".join(lines)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

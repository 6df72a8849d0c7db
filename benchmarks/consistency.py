"""Do the kernel microbenchmarks agree with the same kernels measured inside model runs?

``python benchmarks/consistency.py [--output benchmarks/consistency.md]``

For every forward node of the per-node labels (``labels/<device>/<tag>.csv``: one op measured inside
a real model run) whose shape was also measured in isolation in ``kernels/test`` on the same GPU, the
ratio ``microbenchmark ms / in-model ms``. A ratio near 1 means the kernel rows the predictors learn
from (and the calibration tier fits on) describe what the GPU does inside a model; far from 1 they
do not, and no kernel-level model can be right on both. The second table splits vector ops by
whether the op's bytes fit in the GPU's L2 (the producer of the input just wrote it there).
No model is trained or loaded: this reads the shipped data only.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from tilecast.data import load_kernels, load_node_labels
from tilecast.evaluation.perop import node_frames
from tilecast.evaluation.tables import markdown
from tilecast.io import write_atomic
from tilecast.paths import ROOT
from tilecast.specs import get_gpu

#: kernel test files and the op columns their rows are matched on
TINY_BYTES = 2**20  # below this a vector op is launch-bound, whatever the memory
KERNEL_FILES = {"bmm": ("b", "m", "n", "k"), "linear": ("m", "n", "k"), "vec": ("b", "h")}


def node_ops() -> pd.DataFrame:
    """One row per labelled forward node that is a single GEMM or vector op: device, shape, bytes, label ms."""
    nodes = load_node_labels()
    nodes = nodes[nodes["fw_latency"] > 0].drop_duplicates(["device", "tag", "Name"])
    parts = []
    for tag, part in nodes.groupby("tag", sort=True):
        try:
            ops, _ = node_frames(str(tag))
        except (KeyError, ValueError):
            continue
        if ops.empty:
            continue
        ops = ops[ops.groupby("cell")["cell"].transform("size") == 1]
        ops = ops[ops["kind"].isin(list(KERNEL_FILES))].rename(columns={"cell": "Name"})
        parts.append(part[["device", "tag", "Name", "fw_latency"]].merge(ops, on="Name"))
    cols = ["device", "tag", "Name", "kind", "op", "b", "m", "n", "k", "h", "bytes", "fw_latency"]
    out = pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)
    return out.rename(columns={"Name": "name", "fw_latency": "node_ms"})


def kernel_rows(kind: str) -> pd.DataFrame:
    """Kernel test rows of ``kind`` with lower-case shape columns (linear rows have B = 1)."""
    rows = load_kernels("test", kind)
    rows = rows.rename(columns={c: c.lower() for c in ("B", "M", "N", "K", "H")})
    return rows.rename(columns={"OPName": "op", "Device": "device", "Latency": "kernel_ms"})


def with_gpu(nodes: pd.DataFrame) -> pd.DataFrame:
    """``gpu`` key and ``size`` class (launch-bound, fits the GPU's L2, larger) of each node."""
    nodes = nodes.copy()
    nodes["gpu"] = [get_gpu(str(d)).key for d in nodes["device"]]
    l2_bytes = nodes["gpu"].map({g: get_gpu(g).l2_mb * 2**20 for g in nodes["gpu"].unique()}).to_numpy(float)
    nbytes = nodes["bytes"].to_numpy(float)
    codes = (nbytes >= TINY_BYTES).astype(int) + (nbytes > l2_bytes).astype(int)
    nodes["size"] = pd.Categorical.from_codes(codes, ["< 1 MiB", "1 MiB .. L2", "> L2"])
    return nodes


def matched(nodes: pd.DataFrame) -> pd.DataFrame:
    """Labelled nodes joined to the microbenchmark of the same op, shape and GPU."""
    parts = []
    for kind, keys in KERNEL_FILES.items():
        k = kernel_rows(kind)
        cols = ["device", "op", *keys]
        k = k[cols + ["kernel_ms"]].groupby(cols, as_index=False)["kernel_ms"].median()
        n = nodes[nodes["kind"] == kind].copy()
        for c in keys:
            n[c] = n[c].astype(int)
            k[c] = pd.to_numeric(k[c]).astype(int)
        parts.append(n.merge(k, on=cols, how="inner"))
    table = pd.concat(parts, ignore_index=True)
    table["ratio"] = table["kernel_ms"] / table["node_ms"]
    return table


def summary(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    g = table.groupby(by, sort=True)["ratio"]
    return pd.DataFrame({"nodes": g.size(), "p25": g.quantile(0.25), "median": g.median(),
                         "p75": g.quantile(0.75)}).round(2).reset_index()


def in_model_vs_l2(nodes: pd.DataFrame) -> pd.DataFrame:
    """Every labelled vector node: in-model GB/s against the DRAM bandwidth of the spec sheet, by L2 residency."""
    v = nodes[nodes["kind"] == "vec"].copy()
    v["dram_fraction"] = v["bytes"] / (v["node_ms"] * 1e-3) / [get_gpu(g).mem_bw_gbs * 1e9 for g in v["gpu"]]
    g = v.groupby(["gpu", "size"], sort=True, observed=True)["dram_fraction"]
    return pd.DataFrame({"nodes": g.size(), "median in-model bandwidth / spec DRAM bandwidth": g.median().round(2)}
                        ).reset_index()


def render(table: pd.DataFrame, nodes: pd.DataFrame) -> str:
    lines = [
        "# Kernel microbenchmarks vs the same kernels inside model runs",
        "",
        f"- date: {datetime.now(UTC):%Y-%m-%d}; command: `python benchmarks/consistency.py`",
        f"- {len(table)} labelled forward nodes whose exact op and shape were also microbenchmarked on that GPU",
        "",
        "`ratio` = microbenchmark ms (`kernels/test`) / in-model ms (per-node label `fw_latency`).",
        "",
        "## By GPU and kernel kind",
        "",
        markdown(summary(table, ["gpu", "kind"]), index=False, digits=2),
        "",
        "## Vector ops in model runs: does the op's data fit in L2?",
        "",
        "Every labelled forward vector node (matched or not), by the bytes the op reads and writes: below",
        "1 MiB launch-bound; up to the GPU's L2 size the input, just written by the previous op, can be",
        "served from L2; above, from DRAM. A value above 1 beat the spec sheet's DRAM bandwidth.",
        "",
        markdown(in_model_vs_l2(nodes), index=False, digits=2),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "consistency.md")
    args = ap.parse_args()
    nodes = with_gpu(node_ops())
    table = matched(nodes)
    if table.empty:
        raise SystemExit("no labelled node matches a microbenchmarked shape")
    text = render(table, nodes)
    write_atomic(args.output, lambda tmp: Path(tmp).write_text(text))
    print(f"wrote {args.output} ({len(table)} matched nodes)")
    print(summary(table, ["gpu", "kind"]).to_string(index=False))


if __name__ == "__main__":
    main()

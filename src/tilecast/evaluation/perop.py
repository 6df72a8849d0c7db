"""The paper's per-op-category error (docs/method.md §13) from the per-node labels.

Each labelled node of a reference graph (``labels/<device>/<tag>.csv`` joined to ``graphs/<tag>.csv``
by ``Name``) whose category is BMM, Linear (FC), an elementwise VEC op, softmax or LN has its
forward kernels forecast and compared with the node's measured ``fw_latency``.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from tilecast.data import load_graph, load_node_labels
from tilecast.forecast import FamilyPredictor, op_latency_ms, stack_frames, summarise_many
from tilecast.graph.reference import parse_reference
from tilecast.metrics import ape_pct
from tilecast.specs import get_gpu

log = logging.getLogger(__name__)

#: reference OpName -> family (the paper's categories: BMM, FC, EW, Softmax, LN)
_CATEGORY = [(re.compile(r"^BMM$"), "bmm"), (re.compile(r"^Linear$"), "linear"),
             (re.compile(r"^VECsoftmax$"), "softmax"), (re.compile(r"^VECln$"), "layernorm"),
             (re.compile(r"^VEC\w+$"), "elementwise")]
PEROP_COLUMNS = ["device", "gpu", "tag", "name", "family", "label_ms", "pred_ms", "ape_pct"]


def category(opname: str) -> str | None:
    """Family of a reference node's ``OpName`` (None for data movement, views, communication)."""
    for pattern, family in _CATEGORY:
        if pattern.match(opname):
            return family
    return None


def node_frames(tag: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """Forward ops of every categorised node of a tag's reference graph, stacked (``cell`` = node name),
    and each node's family."""
    graph = load_graph(tag)  # the label's own tag: a label under another model name is not this graph
    frames, families = {}, {}
    for _, row in graph.iterrows():
        family = category(str(row["OpName"]))
        if family is None:
            continue
        ops = parse_reference(row.to_frame().T.reset_index(drop=True)).select(phase="fw")
        if len(ops):
            frames[str(row["Name"])] = ops.to_frame()
            families[str(row["Name"])] = family
    return stack_frames(frames), families


def perop_errors(predict: FamilyPredictor, nodes: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per labelled node of a known category: measured and forecast forward ms and APE."""
    nodes = load_node_labels() if nodes is None else nodes
    nodes = nodes[nodes["fw_latency"] > 0]
    out = []
    cache: dict[str, tuple[pd.DataFrame, dict[str, str]]] = {}
    missing: dict[str, list[str]] = {}  # reason -> tags: logged once per reason at the end
    for (device, tag), part in nodes.groupby(["device", "tag"], sort=True):
        if tag not in cache:
            try:
                cache[tag] = node_frames(tag)
            except (KeyError, ValueError) as exc:
                missing.setdefault(str(exc).split(";")[0].replace(repr(tag), "'<tag>'"), []).append(tag)
                cache[tag] = (pd.DataFrame(), {})
        stacked, families = cache[tag]
        part = part[part["Name"].isin(list(families))]
        if part.empty:
            continue
        gpu = get_gpu(str(device))
        pred = summarise_many(stacked, op_latency_ms(stacked, gpu, predict))["fw_ms"]
        names = list(dict.fromkeys(part["Name"]))
        label = part.groupby("Name")["fw_latency"].first()
        out.append(pd.DataFrame({"device": device, "gpu": gpu.key, "tag": tag, "name": names,
                                 "family": [families[n] for n in names], "label_ms": label.loc[names].to_numpy(),
                                 "pred_ms": pred.loc[names].to_numpy()}))
    for reason, tags in missing.items():
        log.warning("per-op: no reference graph for %d tag%s (%s%s: %s); skipped", len(tags), "s" * (len(tags) > 1),
                    ", ".join(tags[:3]), f", ... and {len(tags) - 3} more" if len(tags) > 3 else "", reason)
    table = pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=PEROP_COLUMNS[:-1])
    table["ape_pct"] = ape_pct(table["pred_ms"].to_numpy(float), table["label_ms"].to_numpy(float))
    return table[PEROP_COLUMNS]


def perop_summary(table: pd.DataFrame, unseen_gpus: tuple[str, ...]) -> pd.DataFrame:
    """MAPE per family on training GPUs (``in``) and unseen GPUs (``out``), as the paper splits it."""
    dist = np.where(table["gpu"].isin(unseen_gpus), "out", "in")
    g = table.assign(distribution=dist).groupby(["distribution", "family"], sort=True)["ape_pct"]
    return pd.DataFrame({"nodes": g.size(), "mape_pct": g.mean().round(2)}).reset_index()

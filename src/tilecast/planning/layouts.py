"""Serving layouts the planner searches: one row per (GPU, dtype, layout), the layout in columns.

A layout is how one **replica** (an engine instance serving requests on its own) spreads over GPUs:
``tp`` (tensor parallel), ``pp`` (pipeline stages), ``ep`` (expert parallel, MoE), ``attention_dp`` (attention
data parallel, MoE), and ``mode``: ``agg`` (prefill and decode in the same engine) or ``disagg`` (a pool of
``prefill_workers`` prefill engines of ``prefill_tp`` GPUs feeding ``decode_workers`` decode engines of
``decode_tp`` GPUs: a replica is then that unit of prefill and decode workers).

The candidates are rows with these columns whatever the forecasters answer today; :data:`ANSWERED` says which
layouts the serving path answers, and every other row carries the reason (``status`` not modelled) instead of
numbers, so a layout the forecasters learn later is a change of :data:`ANSWERED`, not of the search.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.serving.engines import ENGINES, check_engine

#: the layout columns of a serving candidate
LAYOUT_COLUMNS = ("mode", "tp", "pp", "ep", "attention_dp", "prefill_tp", "prefill_workers", "decode_tp",
                  "decode_workers")
#: a sparse concurrency grid (requests in flight per replica; decode workers for disagg): what a nightly serve
#: table scores
DEFAULT_CONCURRENCY = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
#: ``concurrency: dense`` (the default) searches every integer from 1 to this (and never above an engine's
#: ``max_num_seqs``)
DENSE_MAX_CONCURRENCY = 1024


@dataclass(frozen=True)
class ServeSearch:
    """The serving search space (``conf/plan.yaml`` ``search.serve``)."""

    tp: tuple[int, ...] = (1, 2, 4, 8)
    pp: tuple[int, ...] = (1,)
    ep: tuple[int, ...] = (1,)
    attention_dp: tuple[int, ...] = (1,)
    disaggregated: bool = False  # also search disaggregated prefill / decode pools
    prefill_workers: tuple[int, ...] = (1, 2, 4)
    decode_workers: tuple[int, ...] = (1, 2, 4)
    concurrency: tuple[int, ...] | str = "dense"  # or a list (e.g. DEFAULT_CONCURRENCY)
    max_concurrency: int = DENSE_MAX_CONCURRENCY
    engines: tuple[str, ...] = ENGINES  # serving engines searched (tilecast.serving.engines)

    @classmethod
    def from_mapping(cls, cfg: Mapping | None) -> ServeSearch:
        cfg = dict(cfg or {})
        dense = cfg.get("concurrency") == "dense"
        if dense:
            cfg.pop("concurrency")
        out = search_fields(cls, cfg, "search.serve", flags=("disaggregated",), ints=("max_concurrency",),
                            words=("engines",))
        for engine in out.get("engines", ()):
            check_engine(engine)
        return cls(**out, **({"concurrency": "dense"} if dense else {}))


def search_fields(cls: type, cfg: Mapping | None, section: str, flags: tuple[str, ...] = (),
                  ints: tuple[str, ...] = (), words: tuple[str, ...] = ()) -> dict:
    """A search-space config (``conf/plan.yaml`` ``search.serve`` / ``search.train``) as the fields of ``cls``:
    ``flags`` true / false, ``ints`` positive integers, ``words`` lists of names, every other field a list of
    positive integers (sorted, distinct). An unknown key or a bad value is an error naming it."""
    cfg = dict(cfg or {})
    unknown = sorted(set(cfg) - set(cls.__dataclass_fields__))
    if unknown:
        raise UserError(f"{section}: unknown key(s) {', '.join(unknown)} (known: "
                         f"{', '.join(cls.__dataclass_fields__)})")
    out: dict = {}
    for key, value in cfg.items():
        if key in flags:
            if not isinstance(value, bool):
                raise UserError(f"{section}.{key} must be true or false, got {value!r}")
            out[key] = value
        elif key in ints:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UserError(f"{section}.{key} must be a positive integer, got {value!r}")
            out[key] = value
        else:
            items = value if isinstance(value, list | tuple) else [value]
            if key in words:
                if not items:
                    raise UserError(f"{section}.{key} must not be empty")
                out[key] = tuple(dict.fromkeys(str(v) for v in items))
                continue
            if not items or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in items):
                raise UserError(f"{section}.{key} must be a list of positive integers, got {value!r}")
            out[key] = tuple(sorted(set(int(v) for v in items)))
    return out


def layout_label(row: Mapping) -> str:
    """A layout in words: ``tp4``, ``tp2 pp2``, ``tp8 ep8 adp8``, ``disagg 2 x tp2 : 1 x tp4``."""
    if row["mode"] == "disagg":
        return (f"disagg {int(row['prefill_workers'])} x tp{int(row['prefill_tp'])} : "
                f"{int(row['decode_workers'])} x tp{int(row['decode_tp'])}")
    parts = [f"tp{int(row['tp'])}"]
    for key, short in (("pp", "pp"), ("ep", "ep"), ("attention_dp", "adp")):
        if int(row[key]) > 1:
            parts.append(f"{short}{int(row[key])}")
    return " ".join(parts)


def gpus_per_replica(frame: pd.DataFrame) -> np.ndarray:
    """GPUs one replica holds: ``tp x pp x attention_dp`` aggregated (expert parallelism reuses those GPUs),
    ``prefill_workers x prefill_tp + decode_workers x decode_tp`` disaggregated."""
    agg = (frame["tp"] * frame["pp"] * frame["attention_dp"]).to_numpy(dtype=np.int64)
    dis = (frame["prefill_workers"] * frame["prefill_tp"] + frame["decode_workers"] * frame["decode_tp"]
           ).to_numpy(dtype=np.int64)
    return np.where(frame["mode"].to_numpy() == "disagg", dis, agg)


@dataclass(frozen=True)
class Answer:
    """Whether the serving path answers a layout: a row mask and the reason where it does not."""

    test: Callable[[pd.DataFrame], np.ndarray]  # True where the layout is NOT answered
    reason: str


#: what the serving forecasters do not answer yet (each row's first matching reason); a layout they learn is
#: a line removed here
NOT_ANSWERED: tuple[Answer, ...] = (
    Answer(lambda f: (f["mode"] == "disagg").to_numpy(),
           "not searched yet: disaggregated prefill / decode pools (tilecast.serving.disagg forecasts one "
           "configuration; the planner's search does not enumerate them yet)"),
    Answer(lambda f: (f["pp"] > 1).to_numpy(), "not modelled yet: pipeline-parallel serving (use tp)"),
)


def not_answered(frame: pd.DataFrame) -> pd.Series:
    """Per layout row, why the serving path does not answer it (None where it does)."""
    out = pd.Series(None, index=frame.index, dtype=object)
    for answer in reversed(NOT_ANSWERED):
        out = out.mask(answer.test(frame), answer.reason)
    return out.astype(object).where(out.notna(), None)


def serve_layouts(gpus: Sequence[str], dtypes: Sequence[str], search: ServeSearch) -> pd.DataFrame:
    """Every (GPU, dtype, layout) of the search: :data:`LAYOUT_COLUMNS`, ``layout`` (words),
    ``gpus_per_replica`` and ``layout_error`` (why the serving path does not answer it; None where it does)."""
    rows = [dict(mode="agg", tp=tp, pp=pp, ep=ep, attention_dp=adp, prefill_tp=0, prefill_workers=0, decode_tp=0,
                 decode_workers=0)
            for tp, pp, ep, adp in itertools.product(search.tp, search.pp, search.ep, search.attention_dp)]
    if search.disaggregated:
        rows += [dict(mode="disagg", tp=dtp, pp=1, ep=1, attention_dp=1, prefill_tp=ptp, prefill_workers=pw,
                      decode_tp=dtp, decode_workers=dw)
                 for ptp, pw, dtp, dw in itertools.product(search.tp, search.prefill_workers, search.tp,
                                                           search.decode_workers)]
    layouts = pd.DataFrame(rows, columns=list(LAYOUT_COLUMNS))
    layouts["layout"] = [layout_label(r) for r in layouts.to_dict("records")]
    layouts["gpus_per_replica"] = gpus_per_replica(layouts)
    layouts["layout_error"] = not_answered(layouts)
    grid = pd.MultiIndex.from_product([list(gpus), list(dtypes), range(len(layouts))],
                                      names=["gpu", "dtype", "_layout"]).to_frame(index=False)
    return pd.concat([grid[["gpu", "dtype"]], layouts.iloc[grid["_layout"].to_numpy()].reset_index(drop=True)],
                     axis=1)


__all__ = ["DEFAULT_CONCURRENCY", "DENSE_MAX_CONCURRENCY", "LAYOUT_COLUMNS", "NOT_ANSWERED", "ServeSearch",
           "gpus_per_replica", "layout_label", "not_answered", "search_fields", "serve_layouts"]

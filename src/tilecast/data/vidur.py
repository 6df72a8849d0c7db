"""Vidur profiles: ``compute/<gpu>/<org>/<model>/mlp.csv`` -> ``mlp`` (long), ``network/<node>/*.csv`` -> ``network``.

``mlp`` has one row per (source file, num_tokens, TP workers, op) with the op's kernel dims in the
project's convention (linear: ``B=1, M=tokens, N=in_features, K=out_features`` per TP rank; vector
ops: ``B=tokens, H=row length``). An op whose times are missing, NaN or not positive is rejected for
that source row only; a row whose model config is bad is rejected for every op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tilecast.data.columns import (
    BOOL,
    INT,
    LATENCY,
    NONNEG_FLOAT,
    POSITIVE_INT,
    STRING,
    CellError,
    ColumnType,
    one_of,
)
from tilecast.data.rows import Reject, SchemaError, arrow_table, read_rows, require_columns, type_rows
from tilecast.data.tables import TableJob, TableResult, rel

#: Vidur's GPU folder -> exact device string (the A100 is an 80 GB part; the brief maps it to SXM4).
GPU_DEVICES: dict[str, str] = {"a100": "NVIDIA A100-SXM4-80GB", "a40": "NVIDIA A40"}
#: network node kind -> (GPU folder, exact device string). Vidur's pairwise-NVLink A100 node is a
#: PCIe pair bridged by NVLink; its DGX node is SXM4.
NODE_DEVICES: dict[str, tuple[str, str]] = {
    "a100_dgx": ("a100", "NVIDIA A100-SXM4-80GB"),
    "a100_pairwise_nvlink": ("a100", "NVIDIA A100 80GB PCIe"),
    "a40_pairwise_nvlink": ("a40", "NVIDIA A40"),
}
COLLECTIVES = ("all_reduce", "send_recv")
STATS = ("median", "mean", "min", "max", "std")  # source suffix -> latency_<stat>_ms (median -> latency_ms)
STAT_TYPES: dict[str, ColumnType] = {"median": LATENCY, "mean": LATENCY, "min": LATENCY, "max": LATENCY,
                                     "std": NONNEG_FLOAT}
DTYPE = "fp16"
CONFIG_TYPES: dict[str, ColumnType] = {
    "n_head": POSITIVE_INT,
    "n_kv_head": POSITIVE_INT,
    "n_embd": POSITIVE_INT,
    "n_expanded_embd": POSITIVE_INT,
    "vocab_size": POSITIVE_INT,
    "use_gated_mlp": BOOL,
    "num_tokens": POSITIVE_INT,
    "num_tensor_parallel_workers": POSITIVE_INT,
}
CONFIG = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp")


def _latency_column(stat: str) -> str:
    return "latency_ms" if stat == "median" else f"latency_{stat}_ms"


@dataclass(frozen=True)
class Layer:
    """One profiled layer shape: model config, tokens and TP degree."""

    n_head: int
    n_kv_head: int
    n_embd: int
    n_expanded_embd: int
    gated: bool
    tokens: int
    tp: int

    def per_rank(self, what: str, total: int) -> int:
        """``total / tp``; :class:`CellError` when TP does not divide it."""
        if total % self.tp:
            raise CellError(f"{what} {total} is not divisible by {self.tp} tensor-parallel workers")
        return total // self.tp

    @property
    def head_dim(self) -> int:
        if self.n_embd % self.n_head:
            raise CellError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")
        return self.n_embd // self.n_head

    @property
    def qkv_width(self) -> int:
        """attn_pre_proj output per rank: (n_head + 2 n_kv_head) head_dim / TP."""
        return self.per_rank("(n_head + 2 n_kv_head) head_dim", (self.n_head + 2 * self.n_kv_head) * self.head_dim)

    @property
    def rope_width(self) -> int:
        """Elements rope rotates per token and rank: q and k, (n_head + n_kv_head) head_dim / TP."""
        return self.per_rank("(n_head + n_kv_head) head_dim", (self.n_head + self.n_kv_head) * self.head_dim)

    @property
    def attn_width(self) -> int:
        """attn_post_proj input per rank: n_head head_dim / TP."""
        return self.per_rank("n_head head_dim", self.n_head * self.head_dim)

    @property
    def up_width(self) -> int:
        """mlp_up_proj output per rank: (2 if gated else 1) n_expanded_embd / TP."""
        return self.per_rank("up-projection width", (2 if self.gated else 1) * self.n_expanded_embd)

    @property
    def mlp_width(self) -> int:
        """mlp_act output and mlp_down_proj input per rank: n_expanded_embd / TP."""
        return self.per_rank("n_expanded_embd", self.n_expanded_embd)


@dataclass(frozen=True)
class VidurOp:
    """A Vidur op: the project's op name (plain, or gated/non-gated) and its shape.

    ``shape`` gives (in_features, out_features) of a linear op, or the row length H of a vector op.
    """

    linear: bool
    shape: Callable[[Layer], tuple[int, int] | int]
    name: str = ""
    gated_names: tuple[str, str] = ("", "")  # (gated model, non-gated model)

    def op_name(self, gated: bool) -> str:
        if self.name:
            return self.name
        return self.gated_names[0] if gated else self.gated_names[1]

    def dims(self, layer: Layer) -> dict[str, int]:
        """Kernel dims: linear ``B=1, M=tokens, N=in, K=out``; vector ``B=tokens, H=row length``."""
        shape = self.shape(layer)
        if self.linear:
            n_in, n_out = shape
            return {"B": 1, "M": layer.tokens, "N": n_in, "K": n_out}
        return {"B": layer.tokens, "H": shape}


_NORM = ("rmsnorm", "ln")  # gated (llama-style) models use RMSNorm
#: Vidur op -> project op and dims, in Vidur's order.
OPS: dict[str, VidurOp] = {
    "emb": VidurOp(False, lambda x: x.n_embd, "embedding"),
    "input_layernorm": VidurOp(False, lambda x: x.n_embd, gated_names=_NORM),
    "attn_pre_proj": VidurOp(True, lambda x: (x.n_embd, x.qkv_width), "linear"),
    "attn_rope": VidurOp(False, lambda x: x.rope_width, "rope"),
    "attn_post_proj": VidurOp(True, lambda x: (x.attn_width, x.n_embd), "linear"),
    "post_attention_layernorm": VidurOp(False, lambda x: x.n_embd, gated_names=_NORM),
    "mlp_up_proj": VidurOp(True, lambda x: (x.n_embd, x.up_width), "linear"),
    "mlp_act": VidurOp(False, lambda x: x.mlp_width, gated_names=("silu_mul", "gelu")),
    "mlp_down_proj": VidurOp(True, lambda x: (x.mlp_width, x.n_embd), "linear"),
    "add": VidurOp(False, lambda x: x.n_embd, "add"),
}

_DIM = ColumnType(POSITIVE_INT.arrow, POSITIVE_INT.parse, nullable=True)
MLP_TYPES: dict[str, ColumnType] = {
    "gpu": STRING, "device": STRING, "model": STRING, "num_tokens": POSITIVE_INT, "tp": POSITIVE_INT,
    "op": STRING, "OPName": STRING, "B": _DIM, "M": _DIM, "N": _DIM, "K": _DIM, "H": _DIM, "dtype": STRING,
    **{_latency_column(s): STAT_TYPES[s] for s in STATS},
    **{c: CONFIG_TYPES[c] for c in CONFIG},
}
NETWORK_TYPES: dict[str, ColumnType] = {
    "node": STRING, "gpu": STRING, "device": STRING, "collective": STRING, "size": POSITIVE_INT,
    "num_workers": POSITIVE_INT, "devices_per_node": POSITIVE_INT, "max_devices_per_node": POSITIVE_INT,
    "dtype": STRING, **{_latency_column(s): STAT_TYPES[s] for s in STATS},
}


def _stat_column(op: str, stat: str) -> str:
    return f"time_stats.{op}.{stat}"


def _mlp_file(path: Path, source: Path, out: dict[str, list], rejects: list[Reject]) -> None:
    shown = rel(path, source)
    parts = Path(shown).parts  # compute/<gpu>/<org>/<model>/mlp.csv
    gpu, model = parts[1], f"{parts[2]}/{parts[3]}"
    if gpu not in GPU_DEVICES:
        raise SchemaError(f"{shown}: unknown GPU folder {gpu!r}; known: {', '.join(GPU_DEVICES)}")
    src = read_rows(path, shown)
    require_columns(src.header, CONFIG_TYPES, shown)
    stat_ops = {c.split(".")[1] for c in src.header if c.startswith("time_stats.")}
    unknown = sorted(stat_ops - set(OPS))
    if unknown:
        raise SchemaError(f"{shown}: unknown ops {unknown}; known: {', '.join(OPS)}")
    ops = [op for op in OPS if op in stat_ops]
    require_columns(src.header, [_stat_column(op, s) for op in ops for s in STATS], shown)
    config, lines, bad = type_rows(src, shown, CONFIG_TYPES, list(CONFIG_TYPES))
    rejects += bad
    index = {c: i for i, c in enumerate(src.header)}
    by_line = dict(zip(src.lines, src.rows, strict=True))
    for r, line in enumerate(lines):
        cfg = {c: config[c][r] for c in CONFIG_TYPES}
        layer = Layer(cfg["n_head"], cfg["n_kv_head"], cfg["n_embd"], cfg["n_expanded_embd"], cfg["use_gated_mlp"],
                      cfg["num_tokens"], cfg["num_tensor_parallel_workers"])
        try:
            dims = {op: OPS[op].dims(layer) for op in ops}
        except CellError as exc:
            rejects.append(Reject(shown, line, f"model config: {exc}"))
            continue
        record = by_line[line]
        for op in ops:
            try:
                stats = {s: STAT_TYPES[s].cell(_stat_column(op, s), record[index[_stat_column(op, s)]])
                         for s in STATS}
            except CellError as exc:
                rejects.append(Reject(shown, line, str(exc)))
                continue
            row = {"gpu": gpu, "device": GPU_DEVICES[gpu], "model": model, "num_tokens": layer.tokens,
                   "tp": layer.tp, "op": op, "OPName": OPS[op].op_name(layer.gated),
                   **{d: dims[op].get(d) for d in ("B", "M", "N", "K", "H")}, "dtype": DTYPE,
                   **{_latency_column(s): stats[s] for s in STATS}, **{c: cfg[c] for c in CONFIG}}
            for c, v in row.items():
                out[c].append(v)


def _mlp_table(source: Path) -> TableResult:
    files = sorted((source / "compute").glob("*/*/*/mlp.csv"))
    if not files:
        raise SchemaError("compute/<gpu>/<org>/<model>/mlp.csv: no source files")
    out: dict[str, list] = {c: [] for c in MLP_TYPES}
    rejects: list[Reject] = []
    for path in files:
        _mlp_file(path, source, out, rejects)
    return TableResult("mlp", arrow_table(out, MLP_TYPES), rejects, [rel(p, source) for p in files])


def _network_table(source: Path) -> TableResult:
    files = sorted(p for p in (source / "network").glob("*/*.csv") if p.stem in COLLECTIVES)
    if not files:
        raise SchemaError("network/<node>/{all_reduce,send_recv}.csv: no source files")
    out: dict[str, list] = {c: [] for c in NETWORK_TYPES}
    rejects: list[Reject] = []
    ranks: set[int] = set()
    for path in files:
        shown = rel(path, source)
        node, collective = path.parent.name, path.stem
        if node not in NODE_DEVICES:
            raise SchemaError(f"{shown}: unknown node kind {node!r}; known: {', '.join(NODE_DEVICES)}")
        stat_columns = {_stat_column(collective, s): s for s in STATS}
        types = {"collective": one_of((collective,)), "size": POSITIVE_INT, "num_workers": POSITIVE_INT,
                 "devices_per_node": POSITIVE_INT, "max_devices_per_node": POSITIVE_INT,
                 "rank": INT,
                 **{c: STAT_TYPES[s] for c, s in stat_columns.items()}}
        src = read_rows(path, shown)
        require_columns(src.header, types, shown)
        values, _, bad = type_rows(src, shown, types, list(types))
        rejects += bad
        ranks.update(values["rank"])
        n = len(values["size"])
        gpu, device = NODE_DEVICES[node]
        fixed = {"node": node, "gpu": gpu, "device": device, "dtype": DTYPE}
        for c in NETWORK_TYPES:
            if c in fixed:
                out[c] += [fixed[c]] * n
            elif c.startswith("latency_"):
                stat = next(s for s in STATS if _latency_column(s) == c)
                out[c] += values[_stat_column(collective, stat)]
            else:
                out[c] += values[c]
    if len(ranks) > 1:
        raise SchemaError(f"network: column 'rank' was dropped as constant but has values {sorted(ranks)}")
    notes = ["dropped the unnamed index column and constant `rank`" + (f" = {ranks.pop()}" if ranks else "")]
    return TableResult("network", arrow_table(out, NETWORK_TYPES), rejects, [rel(p, source) for p in files], notes)


def plan_vidur(source: Path) -> list[TableJob]:
    """The two Vidur tables: ``mlp`` and ``network``."""
    return [TableJob("mlp", _mlp_table), TableJob("network", _network_table)]

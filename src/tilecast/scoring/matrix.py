"""Config matrix (``conf/matrix/<name>.yaml``) -> validated :class:`Matrix` -> one row per cell.

A matrix lists models, GPUs, batch sizes, sequence lengths, modes, parallel layouts, fused options
and precisions (``dtypes``, default ``[fp32]``: the NeuSight-compatible path); the cells are their
cross product minus the ``exclude`` rules (and, unless ``respect_max_positions`` is off, sequence
lengths longer than a model's context). ``amp_bf16`` is a training recipe: its inference cells are
dropped from the product like a too-long sequence (no rule needed). ``all`` stands for the whole
catalog. Every name is checked before any work starts: an unknown GPU, model or dtype is an error
listing the known ones. A (GPU, dtype) pair the GPU has no peak for is not an expansion error: those
cells are kept and carry that error when scored (the other cells are unaffected).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tilecast.errors import UserError
from tilecast.forecast.serve import SERVE_DTYPES, SERVE_FAMILIES
from tilecast.graph.parallel import ParallelismError, parse_parallel
from tilecast.specs import UnknownSpecError, all_gpus, all_models, get_gpu, get_model
from tilecast.specs.layout import parse_layout
from tilecast.specs.workload import MODES
from tilecast.tiles.dtypes import WORKLOAD_DTYPES

#: the columns that identify a cell, in order; a graph depends on all but ``gpu``
CELL_KEYS = ("model", "gpu", "batch", "seq_len", "mode", "parallel", "fused", "dtype")
GRAPH_KEYS = ("model", "batch", "seq_len", "mode", "parallel", "fused", "dtype")
#: what a built graph depends on: the graph keys, and for the graphs of a serve cell the KV length a decode
#: step attends over and ``serving`` (a serving forward computes the logits of the last token only)
BUILD_KEYS = (*GRAPH_KEYS, "kv_len", "serving")
#: the keys of a serve cell (a ``serve`` section), in order
SERVE_KEYS = ("model", "gpu", "dtype", "tp", "isl", "osl", "concurrency")
NO_PARALLEL = "none"
DEFAULT_DTYPE = "fp32"
#: workload dtypes that only train (their inference cells are dropped from the product)
TRAINING_ONLY_DTYPES = frozenset({"amp_bf16"})
_FIELDS = ("name", "description", "models", "gpus", "batch_sizes", "seq_lens", "modes", "parallel", "fused",
           "dtypes", "exclude", "respect_max_positions", "serve", "train_runs")
_SERVE_FIELDS = ("models", "gpus", "dtypes", "tp", "isl_osl", "concurrency", "exclude")


class MatrixError(UserError):
    """A matrix config that cannot be expanded (names the matrix, the field and the value)."""


#: memory a scored cell adds at the peak of a run, every process of it (the expanded cells, the graphs' op
#: rows, the per-GPU summaries, the tables): the job's peak RSS on the nightly grid less the smoke grid's,
#: per cell (1,558 - 1,193 MB over 109,377 more cells: ``benchmarks/scoring.md``, 2026-12-01)
BYTES_PER_CELL = 3500


def check_size(matrix: Matrix, max_cells: int | None) -> int:
    """The matrix's cell count before exclusions (an upper bound of what is scored); a matrix above
    ``max_cells`` is refused before anything is expanded, naming its size and a memory estimate."""
    n = matrix.size_before_exclusions
    if max_cells is not None and n > max_cells:
        raise MatrixError(f"matrix {matrix.name!r} has {n:,} cells before exclusions (about "
                          f"{n * BYTES_PER_CELL / 2**30:,.1f} GiB to score), above max_cells={max_cells:,}; "
                          "narrow the matrix or raise max_cells (null: no limit)")
    return n


def canonical_parallel(value: object) -> str:
    """The labels' spelling of a parallel scheme (``dp4``, ``tp4``, ``pp4_1``) or ``"none"``."""
    try:
        parsed = parse_parallel(value)
    except ParallelismError as exc:
        raise MatrixError(str(exc)) from None
    return NO_PARALLEL if parsed is None else parsed.tag


def n_gpus_of(parallel: str) -> int:
    """GPUs a cell occupies: the parallel degree (1 without parallelism; a mixture-of-experts layout's tag, e.g.
    ``tp1dp8ep8``: its ``tp x dp`` GPUs)."""
    try:
        parsed = parse_parallel(parallel)
    except ParallelismError:
        return parse_layout(parallel).gpus
    return 1 if parsed is None else parsed.gpus


@dataclass(frozen=True)
class ServeMatrix:
    """A matrix's serve section: every (model, GPU, dtype, tp, (isl, osl), concurrency) minus ``exclude``."""

    models: tuple[str, ...]
    gpus: tuple[str, ...]
    dtypes: tuple[str, ...] = ("bf16",)
    tp: tuple[int, ...] = (1,)
    isl_osl: tuple[tuple[int, int], ...] = ((1024, 1024),)
    concurrency: tuple[int, ...] = (1,)
    exclude: tuple[Mapping[str, tuple], ...] = ()

    @property
    def size_before_exclusions(self) -> int:
        return (len(self.models) * len(self.gpus) * len(self.dtypes) * len(self.tp) * len(self.isl_osl)
                * len(self.concurrency))


#: the keys of a training-run cell (a ``train_runs`` section), in order
TRAIN_KEYS = ("model", "gpu", "n_gpus", "seq_len", "micro_batch", "global_batch", "dtype", "sharding",
              "activation_checkpointing")
_TRAIN_FIELDS = ("models", "gpus", "n_gpus", "seq_len", "micro_batch", "global_batch", "dtypes", "sharding",
                 "activation_checkpointing", "gpus_per_node", "train_tokens")


@dataclass(frozen=True)
class TrainMatrix:
    """A matrix's training runs at scale: every (model, GPU, GPU count, dtype, sharding, checkpointing) of
    ``seq_len``-token sequences in micro-batches of ``micro_batch``, ``global_batch`` sequences per step
    (gradient accumulation fills the rest), priced for ``train_tokens`` tokens."""

    models: tuple[str, ...]
    gpus: tuple[str, ...]
    n_gpus: tuple[int, ...]
    seq_len: int = 4096
    micro_batch: int = 1
    global_batch: int = 1024
    dtypes: tuple[str, ...] = ("amp_bf16",)
    sharding: tuple[str, ...] = ("zero3",)
    activation_checkpointing: tuple[str, ...] = ("full",)
    gpus_per_node: int = 8
    train_tokens: float = 1e12

    @property
    def size(self) -> int:
        return (len(self.models) * len(self.gpus) * len(self.n_gpus) * len(self.dtypes) * len(self.sharding)
                * len(self.activation_checkpointing))


@dataclass(frozen=True)
class Matrix:
    """A validated matrix: catalog keys, positive sizes, known modes, parsed exclusion rules."""

    name: str
    models: tuple[str, ...]
    gpus: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    seq_lens: tuple[int, ...]
    modes: tuple[str, ...]
    parallel: tuple[str, ...] = (NO_PARALLEL,)
    fused: tuple[bool, ...] = (False,)
    dtypes: tuple[str, ...] = (DEFAULT_DTYPE,)
    exclude: tuple[Mapping[str, tuple], ...] = ()
    respect_max_positions: bool = True
    description: str = ""
    serve: ServeMatrix | None = None
    train_runs: TrainMatrix | None = None

    @property
    def size_before_exclusions(self) -> int:
        """Cells of the cross products (the serve and training-run sections' included), before any exclusion."""
        return (len(self.models) * len(self.gpus) * len(self.batch_sizes) * len(self.seq_lens) * len(self.modes)
                * len(self.parallel) * len(self.fused) * len(self.dtypes)
                + (self.serve.size_before_exclusions if self.serve is not None else 0)
                + (self.train_runs.size if self.train_runs is not None else 0))


def matrix_dtypes(matrix: Matrix) -> tuple[str, ...]:
    """Every dtype a matrix's cells run in (grid, serve and training-run sections), in order, once each."""
    return tuple(dict.fromkeys(matrix.dtypes + (matrix.serve.dtypes if matrix.serve else ())
                               + (matrix.train_runs.dtypes if matrix.train_runs else ())))


def matrix_models(matrix: Matrix) -> tuple[str, ...]:
    """Every model a matrix's cells run (grid, serve and training-run sections), in order, once each."""
    return tuple(dict.fromkeys(matrix.models + (matrix.serve.models if matrix.serve else ())
                               + (matrix.train_runs.models if matrix.train_runs else ())))


def _as_list(name: str, field: str, value: Any) -> list[Any]:
    if isinstance(value, (str, int, bool)):
        return [value]
    if isinstance(value, Sequence) or hasattr(value, "__iter__"):
        out = list(value)
        if not out:
            raise MatrixError(f"matrix {name!r}: field {field!r} is empty")
        return out
    raise MatrixError(f"matrix {name!r}: field {field!r} has invalid value {value!r} (expected a list)")


def _catalog_keys(name: str, field: str, value: Any, kind: str) -> tuple[str, ...]:
    """Catalog keys for ``all`` or a list of keys / device names; every unknown name reported at once."""
    catalog = all_gpus() if kind == "GPU" else all_models()
    if value == "all":
        return tuple(catalog)
    lookup = get_gpu if kind == "GPU" else get_model
    keys, errors = [], []
    for item in _as_list(name, field, value):
        try:
            keys.append(lookup(str(item)).key)
        except UnknownSpecError as exc:
            errors.append(str(exc))
    if errors:
        raise UnknownSpecError(f"matrix {name!r}, field {field!r}: " + "; ".join(errors))
    return tuple(dict.fromkeys(keys))


def _positive_ints(name: str, field: str, value: Any) -> tuple[int, ...]:
    items = _as_list(name, field, value)
    for v in items:
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise MatrixError(f"matrix {name!r}: field {field!r} has invalid value {v!r} (expected a positive integer)")
    return tuple(dict.fromkeys(items))


def _modes(name: str, value: Any) -> tuple[str, ...]:
    items = _as_list(name, "modes", value)
    for v in items:
        if v not in MODES:
            raise MatrixError(f"matrix {name!r}: field 'modes' has invalid value {v!r} (expected one of "
                              f"{', '.join(MODES)})")
    return tuple(dict.fromkeys(items))


def _parallel(name: str, value: Any) -> tuple[str, ...]:
    items = []
    for v in _as_list(name, "parallel", value):
        try:
            items.append(canonical_parallel(v))
        except MatrixError as exc:
            raise MatrixError(f"matrix {name!r}: field 'parallel': {exc}") from None
    return tuple(dict.fromkeys(items))


def _bools(name: str, value: Any) -> tuple[bool, ...]:
    items = _as_list(name, "fused", value)
    for v in items:
        if not isinstance(v, bool):
            raise MatrixError(f"matrix {name!r}: field 'fused' has invalid value {v!r} (expected true or false)")
    return tuple(dict.fromkeys(items))


def _dtypes(name: str, value: Any, field: str = "dtypes", known: tuple[str, ...] = WORKLOAD_DTYPES
            ) -> tuple[str, ...]:
    items = _as_list(name, field, value)
    for v in items:
        if v not in known:
            raise MatrixError(f"matrix {name!r}: field {field!r} has invalid value {v!r} (expected one of "
                              f"{', '.join(known)})")
    return tuple(dict.fromkeys(items))


_VALUE_CHECKS = {
    "model": lambda n, v: _catalog_keys(n, "exclude.model", v, "model"),
    "gpu": lambda n, v: _catalog_keys(n, "exclude.gpu", v, "GPU"),
    "batch": lambda n, v: _positive_ints(n, "exclude.batch", v),
    "seq_len": lambda n, v: _positive_ints(n, "exclude.seq_len", v),
    "mode": _modes,
    "parallel": _parallel,
    "fused": _bools,
    "dtype": lambda n, v: _dtypes(n, v, "exclude.dtype"),
}


def _exclusions(name: str, rules: Any, checks: Mapping[str, Any] | None = None, field: str = "exclude"
                ) -> tuple[Mapping[str, tuple], ...]:
    """Each rule maps cell keys to a value or a list; a cell matching every key of a rule is dropped."""
    checks = _VALUE_CHECKS if checks is None else checks
    out = []
    for i, rule in enumerate(_as_list(name, field, rules) if rules else []):
        if not isinstance(rule, Mapping) or not rule:
            raise MatrixError(f"matrix {name!r}: {field}[{i}] has invalid value {rule!r} "
                              f"(expected a mapping of cell keys, e.g. {{mode: training, fused: true}})")
        parsed = {}
        for key, value in rule.items():
            if key not in checks:
                raise MatrixError(f"matrix {name!r}: {field}[{i}] names unknown key {key!r}; "
                                  f"known: {', '.join(checks)}")
            parsed[key] = checks[key](name, value)
        out.append(parsed)
    return tuple(out)


def _isl_osl(name: str, value: Any) -> tuple[tuple[int, int], ...]:
    pairs = []
    for v in _as_list(name, "serve.isl_osl", value):
        if not (isinstance(v, Sequence) and not isinstance(v, str) and len(v) == 2):
            raise MatrixError(f"matrix {name!r}: field 'serve.isl_osl' has invalid value {v!r} (expected "
                              "[isl, osl] pairs, e.g. [[1024, 1024], [8192, 1024]])")
        _positive_ints(name, "serve.isl_osl", list(v))
        pairs.append((int(v[0]), int(v[1])))
    return tuple(dict.fromkeys(pairs))


_SERVE_CHECKS = {
    "model": lambda n, v: _catalog_keys(n, "serve.exclude.model", v, "model"),
    "gpu": lambda n, v: _catalog_keys(n, "serve.exclude.gpu", v, "GPU"),
    "dtype": lambda n, v: _dtypes(n, v, "serve.exclude.dtype", SERVE_DTYPES),
    **{k: (lambda key: lambda n, v: _positive_ints(n, f"serve.exclude.{key}", v))(k)
       for k in ("tp", "isl", "osl", "concurrency")},
}


def _serve(name: str, cfg: Any) -> ServeMatrix | None:
    """The ``serve`` section (None when absent); its models must be decoders serving is modelled for."""
    if cfg is None:
        return None
    if not isinstance(cfg, Mapping):
        raise MatrixError(f"matrix {name!r}: field 'serve' has invalid value {cfg!r} (expected a mapping)")
    unknown = sorted(set(cfg) - set(_SERVE_FIELDS))
    if unknown:
        raise MatrixError(f"matrix {name!r}: serve section has unknown field {unknown[0]!r}; known fields: "
                          f"{', '.join(_SERVE_FIELDS)}")
    for required in ("models", "gpus", "concurrency"):
        if cfg.get(required) is None:
            raise MatrixError(f"matrix {name!r}: serve section misses field {required!r}")
    models = _catalog_keys(name, "serve.models", cfg["models"], "model")
    for m in models:
        if get_model(m).family not in SERVE_FAMILIES:
            raise MatrixError(f"matrix {name!r}: field 'serve.models': {m} is a {get_model(m).family!r} model; "
                              f"serving is modelled for the decoder families {', '.join(SERVE_FAMILIES)}")
    return ServeMatrix(
        models=models, gpus=_catalog_keys(name, "serve.gpus", cfg["gpus"], "GPU"),
        dtypes=_dtypes(name, cfg.get("dtypes", ["bf16"]), "serve.dtypes", SERVE_DTYPES),
        tp=_positive_ints(name, "serve.tp", cfg.get("tp", [1])),
        isl_osl=_isl_osl(name, cfg.get("isl_osl", [[1024, 1024]])),
        concurrency=_positive_ints(name, "serve.concurrency", cfg["concurrency"]),
        exclude=_exclusions(name, cfg.get("exclude"), _SERVE_CHECKS, "serve.exclude"))


def _train_runs(name: str, cfg: Any) -> TrainMatrix | None:
    """The ``train_runs`` section (None when absent): names and settings checked as a TrainRun checks them."""
    if cfg is None:
        return None
    from tilecast.specs.train_run import CHECKPOINTING, SHARDINGS, TRAIN_DTYPES

    if not isinstance(cfg, Mapping):
        raise MatrixError(f"matrix {name!r}: field 'train_runs' has invalid value {cfg!r} (expected a mapping)")
    unknown = sorted(set(cfg) - set(_TRAIN_FIELDS))
    if unknown:
        raise MatrixError(f"matrix {name!r}: train_runs section has unknown field {unknown[0]!r}; known fields: "
                          f"{', '.join(_TRAIN_FIELDS)}")
    for required in ("models", "gpus", "n_gpus"):
        if cfg.get(required) is None:
            raise MatrixError(f"matrix {name!r}: train_runs section misses field {required!r}")

    def one_int(key: str, default: int) -> int:
        return _positive_ints(name, f"train_runs.{key}", cfg.get(key, default))[0]

    def names(key: str, table, default: str) -> tuple[str, ...]:
        out = []
        for v in _as_list(name, f"train_runs.{key}", cfg.get(key, [default])):
            text = str(v).lower()
            if text not in table:
                raise MatrixError(f"matrix {name!r}: field 'train_runs.{key}' has invalid value {v!r} (expected one "
                                  f"of {', '.join(table)})")
            out.append(table[text] if isinstance(table, dict) else text)
        return tuple(dict.fromkeys(out))

    tokens = cfg.get("train_tokens", 1e12)
    if isinstance(tokens, bool) or not isinstance(tokens, int | float) or not tokens > 0:
        raise MatrixError(f"matrix {name!r}: field 'train_runs.train_tokens' has invalid value {tokens!r} (expected "
                          "a positive number of tokens, e.g. 1.0e+12)")
    return TrainMatrix(
        models=_catalog_keys(name, "train_runs.models", cfg["models"], "model"),
        gpus=_catalog_keys(name, "train_runs.gpus", cfg["gpus"], "GPU"),
        n_gpus=_positive_ints(name, "train_runs.n_gpus", cfg["n_gpus"]),
        seq_len=one_int("seq_len", 4096), micro_batch=one_int("micro_batch", 1),
        global_batch=one_int("global_batch", 1024), dtypes=names("dtypes", TRAIN_DTYPES, "amp_bf16"),
        sharding=names("sharding", SHARDINGS, "zero3"),
        activation_checkpointing=names("activation_checkpointing", CHECKPOINTING, "full"),
        gpus_per_node=one_int("gpus_per_node", 8), train_tokens=float(tokens))


def expand_train_runs(matrix: Matrix) -> pd.DataFrame:
    """The training-run section's cells (columns :data:`TRAIN_KEYS`); empty without one."""
    tr = matrix.train_runs
    if tr is None:
        return pd.DataFrame({k: pd.Series(dtype=np.int64 if k in ("n_gpus", "seq_len", "micro_batch", "global_batch")
                                           else object) for k in TRAIN_KEYS})
    cells = pd.MultiIndex.from_product([tr.models, tr.gpus, tr.n_gpus, tr.dtypes, tr.sharding,
                                        tr.activation_checkpointing]).to_frame(index=False)
    return pd.DataFrame({"model": cells[0], "gpu": cells[1], "n_gpus": cells[2].astype("int64"),
                         "seq_len": np.int64(tr.seq_len), "micro_batch": np.int64(tr.micro_batch),
                         "global_batch": np.int64(tr.global_batch), "dtype": cells[3], "sharding": cells[4],
                         "activation_checkpointing": cells[5]})[list(TRAIN_KEYS)]


def load_matrix(config: Mapping[str, Any], name: str | None = None) -> Matrix:
    """Validate a matrix mapping (a composed ``matrix`` node or a plain dict) into a :class:`Matrix`."""
    cfg = dict(config)
    name = str(cfg.get("name") or name or "matrix")
    unknown = sorted(set(cfg) - set(_FIELDS))
    if unknown:
        raise MatrixError(f"matrix {name!r}: unknown field {unknown[0]!r}; known fields: {', '.join(_FIELDS)}")
    for required in ("models", "gpus", "batch_sizes", "seq_lens", "modes"):
        if cfg.get(required) is None:
            raise MatrixError(f"matrix {name!r}: missing field {required!r}")
    respect = cfg.get("respect_max_positions", True)
    if not isinstance(respect, bool):
        raise MatrixError(f"matrix {name!r}: field 'respect_max_positions' has invalid value {respect!r}")
    return Matrix(
        name=name,
        description=str(cfg.get("description") or ""),
        models=_catalog_keys(name, "models", cfg["models"], "model"),
        gpus=_catalog_keys(name, "gpus", cfg["gpus"], "GPU"),
        batch_sizes=_positive_ints(name, "batch_sizes", cfg["batch_sizes"]),
        seq_lens=_positive_ints(name, "seq_lens", cfg["seq_lens"]),
        modes=_modes(name, cfg["modes"]),
        parallel=_parallel(name, cfg.get("parallel", [NO_PARALLEL])),
        fused=_bools(name, cfg.get("fused", [False])),
        dtypes=_dtypes(name, [DEFAULT_DTYPE] if cfg.get("dtypes") is None else cfg["dtypes"]),
        exclude=_exclusions(name, cfg.get("exclude")),
        respect_max_positions=respect,
        serve=_serve(name, cfg.get("serve")),
        train_runs=_train_runs(name, cfg.get("train_runs")),
    )


def _keep(cells: pd.DataFrame, rules: tuple[Mapping[str, tuple], ...]) -> np.ndarray:
    """Cells matching no rule (a rule matches a cell that has one of its values for every key)."""
    keep = np.ones(len(cells), dtype=bool)
    for rule in rules:
        hit = np.ones(len(cells), dtype=bool)
        for key, values in rule.items():
            hit &= cells[key].isin(list(values)).to_numpy()
        keep &= ~hit
    return keep


def expand_serve(matrix: Matrix) -> pd.DataFrame:
    """The serve section's cells (columns :data:`SERVE_KEYS` plus ``n_gpus`` = tp); empty without one.
    (isl, osl) pairs beyond a model's positions are dropped."""
    serve = matrix.serve
    if serve is None:
        return pd.DataFrame({k: pd.Series(dtype=object if k in ("model", "gpu", "dtype") else np.int64)
                             for k in (*SERVE_KEYS, "n_gpus")})
    pairs = pd.MultiIndex.from_product([serve.models, serve.gpus, serve.dtypes, serve.tp, range(len(serve.isl_osl)),
                                        serve.concurrency]).to_frame(index=False)
    isl_osl = np.array(serve.isl_osl, dtype=np.int64)[pairs[4].to_numpy()]
    cells = pd.DataFrame({"model": pairs[0], "gpu": pairs[1], "dtype": pairs[2], "tp": pairs[3],
                          "isl": isl_osl[:, 0], "osl": isl_osl[:, 1], "concurrency": pairs[5]})
    keep = _keep(cells, serve.exclude)
    max_pos = cells["model"].map({k: get_model(k).max_positions for k in serve.models}).to_numpy()
    keep &= (max_pos == 0) | ((cells["isl"] + cells["osl"]).to_numpy() <= max_pos)
    cells = cells.loc[keep].reset_index(drop=True)
    for col in ("tp", "isl", "osl", "concurrency"):
        cells[col] = cells[col].astype("int64")
    cells["n_gpus"] = cells["tp"]
    if cells.empty:
        raise MatrixError(f"matrix {matrix.name!r}: every serve cell is excluded")
    return cells


def expand(matrix: Matrix) -> pd.DataFrame:
    """The matrix's cells, one row each (columns :data:`CELL_KEYS` plus ``n_gpus``), in a stable order."""
    axes = (matrix.models, matrix.gpus, matrix.batch_sizes, matrix.seq_lens, matrix.modes, matrix.parallel,
            matrix.fused, matrix.dtypes)
    cells = pd.MultiIndex.from_product(axes, names=list(CELL_KEYS)).to_frame(index=False)
    keep = _keep(cells, matrix.exclude)
    keep &= ~(cells["dtype"].isin(list(TRAINING_ONLY_DTYPES)) & (cells["mode"] != "training")).to_numpy()
    if matrix.respect_max_positions:
        max_pos = cells["model"].map({k: get_model(k).max_positions for k in matrix.models}).to_numpy()
        keep &= (max_pos == 0) | (cells["seq_len"].to_numpy() <= max_pos)
    cells = cells.loc[keep].reset_index(drop=True)
    cells["n_gpus"] = cells["parallel"].map({p: n_gpus_of(p) for p in matrix.parallel}).astype("int64")
    for col in ("batch", "seq_len"):
        cells[col] = cells[col].astype("int64")
    cells["fused"] = cells["fused"].astype(bool)
    if cells.empty:
        raise MatrixError(f"matrix {matrix.name!r}: every cell is excluded")
    return cells

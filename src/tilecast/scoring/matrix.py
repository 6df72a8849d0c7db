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

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tilecast.graph.parallel import ParallelismError, parse_parallel
from tilecast.specs import UnknownSpecError, all_gpus, all_models, get_gpu, get_model
from tilecast.specs.workload import MODES
from tilecast.tiles.dtypes import WORKLOAD_DTYPES

#: the columns that identify a cell, in order; a graph depends on all but ``gpu``
CELL_KEYS = ("model", "gpu", "batch", "seq_len", "mode", "parallel", "fused", "dtype")
GRAPH_KEYS = ("model", "batch", "seq_len", "mode", "parallel", "fused", "dtype")
NO_PARALLEL = "none"
DEFAULT_DTYPE = "fp32"
#: workload dtypes that only train (their inference cells are dropped from the product)
TRAINING_ONLY_DTYPES = frozenset({"amp_bf16"})
_FIELDS = ("name", "description", "models", "gpus", "batch_sizes", "seq_lens", "modes", "parallel", "fused",
           "dtypes", "exclude", "respect_max_positions")


class MatrixError(ValueError):
    """A matrix config that cannot be expanded (names the matrix, the field and the value)."""


def canonical_parallel(value: object) -> str:
    """The labels' spelling of a parallel scheme (``dp4``, ``tp4``, ``pp4_1``) or ``"none"``."""
    try:
        parsed = parse_parallel(value)
    except ParallelismError as exc:
        raise MatrixError(str(exc)) from None
    return NO_PARALLEL if parsed is None else parsed.tag


def n_gpus_of(parallel: str) -> int:
    """GPUs a cell occupies: the parallel degree (1 without parallelism)."""
    parsed = parse_parallel(parallel)
    return 1 if parsed is None else parsed.gpus


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

    @property
    def size_before_exclusions(self) -> int:
        return (len(self.models) * len(self.gpus) * len(self.batch_sizes) * len(self.seq_lens) * len(self.modes)
                * len(self.parallel) * len(self.fused) * len(self.dtypes))


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


def _dtypes(name: str, value: Any, field: str = "dtypes") -> tuple[str, ...]:
    items = _as_list(name, field, value)
    for v in items:
        if v not in WORKLOAD_DTYPES:
            raise MatrixError(f"matrix {name!r}: field {field!r} has invalid value {v!r} (expected one of "
                              f"{', '.join(WORKLOAD_DTYPES)})")
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


def _exclusions(name: str, rules: Any) -> tuple[Mapping[str, tuple], ...]:
    """Each rule maps cell keys to a value or a list; a cell matching every key of a rule is dropped."""
    out = []
    for i, rule in enumerate(_as_list(name, "exclude", rules) if rules else []):
        if not isinstance(rule, Mapping) or not rule:
            raise MatrixError(f"matrix {name!r}: exclude[{i}] has invalid value {rule!r} "
                              f"(expected a mapping of cell keys, e.g. {{mode: training, fused: true}})")
        parsed = {}
        for key, value in rule.items():
            if key not in _VALUE_CHECKS:
                raise MatrixError(f"matrix {name!r}: exclude[{i}] names unknown key {key!r}; "
                                  f"known: {', '.join(CELL_KEYS)}")
            parsed[key] = _VALUE_CHECKS[key](name, value)
        out.append(parsed)
    return tuple(out)


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
    )


def expand(matrix: Matrix) -> pd.DataFrame:
    """The matrix's cells, one row each (columns :data:`CELL_KEYS` plus ``n_gpus``), in a stable order."""
    axes = (matrix.models, matrix.gpus, matrix.batch_sizes, matrix.seq_lens, matrix.modes, matrix.parallel,
            matrix.fused, matrix.dtypes)
    cells = pd.DataFrame(list(itertools.product(*axes)), columns=list(CELL_KEYS))
    keep = np.ones(len(cells), dtype=bool)
    for rule in matrix.exclude:
        hit = np.ones(len(cells), dtype=bool)
        for key, values in rule.items():
            hit &= cells[key].isin(list(values)).to_numpy()
        keep &= ~hit
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

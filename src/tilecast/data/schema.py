"""What each ingested table must contain: column types, required columns, name mappings.

Registries, not if-chains: a new op family, dims file or model alias is one entry here.
"""

from __future__ import annotations

from tilecast.data.columns import (
    BOOL,
    DEVICE,
    DIM,
    FLOAT,
    INT,
    LATENCY,
    NONNEG_FLOAT,
    REQUIRED_STRING,
    STRING,
    ColumnType,
)

# ---- kernel tables (train per op and GPU, train_processed, test) -------------------------------
GEMM_DIMS = ("B", "M", "N", "K")
VEC_DIMS = ("B", "H")
#: conv training tables, source spelling kept (``Kernel_Szie`` is the source's typo).
CONV_DIMS = ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding")

#: dims columns of a kernel table by its name (op directory or test/processed file stem).
KERNEL_DIMS: dict[str, tuple[str, ...]] = {"bmm": GEMM_DIMS, "linear": GEMM_DIMS, "conv": CONV_DIMS}


def kernel_dims(name: str) -> tuple[str, ...]:
    """Dimension columns of kernel table ``name`` (B, H for every vector-like op)."""
    return KERNEL_DIMS.get(name, VEC_DIMS)


KERNEL_TYPES: dict[str, ColumnType] = {
    "OPName": REQUIRED_STRING,
    "Latency": LATENCY,  # ms
    "Device": DEVICE,
    "Torch Version": STRING,
    "CUDNN Version": INT,
    "Kernel Name": STRING,
    "Warps per SM": FLOAT,
    "Blocks per SM": FLOAT,
    "Grid x": INT,
    "Grid y": INT,
    "Grid z": INT,
    "Block x": INT,
    "Block y": INT,
    "Block z": INT,
    "CUDA Version": STRING,
    "Kernels": STRING,
    "large": BOOL,
    **{c: DIM for c in GEMM_DIMS + VEC_DIMS + CONV_DIMS},
}
KERNEL_REQUIRED = ("OPName", "Latency", "Device")

# ---- dims tables (no header, ';' separated) ----------------------------------------------------
#: column names of ``kernels/dims/<split>_<kind>.csv`` by kind. cnn: conv shapes, same order as
#: the conv training table (its ``Kernel_Szie`` spelled ``Kernel_Size`` here).
DIMS_COLUMNS: dict[str, tuple[str, ...]] = {
    "bmm": GEMM_DIMS,
    "linear": GEMM_DIMS,
    "vec": VEC_DIMS,
    "ln": VEC_DIMS,
    "cnn": ("B", "Input_Channel", "Output_Channel", "Kernel_Size", "Input_Size", "Stride", "Padding"),
}

# ---- end-to-end labels ---------------------------------------------------------------------------
#: model names in label file names that are not catalog keys -> catalog key. Empty on purpose:
#: NVIDIA_L4/switch4-inf-512-1 traces d_model 768, 12 heads, d_kv 64 (a Switch-Base shape), not
#: switchxl4's 1024 / 32 / 128, so it is kept under its own name rather than aliased to switchxl4.
MODEL_ALIASES: dict[str, str] = {}
#: label file name token -> mode.
MODES: dict[str, str] = {"inf": "inference", "train": "training"}
E2E_LATENCY_KEYS = ("e2e_latency",)  # must be positive (ms)

# ---- per-node labels -----------------------------------------------------------------------------
_NULLABLE_NONNEG_FLOAT = ColumnType(NONNEG_FLOAT.arrow, NONNEG_FLOAT.parse, nullable=True)
_NULLABLE_BOOL = ColumnType(BOOL.arrow, BOOL.parse, nullable=True)
NODE_TYPES: dict[str, ColumnType] = {
    "Name": REQUIRED_STRING,
    "op": REQUIRED_STRING,
    "fw_latency": NONNEG_FLOAT,
    "bw_latency": NONNEG_FLOAT,
    "acc_latency": NONNEG_FLOAT,
    # switch4 on L4 has e2e_latency / bwall_latency instead of latency
    "latency": _NULLABLE_NONNEG_FLOAT,
    "e2e_latency": _NULLABLE_NONNEG_FLOAT,
    "bwall_latency": _NULLABLE_NONNEG_FLOAT,
    "_erased": _NULLABLE_BOOL,
    "contiguous": _NULLABLE_BOOL,
}
NODE_REQUIRED = ("Name", "op", "target", "input_shapes", "output_shape", "fw_latency", "bw_latency",
                 "acc_latency", "dtype")
#: columns put first in nodes.parquet (the rest follow in source order).
NODE_FIRST = ("Name", "op", "target", "input_shapes", "output_shape", "latency", "fw_latency",
              "bw_latency", "acc_latency", "dtype")

# ---- reference graphs ----------------------------------------------------------------------------
GRAPH_COLUMNS = ("Name", "OpName", "FwOps", "BwOps", "AccOps", "Prev", "Next", "InputShapes", "OutputShape")

# ---- paper error tables --------------------------------------------------------------------------
#: model names in the paper's tables -> catalog key.
PAPER_MODELS: dict[str, str] = {
    "BERT-Large": "bert_large",
    "GPT2-Large": "gpt2_large",
    "GPT3-XL": "gpt3_xl",
    "OPT-1.3B": "opt_13",
    "GPT3-2.7B": "gpt3_27",
    "SwitchTrans": "switchxl4",
}
#: paper per-op categories -> tilecast op family.
PAPER_CATEGORIES: dict[str, str] = {
    "BMM": "bmm",
    "FC": "linear",
    "EW": "elementwise",
    "Softmax": "softmax",
    "LN": "layernorm",
}
PAPER_DISTRIBUTIONS: dict[str, str] = {"In Distribution": "in", "Out of Distribution": "out"}
#: paper e2e tables -> mode.
PAPER_E2E: dict[str, str] = {"nvidia_inf": "inference", "nvidia_train": "training"}

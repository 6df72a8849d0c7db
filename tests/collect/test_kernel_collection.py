"""Kernel collection on CPU, run as a user runs it: tiny shapes, real files in tmp_path."""

import csv

import pandas as pd
import pytest
import torch

from tilecast.collect import (
    CollectDtypeError,
    CollectError,
    KernelRequest,
    NoGpuError,
    ShapeSourceError,
    TimingPlan,
    UnsupportedOpError,
    collect_kernels,
)
from tilecast.collect.environment import cpu_name
from tilecast.collect.kernel_ops import KERNEL_OPS
from tilecast.collect.shapes import TINY, load_shapes, order_shapes

FAST = TimingPlan(warmup=1, repeats=3, fastest=2)
#: headers of the shipped kernels/test/<table>.csv files, as they are in the data
SHIPPED = {
    "gemm": "OPName,Latency,Device,Torch Version,CUDNN Version,Kernel Name,Warps per SM,Blocks per SM,Grid x,"
            "Grid y,Grid z,Block x,Block y,Block z,CUDA Version,Kernels,B,M,N,K",
    "vec": "OPName,Latency,Device,Torch Version,CUDNN Version,Kernel Name,Warps per SM,Blocks per SM,Grid x,"
           "Grid y,Grid z,Block x,Block y,Block z,CUDA Version,B,H,large",
}


def _rows(path):
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_every_op_writes_the_shipped_schema_on_cpu(tmp_path):
    req = KernelRequest(ops=list(KERNEL_OPS), shapes="tiny", plan=FAST, limit=2)
    summaries = collect_kernels(req, "cpu", tmp_path)
    assert [s.op for s in summaries] == list(KERNEL_OPS)
    assert all(s.measured == 2 and s.skipped == 0 for s in summaries)
    for table, kind in [("bmm", "gemm"), ("linear", "gemm"), ("elem", "vec"), ("softmax", "vec"), ("ln", "vec")]:
        path = tmp_path / "kernels" / f"{table}.csv"
        assert path.read_text().splitlines()[0] == SHIPPED[kind] + ",dtype,driver"
    elem = _rows(tmp_path / "kernels" / "elem.csv")
    assert sorted({r["OPName"] for r in elem}) == sorted(set(KERNEL_OPS) - {"bmm", "linear", "softmax", "ln"})
    for r in elem + _rows(tmp_path / "kernels" / "bmm.csv"):
        assert float(r["Latency"]) > 0
        assert r["Device"] == cpu_name() and r["Torch Version"] == "p" + torch.__version__.split("+")[0]
        assert r["dtype"] == "fp32"
        assert r["Kernel Name"] == r["Grid x"] == r["CUDA Version"] == r["CUDNN Version"] == r["driver"] == ""
    assert {r["large"] for r in elem} == {"False"}  # tiny shapes are far below 2^21 elements


def test_bf16_rows_carry_their_dtype_beside_fp32(tmp_path):
    for dtype in ("fp32", "bf16"):
        collect_kernels(KernelRequest(ops=["linear", "add"], dtype=dtype, plan=FAST, limit=1), "cpu", tmp_path)
    rows = _rows(tmp_path / "kernels" / "linear.csv")
    assert sorted(r["dtype"] for r in rows) == ["bf16", "fp32"]
    assert rows[0]["B"] == rows[1]["B"]  # the same (first) shape at both dtypes


def test_rerun_skips_measured_shapes_and_repairs_a_torn_last_line(tmp_path):
    req = KernelRequest(ops=["bmm"], plan=FAST)
    collect_kernels(req, "cpu", tmp_path)
    path = tmp_path / "kernels" / "bmm.csv"
    first = _rows(path)
    assert len(first) == len(TINY[("B", "M", "N", "K")])
    again = collect_kernels(req, "cpu", tmp_path)[0]
    assert (again.measured, again.already) == (0, len(first))
    assert _rows(path) == first
    text = path.read_text()
    path.write_text(text[: text.rstrip("\n").rfind("\n") + 12])  # the process died mid-way through the last row
    fixed = collect_kernels(req, "cpu", tmp_path)[0]
    assert (fixed.measured, fixed.already) == (1, len(first) - 1)
    rows = _rows(path)
    assert rows[:-1] == first[:-1]
    assert len(rows) == len(first) and len({(r["B"], r["M"], r["N"], r["K"]) for r in rows}) == len(rows)


def test_budget_and_limit_bound_the_work(tmp_path):
    s = collect_kernels(KernelRequest(ops=["add"], plan=FAST, budget_s=0.0), "cpu", tmp_path)[0]
    assert (s.measured, s.left) == (0, len(TINY[("B", "H")]))
    assert not (tmp_path / "kernels" / "elem.csv").exists()
    s = collect_kernels(KernelRequest(ops=["add"], plan=FAST, limit=1), "cpu", tmp_path)[0]
    assert (s.planned, s.measured) == (1, 1)


def test_order_is_a_seeded_shuffle():
    shapes = [(i, 8) for i in range(50)]
    a, b = order_shapes(shapes, True, 3, 10), order_shapes(shapes, True, 3, 10)
    assert a == b and len(set(a)) == 10 and a != shapes[:10]
    assert order_shapes(shapes, False, 3, None) == shapes


def test_bad_inputs_fail_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(UnsupportedOpError, match="'conv2d'.*supported ops: bmm, linear"):
        collect_kernels(KernelRequest(ops=["add", "conv2d"]), "cpu", out)
    with pytest.raises(CollectDtypeError, match="'fp8'"):
        collect_kernels(KernelRequest(ops=["add"], dtype="fp8"), "cpu", out)
    with pytest.raises(CollectError, match="'tpu'"):
        collect_kernels(KernelRequest(ops=["add"]), "tpu", out)
    with pytest.raises(ShapeSourceError, match="nope"):
        collect_kernels(KernelRequest(ops=["add"], shapes=str(tmp_path / "nope.csv")), "cpu", out)
    if not torch.cuda.is_available():
        with pytest.raises(NoGpuError, match="device=cuda"):
            collect_kernels(KernelRequest(ops=["add"]), "cuda", out)
    assert not out.exists()


def test_rows_of_another_device_are_not_mixed_in(tmp_path):
    path = tmp_path / "kernels" / "elem.csv"
    path.parent.mkdir(parents=True)
    header = SHIPPED["vec"] + ",dtype,driver"
    path.write_text(header + "\nadd,0.1,NVIDIA L4,p2.1.0,8902,k,1,1,1,1,1,1,1,1,cu121,4,32,False,fp32,550\n")
    with pytest.raises(CollectError, match="NVIDIA L4"):
        collect_kernels(KernelRequest(ops=["add"], plan=FAST), "cpu", tmp_path)
    path.write_text("OPName,Latency\n")
    with pytest.raises(CollectError, match="columns"):
        collect_kernels(KernelRequest(ops=["add"], plan=FAST), "cpu", tmp_path)


def test_shape_sources_dims_tables_test_tables_and_files(tmp_path):
    root = tmp_path / "neusight"
    (root / "kernels" / "dims").mkdir(parents=True)
    (root / "kernels" / "test").mkdir(parents=True)
    pd.DataFrame({"B": [2, 2, 3], "M": [4, 4, 5], "N": [6, 6, 7], "K": [8, 8, 9]}).to_parquet(
        root / "kernels" / "dims" / "test_bmm.parquet")
    pd.DataFrame({"B": [1], "H": [2]}).to_parquet(root / "kernels" / "dims" / "test_vec.parquet")
    pd.DataFrame({"OPName": ["add", "mul", "add"], "Latency": [1.0, 1.0, 1.0], "Device": ["a", "a", "b"],
                  "B": [10, 11, 10], "H": [20, 21, 20]}).to_parquet(root / "kernels" / "test" / "elem.parquet")
    bmm, add = KERNEL_OPS["bmm"], KERNEL_OPS["add"]
    assert load_shapes("test_bmm", bmm, root) == [(2, 4, 6, 8), (3, 5, 7, 9)]
    assert load_shapes("test", add, root) == [(10, 20)]
    with pytest.raises(ShapeSourceError, match="needs B, M, N, K"):
        load_shapes("test_vec", bmm, root)
    with pytest.raises(ShapeSourceError, match="test_nope"):
        load_shapes("test_nope", bmm, root)
    with pytest.raises(ShapeSourceError, match="no rows of op 'gelu'"):
        load_shapes("test", KERNEL_OPS["gelu"], root)
    src = tmp_path / "dims.csv"
    src.write_text("8;16\n32;64\n8;16\n")  # the source's header-less dims format
    assert load_shapes(str(src), add, root) == [(8, 16), (32, 64)]
    src.write_text("B,H,extra\n3,5,x\n")
    assert load_shapes(str(src), add, root) == [(3, 5)]
    s = collect_kernels(KernelRequest(ops=["bmm"], shapes="test_bmm", plan=FAST, data_root=str(root)), "cpu",
                        tmp_path / "out")[0]
    assert s.measured == 2

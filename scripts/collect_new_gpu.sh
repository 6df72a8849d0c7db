#!/usr/bin/env bash
# First measurements of a GPU that is not in the shipped data (issue 7, item 5), in ~6 minutes of
# GPU work (~8 with the machine's start), as ONE process so the CUDA / import start is paid once.
#
# Usage (repository root, on the GPU machine; needs torch with CUDA, pandas, pyarrow, pyyaml; no
# Hydra, no install: it runs `tilecast.collect` from src/):
#     bash scripts/collect_new_gpu.sh [OUTPUT_DIR]
# OUTPUT_DIR defaults to data/collected/<gpu key> (the catalog key of the device, e.g. h200_sxm for
# "NVIDIA H200", else a key derived from its name). Re-running resumes: shapes already in the
# tables are skipped (append-only tables), labels are re-measured and replaced.
# On the project's device tool ($OUT comes back; at most 8 files, 2 folders deep), e.g.:
#     bash scripts/collect_new_gpu.sh /tmp/col 2>&1 | tee $OUT/log; tar czf $OUT/collected.tgz -C /tmp/col .
# Dry run of this script's whole path on a CPU (tiny shapes, 1-layer models, no spec step):
#     COLLECT_SMOKE=1 bash scripts/collect_new_gpu.sh /tmp/smoke
#
# What it writes under OUTPUT_DIR:
#   kernels/bmm.csv, kernels/linear.csv   fp32 and bf16 rows (dtype column)
#   kernels/elem.csv                      add addu mul mulu div divu pow powu relu gelu tanh, fp32
#   kernels/softmax.csv, kernels/ln.csv   fp32
#   kernels/<table>.skipped.jsonl         shapes that could not run (memory), with the reason
#   labels/<device dir>/gpt2_large-inf-1024-4.json    gpt2_large-train-1024-1.json
#   labels/<device dir>/bert_large-inf-512-8.json     opt_13-inf-2048-2.json   (the data's label layout, ms)
#   provenance.jsonl   one record per step: config, device, driver, torch / CUDA / cuDNN, git commit,
#                      start / end, and per op how many shapes were planned, measured, skipped, left
#   gpu_spec_draft.yaml  what=spec: name, SMs, memory, L2, clocks as torch / nvidia-smi report them, with
#                      derived fp32 peak and bandwidth marked CONFIRM (copy to conf/gpu/<key>.yaml for a new GPU)
#   nvidia-smi.txt     `nvidia-smi -q` at the start
# Kernel tables have the columns of the shipped kernels/test/<table>.csv plus dtype and driver.
# Timing as in the data: CUDA events, mean of the 5 fastest of 25 calls after 5 warm-up calls, TF32 off.
#
# How the shapes were chosen (the full test sets would take ~30 minutes of fp32 GEMMs alone):
#   bmm / linear: the shipped dims tables test_bmm (3108 shapes) and test_linear (1040), shuffled with
#     seed 0; each (op, dtype) measures shapes in that order until its wall-clock budget is spent
#     (fp32: 75 s each, bf16: 35 s each). The measured rows are therefore a uniform random subsample;
#     bf16 uses the same order, so its shapes are a subset of the fp32 ones (paired comparison).
#     provenance.jsonl records how many were measured and how many were left.
#   elementwise / softmax / ln: the shapes of the shipped test tables (kernels/test/elem, softmax,
#     ln: 65-81 shapes per op, the ones the other GPUs were measured on; test_vec holds many small
#     shapes those tables never measured), fp32, budget 8 s per op (softmax / ln 12 s), which covers
#     all of them on an H200-class GPU; any op cut short says so in provenance.jsonl.
# Shape tables are read from data/neusight (Parquet from `python jobs/ingest.py`); every shape source
# is checked before the GPU work starts.
#
# Then compare forecasts with the measurements (on any machine):
#   python jobs/predict_kernels.py predictor=roofline input=<OUTPUT_DIR>/kernels/bmm.csv \
#       output=reports/new_gpu/bmm_roofline.csv
#   (likewise linear, elem, softmax, ln; it prints the MAPE per Device. The roofline and predictors
#   model fp32: keep the dtype=fp32 rows, e.g. filter with pandas, before comparing.) The Device
#   column must name a catalog GPU (conf/gpu); for a new one, confirm the spec draft first.
#   The labels compare with e2e forecasts of the same model / batch / seq_len / mode on that GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUTPUT_DIR="${1:-}"
SMOKE="${COLLECT_SMOKE:-0}"
if [ "$SMOKE" = 1 ]; then
  OUTPUT_DIR="${OUTPUT_DIR:?COLLECT_SMOKE=1 needs an OUTPUT_DIR}"
else
  python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "error: torch sees no CUDA GPU")'
fi
OUTPUT_DIR="${OUTPUT_DIR:-$(python3 -c '
import torch
from tilecast.collect.job import device_key
from tilecast.paths import DATA_DIR
print(DATA_DIR / "collected" / device_key(torch.cuda.get_device_name(0)))')}"
mkdir -p "$OUTPUT_DIR"
[ "$SMOKE" = 1 ] || nvidia-smi -q > "$OUTPUT_DIR/nvidia-smi.txt" 2>&1 || true

python3 - "$OUTPUT_DIR" "$SMOKE" <<'PY'
import json
import logging
import sys
import time

from tilecast.collect.__main__ import parse_args
from tilecast.collect.kernels import KernelRequest
from tilecast.collect.kernels import prepare as prepare_kernels
from tilecast.collect.job import run

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
out, smoke = sys.argv[1], sys.argv[2] == "1"
ELEM = ["add", "addu", "mul", "mulu", "div", "divu", "pow", "powu", "relu", "gelu", "tanh"]
kernels = [  # (ops, shapes, dtype, budget_s per op)
    (["bmm"], "test_bmm", "fp32", 75), (["linear"], "test_linear", "fp32", 75),
    (["bmm"], "test_bmm", "bf16", 35), (["linear"], "test_linear", "bf16", 35),
    (ELEM, "test", "fp32", 8), (["softmax", "ln"], "test", "fp32", 12),
]
e2e = [("gpt2_large", 4, 1024, "inference"), ("gpt2_large", 1, 1024, "training"),
       ("bert_large", 8, 512, "inference"), ("opt_13", 2, 2048, "inference")]
dev = "cpu" if smoke else "cuda"
steps = [parse_args(["what=kernels", f"device={dev}", f"output_dir={out}", f"ops=[{','.join(ops)}]",
                     f"shapes={shapes}", f"dtype={dtype}", f"budget_s={budget}"])
         for ops, shapes, dtype, budget in kernels]
steps += [parse_args(["what=e2e", f"device={dev}", f"output_dir={out}", f"model={m}", f"batch={b}",
                      f"seq_len={s}", f"mode={mode}"]) for m, b, s, mode in e2e]
if smoke:  # the same steps, small: tiny shapes, one layer, short sequences, few repeats
    for cfg in steps:
        cfg.update(warmup=1, repeats=3, fastest=1, shapes="tiny", batch=1, seq_len=32, num_layers=1)
else:
    steps.append(parse_args(["what=spec", "device=cuda", f"output_dir={out}"]))

for cfg in steps:  # preflight: every op, dtype and shape table, before any GPU time is spent
    if cfg["what"] == "kernels":
        prepare_kernels(KernelRequest(ops=cfg["ops"], shapes=cfg["shapes"], dtype=cfg["dtype"]), dev)

t0, failed = time.perf_counter(), []
for cfg in steps:
    t = time.perf_counter()
    try:
        result = run(cfg)
    except Exception as exc:  # keep going: one model that does not fit must not cost the rest
        failed.append(f"{cfg['what']} {cfg.get('model') or cfg.get('ops')}: {exc}")
        print(f"STEP FAILED: {failed[-1]}", flush=True)
        continue
    result.pop("text", None)
    print(f"[{time.perf_counter() - t:6.1f} s] {json.dumps(result, default=str)}", flush=True)
print(f"total {time.perf_counter() - t0:.0f} s; {len(failed)} failed step(s)")
for f in failed:
    print("  ", f)
sys.exit(1 if failed else 0)
PY

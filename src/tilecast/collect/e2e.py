"""End-to-end labels: time a catalog model built in plain torch, write a label JSON like the data's.

Inference: the forward pass (``inference_mode``). Training: forward + loss, then backward, no
optimizer step; gradients are not cleared between repeats, so from the second pass on backward
accumulates into existing gradients, as the reference measurement does (its ``acc`` ops).
Label layout (``labels/<device dir>/<model>-<inf|train>-<seq>-<batch>.json``, ms):
``{"num_layer", "e2e_latency", "fw_latency", "bwall_latency"}``.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tilecast.collect.environment import check_device, detect, set_precision_like_the_data
from tilecast.collect.errors import CollectError
from tilecast.collect.kernel_ops import check_dtype
from tilecast.collect.timing import TimingPlan, time_phases
from tilecast.collect.writing import write_json_atomic
from tilecast.graph.torch_models import BUILDERS, MODES, build_torch_model
from tilecast.specs import ModelSpec, get_model

log = logging.getLogger("tilecast.collect")

#: mode -> token in label file names
MODE_TAGS = {"inference": "inf", "training": "train"}
#: families whose learned position table bounds the sequence length
LEARNED_POSITIONS = frozenset({"gpt2", "opt", "bert"})


@dataclass(frozen=True)
class E2eRequest:
    """One end-to-end measurement."""

    model: str
    batch: int
    seq_len: int
    mode: str = "inference"
    dtype: str = "fp32"
    plan: TimingPlan = field(default_factory=lambda: TimingPlan(warmup=3, repeats=10, fastest=5))
    num_layers: int | None = None  # override the catalog depth (smoke runs); recorded in the file name


def label_name(spec: ModelSpec, request: E2eRequest) -> str:
    """``<model>-<inf|train>-<seq>-<batch>`` (model ``<key>_L<n>`` when the depth was overridden)."""
    model = spec.key if request.num_layers is None else f"{spec.key}_L{request.num_layers}"
    return f"{model}-{MODE_TAGS[request.mode]}-{request.seq_len}-{request.batch}"


def prepare(request: E2eRequest, device: str) -> ModelSpec:
    """Check every input; raises before anything is built or written."""
    check_device(device)
    check_dtype(request.dtype)
    if request.mode not in MODES:
        raise CollectError(f"mode {request.mode!r} is not supported; use one of: {', '.join(MODES)}")
    for name in ("batch", "seq_len"):
        v = getattr(request, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise CollectError(f"{name} must be a positive integer, got {v!r}")
    spec = get_model(request.model)
    if spec.family not in BUILDERS:
        raise CollectError(f"model {spec.key!r}: family {spec.family!r} has no plain-torch builder; "
                           f"supported families: {', '.join(BUILDERS)}")
    if request.num_layers is not None:
        if not isinstance(request.num_layers, int) or request.num_layers < 1:
            raise CollectError(f"num_layers must be a positive integer, got {request.num_layers!r}")
        spec = dataclasses.replace(spec, num_layers=request.num_layers)
    if spec.family in LEARNED_POSITIONS and request.seq_len > spec.max_positions:
        raise CollectError(f"seq_len={request.seq_len} exceeds model {spec.key!r}'s {spec.max_positions} positions")
    if request.mode == "training" and request.seq_len < 2 and spec.family != "bert":
        raise CollectError("training needs seq_len >= 2 (next-token loss)")
    return spec


def _build(spec: ModelSpec, mode: str, dtype: torch.dtype, device: torch.device) -> torch.nn.Module:
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            return build_torch_model(spec, mode)
    finally:
        torch.set_default_dtype(old)


def measure_e2e(model: torch.nn.Module, input_ids: torch.Tensor, mode: str, plan: TimingPlan
                ) -> tuple[float, float]:
    """(forward ms, backward ms): per phase, the mean over the ``plan.fastest`` fastest repeats."""
    dev = input_ids.device
    if mode == "inference":
        with torch.inference_mode():
            samples = time_phases([lambda: model(input_ids)], dev, plan)
    else:
        box: dict[str, torch.Tensor] = {}

        def forward() -> None:
            box["loss"] = model(input_ids)

        def backward() -> None:
            box.pop("loss").backward()

        samples = time_phases([forward, backward], dev, plan)
    best = sorted(samples, key=sum)[: plan.fastest]
    fw = sum(s[0] for s in best) / len(best)
    bw = sum(s[1] for s in best) / len(best) if mode == "training" else 0.0
    return fw, bw


def collect_e2e(request: E2eRequest, device: str, output_dir: Path) -> Path:
    """Time ``request`` on ``device``; write ``output_dir/labels/<device dir>/<name>.json``; return its path."""
    spec = prepare(request, device)
    info = detect(device)
    set_precision_like_the_data()
    dev = info.torch_device
    try:
        model = _build(spec, request.mode, check_dtype(request.dtype), dev)
        input_ids = torch.randint(0, spec.vocab_size, (request.batch, request.seq_len), device=dev)
        fw, bw = measure_e2e(model, input_ids, request.mode, request.plan)
    except torch.OutOfMemoryError as exc:
        raise CollectError(f"{label_name(spec, request)} ({request.dtype}) does not fit in {info.name}'s "
                           f"memory: {str(exc).splitlines()[0]}") from None
    finally:
        model = input_ids = None  # noqa: F841 - release before emptying the cache
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    label = {"num_layer": spec.num_layers, "e2e_latency": fw + bw, "fw_latency": fw, "bwall_latency": bw}
    path = Path(output_dir) / "labels" / info.name.replace(" ", "_") / f"{label_name(spec, request)}.json"
    write_json_atomic(path, label)
    log.info("%s on %s (%s): fw %.3f ms, bw %.3f ms -> %s", label_name(spec, request), info.name,
             request.dtype, fw, bw, path)
    return path

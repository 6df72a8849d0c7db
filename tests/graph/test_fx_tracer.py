"""fx tracer: meta-device tracing of any nn.Module, mapped onto the builders' op kinds."""

import pytest
import torch
from torch import nn

from tilecast.graph import build_graph, compare_graphs, trace_module
from tilecast.graph.compare import gemm_inventory
from tilecast.graph.fx_tracer import TraceError
from tilecast.graph.torch_models import build_torch_model, tiny_spec
from tilecast.specs import get_model


def _meta_model(spec, mode):
    with torch.device("meta"):
        return build_torch_model(spec, mode)


@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize("spec", [tiny_spec("gpt2"), get_model("gpt2_large")], ids=["tiny", "gpt2_large"])
def test_plain_torch_gpt2_traces_to_the_builders_gemm_inventory(spec, mode):
    result = trace_module(_meta_model(spec, mode), (2, 64), dtype=torch.long)
    built = build_graph(spec, 2, 64, mode)
    for phase in ("fw", "bw"):
        assert gemm_inventory(result.graph, phase) == gemm_inventory(built, phase)
    assert result.graph.meta["mode"] == mode
    assert result.num_params == sum(p.numel() for p in _meta_model(spec, mode).parameters())


@pytest.mark.parametrize("family", ["opt", "bert", "llama"])
def test_other_zoo_families_match_on_gemm_flops(family):
    spec = tiny_spec(family)
    result = trace_module(_meta_model(spec, "training"), (2, 16), dtype=torch.long)
    built = build_graph(spec, 2, 16, "training")
    table = compare_graphs(result.graph, built, phases=("fw", "bw"))
    # llama: the zoo builds its rotary table with torch.outer where HF (and the builder) use a tiny bmm
    assert (table["matched_share"] >= 0.999).all() and (table["extra_share"] <= 0.001).all()


class SmallConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, groups=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv1(x)))
        x = nn.functional.max_pool2d(self.conv2(x), 2)
        return self.fc(torch.flatten(self.pool(x), 1))


def test_conv_net_maps_convolutions_to_conv_ops_and_lists_what_it_cannot_map():
    with torch.device("meta"):
        net = SmallConvNet().eval()
    result = trace_module(net, (8, 3, 32, 32))
    convs = {o.dims for o in result.graph.select(kind="conv").ops}
    # implicit GEMM: (groups, batch x output pixels, in channels / groups x kernel area, out channels / groups)
    assert convs == {(1, 8 * 32 * 32, 3 * 9, 16), (2, 8 * 15 * 15, 8 * 9, 16)}
    assert {o.dims for o in result.graph.select(kind="linear").ops} == {(8, 32, 10)}
    assert result.unmapped == {"nn.BatchNorm2d": 1, "F.max_pool2d": 1, "nn.AdaptiveAvgPool2d": 1}
    names = {o.name for o in result.graph.select(kind="mem").ops}
    assert {"bn", "max_pool2d", "pool"} <= names  # costed by the bytes they move, not dropped
    assert result.graph.select(kind="vec").ops[0].op == "relu"


def test_training_trace_adds_conv_backward():
    with torch.device("meta"):
        net = SmallConvNet().train()
    g = trace_module(net, (2, 3, 16, 16)).graph
    assert g.meta["mode"] == "training"
    assert {o.dims for o in g.select(phase="bw", kind="conv").ops} >= {(1, 2 * 16 * 16, 16, 27), (1, 16, 512, 27)}


def test_real_weights_are_left_untouched_and_nothing_is_materialised():
    net = SmallConvNet().eval()
    before = net.conv1.weight.detach().clone()
    result = trace_module(net, torch.empty(4, 3, 16, 16, device="meta"))
    assert result.graph.total_flops() > 0
    assert net.conv1.weight.device.type == "cpu" and torch.equal(net.conv1.weight, before)


def test_missing_example_input_is_named():
    with torch.device("meta"):
        net = SmallConvNet()
    with pytest.raises(TraceError, match="no example input for placeholder 'x'"):
        trace_module(net)

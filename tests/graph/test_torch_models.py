"""Plain-torch model zoo: shapes on tiny configs, meta builds, published parameter counts, fx-traceability."""

import pytest
import torch
from torch.fx.passes.shape_prop import ShapeProp

from tilecast.graph.torch_models import UntraceableModelError, build_torch_model, tiny_spec
from tilecast.specs import ModelSpec, get_model

FAMILIES = ("gpt2", "opt", "bert", "llama")


def _ids(spec: ModelSpec, batch: int = 2, seq: int = 12, device: str = "cpu") -> torch.Tensor:
    return torch.randint(0, spec.vocab_size, (batch, seq), device=device)


def _n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # shared (tied) tensors counted once


@pytest.mark.parametrize("family", FAMILIES)
def test_inference_returns_logits(family):
    torch.manual_seed(0)
    spec = tiny_spec(family)
    model = build_torch_model(spec)
    assert not model.training
    with torch.no_grad():
        out = model(_ids(spec))
    want = (2, 2) if family == "bert" else (2, 12, spec.vocab_size)
    assert tuple(out.shape) == want
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_training_returns_scalar_loss_with_gradients(family):
    torch.manual_seed(0)
    spec = tiny_spec(family)
    model = build_torch_model(spec, mode="training")
    assert model.training
    loss = model(_ids(spec))
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None for g in grads)
    assert sum(float(g.abs().sum()) for g in grads) > 0


def test_causal_models_do_not_look_ahead():
    """Changing the last token must not change the logits of earlier positions."""
    for family in ("gpt2", "opt", "llama"):
        torch.manual_seed(0)
        spec = tiny_spec(family)
        model = build_torch_model(spec)
        ids = _ids(spec, batch=1, seq=8)
        ids2 = ids.clone()
        ids2[0, -1] = (ids[0, -1] + 1) % spec.vocab_size
        with torch.no_grad():
            a, b = model(ids), model(ids2)
        assert torch.allclose(a[:, :-1], b[:, :-1], atol=1e-5), family
        assert not torch.allclose(a[:, -1], b[:, -1]), family


def test_bert_heads_depend_on_mode():
    spec = tiny_spec("bert")
    names_inf = {n for n, _ in build_torch_model(spec).named_modules()}
    names_train = {n for n, _ in build_torch_model(spec, "training").named_modules()}
    assert "classifier" in names_inf and "decoder" not in names_inf
    assert {"decoder", "seq_relationship", "transform_dense"} <= names_train
    assert "classifier" not in names_train


@pytest.mark.parametrize("family", FAMILIES)
def test_meta_build_creates_no_storage_and_traces(family):
    spec = tiny_spec(family)
    with torch.device("meta"):
        model = build_torch_model(spec)
    tensors = list(model.parameters()) + list(model.buffers())
    assert tensors and all(t.is_meta for t in tensors)
    gm = torch.fx.symbolic_trace(model)
    ShapeProp(gm).propagate(_ids(spec, device="meta"))
    out = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    assert out.meta["tensor_meta"].shape[0] == 2
    kinds = {n.target if isinstance(n.target, str) else n.target.__name__ for n in gm.graph.nodes}
    assert "softmax" in kinds  # eager attention: matmul/bmm, softmax, matmul/bmm
    assert {"matmul", "bmm"} & kinds


def test_gpt2_large_parameter_count_on_meta_matches_published():
    with torch.device("meta"):
        model = build_torch_model(get_model("gpt2_large"))
    assert all(p.is_meta for p in model.parameters())
    n = _n_params(model)
    assert abs(n - 774_000_000) / 774_000_000 < 0.005, n
    assert n == 774_030_080  # Hugging Face GPT2LMHeadModel('gpt2-large'), tied LM head


@pytest.mark.parametrize("key,published", [("opt_13", 1_315_758_080), ("bert_large", 335_143_938)])
def test_catalog_parameter_counts(key, published):
    """OPT-1.3B (OPTForCausalLM) and BERT-large (BertForSequenceClassification, 2 labels) as published."""
    with torch.device("meta"):
        model = build_torch_model(get_model(key))
    assert _n_params(model) == published


def test_llama_gqa_parameter_count():
    """Llama-3-8B shapes (GQA 32/8 heads, SwiGLU, untied head): 8,030,261,248 parameters."""
    spec = tiny_spec("llama", hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=8, head_dim=128,
                     intermediate_size=14336, vocab_size=128256, max_positions=8192)
    with torch.device("meta"):
        model = build_torch_model(spec)
    assert _n_params(model) == 8_030_261_248


def test_bad_mode_and_family_are_named():
    with pytest.raises(UntraceableModelError, match="'eval'"):
        build_torch_model(tiny_spec("gpt2"), mode="eval")
    with pytest.raises(UntraceableModelError, match="switch"):
        build_torch_model(get_model("switchxl4"))

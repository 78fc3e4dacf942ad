"""Model.from_torch (the in-process exporter) against the zoo, with whatever torch this Python
has (CI: Debian's torch 1.13; also run against torch 2.x from PyPI). The comparison rules are
tests/models/export_test.py's (imported, not copied)."""

import importlib.util
import os

import pytest

import ddpscope

torch = pytest.importorskip("torch")
nn = torch.nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _export_test():
    path = os.path.join(ROOT, "tests", "models", "export_test.py")
    spec = importlib.util.spec_from_file_location("ddpscope_export_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.FAILURES.clear()
    return module


def _assert_like_zoo(model, zoo_name):
    et = _export_test()
    et.compare_with_zoo(model.to_dict(), et.zoo(zoo_name), None)
    assert et.FAILURES == []


def test_from_torch_mlp_matches_the_zoo(cli, tmp_path):
    et = _export_test()
    torch.manual_seed(0)
    model = ddpscope.Model.from_torch(et.mlp_tiny_factory(), torch.randn(20, 10), "mlp-tiny")
    _assert_like_zoo(model, "mlp-tiny")
    assert model.name == "mlp-tiny"
    assert model.param_names == ddpscope.Model.zoo("mlp-tiny").param_names
    # The same plan and the same simulated step as the zoo model, through the CLI too.
    for cap in (1, 25):
        assert ddpscope.buckets(model, bucket_cap_mb=cap)["buckets"] == ddpscope.buckets(
            "mlp-tiny", bucket_cap_mb=cap)["buckets"]
    model.save(tmp_path / "m.json")
    assert ddpscope.simulate(model, cluster="dgx-a100", world_size=2).to_dict()[
        "step_time_ns"] == cli.json("simulate", "--model", str(tmp_path / "m.json"),
                                    "--cluster", "dgx-a100", "--world-size", "2")["step_time_ns"]


def test_from_torch_resnet18_matches_the_zoo():
    torchvision = pytest.importorskip("torchvision")
    model = ddpscope.Model.from_torch(torchvision.models.resnet18(), torch.randn(2, 3, 224, 224),
                                      "resnet18")
    _assert_like_zoo(model, "resnet18")
    assert ddpscope.buckets(model, bucket_cap_mb=25) == ddpscope.buckets("resnet18",
                                                                         bucket_cap_mb=25)


def test_from_torch_measures_layers_on_request():
    et = _export_test()
    model = ddpscope.Model.from_torch(et.mlp_tiny_factory(), torch.randn(20, 10), measure=True,
                                      repeat=2)
    layers = model.to_dict()["layers"]
    assert all(l["measured"]["forward_ms"] >= 0 for l in layers)
    assert all(l["measured"]["backward_ms"] >= 0 for l in layers if l.get("params"))


def test_from_torch_costs_any_module_from_its_ops():
    # A module type the exporter does not know (it owns a weight and multiplies) and a
    # Llama-style decoder in plain torch (RMSNorm, rotary embeddings, attention, SwiGLU).
    et = _export_test()
    own = ddpscope.Model.from_torch(et.own_scale_factory(), torch.randn(2, 3)).to_dict()
    assert own["layers"][-1]["type"] == "OwnScale"
    assert own["layers"][-1]["params"] == ["1.scale"]
    module = et.llama_style()
    model = ddpscope.Model.from_torch(module, torch.randint(0, 96, (2, 24)), name="llama-style")
    assert model.total_bytes == sum(p.numel() * p.element_size() for p in module.parameters())
    layers = model.to_dict()["layers"]
    assert sum(et.matrix_flops(l, model.to_dict()["inputs"]) for l in layers) == \
        et.llama_forward_flops(2, 24)
    with pytest.raises(ddpscope.export.ExportError, match="example_input: expected a "
                       "torch.Tensor, got list"):
        ddpscope.Model.from_torch(module, [1, 2])


class Conv1D(torch.nn.Module):
    """transformers.pytorch_utils.Conv1D's layout (GPT-2's projections): weight [in, out]."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = torch.nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = torch.nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        out = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return out.view(x.size()[:-1] + (self.nf,))


def test_from_torch_costs_a_transformers_conv1d_as_the_linear_it_is():
    conv = ddpscope.Model.from_torch(torch.nn.Sequential(Conv1D(48, 16), torch.nn.GELU()),
                                     torch.randn(4, 16), name="c")
    linear = ddpscope.Model.from_torch(torch.nn.Sequential(torch.nn.Linear(16, 48),
                                                           torch.nn.GELU()),
                                       torch.randn(4, 16), name="c")
    a, b = conv.to_dict()["layers"][0], linear.to_dict()["layers"][0]
    assert a["type"] == b["type"] == "Linear"
    assert a["attrs"] == b["attrs"] == {"in_features": 16, "out_features": 48, "bias": 1}
    for key in ("flops", "backward_flops", "bytes"):
        assert a[key] == b[key], key
    assert conv.total_bytes == linear.total_bytes


def test_from_torch_exports_a_real_transformers_gpt2():
    # The real Conv1D (where transformers is installed; Debian's CI torch has none): every
    # projection becomes a Linear of its weight's [in, out] shape, no parameter left out.
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512,
                                     n_positions=32)
    module = transformers.GPT2Model(config)
    model = ddpscope.Model.from_torch(module, torch.randint(0, 512, (2, 32)), name="gpt2-tiny")
    assert model.total_bytes == sum(p.numel() * p.element_size() for p in module.parameters())
    layers = {l["name"]: l for l in model.to_dict()["layers"]}
    for name, m in module.named_modules():
        if type(m).__name__ == "Conv1D":
            assert layers[name]["type"] == "Linear"
            assert layers[name]["attrs"]["in_features"] == m.weight.shape[0]
            assert layers[name]["attrs"]["out_features"] == m.weight.shape[1]

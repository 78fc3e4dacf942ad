#!/usr/bin/env python3
"""Tests models/export/torch_export.py against the zoo and against real PyTorch 1.13 records.

Usage: export_test.py DDPSCOPE_BINARY
Exit 0 = pass, 1 = failure, 77 = skipped (torch or torchvision not importable; ctest
SKIP_RETURN_CODE). Also used as a module by the CLI check (`own_scale_factory`) and by
python/tests/test_export.py (the Llama-style decoder).

    export_test.py --flops DDPSCOPE_BINARY

checks instead that every exported layer's forward FLOPs equal those that
torch.utils.flop_counter.FlopCounterMode counts for the same module and input (PyTorch >= 2.1;
skipped, 77, without it): a Llama-style decoder in plain torch, the same with torch.nn.RMSNorm
where it exists, torchvision's resnet18 and, where installed, a transformers GPT-2.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SKIP = 77
CLUSTER = "dgx-a100"

try:
    import torch
    import torch.nn as nn
except ImportError as e:  # pragma: no cover - depends on the machine
    if __name__ == "__main__":
        print("SKIP: cannot import torch (%s); install python3-torch" % e)
        sys.exit(SKIP)
    raise

sys.path.insert(0, os.path.join(ROOT, "models", "export"))
from torch_export import ExportError, export_model  # noqa: E402

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what)


def zoo(name):
    with open(os.path.join(ROOT, "models", "zoo", name + ".json")) as f:
        return json.load(f)


def model_ready_order(spec):
    """ModelSpec::gradReadyOrder() (models/FORMAT.md) computed from a model file's layers."""
    names = [p["name"] for p in spec["parameters"]]
    first_owner = {}
    for li, layer in enumerate(spec["layers"]):
        for p in layer.get("params", []):
            first_owner.setdefault(p, li)
    order = []
    for li in reversed(range(len(spec["layers"]))):
        layer = spec["layers"][li]
        for p in layer.get("grad_ready_order", layer.get("params", [])):
            if first_owner[p] == li:
                order.append(p)
    owned = set(first_owner)
    order += [n for n in reversed(names) if n not in owned]
    return [names.index(n) for n in order]


class OwnScale(nn.Module):
    """Owns a parameter directly and is no layer type ddpscope knows: costed from its ops."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return x * self.scale


def own_scale_factory():
    return nn.Sequential(nn.Linear(3, 4), OwnScale())


# A Llama-style decoder in plain torch, as a user writes one: the GPU kit's llama-small code
# (scripts/gpu_kit/torch_job.py: Hugging Face's module names, RMSNorm owning its weight, rotary
# embeddings in the attention's forward, scaled_dot_product_attention where torch has it else
# matmul-softmax-matmul, SwiGLU, bias-free projections, an untied head) at a tiny size. None of
# its own modules is a type the exporter knows by name.
LLAMA_SIZES = {"vocab": 96, "hidden": 64, "heads": 4, "inter": 160, "layers": 2}


def _kit_torch_job():
    path = os.path.join(ROOT, "scripts", "gpu_kit", "torch_job.py")
    spec = importlib.util.spec_from_file_location("ddpscope_kit_torch_job", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def llama_style(rms_norm=None):
    """The decoder; `rms_norm` (torch.nn.RMSNorm) replaces its own RMSNorm modules."""
    model = _kit_torch_job().LlamaForCausalLM(**LLAMA_SIZES)
    if rms_norm is not None:
        for name, module in list(model.named_modules()):
            if type(module).__name__ == "LlamaRMSNorm":
                parent, _, child = name.rpartition(".")
                setattr(model.get_submodule(parent), child,
                        rms_norm(LLAMA_SIZES["hidden"], eps=module.eps))
    return model


def llama_forward_flops(batch, seq):
    """Matrix FLOPs of one forward of the decoder (a multiply-add is 2), counted by hand."""
    d, inter, vocab = LLAMA_SIZES["hidden"], LLAMA_SIZES["inter"], LLAMA_SIZES["vocab"]
    tokens = batch * seq
    per_layer = 2 * tokens * (4 * d * d + 3 * d * inter) + 4 * batch * seq * seq * d
    return LLAMA_SIZES["layers"] * per_layer + 2 * tokens * d * vocab


def eval_poly(poly, inputs):
    """A model-file polynomial at the model's `inputs` (batch, seq_len, image_size)."""
    values = {"batch": inputs.get("batch", 1), "seq": inputs.get("seq_len", 1),
              "image": inputs.get("image_size", 1), "1": 1}
    total = 0.0
    for monomial, coefficient in (poly or {}).items():
        term = float(coefficient)
        for var in monomial.split("*"):
            term *= values[var]
        total += term
    return total


def mlp_tiny_factory():
    # models/zoo/gen_zoo.py: mlp("mlp-tiny", ..., 20, [10, 50, 1])
    return nn.Sequential(nn.Linear(10, 50), nn.ReLU(), nn.Linear(50, 1))


def compare_with_zoo(exported, zoo_spec, recorded):
    name = zoo_spec["name"]
    check(exported["parameters"] == zoo_spec["parameters"], name + ": parameters differ from zoo")
    zoo_layers = {l["name"]: l for l in zoo_spec["layers"]}
    with_params = [l for l in exported["layers"] if l.get("params")]
    check(len(with_params) == sum(1 for l in zoo_spec["layers"] if l.get("params")),
          name + ": number of layers with parameters differs from zoo")
    for layer in exported["layers"]:
        z = zoo_layers.get(layer["name"])
        check(z is not None, "%s: layer %s not in the zoo" % (name, layer["name"]))
        if z is None:
            continue
        for key in ("type", "params", "grad_ready_order", "attrs"):
            if key == "attrs":
                continue  # the zoo writes a few extra attrs (inplace); costs are what matter
            check(layer.get(key) == z.get(key),
                  "%s: layer %s %s: exported %s, zoo %s" % (name, layer["name"], key,
                                                            layer.get(key), z.get(key)))
        for key in ("flops", "bytes", "backward_flops"):
            a, b = layer.get(key), z.get(key)
            same = (a is None and b is None) or (
                a is not None and b is not None and a.keys() == b.keys() and
                all(abs(a[k] - b[k]) <= 1e-9 * max(1.0, abs(b[k])) for k in a))
            check(same, "%s: layer %s %s: exported %s, zoo %s" % (name, layer["name"], key, a, b))
    # The measured model-level ready order equals the zoo's (FORMAT.md rule), equals what the
    # exported layers imply, and equals real PyTorch 1.13's recorded order.
    check(exported["grad_ready_order"] == model_ready_order(zoo_spec),
          name + ": gradient-ready order differs from the zoo's")
    check(exported["grad_ready_order"] == model_ready_order(exported),
          name + ": top-level order differs from the order its layers imply")
    if recorded is not None:
        check(exported["grad_ready_order"] == recorded["grad_ready_order"],
              name + ": gradient-ready order differs from tests/data/pytorch-1.13-buckets.json")


FP32_BYTES = 4


def check_llama_style(ddpscope, tmp):
    """The plain-torch Llama-style decoder exports: every parameter in a layer, its FLOPs equal
    the hand count at the example and at twice its sequence length (the polynomials scale),
    attention is one functional layer, and ddpscope simulates and buckets the file."""
    torch.manual_seed(0)
    model = llama_style()
    batch, seq = 2, 24
    spec = export_model(model, torch.randint(0, LLAMA_SIZES["vocab"], (batch, seq)), "llama-style")
    names = [p["name"] for p in spec["parameters"]]
    owned = {p for layer in spec["layers"] for p in layer.get("params", [])}
    check(owned == set(names), "llama-style: parameters in no layer: %s" % (set(names) - owned))
    for at_seq in (seq, 2 * seq):
        inputs = dict(spec["inputs"], seq_len=at_seq)
        total = sum(matrix_flops(l, inputs) for l in spec["layers"])
        expected = llama_forward_flops(batch, at_seq)
        check(total == expected, "llama-style at seq %d: exported %s forward FLOPs, counted %d"
              % (at_seq, total, expected))
    by_name = {l["name"]: l for l in spec["layers"]}
    norm = by_name.get("model.layers.0.input_layernorm", {})
    check(norm.get("type") == "LlamaRMSNorm" and norm.get("params") ==
          ["model.layers.0.input_layernorm.weight"] and norm.get("host_ops", {}).get("forward", 0)
          >= 1, "llama-style RMSNorm layer: %s" % norm)
    attention = [l for l in spec["layers"] if l["name"].startswith("model.layers.0.self_attn.")
                 and "params" not in l and l["flops"]]
    sdpa = hasattr(nn.functional, "scaled_dot_product_attention")
    check(len(attention) == 1 and attention[0]["type"] == ("AttentionCore" if sdpa else "Matmul")
          and "batch*seq*seq" in attention[0]["flops"],
          "llama-style attention: one functional layer costed by seq^2: %s" % attention)
    # Rotary embeddings run between the projections and attention in the same forward: their
    # ops (mul, neg, cat, mul, add for q and for k, and the angles) belong to that layer.
    check(len(attention) == 1 and attention[0]["host_ops"]["forward"] >= 11,
          "llama-style attention layer's host ops include the rotary embedding's: %s"
          % attention)
    path = os.path.join(tmp, "llama-style.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    r = run([ddpscope, "simulate", "--model", path, "--cluster", CLUSTER, "--world-size", "2",
             "--iterations", "3", "--json"])
    check(r.returncode == 0 and json.loads(r.stdout).get("step_time_ns", 0) > 0,
          "ddpscope simulate --model llama-style: rc %d: %s" % (r.returncode, r.stderr))
    r = run([ddpscope, "buckets", "--model", path, "--bucket-cap-mb", "0.05", "--json"])
    check(r.returncode == 0 and len(json.loads(r.stdout).get("buckets", [])) > 1,
          "ddpscope buckets --model llama-style: rc %d: %s" % (r.returncode, r.stderr))


def matrix_flops(layer, inputs):
    """A layer's forward FLOPs as FlopCounterMode counts them (matrix work only): the zoo's
    rules add a bias's add (one per output element) to Linear and convolutions, and count
    elementwise layers, which FlopCounterMode does not."""
    flops = eval_poly(layer.get("flops"), inputs)
    attrs = layer.get("attrs", {})
    if layer["type"] in ("Linear", "Conv1D"):
        if attrs.get("bias"):
            flops *= 2 * attrs["in_features"] / (2 * attrs["in_features"] + 1)
        return flops
    if layer["type"] in ("Conv1d", "Conv2d"):
        if attrs.get("bias"):
            per = 2 * attrs["in_channels"] // attrs["groups"] * attrs["kernel_size"] ** (
                2 if layer["type"] == "Conv2d" else 1)
            flops *= per / (per + 1)
        return flops
    if "host_ops" in layer:  # costed from its recorded ops: FlopCounterMode's formulas
        return flops
    return 0.0


def check_flop_counter(name, module, example):
    """Per module: the exported layers under its path sum to FlopCounterMode's count."""
    from torch.utils.flop_counter import FlopCounterMode
    spec = export_model(module, example, name)
    counter = FlopCounterMode(display=False)
    with counter:
        module(example)
    root = type(module).__name__
    counts = {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}
    inputs = spec["inputs"]
    checked = 0
    for key, counted in counts.items():
        if key == "Global" or not (key == root or key.startswith(root + ".")):
            continue
        path = key[len(root) + 1:]
        exported = sum(matrix_flops(l, inputs) for l in spec["layers"]
                       if not path or l["name"].split(":")[0] == path
                       or l["name"].startswith(path + "."))
        check(abs(exported - counted) <= 1e-9 * max(counted, 1),
              "%s: module '%s': exported %.0f forward FLOPs, FlopCounterMode %d"
              % (name, path or root, exported, counted))
        checked += 1
    total = sum(matrix_flops(l, inputs) for l in spec["layers"])
    check(total == counts.get("Global", 0), "%s: model: exported %.0f, FlopCounterMode %d"
          % (name, total, counts.get("Global", 0)))
    params = sum(p.numel() * p.element_size() for p in module.parameters())
    sizes = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
    exported_params = sum(math.prod(p["shape"]) * sizes[p["dtype"]] for p in spec["parameters"])
    check(params == exported_params, "%s: parameter bytes: exported %d, module %d"
          % (name, exported_params, params))
    print("%s: %d modules, %.0f forward FLOPs, equal to FlopCounterMode's" % (name, checked,
                                                                              total))


def flops_main():
    try:
        from torch.utils.flop_counter import FlopCounterMode  # noqa: F401
    except ImportError:
        print("SKIP: torch %s has no torch.utils.flop_counter.FlopCounterMode (PyTorch >= 2.1)"
              % torch.__version__)
        return SKIP
    torch.manual_seed(0)
    check_flop_counter("llama-style", llama_style(), torch.randint(0, 96, (2, 24)))
    if hasattr(nn, "RMSNorm"):
        check_flop_counter("llama-style-nn-rmsnorm", llama_style(rms_norm=nn.RMSNorm),
                           torch.randint(0, 96, (2, 24)))
    try:
        import torchvision
        check_flop_counter("resnet18", torchvision.models.resnet18(), torch.randn(2, 3, 64, 64))
    except ImportError as e:
        print("note: torchvision not importable (%s): resnet18 not checked" % e)
    try:
        import transformers
        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512,
                                         n_positions=32)
        check_flop_counter("gpt2-tiny", transformers.GPT2Model(config),
                           torch.randint(0, 512, (2, 24)))
    except ImportError as e:
        print("note: transformers not importable (%s): GPT-2 not checked" % e)
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("OK: exported forward FLOPs equal FlopCounterMode's per module")
    return 0


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def check_cli_loads(ddpscope, path, zoo_name):
    # (`ddpscope models` lists the zoo only; simulate loads and costs every layer.)
    r = run([ddpscope, "simulate", "--model", path, "--cluster", CLUSTER, "--world-size",
             "2", "--iterations", "3", "--json"])
    check(r.returncode == 0 and json.loads(r.stdout).get("step_time_ns", 0) > 0,
          "ddpscope simulate --model %s: rc %d: %s" % (path, r.returncode, r.stderr))
    for cap in ("1", "25"):
        a = run([ddpscope, "buckets", "--model", path, "--bucket-cap-mb", cap, "--json"])
        b = run([ddpscope, "buckets", "--model", zoo_name, "--bucket-cap-mb", cap, "--json"])
        check(a.returncode == 0, "ddpscope buckets --model %s: rc %d: %s"
              % (path, a.returncode, a.stderr))
        if a.returncode == 0 and b.returncode == 0:
            pa, pb = json.loads(a.stdout), json.loads(b.stdout)
            check(pa.get("buckets") == pb.get("buckets"),
                  "%s: bucket plan at cap %s MiB differs from the zoo model's" % (path, cap))
        # The exported file doubles as a --ready-order-file.
        c = run([ddpscope, "buckets", "--model", path, "--bucket-cap-mb", cap,
                 "--ready-order-file", path, "--json"])
        check(c.returncode == 0 and json.loads(c.stdout).get("buckets") ==
              json.loads(a.stdout).get("buckets") if a.returncode == 0 else False,
              "%s: --ready-order-file with the exported order gives another plan" % path)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--flops":
        return flops_main()
    if len(sys.argv) != 2:
        print("usage: export_test.py [--flops] DDPSCOPE_BINARY", file=sys.stderr)
        return 2
    ddpscope = sys.argv[1]
    try:
        import torchvision
    except ImportError as e:
        print("SKIP: cannot import torchvision (%s); install python3-torchvision" % e)
        return SKIP
    with open(os.path.join(ROOT, "tests", "data", "pytorch-1.13-buckets.json")) as f:
        recorded = json.load(f)["models"]
    tmp = tempfile.mkdtemp(prefix="ddpscope-export-test-")

    torch.manual_seed(0)
    mlp = export_model(mlp_tiny_factory(), torch.randn(20, 10), "mlp-tiny", measure=True,
                       repeat=3)
    compare_with_zoo(mlp, zoo("mlp-tiny"), recorded.get("tiny_mlp"))
    check(all("forward_ms" in l.get("measured", {}) for l in mlp["layers"]),
          "mlp-tiny --measure: every layer has measured.forward_ms")
    check(all(l["measured"]["forward_ms"] >= 0 for l in mlp["layers"] if "measured" in l),
          "mlp-tiny --measure: forward times are non-negative")
    mlp_path = os.path.join(tmp, "mlp-tiny.json")
    with open(mlp_path, "w") as f:
        json.dump(mlp, f)
    check_cli_loads(ddpscope, mlp_path, "mlp-tiny")

    # resnet18 at 2 images of 224x224: the polynomials scale to the zoo's batch 32.
    resnet = export_model(torchvision.models.resnet18(), torch.randn(2, 3, 224, 224),
                          "resnet18")
    compare_with_zoo(resnet, zoo("resnet18"), recorded.get("resnet18"))
    resnet_path = os.path.join(tmp, "resnet18.json")
    with open(resnet_path, "w") as f:
        json.dump(resnet, f)
    check_cli_loads(ddpscope, resnet_path, "resnet18")

    # A module that owns a parameter and is no known type: costed from the ops it dispatches
    # (one multiply; its backward one node), by the library and by the CLI.
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    own = export_model(own_scale_factory(), torch.randn(2, 3), "own")
    layer = own["layers"][-1]
    check(layer["name"] == "1" and layer["type"] == "OwnScale" and layer["params"] == ["1.scale"]
          and layer["host_ops"] == {"forward": 1, "backward": 1} and layer["flops"] == {}
          and layer["bytes"] == {"batch": 2 * 4 * FP32_BYTES, "1": 4 * FP32_BYTES},
          "OwnScale layer: %s" % layer)
    r = run([sys.executable, os.path.join(ROOT, "models", "export", "torch_export.py"),
             "--module", "export_test:own_scale_factory", "--input-shape", "2,3", "-o",
             os.path.join(tmp, "own.json")], env=env)
    check(r.returncode == 0 and "wrote" in r.stdout, "CLI on OwnScale: rc %d, %s"
          % (r.returncode, r.stderr))
    r = run([sys.executable, os.path.join(ROOT, "models", "export", "torch_export.py"),
             "--module", "export_test:no_such_factory", "--input-shape", "2,3", "-o",
             os.path.join(tmp, "none.json")], env=env)
    check(r.returncode == 2 and "torch_export: error: --module: 'export_test' has no attribute "
          "'no_such_factory'" in r.stderr, "CLI on a missing factory: rc %d, %s"
          % (r.returncode, r.stderr))
    try:
        export_model(own_scale_factory(), [[1.0, 2.0, 3.0]], "bad")
        check(False, "a list as example input: no ExportError raised")
    except ExportError as e:
        check(str(e) == "example_input: expected a torch.Tensor, got list",
              "a list as example input: %s" % e)
    check_llama_style(ddpscope, tmp)
    r = run([sys.executable, os.path.join(ROOT, "models", "export", "torch_export.py"),
             "--module", "export_test:mlp_tiny_factory", "--input-shape", "20,x", "-o",
             os.path.join(tmp, "x.json")], env=env)
    check(r.returncode == 2 and "--input-shape: expected positive integers" in r.stderr,
          "CLI bad --input-shape: rc %d, %s" % (r.returncode, r.stderr))
    r = run([sys.executable, os.path.join(ROOT, "models", "export", "torch_export.py"),
             "--module", "export_test:mlp_tiny_factory", "--input-shape", "20,10", "-o",
             os.path.join(tmp, "cli.json")], env=env)
    check(r.returncode == 0, "CLI export of mlp-tiny: rc %d, %s" % (r.returncode, r.stderr))
    r = run([sys.executable, os.path.join(ROOT, "models", "export", "torch_export.py"),
             "--module", "export_test:mlp_tiny_factory", "--input-shape", "20,10", "--output",
             os.path.join(tmp, "old.json")], env=env)
    check(r.returncode == 0 and "--output is deprecated and goes in the next release; use --out"
          in r.stderr and os.path.exists(os.path.join(tmp, "old.json")),
          "CLI export with the old --output: rc %d, %s" % (r.returncode, r.stderr))

    # models/export/kineto_trace.py: a profile of this (Kineto-less) torch imports.
    import kineto_trace
    model = mlp_tiny_factory()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
                                record_shapes=True) as prof:
        for _ in range(4):
            opt.zero_grad()
            model(torch.randn(20, 10)).sum().backward()
            opt.step()
            prof.step()
    trace_path = os.path.join(tmp, "rank0.json.gz")
    kineto_trace.export(prof, trace_path, rank=0, world_size=1, backend="none")
    r = run([ddpscope, "import-torch", trace_path, "-o", os.path.join(tmp, "run.json"),
             "--model", mlp_path, "--json"])
    check(r.returncode == 0, "import-torch of a kineto_trace.export file: rc %d, %s"
          % (r.returncode, r.stderr))
    if r.returncode == 0:
        summary = json.loads(r.stdout)
        check(summary["iterations"] == 2 and summary["median_step_ns"] > 0,
              "import-torch of a kineto_trace.export file: %s" % r.stdout)

    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("OK: mlp-tiny and resnet18 exports equal the zoo (parameters, layers, costs, ready "
          "order) and PyTorch 1.13's recorded ready orders; any module exports (a custom scale, a "
          "Llama-style decoder at its hand-counted FLOPs); files load in ddpscope")
    return 0


if __name__ == "__main__":
    sys.exit(main())

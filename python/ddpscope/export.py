#!/usr/bin/env python3
"""Exports a PyTorch model to ddpscope's model JSON (models/FORMAT.md). PyTorch >= 1.13.

As a module:

    from torch_export import export_model
    spec = export_model(model, torch.randn(8, 3, 224, 224), "my-net")   # -> dict
    json.dump(spec, open("my-net.json", "w"))

As a program:

    python3 models/export/torch_export.py --module torchvision.models:resnet18 \\
        --input-shape 8,3,224,224 -o resnet18.json [--measure]

What is exported, and how it is found (nothing is guessed from names):

- `parameters`: model.named_parameters() order, with shape and dtype; `buffers` likewise.
- `layers`: the leaf modules of the supported types in FORWARD EXECUTION order, recorded by
  forward hooks during one forward pass of the example input; a module called twice is listed
  twice (`relu`, `relu:2`). Each layer lists the parameters it owns (module order). Functional
  operations (residual `+`, `torch.flatten`, F.relu) are not modules and are not recorded.
- `grad_ready_order` (per layer, and for the whole model at the top level): the order in which
  autograd produced the gradients, recorded by hooks on every parameter's AccumulateGrad node
  during one backward of `output.sum()` — the events DDP's reducer reacts to.
- `flops` / `bytes`: forward costs counted as models/zoo/gen_zoo.py counts them (a multiply-add
  is 2 FLOPs; bytes = activations read + written at fp32 + parameter bytes), from the shapes
  seen by the hooks, written as polynomials: per sample × `batch`, and for image inputs
  (N, C, H, H) the layers with spatial outputs scale as `batch*image*image`; for sequence inputs
  (N, S[, E]) the layers with per-token outputs scale as `batch*seq`. A layer whose input does
  not require a gradient (the first layer) gets backward_flops = flops (weight gradient only).
- `--measure`: per-layer forward and backward wall times (ms, median of --repeat runs) in each
  layer's `measured` object (forward: pre/post forward hooks; backward, for layers with
  parameters: from the AccumulateGrad hooks, the interval between the previous layer's last
  gradient and this layer's last gradient).

A module that owns parameters directly and is not a supported type is an error naming its path
and type (ddpscope could not cost it); so is a supported module whose parameters are shared in
a way the hooks did not see.
"""

import argparse
import importlib
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn

FP32_BYTES = 4


class ExportError(ValueError):
    """The model cannot be exported; the message names the module path and type."""


# Modules whose parameters ddpscope knows how to cost; value = the model-JSON layer type.
def _supported_types():
    types = {
        nn.Linear: "Linear",
        nn.Conv1d: "Conv1d",
        nn.Conv2d: "Conv2d",
        nn.BatchNorm1d: "BatchNorm1d",
        nn.BatchNorm2d: "BatchNorm2d",
        nn.SyncBatchNorm: "SyncBatchNorm",
        nn.LayerNorm: "LayerNorm",
        nn.GroupNorm: "GroupNorm",
        nn.Embedding: "Embedding",
        nn.MultiheadAttention: "MultiheadAttention",
    }
    return types


def _is_conv1d_linear(module):
    """transformers' Conv1D (GPT-2's attention and MLP projections): a Linear whose weight is
    stored transposed ([in, out], `nf` outputs); it costs what a Linear of those sizes costs."""
    weight = getattr(module, "weight", None)
    return (type(module).__name__ == "Conv1D" and isinstance(getattr(module, "nf", None), int)
            and isinstance(weight, torch.Tensor) and weight.dim() == 2
            and weight.shape[1] == module.nf)


def _linear_sizes(module):
    """(in_features, out_features, has bias) of an nn.Linear or a transformers Conv1D."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features, module.bias is not None
    return int(module.weight.shape[0]), int(module.nf), getattr(module, "bias", None) is not None


def _param_free_types():
    return {
        nn.ReLU: "ReLU", nn.ReLU6: "ReLU6", nn.GELU: "GELU", nn.Tanh: "Tanh",
        nn.Sigmoid: "Sigmoid", nn.SiLU: "SiLU", nn.LeakyReLU: "LeakyReLU", nn.ELU: "ELU",
        nn.Hardswish: "Hardswish", nn.Hardsigmoid: "Hardsigmoid", nn.Softmax: "Softmax",
        nn.MaxPool1d: "MaxPool1d", nn.MaxPool2d: "MaxPool2d", nn.AvgPool2d: "AvgPool2d",
        nn.AdaptiveAvgPool1d: "AdaptiveAvgPool1d", nn.AdaptiveAvgPool2d: "AdaptiveAvgPool2d",
        nn.Dropout: "Dropout", nn.Dropout1d: "Dropout", nn.Dropout2d: "Dropout",
    }


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _numel(shape):
    return int(math.prod(shape))


def _first_tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (tuple, list)):
        for item in x:
            t = _first_tensor(item)
            if t is not None:
                return t
    if isinstance(x, dict):
        for item in x.values():
            t = _first_tensor(item)
            if t is not None:
                return t
    return None


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _tensors(item)]
    if isinstance(x, dict):
        return [t for item in x.values() for t in _tensors(item)]
    return []


class _Scaling:
    """Turns a cost measured at the example input into a polynomial (FORMAT.md)."""

    def __init__(self, example):
        self.batch = example.shape[0] if example.dim() > 0 else 1
        self.image = None
        self.seq = None
        if example.dim() == 4 and example.shape[2] == example.shape[3]:
            self.image = int(example.shape[2])
        elif example.dim() in (2, 3) and not example.is_floating_point():
            self.seq = int(example.shape[1])
        elif example.dim() == 3:
            self.seq = int(example.shape[1])

    def inputs(self):
        out = {"batch": int(self.batch)}
        if self.image:
            out["image_size"] = self.image
        if self.seq:
            out["seq_len"] = self.seq
        return out

    def poly(self, total, out_shape, constant=0.0):
        """`total` measured at the example size; scales with the output's kind of extent."""
        result = {}
        per_sample = float(total) / self.batch
        if per_sample:
            if self.image and len(out_shape) == 4:
                result["batch*image*image"] = per_sample / (self.image * self.image)
            elif self.seq and len(out_shape) >= 3 and out_shape[1] == self.seq:
                result["batch*seq"] = per_sample / self.seq
            else:
                result["batch"] = per_sample
        if constant:
            result["1"] = float(constant)
        return {k: (int(v) if float(v).is_integer() else v) for k, v in result.items()}


def _layer_cost(module, type_, in_shape, out_shape, param_bytes):
    """(flops, activation bytes) of one forward call, at the example size (gen_zoo rules)."""
    n_in = _numel(in_shape)
    n_out = _numel(out_shape)
    if isinstance(module, nn.Linear) or _is_conv1d_linear(module):
        fan_in, fan_out, bias = _linear_sizes(module)
        rows = n_out // fan_out
        flops = rows * (2 * fan_in * fan_out + (fan_out if bias else 0))
        return flops, (n_in + n_out) * FP32_BYTES
    if isinstance(module, (nn.Conv1d, nn.Conv2d)):
        k = _numel(module.kernel_size)
        flops = 2 * module.in_channels // module.groups * k * n_out
        if module.bias is not None:
            flops += n_out
        return flops, (n_in + n_out) * FP32_BYTES
    if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d, nn.SyncBatchNorm, nn.GroupNorm)):
        return 4 * n_out, 2 * n_out * FP32_BYTES
    if isinstance(module, nn.LayerNorm):
        return 5 * n_out, 2 * n_out * FP32_BYTES
    if isinstance(module, nn.Embedding):
        return 0, 2 * n_out * FP32_BYTES
    if isinstance(module, nn.MultiheadAttention):
        e = module.embed_dim
        tokens = n_out // e
        proj = tokens * (2 * e * 3 * e + 3 * e) + tokens * (2 * e * e + e)
        batch = in_shape[0] if module.batch_first else in_shape[1]
        seq = tokens // max(batch, 1)
        core = batch * (4 * seq * seq * e + 8 * module.num_heads * seq * seq)
        return proj + core, (8 * n_out + 4 * batch * module.num_heads * seq * seq) * FP32_BYTES
    if isinstance(module, (nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool2d)):
        return _numel(_pair(module.kernel_size)) * n_out, (n_in + n_out) * FP32_BYTES
    if isinstance(module, (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d)):
        return n_in, (n_in + n_out) * FP32_BYTES
    if isinstance(module, (nn.Dropout, nn.Dropout1d, nn.Dropout2d)):
        return 2 * n_out, 3 * n_out * FP32_BYTES
    if isinstance(module, (nn.GELU, nn.SiLU, nn.Softmax, nn.ELU)):
        return 8 * n_out, 2 * n_out * FP32_BYTES
    return n_out, 2 * n_out * FP32_BYTES  # other elementwise activations


def _pair(k):
    return k if isinstance(k, tuple) else (k, k)


def _attrs(module):
    if isinstance(module, nn.Linear) or _is_conv1d_linear(module):
        fan_in, fan_out, bias = _linear_sizes(module)
        return {"in_features": fan_in, "out_features": fan_out, "bias": 1 if bias else 0}
    if isinstance(module, (nn.Conv1d, nn.Conv2d)):
        return {"in_channels": module.in_channels, "out_channels": module.out_channels,
                "kernel_size": module.kernel_size[0], "stride": module.stride[0],
                "padding": module.padding[0] if isinstance(module.padding, tuple) else 0,
                "groups": module.groups, "bias": 1 if module.bias is not None else 0}
    if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d, nn.SyncBatchNorm)):
        return {"num_features": module.num_features, "eps": module.eps,
                "momentum": module.momentum if module.momentum is not None else 0}
    if isinstance(module, nn.LayerNorm):
        return {"normalized_shape": _numel(module.normalized_shape), "eps": module.eps}
    if isinstance(module, nn.Embedding):
        return {"num_embeddings": module.num_embeddings, "embedding_dim": module.embedding_dim}
    if isinstance(module, nn.MultiheadAttention):
        return {"num_heads": module.num_heads, "head_dim": module.embed_dim // module.num_heads}
    if isinstance(module, (nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool2d)):
        return {"kernel_size": _pair(module.kernel_size)[0], "stride": _pair(module.stride)[0],
                "padding": _pair(module.padding)[0]}
    if isinstance(module, (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d)):
        size = module.output_size
        return {"output_size": size[0] if isinstance(size, tuple) else size}
    if isinstance(module, (nn.Dropout, nn.Dropout1d, nn.Dropout2d)):
        return {"p": module.p}
    if hasattr(module, "inplace"):
        return {"inplace": 1 if module.inplace else 0}
    return {}


def _leaf_layers(model):
    """(path, module, type) of the modules that become layers; raises on unsupported owners."""
    supported = _supported_types()
    free = _param_free_types()
    layers = []
    covered = set()  # modules inside a supported composite (MultiheadAttention.out_proj)
    for path, module in model.named_modules():
        if id(module) in covered:
            continue
        # isinstance: subclasses (NonDynamicallyQuantizableLinear) compute what their base does.
        kind = next((t for cls, t in supported.items() if isinstance(module, cls)), None)
        if kind is None and _is_conv1d_linear(module):
            kind = "Linear"
        if kind is not None:
            layers.append((path, module, kind))
            for sub in module.modules():
                if sub is not module:
                    covered.add(id(sub))
            continue
        own = [n for n, p in module.named_parameters(recurse=False)]
        if own:
            raise ExportError(
                "module '%s' (%s) owns parameters %s directly and is not a supported layer type "
                "(%s): ddpscope cannot cost it; wrap its computation in supported modules or "
                "extend models/export/torch_export.py"
                % (path or "<root>", type(module).__name__, ", ".join(own),
                   ", ".join(sorted(set(supported.values())))))
        kind = next((t for cls, t in free.items() if isinstance(module, cls)), None)
        if kind is not None:
            layers.append((path, module, kind))
    return layers


def _record_grad_ready_order(model, example, names):
    """Parameter names in the order autograd accumulates their gradients (one backward)."""
    order = []
    handles = []
    grad_nodes = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        # The AccumulateGrad node of a leaf: what p.expand_as(p) hangs its grad_fn on.
        node = p.expand_as(p).grad_fn.next_functions[0][0]
        grad_nodes.append(node)  # keep the node alive while its hook is registered
        handles.append(node.register_hook(lambda *unused, n=name: order.append(n)))
    try:
        model.zero_grad(set_to_none=True)
        out = model(example)
        loss = sum(t.float().sum() for t in _tensors(out) if t.requires_grad)
        loss.backward()
    finally:
        for h in handles:
            h.remove()
        model.zero_grad(set_to_none=True)
    seen = set()
    unique = [n for n in order if not (n in seen or seen.add(n))]
    return unique


def _measure(model, example, layer_params, repeat):
    """Median per-layer forward/backward wall times in ms, keyed by layer path (first call).

    `layer_params`: {path: [parameter names]} in forward execution order.
    Forward: pre/post forward hooks. Backward: from hooks on the parameters' AccumulateGrad
    nodes (module backward hooks break on in-place ops such as ResNet's `out += identity`): a
    layer with parameters is done when its last gradient is accumulated, and its backward time
    is the interval since the previous such layer finished (the first: since backward began).
    Parameter-free layers get no backward time; theirs is inside the next layer's.
    """
    fwd = {p: [] for p in layer_params}
    bwd = {p: [] for p in layer_params}
    modules = dict(model.named_modules())
    params = dict(model.named_parameters())
    state = {"fwd_start": {}, "fwd_done": set(), "ready": {}}
    handles = []
    nodes = []
    for path in layer_params:
        m = modules[path]

        def pre(mod, inp, path=path):
            state["fwd_start"].setdefault(path, time.perf_counter())

        def post(mod, inp, out, path=path):
            if path in state["fwd_start"] and path not in state["fwd_done"]:
                fwd[path].append((time.perf_counter() - state["fwd_start"][path]) * 1e3)
                state["fwd_done"].add(path)

        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    for name, p in params.items():
        if not p.requires_grad:
            continue
        node = p.expand_as(p).grad_fn.next_functions[0][0]
        nodes.append(node)
        handles.append(node.register_hook(
            lambda *unused, n=name: state["ready"].__setitem__(n, time.perf_counter())))
    try:
        for _ in range(repeat):
            state["fwd_start"] = {}
            state["fwd_done"] = set()
            state["ready"] = {}
            model.zero_grad(set_to_none=True)
            out = model(example)
            loss = sum(t.float().sum() for t in _tensors(out) if t.requires_grad)
            start = time.perf_counter()
            loss.backward()
            done = []
            for path, names in layer_params.items():
                times = [state["ready"][n] for n in names if n in state["ready"]]
                if times:
                    done.append((max(times), path))
            previous = start
            for t, path in sorted(done):
                bwd[path].append((t - previous) * 1e3)
                previous = t
    finally:
        for h in handles:
            h.remove()
        model.zero_grad(set_to_none=True)
    result = {}
    for path in layer_params:
        entry = {}
        if fwd[path]:
            entry["forward_ms"] = round(statistics.median(fwd[path]), 6)
        if bwd[path]:
            entry["backward_ms"] = round(statistics.median(bwd[path]), 6)
        result[path] = entry
    return result


def export_model(module, example_input, name, description="", measure=False, repeat=5):
    """Returns ddpscope's model JSON (a dict) for `module` run on `example_input`.

    `example_input`: one tensor (its first dimension is the batch). Raises ExportError for
    modules that own parameters and are not supported.
    """
    if not isinstance(example_input, torch.Tensor):
        raise ExportError("example_input: expected a torch.Tensor, got %s"
                          % type(example_input).__name__)
    model = module
    layers = _leaf_layers(model)
    param_names = {id(p): n for n, p in model.named_parameters()}
    scaling = _Scaling(example_input)

    calls = []  # (path, module, kind, in_shape, out_shape, input_requires_grad)
    handles = []
    for path, m, kind in layers:
        def hook(mod, inp, out, path=path, kind=kind):
            x = _first_tensor(inp)
            y = _first_tensor(out)
            calls.append((path, mod, kind, tuple(x.shape) if x is not None else (),
                          tuple(y.shape) if y is not None else (),
                          bool(x is not None and x.requires_grad)))
        handles.append(m.register_forward_hook(hook))
    try:
        # Shapes and execution order come from a forward with autograd on (requires_grad of
        # a layer's input tells whether backward computes an input gradient there).
        out = model(example_input)
        del out
    finally:
        for h in handles:
            h.remove()

    ready = _record_grad_ready_order(model, example_input, param_names)
    ready_rank = {n: i for i, n in enumerate(ready)}

    out_layers = []
    used_names = {}
    for path, m, kind, in_shape, out_shape, in_grad in calls:
        base = path or type(m).__name__.lower()
        used_names[base] = used_names.get(base, 0) + 1
        lname = base if used_names[base] == 1 else "%s:%d" % (base, used_names[base])
        params = [param_names[id(p)] for p in m.parameters() if id(p) in param_names]
        pbytes = sum(p.numel() * p.element_size() for p in m.parameters())
        flops, act_bytes = _layer_cost(m, kind, in_shape, out_shape, pbytes)
        layer = {"name": lname, "type": kind}
        if params:
            layer["params"] = params
            known = [p for p in params if p in ready_rank]
            layer["grad_ready_order"] = sorted(known, key=lambda p: ready_rank[p]) + [
                p for p in params if p not in ready_rank]
        layer["flops"] = scaling.poly(flops, out_shape)
        layer["bytes"] = scaling.poly(act_bytes, out_shape, constant=pbytes)
        if params and not in_grad and not isinstance(m, nn.Embedding):
            layer["backward_flops"] = layer["flops"]  # weight gradient only
        attrs = _attrs(m)
        if attrs:
            layer["attrs"] = attrs
        out_layers.append(layer)

    if measure:
        layer_params = {}
        for c in calls:
            layer_params.setdefault(c[0], [param_names[id(p)] for p in c[1].parameters()
                                           if id(p) in param_names])
        times = _measure(model, example_input, layer_params, repeat)
        for layer in out_layers:
            base = layer["name"].split(":")[0]
            if ":" not in layer["name"] and times.get(base):
                layer["measured"] = times[base]

    index_of = {n: i for i, (n, _) in enumerate(model.named_parameters())}
    spec = {
        "name": name,
        "description": description or "exported by models/export/torch_export.py from %s"
        % type(model).__name__,
        "inputs": scaling.inputs(),
        "parameters": [{"name": n, "shape": list(p.shape), "dtype": _dtype_name(p.dtype)}
                       for n, p in model.named_parameters()],
        "buffers": [{"name": n, "shape": list(b.shape), "dtype": _dtype_name(b.dtype)}
                    for n, b in model.named_buffers()],
        "layers": out_layers,
        # Indices into `parameters`: usable as `ddpscope buckets --ready-order-file`.
        "grad_ready_order": [index_of[n] for n in ready],
        "exporter": {"tool": "models/export/torch_export.py", "torch": torch.__version__,
                     "example_input_shape": list(example_input.shape)},
    }
    return spec


def _load_factory(spec):
    if ":" not in spec:
        raise ExportError("--module: expected pkg.mod:factory, got '%s'" % spec)
    mod_name, attr = spec.split(":", 1)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ExportError("--module: cannot import '%s': %s" % (mod_name, e))
    factory = getattr(mod, attr, None)
    if factory is None:
        raise ExportError("--module: '%s' has no attribute '%s'" % (mod_name, attr))
    return factory


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Export a PyTorch model to ddpscope's model JSON (models/FORMAT.md).")
    ap.add_argument("--module", required=True,
                    help="pkg.mod:factory — a callable returning the nn.Module (or an nn.Module)")
    ap.add_argument("--input-shape", required=True,
                    help="example input shape, comma-separated, batch first (e.g. 8,3,224,224)")
    ap.add_argument("--input-dtype", default="float32",
                    help="float32 (default) or int64 for token ids")
    ap.add_argument("--vocab", type=int, default=1000, help="token id range for int64 inputs")
    ap.add_argument("--name", help="model name (default: the factory's name)")
    ap.add_argument("-o", "--out", help="where to write the model JSON")
    ap.add_argument("--output", help=argparse.SUPPRESS)  # the old spelling, until the next release
    ap.add_argument("--measure", action="store_true",
                    help="also measure per-layer forward/backward wall times on this machine")
    ap.add_argument("--repeat", type=int, default=5, help="runs for --measure (median)")
    args = ap.parse_args(argv)
    if args.output is not None:
        print("ddpscope.export: note: --output is deprecated and goes in the next release; use "
              "--out", file=sys.stderr)
        if args.out is not None:
            ap.error("give --out or its old spelling --output, not both")
        args.out = args.output
    if args.out is None:
        ap.error("the following arguments are required: -o/--out")
    try:
        try:
            shape = [int(v) for v in args.input_shape.split(",")]
            if not shape or any(v <= 0 for v in shape):
                raise ValueError
        except ValueError:
            raise ExportError("--input-shape: expected positive integers separated by commas, "
                              "got '%s'" % args.input_shape)
        factory = _load_factory(args.module)
        model = factory() if not isinstance(factory, nn.Module) else factory
        if not isinstance(model, nn.Module):
            raise ExportError("--module: '%s' did not return an nn.Module" % args.module)
        torch.manual_seed(0)
        if args.input_dtype == "int64":
            example = torch.randint(0, args.vocab, shape)
        elif args.input_dtype == "float32":
            example = torch.randn(shape)
        else:
            raise ExportError("--input-dtype: expected float32 or int64, got '%s'"
                              % args.input_dtype)
        name = args.name or args.module.split(":", 1)[1]
        spec = export_model(model, example, name, measure=args.measure, repeat=args.repeat)
    except ExportError as e:
        print("torch_export: error: %s" % e, file=sys.stderr)
        return 2
    with open(args.out, "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    print("wrote %s: %d parameters, %d layers" % (args.out, len(spec["parameters"]),
                                                   len(spec["layers"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

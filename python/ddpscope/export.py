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
- `layers`: in FORWARD EXECUTION order, recorded by forward hooks on every module and an aten
  dispatch mode (torch.utils._python_dispatch.TorchDispatchMode, the mechanism of
  torch.utils.flop_counter) during one forward of the example input:
  * modules of the types the zoo knows (Linear, Conv, norms, Embedding, MultiheadAttention,
    transformers' Conv1D, activations, pooling, dropout) become a layer of that type, costed
    by the zoo's rules;
  * any other module that owns parameters directly (an RMSNorm, a custom scale), and any other
    leaf module, becomes a layer typed by its class name (`Matmul` when it multiplies
    matrices), costed from the aten ops it dispatched;
  * the ops a module's own forward runs between its children (residual `+`, rotary
    embeddings, attention, `silu(gate) * up`) become functional layers `<module>.<op>`, one
    per run of ops between two child calls (`AttentionCore` when it holds attention, `Add`
    for a lone residual add, `Matmul` when it multiplies matrices, else `Elementwise`); runs
    of views only (reshape, transpose, flatten) are no layers.
  A module called twice is listed twice (`relu`, `relu:2`). Each layer lists the parameters
  it owns (module order).
- `grad_ready_order` (per layer, and for the whole model at the top level): the order in which
  autograd produced the gradients, recorded by hooks on every parameter's AccumulateGrad node
  during one backward of `output.sum()` — the events DDP's reducer reacts to.
- `flops` / `bytes`: forward costs, as polynomials: per sample x `batch`, and for image inputs
  (N, C, H, H) the layers with spatial outputs scale as `batch*image*image`; for sequence inputs
  (N, S[, E]) the costs that grow with the sequence as `batch*seq` (attention's score matrix:
  `batch*seq*seq`; an op's extents equal to S or N x S are the ones that grow, so give an
  example whose S differs from the model's widths). Known types: the zoo's rules
  (models/zoo/gen_zoo.py: a multiply-add is 2 FLOPs; bytes = activations read + written at
  fp32 + parameter bytes; a layer whose input needs no gradient, the first, gets
  backward_flops = flops). Layers costed from their ops: FLOPs as FlopCounterMode counts them
  (mm, addmm, bmm, baddbmm, convolutions, scaled-dot-product attention; other ops 0),
  `backward_flops` the same matrix work once per operand that needs a gradient (attention
  2.5x, FlopCounterMode's backward), bytes every tensor the non-view ops read and wrote at
  their dtype (parameters as the constant term), and `host_ops`: the non-view ops dispatched
  (forward) and the ops that recorded an autograd node (backward).
- `--measure`: per-layer forward and backward wall times (ms, median of --repeat runs) in each
  layer's `measured` object (forward: pre/post forward hooks; backward, for layers with
  parameters: from the AccumulateGrad hooks, the interval between the previous layer's last
  gradient and this layer's last gradient).

Any module exports; an example input that is not a tensor is an error.
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
from torch.utils._python_dispatch import TorchDispatchMode

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

    def seq_power(self, dims):
        """How many of `dims` grow with the sequence: a dim equal to seq_len, or to batch x
        seq_len (tokens flattened); 2 for attention's score matrix."""
        if not self.seq:
            return 0
        return min(2, sum(1 for d in dims if d in (self.seq, self.batch * self.seq)))

    def poly(self, total, out_shape, constant=0.0, seq_power=None):
        """`total` measured at the example size; scales with the output's kind of extent
        (`seq_power` for a cost from recorded ops: the power of seq_len it grows with)."""
        result = {}
        per_sample = float(total) / self.batch
        if per_sample:
            if seq_power is not None and self.seq:
                if seq_power == 0:
                    result["batch"] = per_sample
                else:
                    key = "batch" + "*seq" * seq_power
                    result[key] = per_sample / self.seq ** seq_power
            elif self.image and len(out_shape) == 4:
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


def _layer_units(model):
    """How each module becomes layers: {id(module): (path, kind, role)}.

    role "known": a supported type (its children, such as MultiheadAttention.out_proj, are
    "covered" by it); "generic": any other module that owns parameters directly, or a leaf
    module of another type (costed from the aten ops it dispatches); "free": a supported
    parameter-free type; "covered": inside a known module; "container": every other module (the
    ops its own forward dispatches become functional layers).
    """
    supported = _supported_types()
    free = _param_free_types()
    units = {}
    for path, module in model.named_modules():
        if id(module) in units:  # a module registered twice: its first path
            continue
        # isinstance: subclasses (NonDynamicallyQuantizableLinear) compute what their base does.
        kind = next((t for cls, t in supported.items() if isinstance(module, cls)), None)
        if kind is None and _is_conv1d_linear(module):
            kind = "Linear"
        if kind is not None:
            units[id(module)] = (path, kind, "known")
            for sub in module.modules():
                if sub is not module:
                    units.setdefault(id(sub), (path, kind, "covered"))
            continue
        kind = next((t for cls, t in free.items() if isinstance(module, cls)), None)
        if kind is not None:
            units[id(module)] = (path, kind, "free")
        elif list(module.parameters(recurse=False)) or not list(module.children()):
            units[id(module)] = (path, type(module).__name__, "generic")
        else:
            units[id(module)] = (path, type(module).__name__, "container")
    return units


def _leaf_layers(model):
    """(path, module, type) of the modules that become layers of their own (the live recorder
    times these); the ops containers dispatch between them become functional layers."""
    modules = {id(m): m for _, m in model.named_modules()}
    return [(path, modules[key], kind) for key, (path, kind, role) in _layer_units(model).items()
            if role in ("known", "free", "generic")]


# Aten ops that only make another view of their input (no kernel, no bytes): the schema's
# return aliases an input without writing it, plus these that return fresh views of the same
# data. FlopCounterMode-compatible FLOP formulas are below.
_VIEW_LIKE = {"aten::_unsafe_view", "aten::_reshape_alias", "aten::lift_fresh"}
_MM = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1), "aten::baddbmm": (1, 2)}
_CONV = {"aten::convolution", "aten::_convolution", "aten::cudnn_convolution",
         "aten::_slow_conv2d_forward", "aten::convolution_overrideable"}
_SDPA = {"aten::_scaled_dot_product_efficient_attention",
         "aten::_scaled_dot_product_flash_attention",
         "aten::_scaled_dot_product_flash_attention_for_cpu",
         "aten::_scaled_dot_product_cudnn_attention"}


def _is_view_op(func):
    schema = func._schema
    if schema.name in _VIEW_LIKE:
        return True
    returns = schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write
                                 for r in returns)


class _Op:
    """One aten op dispatched during the recorded forward, with its costs at the example size.

    flops: as torch.utils.flop_counter.FlopCounterMode counts them (matrix multiplies,
    convolutions and attention; a multiply-add is 2; every other op 0). backward_flops: the
    same matrix work once per operand that needs a gradient (attention: FlopCounterMode's
    backward, 2.5x forward, when its inputs need gradients). bytes: every tensor read and
    written (parameters apart, in param_bytes). needs_grad: autograd records a node for it.
    """

    __slots__ = ("name", "view", "flops", "backward_flops", "bytes", "param_bytes", "out_shape",
                 "needs_grad", "attention", "work_dims")

    def __init__(self, func, args, kwargs, out, param_ptrs):
        self.name = func._schema.name
        self.view = _is_view_op(func)
        tensors = [a for a in _tensors(list(args) + list(kwargs.values()))]
        outs = _tensors(out)
        self.out_shape = tuple(outs[0].shape) if outs else ()
        self.needs_grad = torch.is_grad_enabled() and any(
            t.requires_grad for t in tensors if t.is_floating_point())
        self.attention = self.name in _SDPA
        self.work_dims = self.out_shape  # the extents its work grows with
        self.flops = 0
        self.backward_flops = 0
        if self.name in _MM:
            i, j = _MM[self.name]
            a, b = args[i], args[j]
            batch = a.shape[0] if a.dim() == 3 else 1
            self.flops = 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]
            self.work_dims = (a.shape[-2], a.shape[-1], b.shape[-1])
            self.backward_flops = self.flops * (int(a.requires_grad) + int(b.requires_grad))
        elif self.name in _CONV and len(args) >= 2:
            x, w = args[0], args[1]
            transposed = bool(args[6]) if len(args) > 6 else False
            spatial = (x.shape if transposed else self.out_shape)[2:]
            self.flops = (2 * _numel(spatial) * _numel(w.shape[2:]) * x.shape[0] * w.shape[0]
                          * w.shape[1])
            self.backward_flops = self.flops * (int(x.requires_grad) + int(w.requires_grad))
        elif self.attention:
            q, k, v = args[0], args[1], args[2]
            b, h, s_q, d = q.shape
            s_k, d_v = k.shape[-2], v.shape[-1]
            self.flops = 2 * b * h * s_q * s_k * d + 2 * b * h * s_q * s_k * d_v
            self.backward_flops = self.flops * 5 // 2 if self.needs_grad else 0
            self.work_dims = (s_q, s_k)
        self.bytes = 0
        self.param_bytes = 0
        if not self.view:
            for t in tensors:
                nbytes = t.numel() * t.element_size()
                if t.data_ptr() in param_ptrs:
                    self.param_bytes += nbytes
                else:
                    self.bytes += nbytes
            self.bytes += sum(t.numel() * t.element_size() for t in outs)


class _OpRecorder(TorchDispatchMode):
    """Hands every aten op dispatched under it to `on_op` (after running it)."""

    def __init__(self, on_op):
        super().__init__()
        self.on_op = on_op

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.on_op(func, args, kwargs, out)
        return out


def _record_forward(model, example, units):
    """One forward of `example`: the layers in execution order, with the ops each dispatched.

    Returns dicts {path, module, kind, role, in_shape, out_shape, in_grad, ops}; role "func" is
    a run of ops that a container's own forward dispatched between two layers (residual adds,
    attention, rotary embeddings, SiLU-times-up): named after its first op.
    """
    param_ptrs = {p.data_ptr() for p in model.parameters()}
    entries = []
    stack = []  # (module, entry or None)
    state = {"func": None}
    handles = []

    def pre(mod, inp):
        path, kind, role = units[id(mod)]
        entry = None
        if role == "covered":
            entry = stack[-1][1] if stack else None
        elif role != "container":
            x = _first_tensor(inp)
            entry = {"path": path, "module": mod, "kind": kind, "role": role, "ops": [],
                     "in_shape": tuple(x.shape) if x is not None else (),
                     "in_grad": bool(x is not None and x.requires_grad), "out_shape": ()}
            entries.append(entry)
        stack.append((mod, entry))
        state["func"] = None

    def post(mod, inp, out):
        if stack and stack[-1][0] is mod:
            _, entry = stack.pop()
            y = _first_tensor(out)
            if entry is not None and entry["module"] is mod and y is not None:
                entry["out_shape"] = tuple(y.shape)
        state["func"] = None

    def on_op(func, args, kwargs, out):
        if not stack:
            return
        mod, entry = stack[-1]
        op = _Op(func, args, kwargs, out, param_ptrs)
        if entry is None:
            path = units[id(mod)][0]
            entry = state["func"]
            if entry is None or entry["path"] != path:
                entry = {"path": path, "module": mod, "kind": None, "role": "func", "ops": [],
                         "in_shape": (), "in_grad": False, "out_shape": ()}
                entries.append(entry)
                state["func"] = entry
        entry["ops"].append(op)
        if entry["role"] == "func" and not op.view:
            entry["out_shape"] = op.out_shape

    for _, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
    try:
        with _OpRecorder(on_op):
            out = model(example)
        del out
    finally:
        for h in handles:
            h.remove()
    # Runs of views only (reshape, head splitting) are not layers.
    return [e for e in entries if e["role"] != "func" or any(not op.view for op in e["ops"])]


def _op_costs(ops, scaling):
    """(flops, backward_flops, bytes) polynomials and host op counts of recorded ops."""
    flops, backward, nbytes = {}, {}, {}
    const_bytes = 0
    forward_ops = backward_nodes = 0
    for op in ops:
        if op.needs_grad:
            backward_nodes += 1
        if op.view:
            continue
        forward_ops += 1
        power = scaling.seq_power(op.work_dims)
        _poly_add(flops, scaling.poly(op.flops, op.out_shape, seq_power=power))
        _poly_add(backward, scaling.poly(op.backward_flops, op.out_shape, seq_power=power))
        _poly_add(nbytes, scaling.poly(op.bytes, op.out_shape,
                                       seq_power=scaling.seq_power(op.out_shape)))
        const_bytes += op.param_bytes
    if const_bytes:
        _poly_add(nbytes, {"1": const_bytes})
    return flops, backward, nbytes, forward_ops, backward_nodes


def _poly_add(into, poly):
    for k, v in poly.items():
        total = into.get(k, 0) + v
        into[k] = int(total) if float(total).is_integer() else total


def _attention_attrs(ops):
    op = next(op for op in ops if op.attention)
    shape = op.out_shape
    return {"num_heads": int(shape[1]), "head_dim": int(shape[3])} if len(shape) == 4 else {}


def _func_name(ops):
    """A functional layer is named after its attention, else its costliest matrix op, else its
    first op."""
    if any(op.attention for op in ops):
        return "scaled_dot_product_attention"
    real = [op for op in ops if not op.view]
    top = max(real, key=lambda op: op.flops)
    op = top if top.flops else real[0]
    return op.name.split("::", 1)[-1].rstrip("_") or op.name


def _generic_type(entry, ops, flops):
    """The model-JSON type of a layer costed from its ops."""
    if any(op.attention for op in ops):
        return "AttentionCore"
    real = [op for op in ops if not op.view]
    if entry["role"] == "func" and len(real) == 1 and real[0].name in ("aten::add", "aten::add_"):
        return "Add"
    if any(v for v in flops.values()):
        return "Matmul"  # matrix work: the simulator costs it at tensor-core rates
    return entry["kind"] or "Elementwise"


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

    `example_input`: one tensor (its first dimension is the batch). Raises ExportError when it
    is not a tensor.
    """
    if not isinstance(example_input, torch.Tensor):
        raise ExportError("example_input: expected a torch.Tensor, got %s"
                          % type(example_input).__name__)
    model = module
    units = _layer_units(model)
    param_names = {id(p): n for n, p in model.named_parameters()}
    scaling = _Scaling(example_input)
    # Shapes, execution order and the aten ops of each layer come from one forward with
    # autograd on (requires_grad of a layer's input tells whether backward computes an input
    # gradient there).
    calls = _record_forward(model, example_input, units)

    ready = _record_grad_ready_order(model, example_input, param_names)
    ready_rank = {n: i for i, n in enumerate(ready)}

    out_layers = []
    used_names = {}
    for entry in calls:
        m, ops = entry["module"], entry["ops"]
        if entry["role"] == "func":
            base = (entry["path"] + "." if entry["path"] else "") + _func_name(ops)
            params = []
        else:
            base = entry["path"] or type(m).__name__.lower()
            params = [param_names[id(p)] for p in m.parameters() if id(p) in param_names]
        used_names[base] = used_names.get(base, 0) + 1
        lname = base if used_names[base] == 1 else "%s:%d" % (base, used_names[base])
        entry["name"] = lname
        if entry["role"] in ("known", "free"):
            # The zoo's cost rules (models/zoo/gen_zoo.py), so an exported torchvision or
            # transformers model costs what the zoo's copy of it costs.
            pbytes = sum(p.numel() * p.element_size() for p in m.parameters())
            flops, act_bytes = _layer_cost(m, entry["kind"], entry["in_shape"],
                                           entry["out_shape"], pbytes)
            layer = {"name": lname, "type": entry["kind"]}
            layer["flops"] = scaling.poly(flops, entry["out_shape"])
            layer["bytes"] = scaling.poly(act_bytes, entry["out_shape"], constant=pbytes)
            if params and not entry["in_grad"] and not isinstance(m, nn.Embedding):
                layer["backward_flops"] = layer["flops"]  # weight gradient only
            attrs = _attrs(m)
        elif _generic_type(entry, ops, {}) == "Add":
            # A residual add: the zoo's rule (one FLOP per output element; read two, write one).
            n_out = _numel(entry["out_shape"])
            layer = {"name": lname, "type": "Add",
                     "flops": scaling.poly(n_out, entry["out_shape"]),
                     "bytes": scaling.poly(3 * n_out * FP32_BYTES, entry["out_shape"])}
            attrs = {}
        else:
            # Any other module, and the ops between modules: costed from what it dispatched.
            flops, backward, nbytes, n_fwd, n_bwd = _op_costs(ops, scaling)
            layer = {"name": lname, "type": _generic_type(entry, ops, flops)}
            layer["flops"] = flops
            layer["bytes"] = nbytes
            layer["backward_flops"] = backward
            layer["host_ops"] = {"forward": n_fwd, "backward": n_bwd}
            attrs = _attention_attrs(ops) if layer["type"] == "AttentionCore" else {}
        if params:
            layer["params"] = params
            known = [p for p in params if p in ready_rank]
            layer["grad_ready_order"] = sorted(known, key=lambda p: ready_rank[p]) + [
                p for p in params if p not in ready_rank]
            # Keep the key order of the zoo's files: name, type, params, grad_ready_order.
            layer = {k: layer[k] for k in ("name", "type", "params", "grad_ready_order")} | {
                k: v for k, v in layer.items() if k not in ("name", "type", "params",
                                                            "grad_ready_order")}
        if attrs:
            layer["attrs"] = attrs
        out_layers.append(layer)

    if measure:
        layer_params = {}
        for c in calls:
            if c["role"] != "func":
                layer_params.setdefault(c["path"], [param_names[id(p)]
                                                    for p in c["module"].parameters()
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

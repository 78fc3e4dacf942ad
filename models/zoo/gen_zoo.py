#!/usr/bin/env python3
"""Generates the ddpscope model zoo: models/zoo/*.json (format: models/FORMAT.md).

Pure Python 3, no torch, no network. Each model is rebuilt here the way its original
(torch.nn / torchvision / Hugging Face transformers) constructs it, so that

  - `parameters` lists every trainable tensor in `model.parameters()` order: a module's own
    direct parameters first, then each child module's, recursively, in registration order;
  - `layers` lists the modules (and the parameter-free ops that cost time) in forward
    EXECUTION order, each with the parameters it owns and the order in which autograd makes
    their gradients ready (PyTorch 1.13 facts, see FORMAT.md);
  - `flops` / `bytes` are forward costs as polynomials in batch, seq and image.

Usage:
  gen_zoo.py            rewrite the JSON files next to this script
  gen_zoo.py --check    exit 1 if any committed file differs from what would be generated
  gen_zoo.py --out DIR  write into DIR instead

Output is deterministic: re-running reproduces the committed files byte for byte.
"""

import argparse
import json
import math
import os
import sys

FP32_BYTES = 4  # activations and parameters are costed at fp32

# ---------------------------------------------------------------------------------------
# Polynomials in (batch, seq, image): {(batchPow, seqPow, imagePow): coef}


def poly(coef=1.0, b=0, s=0, i=0):
    return {(b, s, i): float(coef)}


def padd(*ps):
    out = {}
    for p in ps:
        for k, v in p.items():
            out[k] = out.get(k, 0.0) + v
    return {k: v for k, v in out.items() if v != 0.0}


def pmul(a, b):
    out = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            k = (ka[0] + kb[0], ka[1] + kb[1], ka[2] + kb[2])
            out[k] = out.get(k, 0.0) + va * vb
    return {k: v for k, v in out.items() if v != 0.0}


def pscale(p, c):
    return {k: v * c for k, v in p.items() if v * c != 0.0}


def monomial_name(key):
    b, s, i = key
    parts = ["batch"] * b + ["seq"] * s + ["image"] * i
    return "*".join(parts) if parts else "1"


def poly_json(p):
    # Sorted by (total degree desc, name) so the output is stable and readable.
    items = sorted(p.items(), key=lambda kv: (-sum(kv[0]), monomial_name(kv[0])))
    out = {}
    for k, v in items:
        out[monomial_name(k)] = int(v) if float(v).is_integer() and abs(v) < 2**53 else v
    return out


ONE = poly(1.0)
BATCH = poly(1.0, b=1)

# ---------------------------------------------------------------------------------------
# Model builder


class Model:
    def __init__(self, name, description, inputs):
        self.name = name
        self.description = description
        self.inputs = inputs
        self.params = []  # [name, shape]
        self.param_index = {}
        self.buffers = []  # [name, shape, dtype]
        self.layers = []
        self.layer_names = set()
        self.last = None  # name of the last executed layer (default producer of the next)

    # -- registration (model.parameters() / model.buffers() order)
    def param(self, name, shape):
        assert name not in self.param_index, name
        self.param_index[name] = len(self.params)
        self.params.append([name, list(shape)])
        return name

    def buffer(self, name, shape, dtype):
        self.buffers.append([name, list(shape), dtype])

    def numel(self, pname):
        return math.prod(self.params[self.param_index[pname]][1])

    # -- execution
    def layer(self, name, type_, params=(), ready=None, flops=None, bytes_=None, attrs=None,
              inputs=None, backward_flops=None, host_ops=None):
        assert name not in self.layer_names, name
        for p in params:
            assert p in self.param_index, p
        ready = list(params) if ready is None else list(ready)
        assert sorted(ready) == sorted(params), (name, ready, params)
        layer = {"name": name, "type": type_}
        if params:
            layer["params"] = list(params)
            layer["grad_ready_order"] = ready
        layer["flops"] = poly_json(flops or {})
        layer["bytes"] = poly_json(bytes_ or {})
        if backward_flops is not None:
            layer["backward_flops"] = poly_json(backward_flops)
        if attrs:
            layer["attrs"] = attrs
        if inputs is not None and inputs != ([self.last] if self.last else ["@input"]):
            layer["inputs"] = list(inputs)
        if host_ops:
            layer["host_ops"] = host_ops
        self.layers.append(layer)
        self.layer_names.add(name)
        self.last = name
        return name

    def param_bytes(self, params):
        return poly(sum(self.numel(p) for p in params) * FP32_BYTES)

    def to_json(self):
        lines = ["{"]
        lines.append('"name": %s,' % json.dumps(self.name))
        lines.append('"description": %s,' % json.dumps(self.description))
        lines.append('"inputs": %s,' % json.dumps(self.inputs))
        lines.append('"parameters": [')
        for i, (n, s) in enumerate(self.params):
            sep = "," if i + 1 < len(self.params) else ""
            lines.append(' {"name": %s, "shape": %s, "dtype": "float32"}%s'
                         % (json.dumps(n), json.dumps(s), sep))
        lines.append("],")
        lines.append('"buffers": [')
        for i, (n, s, d) in enumerate(self.buffers):
            sep = "," if i + 1 < len(self.buffers) else ""
            lines.append(' {"name": %s, "shape": %s, "dtype": %s}%s'
                         % (json.dumps(n), json.dumps(s), json.dumps(d), sep))
        lines.append("],")
        lines.append('"layers": [')
        for i, layer in enumerate(self.layers):
            sep = "," if i + 1 < len(self.layers) else ""
            lines.append(" " + json.dumps(layer, separators=(", ", ": ")) + sep)
        lines.append("]")
        lines.append("}")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------
# CNNs. Costs are computed at the default image size; a layer whose activations are
# spatial scales as coef * batch * image^2 (coef = per-sample cost at the default size /
# default^2), which is exact up to the rounding of strided output sizes.


class Cnn(Model):
    def __init__(self, name, description, batch, image):
        super().__init__(name, description, {"batch": batch, "image_size": image})
        self.image = image
        self.shape = (3, image, image)  # per-sample activation (C, H, W) at the default size
        self.spatial = True             # False after global pooling

    def per_sample(self, per_sample_cost):
        if self.spatial:
            return poly(per_sample_cost / float(self.image * self.image), b=1, i=2)
        return poly(per_sample_cost, b=1)

    def elements(self, shape=None):
        return math.prod(shape or self.shape)

    def conv(self, name, cin, cout, k, stride=1, pad=0, groups=1, bias=False, inputs=None,
             first=False):
        c, h, w = self.shape
        assert c == cin, (name, c, cin)
        w_name = self.param(name + ".weight", [cout, cin // groups, k, k])
        params = [w_name]
        if bias:
            params.append(self.param(name + ".bias", [cout]))
        ho = (h + 2 * pad - k) // stride + 1
        wo = (w + 2 * pad - k) // stride + 1
        out_elems = cout * ho * wo
        flops = 2 * cout * (cin // groups) * k * k * ho * wo + (out_elems if bias else 0)
        in_elems = self.elements()
        self.shape = (cout, ho, wo)
        attrs = {"in_channels": cin, "out_channels": cout, "kernel_size": k, "stride": stride,
                 "padding": pad, "groups": groups, "bias": 1 if bias else 0}
        fl = self.per_sample(flops)
        # The first layer's input needs no gradient: backward only computes the weight grad.
        return self.layer(name, "Conv2d", params, ready=params, flops=fl,
                          bytes_=padd(self.per_sample((in_elems + out_elems) * FP32_BYTES),
                                      self.param_bytes(params)),
                          attrs=attrs, inputs=inputs, backward_flops=fl if first else None)

    def bn(self, name):
        c = self.shape[0]
        params = [self.param(name + ".weight", [c]), self.param(name + ".bias", [c])]
        self.buffer(name + ".running_mean", [c], "float32")
        self.buffer(name + ".running_var", [c], "float32")
        self.buffer(name + ".num_batches_tracked", [], "int64")
        n = self.elements()
        # Training-mode batch norm: statistics (2/elem) + normalize and affine (2/elem).
        return self.layer(name, "BatchNorm2d", params, ready=params,
                          flops=self.per_sample(4 * n),
                          bytes_=padd(self.per_sample(2 * n * FP32_BYTES),
                                      self.param_bytes(params)),
                          attrs={"num_features": c, "eps": 1e-05, "momentum": 0.1})

    def act(self, name, type_="ReLU"):
        n = self.elements()
        return self.layer(name, type_, flops=self.per_sample(n),
                          bytes_=self.per_sample(2 * n * FP32_BYTES), attrs={"inplace": 1})

    def add(self, name, a, b):
        n = self.elements()
        return self.layer(name, "Add", flops=self.per_sample(n),
                          bytes_=self.per_sample(3 * n * FP32_BYTES), inputs=[a, b])

    def maxpool(self, name, k, stride, pad):
        c, h, w = self.shape
        ho = (h + 2 * pad - k) // stride + 1
        wo = (w + 2 * pad - k) // stride + 1
        in_elems = self.elements()
        self.shape = (c, ho, wo)
        out_elems = self.elements()
        return self.layer(name, "MaxPool2d", flops=self.per_sample(k * k * out_elems),
                          bytes_=self.per_sample((in_elems + out_elems) * FP32_BYTES),
                          attrs={"kernel_size": k, "stride": stride, "padding": pad})

    def adaptive_avgpool(self, name, out_hw):
        c, h, w = self.shape
        in_elems = self.elements()
        self.shape = (c, out_hw, out_hw)
        out_elems = self.elements()
        fl = self.per_sample(in_elems)
        by = self.per_sample((in_elems + out_elems) * FP32_BYTES)
        if out_hw == 1:
            self.spatial = False  # everything after a global pool is per sample
        return self.layer(name, "AdaptiveAvgPool2d", flops=fl, bytes_=by,
                          attrs={"output_size": out_hw})

    def linear(self, name, fin, fout, bias=True, first=False):
        assert self.elements() == fin, (name, self.shape, fin)
        params = [self.param(name + ".weight", [fout, fin])]
        if bias:
            params.append(self.param(name + ".bias", [fout]))
        self.shape = (fout, 1, 1)
        fl = 2 * fin * fout + (fout if bias else 0)
        # addmm(bias, x, weight.t()): bias's gradient is ready before weight's (TBackward).
        fl = self.per_sample(fl)
        return self.layer(name, "Linear", params, ready=list(reversed(params)), flops=fl,
                          bytes_=padd(self.per_sample((fin + fout) * FP32_BYTES),
                                      self.param_bytes(params)),
                          attrs={"in_features": fin, "out_features": fout,
                                 "bias": 1 if bias else 0},
                          backward_flops=fl if first else None)

    def dropout(self, name, p):
        n = self.elements()
        return self.layer(name, "Dropout", flops=self.per_sample(2 * n),
                          bytes_=self.per_sample(3 * n * FP32_BYTES), attrs={"p": p})


def resnet(name, block, layers, description):
    m = Cnn(name, description, 32, 224)
    m.conv("conv1", 3, 64, 7, stride=2, pad=3, first=True)
    m.bn("bn1")
    m.act("relu")
    m.maxpool("maxpool", 3, 2, 1)
    inplanes = 64
    expansion = 1 if block == "basic" else 4
    for li, (planes, blocks) in enumerate(zip([64, 128, 256, 512], layers)):
        for bi in range(blocks):
            stride = 2 if (li > 0 and bi == 0) else 1
            p = "layer%d.%d" % (li + 1, bi)
            block_in = m.last
            in_shape = m.shape
            if block == "basic":
                m.conv(p + ".conv1", inplanes, planes, 3, stride=stride, pad=1)
                m.bn(p + ".bn1")
                m.act(p + ".relu")
                m.conv(p + ".conv2", planes, planes, 3, pad=1)
                main = m.bn(p + ".bn2")
            else:
                # torchvision v1.5 Bottleneck: the stride sits on the 3x3 conv.
                m.conv(p + ".conv1", inplanes, planes, 1)
                m.bn(p + ".bn1")
                m.act(p + ".relu")
                m.conv(p + ".conv2", planes, planes, 3, stride=stride, pad=1)
                m.bn(p + ".bn2")
                m.act(p + ".relu:2")
                m.conv(p + ".conv3", planes, planes * expansion, 1)
                main = m.bn(p + ".bn3")
            identity = block_in
            if stride != 1 or inplanes != planes * expansion:
                # forward() runs the downsample branch after the main branch's last BN.
                out_shape = m.shape
                m.shape = in_shape
                m.conv(p + ".downsample.0", inplanes, planes * expansion, 1, stride=stride,
                       inputs=[block_in])
                identity = m.bn(p + ".downsample.1")
                assert m.shape == out_shape
            m.add(p + ".add", main, identity)
            m.act(p + (".relu:2" if block == "basic" else ".relu:3"))
            inplanes = planes * expansion
    m.adaptive_avgpool("avgpool", 1)
    m.linear("fc", 512 * expansion, 1000)
    return m


def vgg16():
    m = Cnn("vgg16", "torchvision vgg16 (configuration D, no batch norm), 1000 classes",
            32, 224)
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
           512, 512, 512, "M"]
    idx = 0
    cin = 3
    for v in cfg:
        if v == "M":
            m.maxpool("features.%d" % idx, 2, 2, 0)
            idx += 1
        else:
            m.conv("features.%d" % idx, cin, v, 3, pad=1, bias=True, first=(idx == 0))
            m.act("features.%d" % (idx + 1))
            idx += 2
            cin = v
    m.adaptive_avgpool("avgpool", 7)
    m.spatial = False
    m.shape = (512 * 7 * 7, 1, 1)  # torch.flatten(x, 1) is a view
    m.linear("classifier.0", 25088, 4096)
    m.act("classifier.1")
    m.dropout("classifier.2", 0.5)
    m.linear("classifier.3", 4096, 4096)
    m.act("classifier.4")
    m.dropout("classifier.5", 0.5)
    m.linear("classifier.6", 4096, 1000)
    return m


def mobilenet_v2():
    m = Cnn("mobilenet_v2", "torchvision mobilenet_v2 (width 1.0), 1000 classes", 32, 224)

    def conv_bn_act(prefix, cin, cout, k=3, stride=1, groups=1, first=False):
        # Conv2dNormActivation: .0 Conv2d(bias=False), .1 BatchNorm2d, .2 ReLU6
        m.conv(prefix + ".0", cin, cout, k, stride=stride, pad=(k - 1) // 2, groups=groups,
               first=first)
        m.bn(prefix + ".1")
        return m.act(prefix + ".2", "ReLU6")

    def make_divisible(v, divisor=8):
        new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
        if new_v < 0.9 * v:
            new_v += divisor
        return new_v

    settings = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
    inp = make_divisible(32)
    conv_bn_act("features.0", 3, inp, stride=2, first=True)
    fi = 1
    for t, c, n, s in settings:
        oup = make_divisible(c)
        for i in range(n):
            stride = s if i == 0 else 1
            p = "features.%d.conv" % fi
            block_in = m.last
            hidden = int(round(inp * t))
            ci = 0
            if t != 1:
                conv_bn_act("%s.%d" % (p, ci), inp, hidden, k=1)
                ci += 1
            conv_bn_act("%s.%d" % (p, ci), hidden, hidden, stride=stride, groups=hidden)
            m.conv("%s.%d" % (p, ci + 1), hidden, oup, 1)
            last = m.bn("%s.%d" % (p, ci + 2))
            if stride == 1 and inp == oup:
                m.add("features.%d.add" % fi, block_in, last)
            inp = oup
            fi += 1
    conv_bn_act("features.%d" % fi, inp, 1280, k=1)
    m.adaptive_avgpool("avgpool", 1)  # nn.functional.adaptive_avg_pool2d in forward()
    m.dropout("classifier.0", 0.2)
    m.linear("classifier.1", 1280, 1000)
    return m


# ---------------------------------------------------------------------------------------
# Transformers. `tokens` is the per-sample token count as a polynomial (seq for text,
# image^2/256 + 1 for ViT-B/16); activations are [tokens, width] per sample.


class Transformer(Model):
    def __init__(self, name, description, inputs, tokens):
        super().__init__(name, description, inputs)
        self.tokens = tokens                     # per sample
        self.all_tokens = pmul(BATCH, tokens)    # per step

    def tok(self, per_token):
        return pscale(self.all_tokens, per_token)

    def linear(self, name, fin, fout, type_="Linear", weight=None, bias_name=None,
               inputs=None, per_sample=False, attrs_extra=None):
        # `weight`/`bias_name` let a packed projection (MultiheadAttention.in_proj_weight)
        # be costed as the F.linear it is.
        if weight is None:
            shape = [fin, fout] if type_ == "Conv1D" else [fout, fin]
            weight = self.param(name + ".weight", shape)
            bias_name = self.param(name + ".bias", [fout])
        params = [weight, bias_name]
        count = BATCH if per_sample else self.all_tokens
        attrs = {"in_features": fin, "out_features": fout, "bias": 1}
        if attrs_extra:
            attrs.update(attrs_extra)
        # Linear: addmm(bias, x, weight.t()); HF Conv1D: addmm(bias, x, weight). In both the
        # bias gradient is ready before the weight gradient.
        return self.layer(name, type_, params, ready=[bias_name, weight],
                          flops=pscale(count, 2 * fin * fout + fout),
                          bytes_=padd(pscale(count, (fin + fout) * FP32_BYTES),
                                      self.param_bytes(params)),
                          attrs=attrs, inputs=inputs)

    def layernorm(self, name, width, eps, inputs=None):
        params = [self.param(name + ".weight", [width]), self.param(name + ".bias", [width])]
        return self.layer(name, "LayerNorm", params, ready=params,
                          flops=self.tok(5 * width),
                          bytes_=padd(self.tok(2 * width * FP32_BYTES), self.param_bytes(params)),
                          attrs={"normalized_shape": width, "eps": eps}, inputs=inputs)

    def elementwise(self, name, type_, width, flops_per_elem, tensors, attrs=None, inputs=None):
        return self.layer(name, type_, flops=self.tok(flops_per_elem * width),
                          bytes_=self.tok(tensors * width * FP32_BYTES), attrs=attrs,
                          inputs=inputs)

    def dropout(self, name, width, p, inputs=None):
        return self.elementwise(name, "Dropout", width, 2, 3, attrs={"p": p}, inputs=inputs)

    def add(self, name, width, a, b):
        return self.elementwise(name, "Add", width, 1, 3, inputs=[a, b])

    def embedding(self, name, num, dim, inputs=None):
        w = self.param(name + ".weight", [num, dim])
        return self.layer(name, "Embedding", [w], flops={},
                          bytes_=self.tok(2 * dim * FP32_BYTES),
                          attrs={"num_embeddings": num, "embedding_dim": dim},
                          inputs=inputs)

    def attention_core(self, name, width, heads, causal, p, inputs=None, host_ops=None):
        # QK^T and PV are 2*T^2*width FLOPs each per sample; scale + mask + softmax +
        # dropout ~ 8 FLOPs per score. Bytes: q, k, v, out, plus the [heads, T, T] score
        # matrix written and read about 4 times (scores, softmax, dropout, PV).
        t2 = pmul(self.tokens, self.tokens)
        scores = pmul(BATCH, pscale(t2, heads))
        flops = padd(pmul(BATCH, pscale(t2, 4 * width)), pscale(scores, 8))
        bytes_ = padd(self.tok(4 * width * FP32_BYTES), pscale(scores, 4 * FP32_BYTES))
        attrs = {"num_heads": heads, "head_dim": width // heads, "causal": 1 if causal else 0,
                 "dropout": p}
        return self.layer(name, "AttentionCore", flops=flops, bytes_=bytes_, attrs=attrs,
                          inputs=inputs, host_ops=host_ops)


def vit_b16():
    hidden, heads, mlp_dim, layers, patch, image = 768, 12, 3072, 12, 16, 224
    tokens = padd(poly(1.0 / (patch * patch), i=2), ONE)  # (image/16)^2 patches + class token
    m = Transformer("vit-b16", "torchvision vit_b_16 (ViT-Base, patch 16, 224x224), "
                    "1000 classes", {"batch": 32, "image_size": image}, tokens)
    n_tok = (image // patch) ** 2 + 1
    # VisionTransformer's own parameter (class_token) comes before its children's.
    m.param("class_token", [1, 1, hidden])
    # conv_proj: 16x16 stride-16 patch embedding; per sample 2*768*3*256 per patch.
    cw = m.param("conv_proj.weight", [hidden, 3, patch, patch])
    cb = m.param("conv_proj.bias", [hidden])
    patches = poly(1.0 / (patch * patch), b=1, i=2)
    conv_fl = pscale(patches, 2 * hidden * 3 * patch * patch + hidden)
    m.layer("conv_proj", "Conv2d", [cw, cb], ready=[cw, cb], flops=conv_fl,
            bytes_=padd(poly(3 * FP32_BYTES, b=1, i=2), pscale(patches, hidden * FP32_BYTES),
                        m.param_bytes([cw, cb])),
            attrs={"in_channels": 3, "out_channels": hidden, "kernel_size": patch,
                   "stride": patch, "padding": 0, "groups": 1, "bias": 1},
            backward_flops=conv_fl)
    # torch.cat([class_token.expand(n, -1, -1), x], dim=1): a copy of all tokens.
    m.layer("class_token", "ClassToken", ["class_token"], flops={},
            bytes_=padd(m.tok(hidden * FP32_BYTES), pscale(patches, hidden * FP32_BYTES)),
            attrs={"embedding_dim": hidden})
    pos = m.param("encoder.pos_embedding", [1, n_tok, hidden])
    m.layer("encoder.pos_embedding", "AddParameter", [pos], flops=m.tok(hidden),
            bytes_=padd(m.tok(2 * hidden * FP32_BYTES), m.param_bytes([pos])),
            attrs={"embedding_dim": hidden})
    # encoder.dropout has p=0.0 (a no-op in PyTorch), so it is not a layer.
    for i in range(layers):
        p = "encoder.layers.encoder_layer_%d" % i
        block_in = m.last
        m.layernorm(p + ".ln_1", hidden, 1e-06)
        ln1 = m.last
        # nn.MultiheadAttention registers in_proj_weight, in_proj_bias, then out_proj.
        w = m.param(p + ".self_attention.in_proj_weight", [3 * hidden, hidden])
        b = m.param(p + ".self_attention.in_proj_bias", [3 * hidden])
        m.linear(p + ".self_attention.in_proj", hidden, 3 * hidden, weight=w, bias_name=b,
                 inputs=[ln1])
        # torchvision's nn.MultiheadAttention runs F.multi_head_attention_forward: besides its two
        # projections' GEMMs, the chunk of the packed projection, the head reshapes and
        # transposes, SDPA and the merge of the heads. PyTorch 2.11 under bf16 autocast (the
        # H200 kit's vit-b16 trace, run1, scripts/gpu_kit/host_facts.py's per-module counts):
        # 25 forward ops, 36 backward nodes, 13 and 29 CUDA runtime calls per module call (the
        # runtime's state queries not counted); the core is that less what the two Linear layers
        # count (1 op, 6 nodes, 3.8 and 8 calls each), where the generic core counts 9, 9, 3.3
        # and 8.1.
        m.attention_core(p + ".self_attention.core", hidden, heads, False, 0.0,
                         host_ops={"forward": 23, "backward": 24, "forward_launches": 5.4,
                                   "backward_launches": 13})
        m.linear(p + ".self_attention.out_proj", hidden, hidden)
        attn = m.last
        x = m.add(p + ".add", hidden, attn, block_in)
        m.layernorm(p + ".ln_2", hidden, 1e-06)
        m.linear(p + ".mlp.0", hidden, mlp_dim)
        m.elementwise(p + ".mlp.1", "GELU", mlp_dim, 8, 2, attrs={"approximate_tanh": 0})
        m.linear(p + ".mlp.3", mlp_dim, hidden)
        m.add(p + ".add:2", hidden, x, m.last)
    m.layernorm("encoder.ln", hidden, 1e-06)
    m.layer("select_class_token", "SelectToken", flops={}, bytes_=pscale(BATCH, 2 * hidden * 4),
            attrs={"index": 0})
    m.linear("heads.head", hidden, 1000, per_sample=True)
    return m


def llama_small():
    # A Llama-style decoder the size of a small GPT-2: Hugging Face LlamaForCausalLM's module
    # names and parameter order (embed_tokens; per layer self_attn q/k/v/o, mlp gate/up/down,
    # input_layernorm, post_attention_layernorm; norm; an untied lm_head), no biases,
    # RMSNorm, rotary position embeddings on q and k, SwiGLU, causal SDPA.
    hidden, heads, inter, layers, vocab, eps = 768, 12, 2048, 8, 32000, 1e-06
    m = Transformer("llama-small", "Llama-style decoder in Hugging Face LlamaForCausalLM's "
                    "layout (8 layers, hidden 768, 12 heads, SwiGLU 2048, RMSNorm, RoPE, "
                    "vocab 32000, untied lm_head)", {"batch": 8, "seq_len": 512},
                    poly(1.0, s=1))

    m.embedding("model.embed_tokens", vocab, hidden, inputs=["@input"])
    m.buffer("model.rotary_emb.inv_freq", [hidden // heads // 2], "float32")
    for i in range(layers):
        p = "model.layers.%d" % i
        block_in = m.last
        # Registration order (model.parameters()): self_attn, mlp, then the two norms.
        a = p + ".self_attn."
        names = [a + "q_proj", a + "k_proj", a + "v_proj", a + "o_proj"]
        f = p + ".mlp."
        names += [f + "gate_proj", f + "up_proj", f + "down_proj"]
        shapes = [[hidden, hidden]] * 4 + [[inter, hidden], [inter, hidden], [hidden, inter]]
        for n, shape in zip(names, shapes):
            m.param(n + ".weight", shape)
        for n in (p + ".input_layernorm", p + ".post_attention_layernorm"):
            m.param(n + ".weight", [hidden])
        ln1 = rmsnorm_layer(m, p + ".input_layernorm", hidden, eps)
        q = linear_nobias(m, a + "q_proj", hidden, hidden, [ln1])
        k = linear_nobias(m, a + "k_proj", hidden, hidden, [ln1])
        v = linear_nobias(m, a + "v_proj", hidden, hidden, [ln1])
        # q * cos + rotate_half(q) * sin, and the same for k: 3 FLOPs an element of each.
        rope = m.layer(a + "rotary", "RotaryEmbedding", flops=m.tok(6 * hidden),
                       bytes_=m.tok(4 * hidden * FP32_BYTES),
                       attrs={"head_dim": hidden // heads}, inputs=[q, k])
        m.attention_core(a + "core", hidden, heads, True, 0.0, inputs=[rope, v])
        linear_nobias(m, a + "o_proj", hidden, hidden, None)
        x = m.add(p + ".add", hidden, m.last, block_in)
        ln2 = rmsnorm_layer(m, p + ".post_attention_layernorm", hidden, eps)
        g = linear_nobias(m, f + "gate_proj", hidden, inter, [ln2])
        u = linear_nobias(m, f + "up_proj", hidden, inter, [ln2])
        # silu(gate) * up: ~5 FLOPs an element; reads gate and up, writes the product.
        m.layer(f + "act", "SwiGLU", flops=m.tok(5 * inter), bytes_=m.tok(3 * inter * FP32_BYTES),
                inputs=[g, u])
        linear_nobias(m, f + "down_proj", inter, hidden, None)
        m.add(p + ".add:2", hidden, x, m.last)
    m.param("model.norm.weight", [hidden])
    rmsnorm_layer(m, "model.norm", hidden, eps)
    m.param("lm_head.weight", [vocab, hidden])
    linear_nobias(m, "lm_head", hidden, vocab, None)
    return m


def rmsnorm_layer(m, name, width, eps):
    """RMSNorm over a registered weight: x * rsqrt(mean(x^2) + eps) * weight, ~4 FLOPs an
    element; reads x, writes y."""
    w = name + ".weight"
    return m.layer(name, "RMSNorm", [w], flops=m.tok(4 * width),
                   bytes_=padd(m.tok(2 * width * FP32_BYTES), m.param_bytes([w])),
                   attrs={"normalized_shape": width, "eps": eps})


def linear_nobias(m, name, fin, fout, inputs):
    """nn.Linear(bias=False) whose weight is already registered: x @ weight.t()."""
    w = name + ".weight"
    return m.layer(name, "Linear", [w], flops=m.tok(2 * fin * fout),
                   bytes_=padd(m.tok((fin + fout) * FP32_BYTES), m.param_bytes([w])),
                   attrs={"in_features": fin, "out_features": fout, "bias": 0}, inputs=inputs)


def bert_base():
    hidden, heads, inter, layers, vocab, max_pos = 768, 12, 3072, 12, 30522, 512
    m = Transformer("bert-base", "Hugging Face BertModel, bert-base-uncased config "
                    "(12 layers, hidden 768, 12 heads), with pooler, no task head",
                    {"batch": 8, "seq_len": 512}, poly(1.0, s=1))
    eps = 1e-12
    # BertEmbeddings registers word, position, token_type, LayerNorm; forward() runs word,
    # token_type, position.
    we = m.param("embeddings.word_embeddings.weight", [vocab, hidden])
    pe = m.param("embeddings.position_embeddings.weight", [max_pos, hidden])
    te = m.param("embeddings.token_type_embeddings.weight", [2, hidden])
    m.buffer("embeddings.position_ids", [1, max_pos], "int64")
    m.buffer("embeddings.token_type_ids", [1, max_pos], "int64")
    emb_bytes = m.tok(2 * hidden * FP32_BYTES)

    def emb_layer(name, w, rows, inputs):
        return m.layer(name, "Embedding", [w], flops={}, bytes_=emb_bytes,
                       attrs={"num_embeddings": rows, "embedding_dim": hidden}, inputs=inputs)

    word = emb_layer("embeddings.word_embeddings", we, vocab, ["@input"])
    tt = emb_layer("embeddings.token_type_embeddings", te, 2, ["@input"])
    x = m.add("embeddings.add", hidden, word, tt)
    pos = emb_layer("embeddings.position_embeddings", pe, max_pos, ["@input"])
    m.add("embeddings.add:2", hidden, x, pos)
    m.layernorm("embeddings.LayerNorm", hidden, eps)
    m.dropout("embeddings.dropout", hidden, 0.1)
    for i in range(layers):
        p = "encoder.layer.%d" % i
        block_in = m.last
        q = m.linear(p + ".attention.self.query", hidden, hidden, inputs=[block_in])
        k = m.linear(p + ".attention.self.key", hidden, hidden, inputs=[block_in])
        v = m.linear(p + ".attention.self.value", hidden, hidden, inputs=[block_in])
        m.attention_core(p + ".attention.self.core", hidden, heads, False, 0.1,
                         inputs=[q, k, v])
        m.linear(p + ".attention.output.dense", hidden, hidden)
        m.dropout(p + ".attention.output.dropout", hidden, 0.1)
        m.add(p + ".attention.output.add", hidden, m.last, block_in)
        attn_out = m.layernorm(p + ".attention.output.LayerNorm", hidden, eps)
        m.linear(p + ".intermediate.dense", hidden, inter)
        m.elementwise(p + ".intermediate.intermediate_act_fn", "GELU", inter, 8, 2,
                      attrs={"approximate_tanh": 0})
        m.linear(p + ".output.dense", inter, hidden)
        m.dropout(p + ".output.dropout", hidden, 0.1)
        m.add(p + ".output.add", hidden, m.last, attn_out)
        m.layernorm(p + ".output.LayerNorm", hidden, eps)
    m.layer("pooler.select_first_token", "SelectToken", flops={},
            bytes_=pscale(BATCH, 2 * hidden * FP32_BYTES), attrs={"index": 0})
    m.linear("pooler.dense", hidden, hidden, per_sample=True)
    m.layer("pooler.activation", "Tanh", flops=pscale(BATCH, 4 * hidden),
            bytes_=pscale(BATCH, 2 * hidden * FP32_BYTES))
    return m


def gpt2(name, hidden, layers, heads, description):
    vocab, n_pos, eps, pdrop = 50257, 1024, 1e-05, 0.1
    m = Transformer(name, description, {"batch": 8, "seq_len": 1024}, poly(1.0, s=1))
    m.embedding("wte", vocab, hidden, inputs=["@input"])
    wte = m.last
    m.embedding("wpe", n_pos, hidden, inputs=["@input"])
    m.add("add", hidden, wte, m.last)
    m.dropout("drop", hidden, pdrop)
    for i in range(layers):
        p = "h.%d" % i
        block_in = m.last
        m.layernorm(p + ".ln_1", hidden, eps)
        # GPT2Attention buffers (transformers 4.2x): the causal mask and masked_bias.
        m.buffer(p + ".attn.bias", [1, 1, n_pos, n_pos], "bool")
        m.buffer(p + ".attn.masked_bias", [], "float32")
        m.linear(p + ".attn.c_attn", hidden, 3 * hidden, type_="Conv1D")
        m.attention_core(p + ".attn.core", hidden, heads, True, pdrop)
        m.linear(p + ".attn.c_proj", hidden, hidden, type_="Conv1D")
        m.dropout(p + ".attn.resid_dropout", hidden, pdrop)
        x = m.add(p + ".add", hidden, m.last, block_in)
        m.layernorm(p + ".ln_2", hidden, eps)
        m.linear(p + ".mlp.c_fc", hidden, 4 * hidden, type_="Conv1D")
        m.elementwise(p + ".mlp.act", "GELU", 4 * hidden, 8, 2, attrs={"approximate_tanh": 1})
        m.linear(p + ".mlp.c_proj", 4 * hidden, hidden, type_="Conv1D")
        m.dropout(p + ".mlp.dropout", hidden, pdrop)
        m.add(p + ".add:2", hidden, x, m.last)
    m.layernorm("ln_f", hidden, eps)
    return m


# ---------------------------------------------------------------------------------------
# MLPs


def mlp(name, description, batch, widths):
    m = Cnn(name, description, batch, 1)
    m.inputs = {"batch": batch}
    m.spatial = False
    m.shape = (widths[0], 1, 1)
    for i in range(len(widths) - 1):
        m.linear(str(2 * i), widths[i], widths[i + 1], first=(i == 0))
        if i + 2 < len(widths):
            m.act(str(2 * i + 1))
    return m


def all_models():
    return [
        mlp("mlp-tiny", "nn.Sequential(Linear(10, 50), ReLU(), Linear(50, 1))", 20,
            [10, 50, 1]),
        mlp("mlp-wide", "nn.Sequential of 8 x Linear(1024, 1024) with ReLU between", 64,
            [1024] * 9),
        resnet("resnet18", "basic", [2, 2, 2, 2], "torchvision resnet18, 1000 classes"),
        resnet("resnet50", "bottleneck", [3, 4, 6, 3],
               "torchvision resnet50 (v1.5: stride on the 3x3 conv), 1000 classes"),
        vgg16(),
        mobilenet_v2(),
        vit_b16(),
        bert_base(),
        llama_small(),
        gpt2("gpt2-small", 768, 12, 12, "Hugging Face GPT2Model, gpt2 config (12 layers, "
             "n_embd 768, 12 heads), no lm_head"),
        gpt2("gpt2-xl", 1600, 48, 25, "Hugging Face GPT2Model, gpt2-xl config (48 layers, "
             "n_embd 1600, 25 heads), no lm_head"),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    stale = []
    for m in all_models():
        text = m.to_json()
        path = os.path.join(args.out, m.name + ".json")
        if args.check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        stale.append(path)
            except OSError:
                stale.append(path)
            continue
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        total = sum(math.prod(s) for _, s in m.params)
        print("%-14s %13d params %4d tensors %4d layers %8d bytes"
              % (m.name, total, len(m.params), len(m.layers), len(text)))
    if stale:
        print("stale (re-run models/zoo/gen_zoo.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

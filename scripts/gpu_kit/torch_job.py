#!/usr/bin/env python3
"""The PyTorch half of the GPU evidence kit (scripts/gpu-kit): one model, one process, one device.

For one model of ddpscope's zoo (written out here in plain torch with the zoo's module names and
parameter order, so no torchvision or transformers is needed) it measures, on one GPU (or the CPU
as a rehearsal):

  eager          plain training steps, no DDP: the step the runtime's step is compared with
  ddp-cap<C>     DistributedDataParallel at world size 1, bucket_cap_mb=C for each C of --caps
                 (default 1, 5, 25, 100; given explicitly, current PyTorch then also caps the
                 first bucket at C MiB)
  ddp-default    ... bucket_cap_mb not given (first bucket 1 MiB, the rest 25 MiB)

The configurations are timed interleaved (eager, cap1, cap5, ..., default, eager, cap1, ...)
for --rounds rounds of --steps steps each, unprofiled; every step is synchronized with the
device and timed with the host clock, so a step is what the user waits for. The same steps also
record the host's own time to enqueue each phase (forward with the loss, backward, optimizer step;
no synchronization inside a step): the unprofiled host, which otherwise can only be inferred from
profiled traces less the profiler's own cost. Then the
configurations of --profile (default eager, cap 1 and the default) are profiled for
--trace-steps steps with torch.profiler (CPU + CUDA activities, record_shapes=True), and those of
--profile-noshapes (default: cap 1 and the default cap) once more with record_shapes=False, each exported
as a Chrome trace that `ddpscope import-torch` reads. During the profiled steps every module's
forward is wrapped in a record_function range "ddpscope.layer:<module path>" so that the kernels
can be attributed to layers (scripts/gpu_kit/analyze.py); the timed steps carry no such ranges.
--no-layer-ranges profiles without them, as a user's own job without ddpscope records its trace
(what `ddpscope import-torch` then matches to the layers by op kind).

Models: resnet50, gpt2-small, bert-base (the profiles were fitted on their H100 traces), and
vit-b16, llama-small (a Llama-style decoder: RMSNorm, SwiGLU, rotary embeddings, SDPA) and
mobilenet_v2 (a second CNN: depthwise convolutions, ReLU6; with it a fit that holds resnet50 out
still has a CNN), held out of every fit.

Writes into --out DIR:
  <model>.json                               the measurements (schema: scripts/gpu_kit/schema.json)
  <model>-<config>[-noshapes]-rank0.json.gz  the profiler traces (when the profiler has Kineto)

The process group is NCCL on a GPU and gloo on the CPU, rendezvous through a file.
Exit codes: 0 done; 2 bad arguments; 3 torch missing.
"""
import argparse
import collections
import copy
import json
import math
import os
import statistics
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # the kit reports exit 3 as "torch missing"
    print(f"torch_job: cannot import torch: {e}", file=sys.stderr)
    sys.exit(3)

# The ResNet skeleton `ddpscope validate --python` trains too: next to this file in the kit
# (scripts/gpu-kit build copies it), in sim/validate/ in a checkout.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.join(_HERE, "..", "..", "sim", "validate")]
from torch_ddp_job import ResNet  # noqa: E402


# ---- models (the zoo's shapes, module names and parameter order) ---------------------------

class Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution."""
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        # torchvision's order: the downsample runs after bn3. The order of the forward ops sets
        # autograd's gradient-ready order, so DDP's rebuilt buckets depend on it.
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


def ResNet50(classes=1000):  # noqa: N802 (a constructor, named as torchvision's class)
    return ResNet(Bottleneck, (3, 4, 6, 3), classes)


class ConvBNReLU6(nn.Sequential):
    """torchvision's Conv2dNormActivation as MobileNetV2 uses it: a convolution without bias
    (padding (k - 1) / 2), BatchNorm2d and ReLU6."""

    def __init__(self, cin, cout, k=3, stride=1, groups=1):
        super().__init__(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    """torchvision's MobileNetV2 block: a 1x1 expansion (left out at expansion 1), a depthwise
    3x3, a linear 1x1 projection with its BatchNorm, and the residual add where the block keeps
    its shape."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = int(round(cin * expand))
        self.residual = stride == 1 and cin == cout
        layers = [] if expand == 1 else [ConvBNReLU6(cin, hidden, 1)]
        layers += [ConvBNReLU6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision's mobilenet_v2 (width 1.0: every width is already a multiple of 8). Its
    pooling is a module here (torchvision calls the functional form) so that the profiled steps
    give it the zoo's layer name, avgpool; the parameters are torchvision's, in its order."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))  # expansion, channels, blocks, first stride

    def __init__(self, classes=1000):
        super().__init__()
        layers, cin = [ConvBNReLU6(3, 32, 3, 2)], 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(ConvBNReLU6(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def attention(q, k, v, causal):
    """Scaled dot-product attention, fused where the torch has it (2.0+)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        t = q.shape[-2]
        mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return scores.softmax(-1) @ v


class Conv1D(nn.Module):
    """Hugging Face GPT-2's Conv1D: a linear layer whose weight is stored [in, out]."""

    def __init__(self, nin, nout):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nin, nout).normal_(std=0.02))
        self.bias = nn.Parameter(torch.zeros(nout))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).reshape(
            *x.shape[:-1], -1)


class GPT2Attention(nn.Module):
    def __init__(self, embd, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = Conv1D(embd, 3 * embd)
        self.c_proj = Conv1D(embd, embd)
        self.attn_dropout = nn.Dropout(0.0)
        self.resid_dropout = nn.Dropout(0.0)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        y = attention(q, k, v, causal=True).transpose(1, 2).reshape(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class GPT2MLP(nn.Module):
    def __init__(self, embd):
        super().__init__()
        self.c_fc = Conv1D(embd, 4 * embd)
        self.c_proj = Conv1D(4 * embd, embd)
        self.act = nn.GELU(approximate="tanh") if "approximate" in \
            nn.GELU.__init__.__code__.co_varnames else nn.GELU()
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class GPT2Block(nn.Module):
    def __init__(self, embd, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(embd)
        self.attn = GPT2Attention(embd, heads)
        self.ln_2 = nn.LayerNorm(embd)
        self.mlp = GPT2MLP(embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    """Hugging Face GPT2Model's layout (gpt2 config), no lm_head."""

    def __init__(self, layers=12, embd=768, heads=12, vocab=50257, positions=1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, embd)
        self.wpe = nn.Embedding(positions, embd)
        self.drop = nn.Dropout(0.0)
        self.h = nn.ModuleList([GPT2Block(embd, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(embd)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (lin(x).view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for lin in (self.query, self.key, self.value))
        return attention(q, k, v, causal=False).transpose(1, 2).reshape(b, t, c)


class BertResidualOutput(nn.Module):
    """Hugging Face's BertSelfOutput (n_in = hidden) and BertOutput (n_in = 4 x hidden):
    dense, dropout, residual add, LayerNorm."""

    def __init__(self, n_in, hidden):
        super().__init__()
        self.dense = nn.Linear(n_in, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.0)

    def forward(self, h, x):
        return self.LayerNorm(self.dropout(self.dense(h)) + x)


class BertAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.self = BertSelfAttention(hidden, heads)
        self.output = BertResidualOutput(hidden, hidden)

    def forward(self, x):
        return self.output(self.self(x), x)


class BertIntermediate(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, 4 * hidden)
        self.intermediate_act_fn = nn.GELU()

    def forward(self, x):
        return self.intermediate_act_fn(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.attention = BertAttention(hidden, heads)
        self.intermediate = BertIntermediate(hidden)
        self.output = BertResidualOutput(4 * hidden, hidden)

    def forward(self, x):
        a = self.attention(x)
        return self.output(self.intermediate(a), a)


class BertEmbeddings(nn.Module):
    def __init__(self, vocab, hidden, positions, types):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(types, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.0)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        types = torch.zeros_like(ids)
        # Hugging Face's order (token types, then positions): it sets the gradient-ready order.
        x = self.word_embeddings(ids) + self.token_type_embeddings(types)
        x = x + self.position_embeddings(pos)
        return self.dropout(self.LayerNorm(x))


class BertEncoder(nn.Module):
    def __init__(self, layers, hidden, heads):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(hidden, heads) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layer:
            x = layer(x)
        return x


class BertPooler(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.activation = nn.Tanh()

    def forward(self, x):
        return self.activation(self.dense(x[:, 0]))


class BertModel(nn.Module):
    """Hugging Face BertModel's layout (bert-base-uncased config), with pooler, no task head."""

    def __init__(self, layers=12, hidden=768, heads=12, vocab=30522, positions=512, types=2):
        super().__init__()
        self.embeddings = BertEmbeddings(vocab, hidden, positions, types)
        self.encoder = BertEncoder(layers, hidden, heads)
        self.pooler = BertPooler(hidden)

    def forward(self, ids):
        h = self.encoder(self.embeddings(ids))
        # The loss reads both outputs, so every parameter gets a gradient (no unused ones).
        return h, self.pooler(h)


class ViTEncoderBlock(nn.Module):
    """torchvision's EncoderBlock: pre-norm nn.MultiheadAttention and an MLP (Linear, GELU,
    Linear; the dropouts are p=0 and not modules that run)."""

    def __init__(self, hidden, heads, mlp_dim):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(hidden, mlp_dim), nn.GELU(), nn.Dropout(0.0),
                                 nn.Linear(mlp_dim, hidden), nn.Dropout(0.0))

    def forward(self, x):
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class ViTEncoder(nn.Module):
    def __init__(self, tokens, layers, hidden, heads, mlp_dim):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, tokens, hidden).normal_(std=0.02))
        self.layers = nn.Sequential(collections.OrderedDict(  # torchvision's names
            (f"encoder_layer_{i}", ViTEncoderBlock(hidden, heads, mlp_dim)) for i in range(layers)))
        self.ln = nn.LayerNorm(hidden, eps=1e-6)

    def forward(self, x):
        return self.ln(self.layers(x + self.pos_embedding))


class VisionTransformer(nn.Module):
    """torchvision's vit_b_16 layout (class_token, conv_proj, encoder, heads.head); the
    position table is sized for --image-size (197 tokens at 224, as the zoo's vit-b16)."""

    def __init__(self, image=224, patch=16, layers=12, hidden=768, heads=12, mlp_dim=3072,
                 classes=1000):
        super().__init__()
        self.patch = patch
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
        self.conv_proj = nn.Conv2d(3, hidden, patch, patch)
        self.encoder = ViTEncoder((image // patch) ** 2 + 1, layers, hidden, heads, mlp_dim)
        self.heads = nn.Sequential()
        self.heads.add_module("head", nn.Linear(hidden, classes))

    def forward(self, x):
        x = self.conv_proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.heads(self.encoder(x)[:, 0])


class LlamaRMSNorm(nn.Module):
    """torch.nn.RMSNorm where the torch has it (2.4+; one fused op on CUDA), else its formula."""

    def __init__(self, hidden, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, t, c = x.shape

        def heads(y):
            return y.view(b, t, self.heads, c // self.heads).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = attention(q, k, v, causal=True).transpose(1, 2).reshape(b, t, c)
        return self.o_proj(y)


class LlamaMLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden, heads, inter, eps):
        super().__init__()
        self.self_attn = LlamaAttention(hidden, heads)
        self.mlp = LlamaMLP(hidden, inter)
        self.input_layernorm = LlamaRMSNorm(hidden, eps)
        self.post_attention_layernorm = LlamaRMSNorm(hidden, eps)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, vocab, hidden, heads, inter, layers, eps):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList([LlamaDecoderLayer(hidden, heads, inter, eps)
                                     for _ in range(layers)])
        self.norm = LlamaRMSNorm(hidden, eps)
        half = hidden // heads // 2
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(half).float() / half),
                             persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        freqs = torch.outer(torch.arange(t, device=ids.device).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    """The zoo's llama-small: Hugging Face LlamaForCausalLM's module names and parameter order
    (8 layers, hidden 768, 12 heads, SwiGLU 2048, RMSNorm, rotary embeddings, vocab 32000,
    untied lm_head, no biases), in plain torch: what a user writes and exports."""

    def __init__(self, vocab=32000, hidden=768, heads=12, inter=2048, layers=8, eps=1e-6):
        super().__init__()
        self.model = LlamaModel(vocab, hidden, heads, inter, layers, eps)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids):
        return self.lm_head(self.model(ids))


MODELS = ("resnet50", "gpt2-small", "bert-base", "vit-b16", "llama-small", "mobilenet_v2")
VOCAB = {"gpt2-small": 50257, "bert-base": 30522, "llama-small": 32000}


def make_model(name, image=224):
    if name == "vit-b16":
        return VisionTransformer(image=image)
    return {"resnet50": ResNet50, "gpt2-small": GPT2Model, "bert-base": BertModel,
            "llama-small": LlamaForCausalLM, "mobilenet_v2": MobileNetV2}[name]()


def is_vision(name):
    return name in ("resnet50", "vit-b16", "mobilenet_v2")


def make_batch(name, batch, seq, image, device):
    g = torch.Generator().manual_seed(1)
    if is_vision(name):
        x = torch.randn(batch, 3, image, image, generator=g)
        y = torch.randint(0, 1000, (batch,), generator=g)
        return x.to(device), y.to(device)
    vocab = VOCAB[name]
    ids = torch.randint(0, vocab, (batch, seq + 1), generator=g)
    # Language modelling as ddpscope's runtime trains GPT-2: the next token at each position.
    return ids[:, :-1].contiguous().to(device), ids[:, 1:].contiguous().to(device)


def loss_of(name, out, y, model=None):
    """The runtime's losses (runtime/cpu/loss.h): cross-entropy of the classes for resnet50
    (and vit-b16, mobilenet_v2); GPT-2: cross-entropy of the next token with the LM head tied to wte
    (GPT2LMHeadModel); llama-small: the same through its own lm_head; bert-base (not trained
    by the runtime): the mean square of both outputs."""
    if is_vision(name):
        return F.cross_entropy(out.float(), y)
    if name == "llama-small":  # its own lm_head made the logits
        return F.cross_entropy(out.float().reshape(-1, out.shape[-1]), y.reshape(-1))
    if name == "bert-base":
        h, pooled = out
        return h.float().pow(2).mean() + pooled.float().pow(2).mean()
    logits = out @ model.wte.weight.t().to(out.dtype)
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))


# ---- measurement ---------------------------------------------------------------------------

def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


class Trainer:
    """One configuration: a model copy, its optimizer and, for DDP, its wrapper."""

    def __init__(self, name, base, cap, device, autocast_dtype):
        self.name = name
        self.model = copy.deepcopy(base)
        self.autocast_dtype = autocast_dtype
        self.device = device
        self.ddp = None
        if cap is not None:
            kwargs = {} if cap == "default" else {"bucket_cap_mb": float(cap)}
            ids = [device.index or 0] if device.type == "cuda" else None
            self.ddp = nn.parallel.DistributedDataParallel(self.model, device_ids=ids, **kwargs)
        self.module = self.ddp if self.ddp is not None else self.model
        # As ddpscope-run's defaults (--lr 0.01, --momentum 0).
        self.opt = torch.optim.SGD(self.module.parameters(), lr=0.01, momentum=0.0)
        self.losses = []

    def step(self, model_name, x, y, marks=None):
        """One training step; with `marks` (a list) appends the host clock when the forward
        (with the loss), the backward and the optimizer step have been enqueued."""
        self.opt.zero_grad(set_to_none=True)
        if self.autocast_dtype is not None:
            with torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype):
                loss = loss_of(model_name, self.module(x), y, self.model)
        else:
            loss = loss_of(model_name, self.module(x), y, self.model)
        if marks is not None:
            marks.append(time.perf_counter())
        loss.backward()
        if marks is not None:
            marks.append(time.perf_counter())
        self.opt.step()
        if marks is not None:
            marks.append(time.perf_counter())
        return loss

    def timed_steps(self, model_name, x, y, n, host=None):
        """`n` synchronized steps' times (ms). With `host` (a list), appends per step the host's
        own time to enqueue it, unprofiled: [forward, backward, optimizer, whole step] in ms from
        the step's start to each phase's return, before the synchronization."""
        times = []
        for _ in range(n):
            sync(self.device)
            t0 = time.perf_counter()
            marks = []
            loss = self.step(model_name, x, y, marks)
            sync(self.device)
            t1 = time.perf_counter()
            times.append((t1 - t0) * 1e3)
            if host is not None:
                phases = [(b - a) * 1e3 for a, b in zip([t0] + marks, marks)]
                host.append(phases + [(marks[-1] - t0) * 1e3])
            if len(self.losses) < 5:
                self.losses.append(float(loss))
        return times


def layer_ranges(model):
    """Forward hooks that wrap every module's forward in a record_function range."""
    handles = []
    for path, module in model.named_modules():
        if not path:
            continue
        label = "ddpscope.layer:" + path

        def pre(mod, inp, label=label):
            rf = torch.autograd.profiler.record_function(label)
            rf.__enter__()
            mod._ddpscope_rf = getattr(mod, "_ddpscope_rf", []) + [rf]

        def post(mod, inp, out):
            stack = getattr(mod, "_ddpscope_rf", [])
            if stack:
                stack.pop().__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
    return handles


# The phases of a step whose host time the timed steps record (Trainer.timed_steps).
HOST_PHASES = ("forward", "backward", "optimizer", "step")


def kineto_available():
    return bool(getattr(torch.autograd, "kineto_available", lambda: False)())


def profile(trainer, model_name, x, y, steps, path, record_shapes=True, ranges=True):
    """Profiles `steps` steps of a trainer (with the layer ranges unless not `ranges`); writes a
    gzip Chrome trace; returns None or why not."""
    if not kineto_available():
        return f"torch {torch.__version__} has no Kineto profiler"
    acts = [torch.profiler.ProfilerActivity.CPU]
    if trainer.device.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    handles = layer_ranges(trainer.model) if ranges else []
    try:
        schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
        with torch.profiler.profile(activities=acts, record_shapes=record_shapes, schedule=schedule,
                                    on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
            for _ in range(steps + 1):
                trainer.step(model_name, x, y)
                sync(trainer.device)
                prof.step()
    finally:
        for h in handles:
            h.remove()
    return None  # export_chrome_trace gzips a path that ends in .gz


def nccl_version():
    try:
        v = torch.cuda.nccl.version()
        return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception as e:  # noqa: BLE001 (reported, not fatal)
        return f"unknown ({e})"


def describe_device(device):
    info = {"type": device.type, "torch": torch.__version__,
            "cuda": getattr(torch.version, "cuda", None)}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(name=p.name, sm_count=p.multi_processor_count,
                    memory_gib=round(p.total_memory / 2**30, 1),
                    nccl=nccl_version())
    else:
        info.update(name="cpu", threads=torch.get_num_threads())
    return info


# ---- numerics against ddpscope's runtime ----------------------------------------------------

def read_param_dump(path):
    """runtime/param_dump.h: "DSPARAM1", uint32 count, per entry uint32 name length, name,
    uint64 numel, numel float32 values (little-endian hosts)."""
    import struct
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != b"DSPARAM1":
        raise SystemExit(f"torch_job: {path}: not a ddpscope parameter dump (no DSPARAM1)")
    (count,), o, out = struct.unpack_from("<I", b, 8), 12, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", b, o)
        name = b[o + 4:o + 4 + n].decode()
        o += 4 + n
        (numel,) = struct.unpack_from("<Q", b, o)
        o += 8
        out[name] = torch.frombuffer(bytearray(b[o:o + 4 * numel]), dtype=torch.float32)
        o += 4 * numel
    return out


def numerics(args, device):
    """Trains the runtime's first batches from its initial parameters (--dump-start) and
    compares the losses with those the runtime reported (its --summary). The same steps in
    float64 are the reference: a deep network's gradients are ill-conditioned enough that
    PyTorch's own float32 result moves by percents after one step (ResNet-50's first
    convolution: 2.7 % from float64 at batch 8, 64 px), so the runtime is judged by its
    distance to float64 against PyTorch's."""
    dump = read_param_dump(args.numerics_from)
    with open(args.numerics_summary) as f:
        runtime_losses = json.load(f)["losses"]
    if device.type == "cuda":  # fp32 means fp32: no TF32 in matrix products or convolutions
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False

    def train(mode):
        dt = torch.float64 if mode == "fp64" else torch.float32
        torch.manual_seed(0)
        model = make_model(args.model, args.image_size).to(device=device, dtype=dt)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name not in dump or dump[name].numel() != p.numel():
                    raise SystemExit(f"torch_job: {args.numerics_from}: parameter {name} "
                                     "missing or of another size")
                p.copy_(dump[name].reshape(p.shape).to(dt))
        opt = torch.optim.SGD(model.parameters(), lr=args.numerics_lr, momentum=0.0)
        losses, k = [], 1
        while f"batch{k}.inputs" in dump:
            x, t = dump[f"batch{k}.inputs"], dump[f"batch{k}.targets"]
            if is_vision(args.model):
                x = x.reshape(t.numel(), 3, args.image_size, args.image_size).to(device, dt)
            else:
                x = x.to(torch.int64).reshape(-1, args.seq_len).to(device)
            t = t.to(torch.int64).reshape(x.shape[0], -1).squeeze(-1).to(device)
            opt.zero_grad(set_to_none=True)
            if mode == "bf16":
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    loss = loss_of(args.model, model(x), t, model)
            else:
                loss = loss_of(args.model, model(x), t, model)
            loss.backward()
            opt.step()
            losses.append(float(loss))
            k += 1
        return losses

    ours = train(args.dtype)
    ref = train("fp64")
    rt = runtime_losses[:len(ours)]

    def diff(a, b):
        return [abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)]

    result = {"schema": "ddpscope.gpu-kit.numerics/1", "model": args.model, "dtype": args.dtype,
              "device": describe_device(device), "batch": args.batch,
              "seq_len": None if is_vision(args.model) else args.seq_len,
              "image_size": args.image_size if is_vision(args.model) else None,
              "torch_losses": ours, "fp64_losses": ref, "runtime_losses": rt,
              "runtime_vs_torch": diff(rt, ours), "torch_vs_fp64": diff(ours, ref),
              "runtime_vs_fp64": diff(rt, ref)}
    path = os.path.join(args.out, f"{args.model}-numerics-{args.dtype}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"torch_job: numerics {args.model} {args.dtype}: losses torch {ours}, runtime {rt}, "
          f"float64 {ref}; runtime vs torch {max(result['runtime_vs_torch']):.2e}, torch vs "
          f"float64 {max(result['torch_vs_fp64']):.2e}, runtime vs float64 "
          f"{max(result['runtime_vs_fp64']):.2e}")


def open_device(parser, args):
    """The device --device names (the first GPU, made current) and --out created; a parser
    error when torch sees no GPU."""
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    os.makedirs(args.out, exist_ok=True)
    return device


def parse_caps(text):
    caps = []
    for c in text.split(","):
        c = c.strip()
        if c != "default":
            try:
                if float(c) <= 0:
                    raise ValueError
            except ValueError:
                raise SystemExit(f"torch_job: --caps: '{c}' is not a positive number or 'default'")
        caps.append(c)
    return caps


def parse_configs(parser, flag, text, configs):
    names = [c.strip() for c in text.split(",") if c.strip()]
    for n in names:
        if n not in configs:
            parser.error(f"{flag}: '{n}' is not one of the timed configurations "
                         f"({', '.join(configs)}; --caps sets the DDP ones)")
    return names


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=MODELS, required=True)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16",
                   help="bf16: autocast (fp32 parameters, gradients and buckets), as "
                        "ddpscope-run --dtype bf16")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--caps", default="1,5,25,100,default")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=5, help="timed steps per round")
    p.add_argument("--trace-steps", type=int, default=6,
                   help="profiled steps per trace (0: no trace)")
    p.add_argument("--profile", default="eager,ddp-cap1,ddp-default",
                   help="configurations profiled with record_shapes=True ('' for none)")
    p.add_argument("--profile-noshapes", default="ddp-cap1,ddp-default",
                   help="configurations profiled again with record_shapes=False, which records "
                        "less per op ('' for none)")
    p.add_argument("--no-layer-ranges", dest="layer_ranges", action="store_false",
                   help="profile without the ddpscope.layer: ranges (as a job without ddpscope "
                        "records its trace)")
    p.add_argument("--out", required=True)
    p.add_argument("--tag", default="",
                   help="a variant of the model's job (e.g. b64: another batch): writes "
                        "<model>-<tag>.json and its traces under that name")
    p.add_argument("--channels-last", action="store_true",
                   help="vision models: the model and its images in torch.channels_last (NHWC), "
                        "as NVIDIA's DeepLearningExamples train resnet50 (cuDNN then runs no "
                        "layout transposes around the convolutions)")
    p.add_argument("--param-names", metavar="JSON",
                   help="also write the model's parameters and buffers (name, shape, in "
                        "model.parameters() order) to JSON")
    p.add_argument("--numerics-from", metavar="DUMP",
                   help="instead of timing: train the batches of a ddpscope-run --dump-start "
                        "file from its parameters and compare the losses")
    p.add_argument("--numerics-summary", metavar="JSON", help="that run's --summary (losses)")
    p.add_argument("--numerics-lr", type=float, default=0.01, help="the run's --lr (default 0.01)")
    args = p.parse_args()
    if min(args.batch, args.seq_len, args.image_size, args.rounds, args.steps) < 1 or \
            args.warmup < 0 or args.trace_steps < 0:
        p.error("--batch, --seq-len, --image-size, --rounds and --steps must be positive")
    if args.tag and not args.tag.replace("-", "").isalnum():
        p.error("--tag: letters, digits and '-' only")
    if args.channels_last and not is_vision(args.model):
        p.error(f"--channels-last: {args.model} takes no images (vision models only)")
    stem = f"{args.model}-{args.tag}" if args.tag else args.model
    caps = parse_caps(args.caps)
    configs = ["eager"] + [f"ddp-cap{c}" if c != "default" else "ddp-default" for c in caps]
    profiled, profiled_noshapes = (parse_configs(p, flag, text, configs) for flag, text in
                                   (("--profile", args.profile),
                                    ("--profile-noshapes", args.profile_noshapes)))
    device = open_device(p, args)
    if args.numerics_from:
        if not args.numerics_summary:
            p.error("--numerics-from needs --numerics-summary")
        numerics(args, device)
        return
    autocast = torch.bfloat16 if args.dtype == "bf16" else None

    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                init_method="file://" + os.path.join(tmp, "rendezvous"),
                                rank=0, world_size=1)
        torch.manual_seed(0)
        base = make_model(args.model, args.image_size).to(device)
        if args.param_names:
            with open(args.param_names, "w") as f:
                json.dump({"model": args.model,
                           "parameters": [[n, list(t.shape)] for n, t in base.named_parameters()],
                           "buffers": [[n, list(t.shape)] for n, t in base.named_buffers()]}, f)
        x, y = make_batch(args.model, args.batch, args.seq_len, args.image_size, device)
        if args.channels_last:
            base = base.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        trainers = [Trainer("eager", base, None, device, autocast)]
        trainers += [Trainer(f"ddp-cap{c}" if c != "default" else "ddp-default", base, c, device,
                             autocast) for c in caps]
        del base
        t0 = time.perf_counter()
        for t in trainers:
            t.timed_steps(args.model, x, y, args.warmup)
        step_ms = {t.name: [] for t in trainers}
        host_ms = {t.name: [] for t in trainers}
        for _ in range(args.rounds):  # interleaved: A B C D A B C D ...
            for t in trainers:
                step_ms[t.name] += t.timed_steps(args.model, x, y, args.steps, host_ms[t.name])
        timing_s = time.perf_counter() - t0
        traces, traces_noshapes, trace_notes = {}, {}, {}
        by_name = {t.name: t for t in trainers}
        for names, shapes, into, suffix in ((profiled, True, traces, ""),
                                            (profiled_noshapes, False, traces_noshapes,
                                             "-noshapes")):
            for name in names if args.trace_steps else []:
                path = os.path.join(args.out, f"{stem}-{name}{suffix}-rank0.json.gz")
                why = profile(by_name[name], args.model, x, y, args.trace_steps, path, shapes,
                              args.layer_ranges)
                if why is None:
                    into[name] = os.path.basename(path)
                else:
                    trace_notes[name + suffix] = why
        buckets = {}
        for t in trainers[1:]:
            log = t.ddp._get_ddp_logging_data()
            buckets[t.name] = {k: str(log.get(k, "")) for k in ("bucket_sizes",
                                                               "rebuilt_bucket_sizes")}
        dist.destroy_process_group()

    result = {
        "schema": "ddpscope.gpu-kit.torch/1",
        "model": args.model,
        "tag": args.tag or None,
        **({"memory_format": "channels_last"} if args.channels_last else {}),
        "device": describe_device(device),
        "dtype": args.dtype,
        "batch": args.batch,
        "seq_len": None if is_vision(args.model) else args.seq_len,
        "image_size": args.image_size if is_vision(args.model) else None,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "steps_per_round": args.steps,
        "timing_seconds": round(timing_s, 3),
        "step_ms": step_ms,
        "median_step_ms": {k: statistics.median(v) for k, v in step_ms.items()},
        # The host's own time in the timed steps (no profiler): per step [forward, backward,
        # optimizer, whole step] enqueued, ms; a step whose host finishes well before the step
        # ends was bound by the device.
        "host_ms": host_ms,
        "median_host_ms": {k: {phase: statistics.median(h[i] for h in v)
                               for i, phase in enumerate(HOST_PHASES)}
                           for k, v in host_ms.items() if v},
        "first_losses": {t.name: t.losses for t in trainers},
        "buckets": buckets,
        "traces": traces,
        "traces_noshapes": traces_noshapes,
        "trace_notes": trace_notes,
        "trace_steps": args.trace_steps,
    }
    with open(os.path.join(args.out, f"{stem}.json"), "w") as f:
        json.dump(result, f, indent=1)
    med = result["median_step_ms"]
    print(f"torch_job: {stem} on {result['device']['name']}: " +
          ", ".join(f"{k} {v:.2f} ms" for k, v in med.items()))


if __name__ == "__main__":
    main()

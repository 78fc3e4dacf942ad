#!/usr/bin/env python3
"""Records real torch.profiler traces of DDP jobs on the CPU for import-torch's naming of a CPU
trace's ops by layer: three small models, each trained by DDP over gloo at world size 1 (SGD, five
steps under torch.profiler.profile(activities=[CPU], schedule=schedule(wait=0, warmup=2,
active=3))); the trace of the three active steps is written by on_trace_ready, gzip-compressed,
not rewritten, and each model by the exporter (models/export/torch_export.py).

dropout/mlp-dropout-rank0.json.gz, dropout/mlp-dropout-model.json: an MLP with a dropout of
  p = 0.5 and one of p = 0 (Linear, Dropout(0.5), ReLU, Linear, Dropout(0.0), ReLU, Linear),
  batch 8. On the CPU PyTorch computes dropout as the input times a Bernoulli mask
  (aten::dropout -> aten::bernoulli_, aten::div_, aten::mul), so its backward node is
  MulBackward0, not the NativeDropoutBackward0 of a CUDA run; a dropout of p = 0 returns its
  input, recording the forward op and no backward node at all.

layer-ranges/block-rank0.json.gz, layer-ranges/block-model.json: every module's forward in a
  record_function("ddpscope.layer:<module path>") range, opened by the product's
  ddpscope.torch.layer_ranges (python/ddpscope/_layer_ranges.py, loaded by its path) around
  the profiled steps, and record_shapes=True. A pre-norm residual block between two Linear layers on sequences (inputs
  [8, 64, 256]: a step of tens of milliseconds, so that the layers, not the step's fixed costs,
  make it): the block's LayerNorm, Linear, GELU and Dropout(0.1) are modules, its residual add
  an op of the block's own forward (no range of its own: the exporter names it block.add), and
  the head has no bias, as a language model's head: on 3-D inputs PyTorch computes it as
  aten::matmul -> aten::mm, whose backward node is MmBackward0, not a Linear's AddmmBackward0.

layer-ranges/block-noranges-rank0.json.gz: the same model and job without the ranges (its model
  is block-model.json): what import-torch matches by kind.

    Linear(256, 512) -> Block(LayerNorm, Linear(512, 512), GELU, Dropout, + residual)
      -> Linear(512, 256, bias=False)

layer-ranges/gpt2block-rank0.json.gz, layer-ranges/gpt2block-model.json and
  layer-ranges/gpt2block-noranges-rank0.json.gz: a GPT-2 style pre-norm block as code outside
  torch.nn writes it, recorded with and without the ranges, inputs [8, 64, 256]: attention with
  an explicit torch.bmm and softmax (the exporter names those ops attn.bmm, of type Matmul, a
  type the match by kind has no op for) and Hugging Face's NewGELU written out as a module of
  its own (0.5 x (1 + tanh(...)): muls, a pow and a tanh, no aten::gelu), then a Linear head.

    LayerNorm -> Attn(Linear qkv, bmm, softmax, bmm, Linear proj) -> + residual
      -> LayerNorm -> Linear(256, 1024) -> NewGELU -> Linear(1024, 256) -> + residual
      -> Linear(256, 256)

layer-ranges/llama-small-noranges-rank0.json.gz: the GPU kit's own llama-small job
  (scripts/gpu_kit/torch_job.py: RMSNorm, rotary embeddings, SDPA, SwiGLU; the zoo's llama-small)
  on the CPU at batch 1, 16 tokens, fp32, DDP with the default cap, two profiled steps with
  record_shapes and --no-layer-ranges: what a user's job without ddpscope's ranges records, and
  the kit model with the most layers of a type the match by kind has no op for.

Usage: /path/to/venv/bin/python tests/data/torch-2.15/gen_cpu_layer_traces.py
Needs a torch with Kineto (the PyPI wheel; recorded with 2.15.0 on 2 CPU cores).
"""
import contextlib
import gzip
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "models", "export"))
import torch_export  # noqa: E402  (models/export/torch_export.py)

# ddpscope.torch.layer_ranges without the package (whose other modules need its compiled core).
_spec = importlib.util.spec_from_file_location(
    "_layer_ranges", os.path.join(HERE, "..", "..", "..", "python", "ddpscope", "_layer_ranges.py"))
_layer_ranges = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_layer_ranges)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)
        self.act = nn.GELU()
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.act(self.fc(self.ln(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(256, 512)
        self.block = Block(512)
        self.head = nn.Linear(512, 256, bias=False)

    def forward(self, x):
        return self.head(self.block(self.inp(x)))


class NewGELU(nn.Module):
    """Hugging Face's GPT-2 activation as its code writes it (no aten::gelu)."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                           (x + 0.044715 * torch.pow(x, 3.0))))


class Attn(nn.Module):
    """Self-attention (no mask) with an explicit bmm and softmax."""

    def __init__(self, d):
        super().__init__()
        self.d = d
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.qkv(x).split(self.d, dim=-1)
        a = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.d), dim=-1)
        return self.proj(torch.bmm(a, v))


class Gpt2Block(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attn(d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.act = NewGELU()
        self.out = nn.Linear(4 * d, d)
        self.head = nn.Linear(d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.out(self.act(self.fc(self.ln2(x))))
        return self.head(x)


def record(name, model, x, y, out_dir, ranges=False, record_shapes=False, export=True):
    """Exports `model` (unless not `export`), then profiles its DDP training steps into
    out_dir/<name>-rank0.json.gz."""
    os.makedirs(out_dir, exist_ok=True)
    if export:
        spec = torch_export.export_model(model, x, name=name)
        with open(os.path.join(out_dir, f"{name}-model.json"), "w") as f:
            json.dump(spec, f, indent=1)
            f.write("\n")
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rdv"),
                                rank=0, world_size=1)
        ddp = nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        raw = os.path.join(tmp, "trace.json")
        named = _layer_ranges.layer_ranges(ddp) if ranges else contextlib.nullcontext()
        with named, profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes,
                            schedule=schedule(wait=0, warmup=2, active=3),
                            on_trace_ready=lambda p: p.export_chrome_trace(raw)) as prof:
            for _ in range(5):
                opt.zero_grad()
                loss = ((ddp(x) - y) ** 2).mean()
                loss.backward()
                opt.step()
                prof.step()
        dist.destroy_process_group()
        with open(raw, "rb") as src, \
                open(os.path.join(out_dir, f"{name}-rank0.json.gz"), "wb") as out, \
                gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    print("wrote", os.path.join(out_dir, name + "-*"), "with torch", torch.__version__)


def record_kit_job(model, out_dir):
    """The GPU kit's job for `model` on the CPU, profiled without the layer ranges."""
    with tempfile.TemporaryDirectory() as tmp:
        job = os.path.join(HERE, "..", "..", "..", "scripts", "gpu_kit", "torch_job.py")
        subprocess.run([sys.executable, job, "--model", model, "--device", "cpu", "--dtype", "fp32",
                        "--batch", "1", "--seq-len", "16", "--warmup", "1", "--rounds", "1",
                        "--steps", "1", "--trace-steps", "2", "--caps", "default",
                        "--profile", "ddp-default", "--profile-noshapes", "",
                        "--no-layer-ranges", "--out", tmp], check=True)
        shutil.copyfile(os.path.join(tmp, f"{model}-ddp-default-rank0.json.gz"),
                        os.path.join(out_dir, f"{model}-noranges-rank0.json.gz"))
    print("wrote", os.path.join(out_dir, model + "-noranges-*"), "with torch", torch.__version__)


def main():
    torch.manual_seed(1)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.5), nn.ReLU(), nn.Linear(32, 32),
                        nn.Dropout(0.0), nn.ReLU(), nn.Linear(32, 4))
    record("mlp-dropout", mlp, torch.randn(8, 16), torch.randn(8, 4),
           os.path.join(HERE, "dropout"))
    torch.manual_seed(1)
    record("block", Net(), torch.randn(8, 64, 256), torch.randn(8, 64, 256),
           os.path.join(HERE, "layer-ranges"), ranges=True, record_shapes=True)
    torch.manual_seed(1)
    record("block-noranges", Net(), torch.randn(8, 64, 256), torch.randn(8, 64, 256),
           os.path.join(HERE, "layer-ranges"), record_shapes=True, export=False)
    for name, ranges in (("gpt2block", True), ("gpt2block-noranges", False)):
        torch.manual_seed(1)
        record(name, Gpt2Block(), torch.randn(8, 64, 256), torch.randn(8, 64, 256),
               os.path.join(HERE, "layer-ranges"), ranges=ranges, record_shapes=True,
               export=ranges)
    record_kit_job("llama-small", os.path.join(HERE, "layer-ranges"))


if __name__ == "__main__":
    main()

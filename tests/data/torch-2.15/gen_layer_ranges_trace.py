#!/usr/bin/env python3
"""Records a real torch.profiler trace of a DDP job on the CPU whose modules ran in
record_function("ddpscope.layer:<module path>") ranges, as the GPU kit's jobs write them, for
import-torch's naming of a CPU trace's ops by those ranges.

The model is a pre-norm residual block between two Linear layers on sequences (inputs [4, 2, 8]):
the block's LayerNorm, Linear, GELU and Dropout(0.1) are modules (each in its range), its
residual add is an op of the block's own forward (no range of its own: the exporter names it
block.add), and the head has no bias, as a language model's head: on 3-D inputs PyTorch
computes it as aten::matmul -> aten::mm, whose backward node (MmBackward0) names no layer type.

  Linear(8, 16) -> Block(LayerNorm, Linear(16, 16), GELU, Dropout, + residual) -> Linear(16, 4)

One process, DDP over gloo at world size 1, SGD, batch 4 x 2, five steps under
torch.profiler.profile(activities=[CPU], record_shapes=True, schedule=schedule(wait=0,
warmup=2, active=3)); the trace of the three active steps is written by on_trace_ready,
gzip-compressed, not rewritten, and the model by the exporter:

  tests/data/torch-2.15/layer-ranges/block-rank0.json.gz
  tests/data/torch-2.15/layer-ranges/block-model.json

Usage: /path/to/venv/bin/python tests/data/torch-2.15/gen_layer_ranges_trace.py
Needs a torch with Kineto (the PyPI wheel; recorded with 2.15.0 on 2 CPU cores).
"""
import gzip
import json
import os
import shutil
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "layer-ranges")
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "models", "export"))
import torch_export  # noqa: E402  (models/export/torch_export.py)


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
        self.inp = nn.Linear(8, 16)
        self.block = Block(16)
        self.head = nn.Linear(16, 4, bias=False)

    def forward(self, x):
        return self.head(self.block(self.inp(x)))


def layer_ranges(model):
    """Every module's forward in a ddpscope.layer:<path> range (as scripts/gpu_kit/torch_job.py)."""
    for path, module in model.named_modules():
        if not path:
            continue

        def pre(mod, inp, label="ddpscope.layer:" + path):
            mod._range = torch.autograd.profiler.record_function(label)
            mod._range.__enter__()

        def post(mod, inp, out):
            mod._range.__exit__(None, None, None)

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)


def main():
    torch.manual_seed(1)
    model = Net()
    x, y = torch.randn(4, 2, 8), torch.randn(4, 2, 4)
    os.makedirs(OUT, exist_ok=True)
    spec = torch_export.export_model(model, x, name="block")
    with open(os.path.join(OUT, "block-model.json"), "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    layer_ranges(model)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rdv"),
                                rank=0, world_size=1)
        ddp = nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        raw = os.path.join(tmp, "trace.json")
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                     schedule=schedule(wait=0, warmup=2, active=3),
                     on_trace_ready=lambda p: p.export_chrome_trace(raw)) as prof:
            for _ in range(5):
                opt.zero_grad()
                loss = ((ddp(x) - y) ** 2).mean()
                loss.backward()
                opt.step()
                prof.step()
        dist.destroy_process_group()
        with open(raw, "rb") as src, open(os.path.join(OUT, "block-rank0.json.gz"), "wb") \
                as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    print("wrote", OUT, "with torch", torch.__version__)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Records a real torch.profiler trace of a training job WITHOUT DDP, for the import's and
replay's "not a DDP job" message.

One process, a two-layer MLP (ddpscope's shorthand mlp:in=16,hidden=32,depth=2,out=4: Linear,
ReLU, Linear), SGD, batch 8, four steps under torch.profiler.profile(activities=[CPU],
schedule=schedule(wait=0, warmup=1, active=3)); the trace of the three active steps is written
by on_trace_ready, gzip-compressed, not rewritten:

  tests/data/torch-2.15/non-ddp/mlp-rank0.json.gz

Usage: /path/to/venv/bin/python tests/data/torch-2.15/gen_non_ddp_trace.py
Needs a torch with Kineto (the PyPI wheel; recorded with 2.15.0 on 2 CPU cores).
"""
import gzip
import os
import shutil
import tempfile

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "non-ddp", "mlp-rank0.json.gz")


def main():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        with profile(activities=[ProfilerActivity.CPU],
                     schedule=schedule(wait=0, warmup=1, active=3),
                     on_trace_ready=lambda p: p.export_chrome_trace(raw)) as prof:
            for _ in range(4):
                opt.zero_grad()
                loss = ((model(x) - y) ** 2).mean()
                loss.backward()
                opt.step()
                prof.step()
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(raw, "rb") as src, open(OUT, "wb") as out, \
                gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    print("wrote", OUT, "with torch", torch.__version__)


if __name__ == "__main__":
    main()

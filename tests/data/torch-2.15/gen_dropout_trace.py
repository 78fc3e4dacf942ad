#!/usr/bin/env python3
"""Records a real torch.profiler trace of a DDP job on the CPU whose model has Dropout layers,
for import-torch's layer matching: on the CPU, PyTorch computes dropout as the input times a
Bernoulli mask (aten::dropout -> aten::bernoulli_, aten::div_, aten::mul), so its backward node
is MulBackward0, not the NativeDropoutBackward0 of a CUDA run; and a dropout of p = 0 returns
its input, recording the forward op and no backward node at all.

One process, DDP over gloo at world size 1, an MLP with a dropout of p = 0.5 and one of p = 0
(Linear, Dropout(0.5), ReLU, Linear, Dropout(0.0), ReLU, Linear), SGD, batch 8, five steps
under torch.profiler.profile(activities=[CPU], schedule=schedule(wait=0, warmup=2,
active=3)); the trace of the three active steps is written by on_trace_ready, gzip-compressed,
not rewritten, and the model by the exporter:

  tests/data/torch-2.15/dropout/mlp-dropout-rank0.json.gz
  tests/data/torch-2.15/dropout/mlp-dropout-model.json

Usage: /path/to/venv/bin/python tests/data/torch-2.15/gen_dropout_trace.py
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
OUT = os.path.join(HERE, "dropout")
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "models", "export"))
import torch_export  # noqa: E402  (models/export/torch_export.py)


def main():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.5), nn.ReLU(), nn.Linear(32, 32),
                          nn.Dropout(0.0), nn.ReLU(), nn.Linear(32, 4))
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    os.makedirs(OUT, exist_ok=True)
    spec = torch_export.export_model(model, x, name="mlp-dropout")
    with open(os.path.join(OUT, "mlp-dropout-model.json"), "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rdv"),
                                rank=0, world_size=1)
        ddp = nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        raw = os.path.join(tmp, "trace.json")
        with profile(activities=[ProfilerActivity.CPU],
                     schedule=schedule(wait=0, warmup=2, active=3),
                     on_trace_ready=lambda p: p.export_chrome_trace(raw)) as prof:
            for _ in range(5):
                opt.zero_grad()
                loss = ((ddp(x) - y) ** 2).mean()
                loss.backward()
                opt.step()
                prof.step()
        dist.destroy_process_group()
        with open(raw, "rb") as src, open(os.path.join(OUT, "mlp-dropout-rank0.json.gz"), "wb") \
                as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    print("wrote", OUT, "with torch", torch.__version__)


if __name__ == "__main__":
    main()

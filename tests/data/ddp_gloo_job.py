"""The real 2-rank DDP job both profiler-fixture generators run (tests/data/torch/gen_fixtures.py
with Debian's torch 1.13, tests/data/torch-2.15/gen_traces.py with torch 2.15 from PyPI).

A DistributedDataParallel job on CPU (gloo backend, two processes launched with
torch.multiprocessing, rendezvous through a file:// init method, one intra-op thread per rank)
with an MLP whose parameters fall into three buckets at bucket_cap_mb=0.05 (DDP's first bucket is
capped at 1 MiB, dist._DEFAULT_FIRST_BUCKET_BYTES, the others at bucket_cap_mb). Two unprofiled
iterations come first: DDP rebuilds its buckets after the first one, so every profiled step uses
the final (rebuilt) layout. Each generator profiles its steps its own way (what its torch can
write); the truth both write is measured here: the buckets as DDP's reducer reports them and the
steps' wall times.
"""

import gzip
import json
import os
import shutil
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "models", "export"))
from torch_export import export_model  # noqa: E402  (models/export/torch_export.py)

BUCKET_CAP_MB = 0.05
WIDTHS = [96, 192, 256, 512, 256, 128, 10]  # 6 Linear layers, 365,130 parameters
BATCH = 16
WORLD = 2
MODEL_TEXT = "nn.Sequential of Linear %s with ReLU between" % WIDTHS


def build_model():
    layers = []
    for i in range(len(WIDTHS) - 1):
        layers.append(nn.Linear(WIDTHS[i], WIDTHS[i + 1]))
        if i + 2 < len(WIDTHS):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def start(rank, init_file):
    """Joins the job as `rank`; returns the DDP model and its training step, past the rebuild."""
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=WORLD)
    model = DDP(build_model(), bucket_cap_mb=BUCKET_CAP_MB)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    gen = torch.Generator().manual_seed(100 + rank)

    def step():
        x = torch.randn(BATCH, WIDTHS[0], generator=gen)
        y = torch.randn(BATCH, WIDTHS[-1], generator=gen)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    return model, step


def profile(step, wait, warmup, active, **kwargs):
    """Profiles wait + warmup + active steps (CPU activities, the profiler's schedule); returns
    the profiler and each step's time.perf_counter_ns() around step() + prof.step()."""
    schedule = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1)
    wall_ns = []
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=schedule, **kwargs) as prof:
        for _ in range(wait + warmup + active):
            t0 = time.perf_counter_ns()
            step()
            prof.step()
            wall_ns.append(time.perf_counter_ns() - t0)
    return prof, wall_ns


def finish(model, rank, out_dir, info):
    """Writes the rank's measurements with DDP's own bucket report and leaves the job."""
    logging = model._get_ddp_logging_data()
    info.update({
        "bucket_sizes": logging.get("bucket_sizes"),
        "rebuilt_bucket_sizes": logging.get("rebuilt_bucket_sizes"),
        "rebuilt_per_bucket_param_indices": logging.get("rebuilt_per_bucket_param_indices"),
        "bucket_cap_bytes": logging.get("bucket_cap_bytes"),
    })
    with open(os.path.join(out_dir, "truth_rank%d.json" % rank), "w") as f:
        json.dump(info, f)
    dist.barrier()
    dist.destroy_process_group()


def parse_sizes(text):
    if text is None or text == "":
        return []
    if isinstance(text, list):
        return [int(v) for v in text]
    return [int(v) for v in str(text).split(",") if v.strip()]


def run(worker, args, prefix):
    """Runs worker(rank, init_file, tmp, *args) on every rank; returns the temporary folder (the
    caller removes it) and each rank's measurements."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    init_file = os.path.join(tmp, "rendezvous")
    mp.spawn(worker, args=(init_file, tmp) + tuple(args), nprocs=WORLD, join=True)
    ranks = []
    for r in range(WORLD):
        with open(os.path.join(tmp, "truth_rank%d.json" % r)) as f:
            ranks.append(json.load(f))
    return tmp, ranks


def bucket_truth(rank0):
    """The job and its buckets: DDP's rebuilt layout (the one every profiled step uses), in bucket
    index order, in bytes of float32 parameters."""
    sizes = parse_sizes(rank0["rebuilt_bucket_sizes"]) or parse_sizes(rank0["bucket_sizes"])
    return {
        "backend": "gloo",
        "world_size": WORLD,
        "bucket_cap_mb": BUCKET_CAP_MB,
        "model": MODEL_TEXT,
        "batch": BATCH,
        "bucket_count": len(sizes),
        "bucket_bytes": sizes,
        "initial_bucket_bytes": parse_sizes(rank0["bucket_sizes"]),
        "bucket_cap_bytes": rank0["bucket_cap_bytes"],
        "per_bucket_param_indices": rank0["rebuilt_per_bucket_param_indices"],
    }


def gzip_copy(src, dst):
    with open(src, "rb") as fin, gzip.open(dst, "wb", 9) as fout:
        shutil.copyfileobj(fin, fout)


def write_model_and_truth(out_dir, truth):
    """ddp_gloo_model.json (the model by models/export/torch_export.py, so that tests can name the
    imported compute spans by layer: import-torch --model) and ddp_gloo_truth.json."""
    spec = export_model(build_model(), torch.randn(BATCH, WIDTHS[0]), "ddp-gloo-mlp",
                        description=MODEL_TEXT)
    with open(os.path.join(out_dir, "ddp_gloo_model.json"), "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, "ddp_gloo_truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")

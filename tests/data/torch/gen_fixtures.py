#!/usr/bin/env python3
"""Generates the PyTorch-profiler fixtures of a real 2-rank DDP job (tests/data/torch/).

Unit-test fixtures only: they are the legacy profiler's events rewritten in Kineto's schema by
our own writer, not what a Kineto build writes. The evidence that import-torch reads real
current PyTorch traces is tests/data/torch-2.15/ (gen_traces.py: torch 2.15 from PyPI, Kineto's
own export_chrome_trace()).

Runs a real DistributedDataParallel job on CPU (gloo backend, two processes launched with
torch.multiprocessing, rendezvous through a file:// init method) with an MLP whose
parameters fall into three buckets at bucket_cap_mb=0.05 (DDP's first bucket is capped at
1 MiB, dist._DEFAULT_FIRST_BUCKET_BYTES, the others at bucket_cap_mb), profiles a few steps
with torch.profiler (record_shapes=True, so the collectives carry their tensor shapes), and
writes per rank:

  ddp_gloo_rank<R>.json.gz   the profiler's events as a Kineto-schema Chrome trace (gzip)

Why not prof.export_chrome_trace(): Debian's python3-torch 1.13.1 is built without Kineto
(USE_KINETO=0), so torch.profiler falls back to the legacy autograd profiler, whose
export_chrome_trace() writes a bare array with pid "CPU functions" and empty args: no
distributedInfo, no shapes. This script writes the same profiler events (prof.events():
names, threads, µs start/duration, input shapes, sequence numbers, record scope) in the
schema Kineto's output_json.cpp uses (schemaVersion, distributedInfo, cat cpu_op /
user_annotation, args "Input Dims" / "Sequence number" / "External id"), which is what
PyTorch builds with Kineto export and what traces/kineto_import reads; the writer is
models/export/kineto_trace.py, usable in any training script on such a build. It adds nothing the
profiler did not record; tensor dtypes are not recorded by the legacy profiler, so no
"Input type" is written (the importer then assumes float32, DDP's gradient dtype here).

and once:

  ddp_gloo_model.json        the model (models/FORMAT.md), by models/export/torch_export.py
  ddp_gloo_truth.json        ground truth measured by this script itself:
    - buckets as DDP's reducer reports them (ddp._get_ddp_logging_data(): bucket_sizes /
      rebuilt_bucket_sizes, in bytes), the parameter count per bucket and the bucket count;
    - per-rank, per-step wall times of the ProfilerStep#N ranges, read back from the
      profiler's own events (prof.events(), µs → ns);
    - the world size, bucket_cap_mb, torch version.

Usage: /usr/bin/python3 tests/data/torch/gen_fixtures.py [--out DIR] [--steps N]
Needs python3-torch (Debian 1.13.1) and no GPU. Output is not byte-reproducible (it is a
measurement); the tests compare the importer against the truth file written in the same run.
"""

import argparse
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "models", "export"))
import kineto_trace  # noqa: E402  (models/export/kineto_trace.py)
from torch_export import export_model  # noqa: E402

BUCKET_CAP_MB = 0.05
WIDTHS = [96, 192, 256, 512, 256, 128, 10]  # 6 Linear layers, 365,130 parameters
BATCH = 16


def build_model():
    layers = []
    for i in range(len(WIDTHS) - 1):
        layers.append(nn.Linear(WIDTHS[i], WIDTHS[i + 1]))
        if i + 2 < len(WIDTHS):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def worker(rank, world, init_file, out_dir, wait, warmup, active):
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
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

    # Two unprofiled iterations: DDP rebuilds its buckets after the first one, so the
    # profiled steps all use the final (rebuilt) layout.
    for _ in range(2):
        step()
    schedule = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1)
    wall_ns = []
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=schedule, record_shapes=True) as prof:
        for _ in range(wait + warmup + active):
            t0 = time.perf_counter_ns()
            step()
            prof.step()
            wall_ns.append(time.perf_counter_ns() - t0)
    events = prof.events()
    trace = kineto_trace.trace_dict(
        events, rank, world, "gloo",
        note="torch %s legacy profiler events (no Kineto in this build) written in Kineto's "
        "schema by tests/data/torch/gen_fixtures.py" % torch.__version__)
    with open(os.path.join(out_dir, "ddp_gloo_rank%d.json" % rank), "w") as f:
        json.dump(trace, f, separators=(",", ":"))
    # Step wall times as the profiler measured them (its own ProfilerStep#N ranges).
    steps = {}
    for ev in events:
        if ev.trace_name and ev.trace_name.startswith("ProfilerStep#"):
            n = int(ev.trace_name[len("ProfilerStep#"):])
            steps[n] = int(round(ev.time_range.elapsed_us() * 1000))
    logging = model._get_ddp_logging_data()
    info = {
        "rank": rank,
        "step_ns": {str(k): v for k, v in sorted(steps.items())},
        "perf_counter_step_ns": wall_ns[wait + warmup:],
        "bucket_sizes": logging.get("bucket_sizes"),
        "rebuilt_bucket_sizes": logging.get("rebuilt_bucket_sizes"),
        "rebuilt_per_bucket_param_indices": logging.get("rebuilt_per_bucket_param_indices"),
        "bucket_cap_bytes": logging.get("bucket_cap_bytes"),
    }
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--steps", type=int, default=5, help="profiled (active) steps")
    args = ap.parse_args()
    world = 2
    wait, warmup = 1, 1
    tmp = tempfile.mkdtemp(prefix="ddpscope-fixtures-")
    try:
        init_file = os.path.join(tmp, "rendezvous")
        mp.spawn(worker, args=(world, init_file, tmp, wait, warmup, args.steps), nprocs=world,
                 join=True)
        ranks = []
        for r in range(world):
            with open(os.path.join(tmp, "truth_rank%d.json" % r)) as f:
                ranks.append(json.load(f))
        # Ground truth for the buckets: DDP's rebuilt layout (the one every profiled step
        # uses), in bucket index order; bytes of float32 parameters.
        sizes = parse_sizes(ranks[0]["rebuilt_bucket_sizes"]) or parse_sizes(
            ranks[0]["bucket_sizes"])
        truth = {
            "source": "tests/data/torch/gen_fixtures.py",
            "torch_version": torch.__version__,
            "backend": "gloo",
            "world_size": world,
            "bucket_cap_mb": BUCKET_CAP_MB,
            "model": "nn.Sequential of Linear %s with ReLU between" % WIDTHS,
            "batch": BATCH,
            "bucket_count": len(sizes),
            "bucket_bytes": sizes,
            "initial_bucket_bytes": parse_sizes(ranks[0]["bucket_sizes"]),
            "bucket_cap_bytes": ranks[0]["bucket_cap_bytes"],
            "per_bucket_param_indices": ranks[0]["rebuilt_per_bucket_param_indices"],
            "ranks": [{"rank": r["rank"], "step_ns": r["step_ns"],
                       "perf_counter_step_ns": r["perf_counter_step_ns"]} for r in ranks],
        }
        os.makedirs(args.out, exist_ok=True)
        for r in range(world):
            src = os.path.join(tmp, "ddp_gloo_rank%d.json" % r)
            with open(src, "rb") as fin, gzip.open(
                    os.path.join(args.out, "ddp_gloo_rank%d.json.gz" % r), "wb", 9) as fout:
                shutil.copyfileobj(fin, fout)
        # The model itself, exported with models/export/torch_export.py, so that tests can
        # name the imported compute spans by layer (import-torch --model).
        spec = export_model(build_model(), torch.randn(BATCH, WIDTHS[0]), "ddp-gloo-mlp",
                            description=truth["model"])
        with open(os.path.join(args.out, "ddp_gloo_model.json"), "w") as f:
            json.dump(spec, f, indent=1)
            f.write("\n")
        with open(os.path.join(args.out, "ddp_gloo_truth.json"), "w") as f:
            json.dump(truth, f, indent=1)
            f.write("\n")
        print(json.dumps({k: truth[k] for k in ("bucket_count", "bucket_bytes")}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

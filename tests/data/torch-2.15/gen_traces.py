#!/usr/bin/env python3
"""Generates real PyTorch-profiler (Kineto) traces of a 2-rank DDP job (tests/data/torch-2.15/).

Runs a real DistributedDataParallel job on CPU (gloo backend, two processes launched with
torch.multiprocessing, rendezvous through a file:// init method, one intra-op thread per
rank) with a small MLP whose parameters fall into three buckets at bucket_cap_mb=0.05, and
profiles a few steps with torch.profiler twice per rank:

  ddp_gloo_default_rank<R>.json.gz  torch.profiler.profile() with default settings
                                    (no record_shapes): the collectives carry no sizes
  ddp_gloo_shapes_rank<R>.json.gz   the same with record_shapes=True

Both are written by the profiler itself (prof.export_chrome_trace(), i.e. Kineto's own
JSON writer), gzip-compressed; nothing is rewritten. And once:

  ddp_gloo_truth.json   ground truth measured by this script in the same run:
    - the buckets as DDP's reducer reports them (ddp._get_ddp_logging_data():
      rebuilt_bucket_sizes / bucket_sizes in bytes, bucket_cap_bytes, param indices);
    - per trace and rank, the wall time of each profiled ProfilerStep#N range, read back
      from the profiler's events (prof.events(), µs -> ns), and each step's
      time.perf_counter_ns() around step() + prof.step();
    - world size, batch, bucket_cap_mb, torch version.
  ddp_gloo_model.json   the model (models/FORMAT.md) by models/export/torch_export.py, so that
                        import-torch --model can take the bucket sizes from the plan.

Usage: python tests/data/torch-2.15/gen_traces.py [--out DIR]
Needs a torch built with Kineto (the PyPI wheel; checked with 2.15.0 CPU) and no GPU. The
output is a measurement, not byte-reproducible; tests compare the importer with the truth
file written in the same run.
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
from torch_export import export_model  # noqa: E402  (models/export/torch_export.py)

BUCKET_CAP_MB = 0.05
WIDTHS = [96, 192, 256, 512, 256, 128, 10]  # 6 Linear layers, 365,130 parameters
BATCH = 16
WAIT, WARMUP, ACTIVE = 1, 1, 4
VARIANTS = (("default", {}), ("shapes", {"record_shapes": True}))


def build_model():
    layers = []
    for i in range(len(WIDTHS) - 1):
        layers.append(nn.Linear(WIDTHS[i], WIDTHS[i + 1]))
        if i + 2 < len(WIDTHS):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def worker(rank, world, init_file, out_dir):
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
    info = {"rank": rank, "traces": {}}
    for name, kwargs in VARIANTS:
        schedule = torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)
        wall_ns = []
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    schedule=schedule, **kwargs) as prof:
            for _ in range(WAIT + WARMUP + ACTIVE):
                t0 = time.perf_counter_ns()
                step()
                prof.step()
                wall_ns.append(time.perf_counter_ns() - t0)
        path = os.path.join(out_dir, "ddp_gloo_%s_rank%d.json" % (name, rank))
        prof.export_chrome_trace(path)
        # torch 2.x names the step ranges "ProfilerStep*" in prof.events() (the trace says
        # ProfilerStep#N); the k-th profiled one, by start time, is step WAIT + WARMUP + k.
        ranges = sorted((ev.time_range.start, ev.time_range.elapsed_us()) for ev in prof.events()
                        if ev.name.startswith("ProfilerStep"))
        steps = {WAIT + WARMUP + k: int(round(us * 1000)) for k, (_, us) in enumerate(ranges)}
        info["traces"][name] = {"step_ns": {str(k): v for k, v in sorted(steps.items())},
                                "perf_counter_step_ns": wall_ns[WAIT + WARMUP:]}
        dist.barrier()
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    world = 2
    tmp = tempfile.mkdtemp(prefix="ddpscope-torch215-")
    try:
        init_file = os.path.join(tmp, "rendezvous")
        mp.spawn(worker, args=(world, init_file, tmp), nprocs=world, join=True)
        ranks = []
        for r in range(world):
            with open(os.path.join(tmp, "truth_rank%d.json" % r)) as f:
                ranks.append(json.load(f))
        sizes = parse_sizes(ranks[0]["rebuilt_bucket_sizes"]) or parse_sizes(
            ranks[0]["bucket_sizes"])
        truth = {
            "source": "tests/data/torch-2.15/gen_traces.py",
            "torch_version": torch.__version__,
            "profiler": "torch.profiler.profile(activities=[CPU], schedule(wait=%d, warmup=%d, "
                        "active=%d)); 'default': no other argument, 'shapes': "
                        "record_shapes=True; traces by prof.export_chrome_trace()"
                        % (WAIT, WARMUP, ACTIVE),
            "backend": "gloo",
            "world_size": world,
            "bucket_cap_mb": BUCKET_CAP_MB,
            "model": "nn.Sequential of Linear %s with ReLU between" % WIDTHS,
            "batch": BATCH,
            "steps_per_trace": ACTIVE,
            "bucket_count": len(sizes),
            "bucket_bytes": sizes,
            "initial_bucket_bytes": parse_sizes(ranks[0]["bucket_sizes"]),
            "bucket_cap_bytes": ranks[0]["bucket_cap_bytes"],
            "per_bucket_param_indices": ranks[0]["rebuilt_per_bucket_param_indices"],
            "traces": {
                name: [dict(rank=r["rank"], file="ddp_gloo_%s_rank%d.json.gz" % (name, r["rank"]),
                            **r["traces"][name]) for r in ranks]
                for name, _ in VARIANTS
            },
        }
        os.makedirs(args.out, exist_ok=True)
        for name, _ in VARIANTS:
            for r in range(world):
                src = os.path.join(tmp, "ddp_gloo_%s_rank%d.json" % (name, r))
                with open(src, "rb") as fin, gzip.open(
                        os.path.join(args.out, "ddp_gloo_%s_rank%d.json.gz" % (name, r)), "wb",
                        9) as fout:
                    shutil.copyfileobj(fin, fout)
        spec = export_model(build_model(), torch.randn(BATCH, WIDTHS[0]), "ddp-gloo-mlp",
                            description=truth["model"])
        with open(os.path.join(args.out, "ddp_gloo_model.json"), "w") as f:
            json.dump(spec, f, indent=1)
            f.write("\n")
        with open(os.path.join(args.out, "ddp_gloo_truth.json"), "w") as f:
            json.dump(truth, f, indent=1)
            f.write("\n")
        print(json.dumps({k: truth[k] for k in ("torch_version", "bucket_count",
                                                 "bucket_bytes")}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What static_graph=True changes in a steady-state DDP iteration of real PyTorch (evidence for
`ddpscope plan`'s "no steady-state gain" note, sim/engine/plan.h kStaticGraphNoSteadyEffect).

Runs a real 2-rank DistributedDataParallel job on CPU (gloo, torch.multiprocessing, one intra-op
thread per rank; the MLP and bucket_cap_mb of gen_traces.py, 5 buckets) under three settings:

  default        find_unused_parameters=False, static_graph=False
  static_graph   find_unused_parameters=False, static_graph=True
  find_unused    find_unused_parameters=True,  static_graph=False   (the control: must differ)

and profiles steps 5..10 (well after the bucket rebuild: iteration 2, or 3 with static_graph)
with torch.profiler (CPU, record_shapes=True). It counts every profiler event name per step on
rank 0 and writes, per setting, {name: count per step} and the collectives' sizes; then the
names whose per-step count differs from the default's, with their CPU time per step.

Found with torch 2.15.0 (static_graph_ops.json): static_graph issues the same collectives of the
same sizes, the same buckets, no DDPSink and no used-map allreduce, but its finalize reads the
used map once per parameter (finalize_bucket_dense: `local_used_map_[i].item()` when
static_graph || find_unused: one aten::select + aten::item per parameter per step) — a small
host cost and never a gain. find_unused (the control) adds DDPSink, the unused-parameter search
and the used-map allreduce.

Usage: python tests/data/torch-2.15/static_graph_ops.py [--out FILE]
(default: static_graph_ops.json next to this script). Needs a torch with Kineto (the PyPI
wheel; checked with 2.15.0 CPU).
"""

import argparse
import collections
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_traces import BATCH, BUCKET_CAP_MB, build_model  # noqa: E402

SETTINGS = {
    "default": dict(find_unused_parameters=False, static_graph=False),
    "static_graph": dict(find_unused_parameters=False, static_graph=True),
    "find_unused": dict(find_unused_parameters=True, static_graph=False),
}
SKIP_STEPS, PROFILED_STEPS = 4, 6
# Collective events: their count and input sizes per step.
COLLECTIVE_WORDS = ("all_reduce", "allreduce", "broadcast", "allgather", "all_gather")


def worker(rank, world, init_file, setting, out_file):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    model = DDP(build_model(), bucket_cap_mb=BUCKET_CAP_MB, **SETTINGS[setting])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    torch.manual_seed(rank + 1)
    x = torch.randn(BATCH, 96)
    y = torch.randint(0, 10, (BATCH,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(SKIP_STEPS):
        step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:
        for _ in range(PROFILED_STEPS):
            step()
    if rank == 0:
        counts = collections.Counter()
        cpu_us = collections.Counter()
        sizes = collections.Counter()
        for e in prof.events():
            counts[e.name] += 1
            cpu_us[e.name] += e.cpu_time_total
            if any(w in e.name.lower() for w in COLLECTIVE_WORDS):
                sizes[f"{e.name} {e.input_shapes}"] += 1
        result = {
            "counts_per_step": {k: v / PROFILED_STEPS for k, v in sorted(counts.items())},
            "cpu_us_per_step": {k: v / PROFILED_STEPS for k, v in sorted(cpu_us.items())},
            "collectives_per_step": {k: v / PROFILED_STEPS for k, v in sorted(sizes.items())},
            "bucket_sizes": model._get_ddp_logging_data().get("rebuilt_bucket_sizes"),
        }
        with open(out_file, "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


def run(setting):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rank0.json")
        mp.spawn(worker, args=(2, os.path.join(tmp, "init"), setting, out), nprocs=2, join=True)
        with open(out) as f:
            return json.load(f)


def differing(a, b):
    names = sorted(set(a) | set(b))
    return {n: [a.get(n, 0), b.get(n, 0)] for n in names if a.get(n, 0) != b.get(n, 0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "static_graph_ops.json"))
    args = ap.parse_args()
    results = {name: run(name) for name in SETTINGS}
    base = results["default"]
    report = {
        "source": "tests/data/torch-2.15/static_graph_ops.py",
        "torch_version": torch.__version__,
        "world_size": 2, "backend": "gloo", "bucket_cap_mb": BUCKET_CAP_MB,
        "profiled_steps": f"{SKIP_STEPS + 1}..{SKIP_STEPS + PROFILED_STEPS}",
        "settings": SETTINGS,
        "differs_from_default": {
            name: {"counts_per_step": differing(base["counts_per_step"], r["counts_per_step"]),
                   # CPU time (µs per step, the event's total incl. children) of those events.
                   "cpu_us_per_step": {
                       n: [base["cpu_us_per_step"].get(n, 0), r["cpu_us_per_step"].get(n, 0)]
                       for n in differing(base["counts_per_step"], r["counts_per_step"])},
                   "collectives_per_step": differing(base["collectives_per_step"],
                                                     r["collectives_per_step"]),
                   "bucket_sizes": None if r["bucket_sizes"] == base["bucket_sizes"]
                   else [base["bucket_sizes"], r["bucket_sizes"]]}
            for name, r in results.items() if name != "default"},
        "default": base,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(json.dumps(report["differs_from_default"], indent=1))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Measures what one graph break costs a torch.compile'd model under DDPOptimizer (real PyTorch).

The simulator's --compile ddp-optimizer mode charges each compiled sub-graph a fixed host cost
(sim/engine/compile_mode.h: kGraphCallOverhead; forward call + backward call). This script
measures it on the installed torch, on this machine's CPU, one thread:

  model  Sequential of N blocks Linear(W, W) + ReLU, batch B: tiny kernels, so the per-graph
         host cost is not hidden under compute
  split  torch._dynamo's own DDPOptimizer (torch/_dynamo/backends/distributed.py) used as the
         torch.compile backend with bucket_bytes_cap = first_bucket_cap = 1 byte: every Linear
         becomes its own sub-graph, each compiled by the inner backend (inductor by default).
         This is the code DDP + torch.compile runs (convert_frame.py wraps the user's backend
         in DDPOptimizer.compile_fn); DDP itself is left out so its allreduces and hooks,
         the same in both variants, add no noise.
  base   the same model compiled as one graph by the inner backend
  result (median fwd+bwd time split − median one graph) / (S − 1), S = sub-graphs
         = the cost of one extra sub-graph (its forward call + its backward call)

Times are the thread's CPU time (time.thread_time_ns), so other processes on a shared host do
not count. The two variants run interleaved (ABAB...) so host drift hits both alike; the
interquartile range of the per-round differences is printed as the noise. Prints JSON.
Run by hand, with a Python that has torch: python scripts/measure_compile_overhead.py
[--backend inductor]
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.nn as nn
from torch._dynamo.backends.distributed import DDPOptimizer


# CPU time of this thread, not wall time: the graph-call cost is host CPU work, and on a shared
# host (this one: 2 cores, load ~10) wall time mostly measures waiting for a core. One intra-op
# thread, so every kernel runs on this thread too.
CLOCK = time.thread_time_ns


def build(width, blocks):
    layers = []
    for _ in range(blocks):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def make_step(split, args, seen):
    # No torch._dynamo.reset() here: it would drop the other variant's compiled code.
    torch.manual_seed(0)
    model = build(args.width, args.blocks)
    inner = torch._dynamo.lookup_backend(args.backend)
    if split:
        ddp_opt = DDPOptimizer(bucket_bytes_cap=1, backend_compile_fn=inner, first_bucket_cap=1)

        def backend(gm, example_inputs, **kw):
            result = ddp_opt.compile_fn(gm, example_inputs, **kw)
            seen["subgraphs"] = len(ddp_opt.buckets)
            return result

    else:
        backend = inner
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(args.batch, args.width, requires_grad=False)

    def step():
        out = compiled(x)
        out.sum().backward()
        for p in model.parameters():
            p.grad = None

    for _ in range(args.warmup):
        step()
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--blocks", type=int, default=24)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(1)
    seen = {}
    steps = {"ddp_optimizer": make_step(True, args, seen), "one_graph": make_step(False, args, seen)}
    subgraphs = seen["subgraphs"]
    times = {m: [] for m in steps}
    for _ in range(args.rounds):
        for mode, step in steps.items():
            t0 = CLOCK()
            for _ in range(args.steps):
                step()
            times[mode].append((CLOCK() - t0) / args.steps)
    med = {m: statistics.median(v) for m, v in times.items()}
    per_break = (med["ddp_optimizer"] - med["one_graph"]) / (subgraphs - 1)
    diffs = sorted(
        (a - b) / (subgraphs - 1) for a, b in zip(times["ddp_optimizer"], times["one_graph"])
    )
    q = len(diffs) // 4
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "host_load_1min": os.getloadavg()[0],
                "cpus": os.cpu_count(),
                "backend": args.backend,
                "device": "cpu, 1 thread",
                "clock": "thread CPU time",
                "model": f"{args.blocks} x (Linear({args.width},{args.width}) + ReLU), "
                f"batch {args.batch}",
                "subgraphs": subgraphs,
                "median_step_ns": {m: round(v) for m, v in med.items()},
                "per_subgraph_overhead_ns": round(per_break),
                "per_subgraph_overhead_iqr_ns": [round(diffs[q]), round(diffs[-q - 1])],
                # The fastest round of each variant: least disturbed by other processes on a
                # shared host (the median above carries the host's load).
                "min_step_ns": {m: round(min(v)) for m, v in times.items()},
                "per_subgraph_overhead_from_min_ns": round(
                    (min(times["ddp_optimizer"]) - min(times["one_graph"])) / (subgraphs - 1)
                ),
                "rounds": args.rounds,
                "steps_per_round": args.steps,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""ddpscope.torch.tune on one device (scripts/gpu-kit): the in-job tuner's GPU path.

One model of torch_job.py (same modules, batches and losses), DDP at world size 1 (NCCL on a GPU,
gloo on the CPU rehearsal) started from --start-cap, tuned with ddpscope.torch.tune (steps timed
with CUDA events on the GPU), then --pairs pairs of --steps steps before and after tuning,
alternating which goes first, every step synchronized with the device and timed with the host
clock. Writes into --out DIR:

  tune-<model>.report.json   the tuner's report (docs/schemas/tune-report.schema.json)
  tune-<model>.json          {model, device, start_cap, switched, paste, before_ms, after_ms,
                              ratios: after/before per pair (medians), tune_seconds}

Needs the ddpscope Python package on PYTHONPATH (the kit's payload carries one built for the GPU
machine's interpreter). Exit codes: 0 done; 2 bad arguments; 3 torch or ddpscope missing.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

try:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
except ImportError:
    print("tune_job: no torch in this python", file=sys.stderr)
    sys.exit(3)
try:
    import ddpscope.torch
except ImportError as e:
    print("tune_job: no ddpscope package (%s); set PYTHONPATH to the kit's python/" % e,
          file=sys.stderr)
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_job  # noqa: E402 (the same models, batches and losses as the torch steps)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=torch_job.MODELS, default="resnet50")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--start-cap", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps-per-block", type=int, default=4)
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--steps", type=int, default=10, help="timed steps per block before/after")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    device = torch_job.open_device(p, args)
    autocast = torch.bfloat16 if args.dtype == "bf16" and device.type == "cuda" else None

    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                init_method="file://" + os.path.join(tmp, "rendezvous"),
                                rank=0, world_size=1)
        torch.manual_seed(0)
        model = torch_job.make_model(args.model).to(device)
        x, y = torch_job.make_batch(args.model, args.batch, args.seq_len, args.image_size, device)
        ids = [0] if device.type == "cuda" else None
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=ids,
                                                  bucket_cap_mb=args.start_cap)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

        def step(m):
            opt.zero_grad(set_to_none=True)
            if autocast is not None:
                with torch.autocast(device_type=device.type, dtype=autocast):
                    out = m(x)
            else:
                out = m(x)
            torch_job.loss_of(args.model, out, y, model).backward()
            opt.step()

        report = os.path.join(args.out, "tune-%s.report.json" % args.model)
        t0 = time.perf_counter()
        result = ddpscope.torch.tune(ddp, step, optimizer=opt, rounds=args.rounds,
                                     steps_per_block=args.steps_per_block, report=report,
                                     example_inputs=x)
        tune_seconds = time.perf_counter() - t0

        def block(m):
            step(m)  # not timed: the switch
            times = []
            for _ in range(args.steps):
                torch_job.sync(device)
                t = time.perf_counter()
                step(m)
                torch_job.sync(device)
                times.append((time.perf_counter() - t) * 1e3)
            return statistics.median(times)

        before, after = [], []
        for k in range(args.pairs):
            order = (("before", ddp), ("after", result.model))
            for name, m in (order if k % 2 == 0 else order[::-1]):
                (before if name == "before" else after).append(block(m))
        summary = {"model": args.model, "device": torch_job.describe_device(device),
                   "torch": torch.__version__, "dtype": args.dtype, "batch": args.batch,
                   "start_cap": args.start_cap, "switched": result.switched,
                   "paste": result.paste, "tune_seconds": tune_seconds,
                   "tune_steps": result.report["steps"]["total"],
                   "before_ms": before, "after_ms": after,
                   "ratios": [a / b for a, b in zip(after, before)]}
        with open(os.path.join(args.out, "tune-%s.json" % args.model), "w") as f:
            json.dump(summary, f, indent=1)
        print("tune_job: %s from bucket_cap_mb=%g: %s (%d steps, %.1f s); after/before %s"
              % (args.model, args.start_cap, result.report["decision"]["reason"],
                 summary["tune_steps"], tune_seconds,
                 ", ".join("%.3f" % r for r in summary["ratios"])))
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

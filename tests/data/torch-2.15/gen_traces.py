#!/usr/bin/env python3
"""Generates real PyTorch-profiler (Kineto) traces of a 2-rank DDP job (tests/data/torch-2.15/).

Runs the real DistributedDataParallel job of tests/data/ddp_gloo_job.py (2 ranks, gloo, CPU, an
MLP in three buckets at bucket_cap_mb=0.05) and profiles a few steps with torch.profiler twice
per rank:

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
import json
import os
import shutil
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import ddp_gloo_job as job  # noqa: E402  (tests/data/ddp_gloo_job.py)

WAIT, WARMUP, ACTIVE = 1, 1, 4
VARIANTS = (("default", {}), ("shapes", {"record_shapes": True}))


def worker(rank, init_file, out_dir):
    model, step = job.start(rank, init_file)
    info = {"rank": rank, "traces": {}}
    for name, kwargs in VARIANTS:
        prof, wall_ns = job.profile(step, WAIT, WARMUP, ACTIVE, **kwargs)
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
    job.finish(model, rank, out_dir, info)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()
    tmp, ranks = job.run(worker, (), "ddpscope-torch215-")
    try:
        truth = {
            "source": "tests/data/torch-2.15/gen_traces.py",
            "torch_version": torch.__version__,
            "profiler": "torch.profiler.profile(activities=[CPU], schedule(wait=%d, warmup=%d, "
                        "active=%d)); 'default': no other argument, 'shapes': "
                        "record_shapes=True; traces by prof.export_chrome_trace()"
                        % (WAIT, WARMUP, ACTIVE),
            "steps_per_trace": ACTIVE,
        }
        truth.update(job.bucket_truth(ranks[0]))
        truth["traces"] = {
            name: [dict(rank=r["rank"], file="ddp_gloo_%s_rank%d.json.gz" % (name, r["rank"]),
                        **r["traces"][name]) for r in ranks]
            for name, _ in VARIANTS
        }
        os.makedirs(args.out, exist_ok=True)
        for name, _ in VARIANTS:
            for r in range(job.WORLD):
                job.gzip_copy(os.path.join(tmp, "ddp_gloo_%s_rank%d.json" % (name, r)),
                              os.path.join(args.out, "ddp_gloo_%s_rank%d.json.gz" % (name, r)))
        job.write_model_and_truth(args.out, truth)
        print(json.dumps({k: truth[k] for k in ("torch_version", "bucket_count",
                                                 "bucket_bytes")}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Generates the PyTorch-profiler fixtures of a real 2-rank DDP job (tests/data/torch/).

Unit-test fixtures only: they are the legacy profiler's events rewritten in Kineto's schema by
our own writer, not what a Kineto build writes. The evidence that import-torch reads real
current PyTorch traces is tests/data/torch-2.15/ (gen_traces.py: torch 2.15 from PyPI, Kineto's
own export_chrome_trace()).

Runs the real DistributedDataParallel job of tests/data/ddp_gloo_job.py (2 ranks, gloo, CPU, an
MLP in three buckets at bucket_cap_mb=0.05), profiles a few steps with torch.profiler (record_shapes=True, so the collectives carry their tensor shapes), and
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
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "models", "export"))
import ddp_gloo_job as job  # noqa: E402  (tests/data/ddp_gloo_job.py)
import kineto_trace  # noqa: E402  (models/export/kineto_trace.py)

WAIT, WARMUP = 1, 1


def worker(rank, init_file, out_dir, active):
    model, step = job.start(rank, init_file)
    prof, wall_ns = job.profile(step, WAIT, WARMUP, active, record_shapes=True)
    events = prof.events()
    trace = kineto_trace.trace_dict(
        events, rank, job.WORLD, "gloo",
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
    job.finish(model, rank, out_dir, {
        "rank": rank,
        "step_ns": {str(k): v for k, v in sorted(steps.items())},
        "perf_counter_step_ns": wall_ns[WAIT + WARMUP:],
    })


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--steps", type=int, default=5, help="profiled (active) steps")
    args = ap.parse_args()
    tmp, ranks = job.run(worker, (args.steps,), "ddpscope-fixtures-")
    try:
        truth = {"source": "tests/data/torch/gen_fixtures.py", "torch_version": torch.__version__}
        truth.update(job.bucket_truth(ranks[0]))
        truth["ranks"] = [{"rank": r["rank"], "step_ns": r["step_ns"],
                           "perf_counter_step_ns": r["perf_counter_step_ns"]} for r in ranks]
        os.makedirs(args.out, exist_ok=True)
        for r in range(job.WORLD):
            job.gzip_copy(os.path.join(tmp, "ddp_gloo_rank%d.json" % r),
                          os.path.join(args.out, "ddp_gloo_rank%d.json.gz" % r))
        job.write_model_and_truth(args.out, truth)
        print(json.dumps({k: truth[k] for k in ("bucket_count", "bucket_bytes")}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Records real torch.profiler traces of 2-rank gloo DDP jobs for the replay tests.

For each of mlp-wide and resnet18 (the zoo's shapes, as sim/validate/torch_ddp_job.py builds
them) at bucket_cap_mb 1 and 25, runs sim/validate/torch_ddp_job.py with --default-profiler:
torch.profiler.profile(activities=[CPU]) with no other setting, as most users profile, so the
collectives carry no message sizes. Writes into tests/data/torch-2.15/replay/:

  <model>-cap<C>-rank<R>.json.gz   the profiler's own trace of rank R (export_chrome_trace),
                                   gzip-compressed, not rewritten
  <model>-cap<C>-job.json          what the job measured: per-rank wall time of every
                                   iteration (perf_counter, ms), DDP's bucket sizes, settings

The configurations run interleaved (A B C D, then again) and the last round is kept, so a slow
moment of the host does not fall on one configuration only.

Usage: /path/to/venv/bin/python tests/data/torch-2.15/gen_replay_traces.py [--rounds 2]
Needs a torch with Kineto (the PyPI wheel; recorded with 2.15.0 on 2 CPU cores).
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "..", "..", "..", "sim", "validate", "torch_ddp_job.py")
CONFIGS = (("mlp-wide", 1), ("mlp-wide", 25), ("resnet18", 1), ("resnet18", 25))
BATCH = {"mlp-wide": 32, "resnet18": 16}
WARMUP, ITERATIONS = 2, 14


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(HERE, "replay"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=ITERATIONS)
    ap.add_argument("--models", default="mlp-wide,resnet18")
    args = ap.parse_args()
    configs = [c for c in CONFIGS if c[0] in args.models.split(",")]
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ddpscope-replay-") as tmp:
        for _ in range(args.rounds):
            for model, cap in configs:
                prefix = os.path.join(tmp, "%s-cap%d" % (model, cap))
                subprocess.run([sys.executable, JOB, "--model", model, "--world", "2",
                                "--batch-per-rank", str(BATCH[model]), "--bucket-cap-mb",
                                str(cap), "--warmup", str(WARMUP), "--iterations",
                                str(args.iterations), "--default-profiler", "--out", prefix],
                               check=True)
        for model, cap in configs:
            name = "%s-cap%d" % (model, cap)
            for rank in range(2):
                src = os.path.join(tmp, "%s-rank%d.json" % (name, rank))
                dst = os.path.join(args.out, "%s-rank%d.json.gz" % (name, rank))
                with open(src, "rb") as fin, gzip.GzipFile(dst, "wb", 9, mtime=0) as fout:
                    shutil.copyfileobj(fin, fout)
            with open(os.path.join(tmp, name + "-job.json")) as f:
                job = json.load(f)
            job["source"] = "tests/data/torch-2.15/gen_replay_traces.py"
            with open(os.path.join(args.out, name + "-job.json"), "w") as f:
                json.dump(job, f, indent=1)
                f.write("\n")
            steps = sorted(max(r[i] for r in job["step_ms_per_rank"])
                           for i in range(WARMUP, WARMUP + args.iterations))
            print("%-16s median slowest-rank step %.2f ms" % (name, steps[len(steps) // 2]))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Overhead of ddpscope.torch.record on a real DDP job: gloo, 2 ranks (CPU), the small MLP of
python/tests/recorder_job.py, SGD. Plain and recorded runs alternate (A B A B ...), each run
`--iterations` steps after 2 warm-up steps; a step is zero_grad + forward + loss + backward +
optimizer.step on rank 0. Prints the median step time of each mode with its spread (min..max
of the per-run medians) and the overhead of the medians, for wall time and for the process's
CPU time per step (all threads; less sensitive to a loaded host), and the load average.

    PYTHONPATH=build/release/python python3 python/bench/recorder_overhead.py \
        [--repeats 7] [--iterations 30] [--world 2]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--world", type=int, default=2)
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ddpscope-recorder-bench-") as out:
        subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "recorder_job.py"), out,
                        "--mode", "bench", "--world", str(args.world), "--iterations",
                        str(args.iterations), "--repeats", str(args.repeats)], check=True)
        with open(os.path.join(out, "bench.json")) as f:
            bench = json.load(f)
    load_after = os.getloadavg()
    print("torch %s, gloo, %d ranks, %d repeats x %d steps (interleaved plain/recorded), rank 0"
          % (bench["torch"], bench["world_size"], args.repeats, args.iterations))
    for key, what in (("step_ns", "wall"), ("cpu_ns", "CPU")):
        per_mode = {"plain": [], "recorded": []}
        for run in bench["runs"]:
            per_mode[run["mode"]].append(statistics.median(run[key]) / 1e6)
        for mode, runs in per_mode.items():
            print("  %-4s %-9s median step %.3f ms  (per-run medians %.3f .. %.3f ms)"
                  % (what, mode, statistics.median(runs), min(runs), max(runs)))
        plain = statistics.median(per_mode["plain"])
        recorded = statistics.median(per_mode["recorded"])
        # Each recorded run against the plain run just before it: robust to drifting load.
        ratios = sorted(100 * (r / p - 1) for p, r in zip(per_mode["plain"],
                                                           per_mode["recorded"]))
        print("  %-4s overhead  %+.3f ms per step (%+.1f %%) between the medians; paired "
              "%+.1f %% (%+.1f .. %+.1f %%)" % (what, recorded - plain,
                                              100 * (recorded - plain) / plain,
                                              statistics.median(ratios), ratios[0], ratios[-1]))
    print("  load average before %.2f %.2f %.2f, after %.2f %.2f %.2f"
          % (load_before + load_after))


if __name__ == "__main__":
    main()

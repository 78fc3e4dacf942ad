#!/usr/bin/env python3
"""How long a DDP job takes to end after one of its ranks is stopped from outside.

Starts `ddpscope run --nproc 2 -- --model M --backend mpi --comm-timeout-s T` (training for
as long as it takes), stops rank 1 with SIGSTOP after --stop-after seconds, and prints, relative
to the stop, when each line of the job's output came and when `ddpscope run` exited; repeats
--runs times and ends with one line per run. A stopped rank only ends by SIGKILL: the figure
checked is "the job ends within the timeout + 15 s" (docs/guide.md, "Faults").

Usage: scripts/measure_stopped_rank.py [--ddpscope build/release/bin/ddpscope] [--runs 10]
           [--timeout 20] [--stop-after 8] [--model mlp-wide] [--verbose]
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rank_pid(rank):
    """The pid of the ddpscope-run process of MPI rank `rank`, or None."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().split(b"\0")
            if not cmd or not cmd[0].endswith(b"ddpscope-run"):
                continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                if ("OMPI_COMM_WORLD_RANK=%d" % rank).encode() in f.read().split(b"\0"):
                    return int(pid)
        except OSError:
            pass
    return None


def one_run(args):
    job = subprocess.Popen(
        [args.ddpscope, "run", "--nproc", "2", "--", "--model", args.model, "--backend", "mpi",
         "--comm-timeout-s", str(args.timeout), "--iterations", "100000000"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    reader = threading.Thread(
        target=lambda: [lines.append((time.monotonic(), l.rstrip())) for l in job.stdout],
        daemon=True)
    reader.start()
    time.sleep(args.stop_after)
    pid = rank_pid(1)
    if pid is None:
        job.kill()
        sys.exit("measure_stopped_rank.py: rank 1 not found after %.0f s" % args.stop_after)
    os.kill(pid, signal.SIGSTOP)
    stop = time.monotonic()
    code = job.wait()
    end = time.monotonic() - stop
    reader.join(timeout=5)
    timeout_line = next((t - stop for t, l in lines if "timed out after" in l), None)
    if args.verbose:
        for t, line in lines:
            if t >= stop:
                print("%7.2f  %s" % (t - stop, line[:160]))
    return end, timeout_line, code


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ddpscope", default=os.path.join(ROOT, "build", "release", "bin", "ddpscope"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--stop-after", type=float, default=8)
    ap.add_argument("--model", default="mlp-wide")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    results = []
    for i in range(args.runs):
        end, timed_out, code = one_run(args)
        results.append(end)
        print("run %d: timeout reported %s s after the stop, job ended %.2f s after it (exit %d)"
              % (i + 1, "%.2f" % timed_out if timed_out is not None else "never", end, code),
              flush=True)
    bound = args.timeout + 15
    within = sum(r <= bound for r in results)
    print("%d of %d runs ended within timeout + 15 s = %.0f s (%.2f-%.2f s)"
          % (within, len(results), bound, min(results), max(results)))
    return 0 if within == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())

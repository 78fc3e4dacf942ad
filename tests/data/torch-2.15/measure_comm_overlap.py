#!/usr/bin/env python3
"""How much slower gloo's collectives run while the rank computes, on the committed real traces.

Usage: measure_comm_overlap.py [--cli DDPSCOPE] [--scan]
  DDPSCOPE: the ddpscope binary (default: $DDPSCOPE_CLI, else build/release/bin/ddpscope).

Imports the four recordings of replay/ (mlp-wide and resnet18 at caps 1 and 25, 2 gloo ranks,
torch 2.15; gen_replay_traces.py) as `ddpscope import-torch --model M --bucket-cap-mb C` does,
then takes every collective of the measured iterations (2..15) the way replay's profile does
(sim/replay/measured_profile.cpp): matched across ranks by (iteration, issue order), from the last
rank's start to the last rank's end, times the ranks' mean own share of that time when gloo ran
two collectives at once. New here: g, the fraction of that window in which the rank's compute
lane (forward, backward, optimizer spans) was busy, mean over ranks. Prints per recording and
message size the median duration, median g and the bytes per second; then a line
t = base + bytes / beta fitted to the collectives of >= 64 KiB with g < 0.2 of all four
recordings pooled (the collectives that ran alone), and each collective's median slowdown
against that line by g.

--scan also replays each recording at its own cap and at the other one on a cluster with that
uncontended line (its `calibrate` output with alpha_beta replaced) at --contention 0 ... 2: the
question is whether compute contention alone (the simulator's only contention) can stand in for
the collectives' own slowdown. Python 3 only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
RUNS = [("mlp-wide", "1"), ("mlp-wide", "25"), ("resnet18", "1"), ("resnet18", "25")]
COMPUTE = ("forward", "backward", "optimizer")
SKIP = 1  # iterations <= SKIP: the profile's default for these recordings (DDP's rebuild step)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def covered(intervals, a, b):
    total = 0.0
    for s, f in intervals:
        if f <= a:
            continue
        if s >= b:
            break
        total += min(f, b) - max(s, a)
    return total


def own_shares(spans):
    """Each span's own share of its length when the spans in flight at once share it equally."""
    events = sorted([(a, i) for i, (a, _) in enumerate(spans)] +
                    [(b, i) for i, (_, b) in enumerate(spans)], key=lambda x: x[0])
    own = [0.0] * len(spans)
    active, previous = [], 0.0
    for t, i in events:
        if active and t > previous:
            for j in active:
                own[j] += (t - previous) / len(active)
        previous = t
        if i in active:
            active.remove(i)
        else:
            active.append(i)
    return [own[i] / (b - a) if b > a else 1.0 for i, (a, b) in enumerate(spans)]


def samples(trace):
    events = json.load(open(trace))["traceEvents"]
    compute, comm = defaultdict(list), defaultdict(list)
    for e in events:
        if e.get("ph") != "X":
            continue
        if e.get("tid") == 0 and e.get("cat") in COMPUTE:
            compute[e["pid"]].append((e["ts"], e["ts"] + e["dur"]))
        elif "bytes" in e.get("args", {}):
            comm[e["pid"]].append(e)
    matched = defaultdict(dict)
    for rank, spans in comm.items():
        spans.sort(key=lambda e: e["ts"])
        compute[rank].sort()
        shares = own_shares([(e["ts"], e["ts"] + e["dur"]) for e in spans])
        order = defaultdict(int)
        for e, share in zip(spans, shares):
            it = e["args"].get("iteration", 0)
            matched[(it, order[it])][rank] = (e, share)
            order[it] += 1
    out = []
    for (it, _), members in matched.items():
        sizes = {e["args"]["bytes"] for e, _ in members.values()}
        if it <= SKIP or len(members) < 2 or len(sizes) != 1:
            continue
        start = max(e["ts"] for e, _ in members.values())
        end = max(e["ts"] + e["dur"] for e, _ in members.values())
        if end <= start:
            continue
        share = statistics.mean(s for _, s in members.values())
        g = statistics.mean(covered(compute[r], start, end) / (end - start) for r in members)
        out.append({"bytes": sizes.pop(), "us": (end - start) * share, "g": g})
    return out


def fit_line(points):
    """Least squares t = base + bytes / beta; returns (base_us, beta_GBps)."""
    n = len(points)
    sx = sum(x for x, _ in points)
    sy = sum(y for _, y in points)
    sxx = sum(x * x for x, _ in points)
    sxy = sum(x * y for x, y in points)
    k = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return (sy - k * sx) / n, 1.0 / (k * 1e3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=os.environ.get("DDPSCOPE_CLI",
                                                   os.path.join(ROOT, "build/release/bin/ddpscope")))
    ap.add_argument("--scan", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="comm-overlap-")
    imported, pooled = {}, []
    for model, cap in RUNS:
        name = "%s-cap%s" % (model, cap)
        path = os.path.join(tmp, name + ".json")
        run([args.cli, "import-torch", os.path.join(HERE, "replay", name + "-rank0.json.gz"),
             os.path.join(HERE, "replay", name + "-rank1.json.gz"), "--model", model,
             "--bucket-cap-mb", cap, "-o", path])
        imported[(model, cap)] = path
        rows = samples(path)
        print("== %s: %d collectives" % (name, len(rows)))
        by_size = defaultdict(list)
        for r in rows:
            by_size[r["bytes"]].append(r)
            if r["bytes"] >= 64 * 1024 and r["g"] < 0.2:
                pooled.append(r)
        for size in sorted(by_size):
            v = by_size[size]
            us = statistics.median(r["us"] for r in v)
            print("  %9.3f MiB  n=%2d  median %7.2f ms  g %.2f  %.2f GB/s" % (
                size / 2**20, len(v), us / 1e3, statistics.median(r["g"] for r in v),
                size / us / 1e3))
    base, beta = fit_line([(r["bytes"], r["us"]) for r in pooled])
    print("\nalone (g < 0.2, >= 64 KiB, %d collectives of the four recordings): t = %.0f us + "
          "bytes / %.2f GB/s" % (len(pooled), base, beta))
    bands = [(0, 0.2), (0.2, 0.5), (0.5, 0.8), (0.8, 1.01)]
    for model, cap in RUNS:
        rows = [r for r in samples(imported[(model, cap)]) if r["bytes"] >= 64 * 1024]
        cells = []
        for lo, hi in bands:
            ratio = [r["us"] / (base + r["bytes"] / (beta * 1e3)) for r in rows if lo <= r["g"] < hi]
            cells.append("g %.1f-%.1f: %s" % (lo, min(hi, 1), "%.2fx (n=%d)" % (
                statistics.median(ratio), len(ratio)) if ratio else "-"))
        print("  %s cap %s, time / the line: %s" % (model, cap, "; ".join(cells)))
    if not args.scan:
        return
    print("\nreplay on that line (alpha 20 us), own cap and the other, by --contention:")
    for model in ("mlp-wide", "resnet18"):
        for src, dst in (("1", "25"), ("25", "1")):
            cluster = os.path.join(tmp, "cal-%s-%s.json" % (model, src))
            run([args.cli, "calibrate", imported[(model, src)], "-o", cluster])
            spec = json.load(open(cluster))
            spec["alpha_beta"].update({"intra_alpha_us": 20, "intra_beta_GBps": round(beta, 4),
                                       "base_us": round(base, 1)})
            json.dump(spec, open(cluster, "w"))
            own = json.loads(run([args.cli, "replay", "--from-trace", imported[(model, dst)],
                                  "--json"]))["measured_step_ms"]
            cells = []
            for c in (0, 0.25, 0.5, 1, 2):
                j = json.loads(run([args.cli, "replay", "--from-trace", imported[(model, src)],
                                    "--cluster", cluster, "--contention", str(c),
                                    "--bucket-cap-mb", dst, "--json"]))
                cells.append("c %g: own %+.1f %%, what-if %+.1f %%" % (
                    c, j["replay_error_percent"], 100 * (j["what_if"]["step_time_ns"] / 1e6 / own - 1)))
            print("  %s cap %s -> %s: %s" % (model, src, dst, "; ".join(cells)))


if __name__ == "__main__":
    main()

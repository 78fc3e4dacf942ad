#!/usr/bin/env python3
"""Measures how much slower compute kernels run while an NCCL kernel runs, on a real trace.

Usage: measure_contention.py TRACE.json[.gz]
  (default: $DDPSCOPE_EXTERNAL_DATA/hta/resnet_2gpu_rank0.json.gz, tests/data/EXTERNAL.md)

For every GPU kernel that is not an NCCL kernel, f = the fraction of its duration covered by
NCCL kernels of the same trace. Kernels are grouped by (name, grid, block): the same work. A
group with >= 2 kernels at f < 0.05 and >= 1 at f > 0.5 gives c = median(overlapped) /
median(not overlapped) - 1. Prints the median of c over the groups, the time-weighted mean, the
NCCL kernels' grid (CTAs) and the device's SM count, so the number can be set beside the SM
share CTAs / (SMs - CTAs) (sim/cost/clusters/FORMAT.md, nccl_sm_contention). Python 3 only.
"""
import collections
import gzip
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import external_data  # noqa: E402  (tests/external_data.py)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def main():
    default = "hta/resnet_2gpu_rank0.json.gz"
    path = sys.argv[1] if len(sys.argv) > 1 else external_data.path(default)
    if not path:
        sys.exit(external_data.missing_message(default))
    doc = load(path)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e.get("dur", 0) > 0]
    nccl = [e for e in kernels if "nccl" in e["name"].lower()]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in nccl]
    groups = collections.defaultdict(lambda: ([], []))
    for e in kernels:
        if "nccl" in e["name"].lower():
            continue
        a, b = e["ts"], e["ts"] + e["dur"]
        covered = sum(max(0.0, min(b, t) - max(a, s)) for s, t in spans)
        f = covered / e["dur"]
        args = e.get("args", {})
        key = (e["name"], str(args.get("grid")), str(args.get("block")))
        if f < 0.05:
            groups[key][0].append(e["dur"])
        elif f > 0.5:
            groups[key][1].append(e["dur"])
    ratios, weights = [], []
    for low, high in groups.values():
        if len(low) >= 2 and len(high) >= 1:
            base = statistics.median(low)
            ratios.append(statistics.median(high) / base - 1)
            weights.append(base * len(high))
    sms = {d.get("numSms") for d in doc.get("deviceProperties", [])}
    ctas = collections.Counter(str(e.get("args", {}).get("grid")) for e in nccl)
    print(f"trace: {os.path.basename(path)}")
    print(f"device SMs: {sorted(s for s in sms if s)}; NCCL kernels: {len(nccl)}, grids {dict(ctas)}")
    if not ratios:
        print("no kernel group ran both overlapped and not overlapped: contention not identified")
        return 1
    weighted = sum(r * w for r, w in zip(ratios, weights)) / sum(weights)
    print(f"groups: {len(ratios)}; compute slowdown while NCCL runs: median "
          f"{100 * statistics.median(ratios):.1f} %, time-weighted mean {100 * weighted:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())

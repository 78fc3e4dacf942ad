#!/usr/bin/env python3
"""Trims real PyTorch-profiler traces from HTA's public test data into small fixtures.

Source: github.com/facebookresearch/HolisticTraceAnalysis, tests/data/ (MIT license;
tests/data/EXTERNAL.md). The trimmed files are other projects' data too: they are not committed
here but kept in the external data folder ($DDPSCOPE_EXTERNAL_DATA/hta/). Each trace is a real Kineto trace of a distributed (NCCL) job. Trimming
keeps every event HTA's get_comm_comp_overlap reads and drops the rest, so HTA's number is
unchanged (record_hta.py checks this: it is run on the trimmed files, and this script prints
HTA's number on the original next to the trimmed one's when HTA is importable):

  kept:    all GPU-side events (cat kernel / gpu_memcpy / gpu_memset / cuda_sync /
           gpu_user_annotation), the cuda_runtime / cuda_driver launches whose correlation a
           GPU event has, every event whose name contains "ProfilerStep", the metadata
           ("M") events, and the top-level fields (distributedInfo, deviceProperties, ...);
  dropped: cpu_op / python_function / user_annotation ranges other than ProfilerStep, the
           remaining runtime calls, flow ("ac2g", "fwdbwd") and instant events.

Usage: python3 tests/data/hta/trim_traces.py HTA_REPO_CHECKOUT [OUT_DIR]
(writes OUT_DIR/<name>.json.gz, default $DDPSCOPE_EXTERNAL_DATA/hta, for the traces in TRACES)
"""

import gzip
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import external_data  # noqa: E402  (tests/external_data.py)
# (path under HTA's tests/data, fixture name)
TRACES = [
    ("nccl_parser_config/nccl_data.json.gz", "resnet_2gpu_rank0.json.gz"),
    ("trace_diff/control/control.json.gz", "trace_diff_8gpu_rank3.json.gz"),
    ("trace_filter/sampled_rank-0.json.gz", "sampled_128gpu_rank0.json.gz"),
    ("trace_filter/sampled_rank-1.json.gz", "sampled_128gpu_rank1.json.gz"),
]
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "gpu_user_annotation"}


def trim(trace):
    events = trace["traceEvents"]
    gpu_corr = {e.get("args", {}).get("correlation") for e in events if e.get("cat") in GPU_CATS}
    gpu_corr.discard(None)
    kept = []
    for e in events:
        cat = e.get("cat")
        if e.get("ph") == "M" or cat in GPU_CATS or "ProfilerStep" in str(e.get("name", "")):
            kept.append(e)
        elif cat in ("cuda_runtime", "cuda_driver") and \
                e.get("args", {}).get("correlation") in gpu_corr:
            kept.append(e)
    out = dict(trace)
    out["traceEvents"] = kept
    return out


def main(argv):
    if len(argv) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    repo = argv[0]
    if len(argv) == 2:
        out_dir = argv[1]
    elif external_data.external_dir():
        out_dir = os.path.join(external_data.external_dir(), "hta")
    else:
        print("trim_traces.py: no OUT_DIR and %s is not set" % external_data.VARIABLE,
              file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    for src, name in TRACES:
        with gzip.open(os.path.join(repo, "tests", "data", src), "rt") as f:
            trace = json.load(f)
        small = trim(trace)
        dst = os.path.join(out_dir, name)
        with gzip.open(dst, "wt", compresslevel=9) as f:
            json.dump(small, f, separators=(",", ": "))  # HTA finds the rank by the regex "rank":\s+N
        print("%s: %d -> %d events, %s" % (src, len(trace["traceEvents"]),
                                           len(small["traceEvents"]), name), file=sys.stderr)
        try:
            sys.path.insert(0, HERE)
            from record_hta import overlap_of
            print("  HTA original %s, trimmed %s" % (
                overlap_of(os.path.join(repo, "tests", "data", src)), overlap_of(dst)),
                file=sys.stderr)
        except ImportError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

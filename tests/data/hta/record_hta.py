#!/usr/bin/env python3
"""Records Holistic Trace Analysis' comm/comp overlap for real and simulated traces.

For every *.json.gz trace given (default: HTA's real NCCL traces under
$DDPSCOPE_EXTERNAL_DATA/hta/ (tests/data/EXTERNAL.md), the simulated Kineto traces under
tests/data/hta/simulated/ (make_simulated.py) and the real torch 2.15 CPU traces under
tests/data/torch-2.15/), runs HTA's TraceAnalysis on a folder holding only that file and records
TraceAnalysis.get_comm_comp_overlap(visualize=False) per rank (comp_comm_overlap_pctg, HTA's own
2-decimal rounding; null where HTA gives NaN, i.e. the trace has no GPU communication kernels).
Writes hta_overlap.json next to this script:

  {"hta_version": "0.5.0", "traces": {"<key>": {"<rank>": pct|null}}}

where <key> is the path relative to tests/data, or "$DDPSCOPE_EXTERNAL_DATA/<path>" for an
external file.

Usage: python tests/data/hta/record_hta.py [TRACE.json.gz ...]
Needs `pip install holistictraceanalysis==0.5.0` (a separate venv; it pins its own pandas).
"""

import glob
import json
import math
import os
import shutil
import sys
import tempfile
from importlib.metadata import version

from hta.trace_analysis import TraceAnalysis

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
sys.path.insert(0, os.path.dirname(DATA))
import external_data  # noqa: E402  (tests/external_data.py)


def overlap_of(path):
    tmp = tempfile.mkdtemp(prefix="ddpscope-hta-")
    try:
        shutil.copy(path, os.path.join(tmp, os.path.basename(path)))
        analysis = TraceAnalysis(trace_dir=tmp)
        df = analysis.get_comm_comp_overlap(visualize=False)
        out = {}
        for rank, pct in zip(df["rank"], df["comp_comm_overlap_pctg"]):
            out[str(int(rank))] = None if math.isnan(pct) else float(pct)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    if not argv and not external_data.glob("hta/*.json.gz"):
        sys.exit(external_data.missing_message("hta/*.json.gz"))
    paths = argv or sorted(external_data.glob("hta/*.json.gz") +
                           glob.glob(os.path.join(HERE, "simulated", "*.json.gz")) +
                           glob.glob(os.path.join(DATA, "torch-2.15", "*.json.gz")))
    result = {"hta_version": version("HolisticTraceAnalysis"),
              "source": "tests/data/hta/record_hta.py", "traces": {}}
    for path in paths:
        rel = external_data.key(path)
        if not rel.startswith(external_data.KEY_PREFIX):
            rel = os.path.relpath(os.path.abspath(path), DATA)
        result["traces"][rel] = overlap_of(path)
        print(rel, result["traces"][rel], file=sys.stderr)
    if not argv:
        with open(os.path.join(HERE, "hta_overlap.json"), "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
            f.write("\n")
    else:
        print(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Writes the simulated Kineto traces in tests/data/hta/simulated/ (their commands:
simulated/commands.json): each command runs with `--trace-format kineto --trace
simulated/NAME.json.gz`, one file per rank (NAME.rankN.json.gz). Then run record_hta.py in a
venv with holistictraceanalysis==0.5.0 to record HTA's overlap on them.

Usage: python3 tests/data/hta/make_simulated.py --ddpscope build/release/bin/ddpscope
"""

import argparse
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "simulated")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ddpscope", required=True)
    args = p.parse_args()
    with open(os.path.join(OUT, "commands.json")) as f:
        commands = json.load(f)["traces"]
    for old in glob.glob(os.path.join(OUT, "*.json.gz")):
        os.remove(old)
    for c in commands:
        path = os.path.join(OUT, c["name"] + ".json.gz")
        cmd = [args.ddpscope] + c["args"] + ["--trace-format", "kineto", "--trace", path]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("make_simulated: %s failed: %s" % (" ".join(cmd), r.stderr))
        print(r.stdout.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())

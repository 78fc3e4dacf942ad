#!/usr/bin/env python3
"""Measures ddpscope.torch.tune on real 2-rank gloo jobs (docs/tuning.md's table).

    PYTHONPATH=<build>/python python/bench/tune_measure.py [--python PY] [--repeats 3]
        [--steps 30] [--pairs 3] [--models mlp-wide,resnet18,gpt2-small] [--start-cap X]
    [-o OUT.json]

For each repeat, each model in turn (interleaved: m1 m2 m3 m1 m2 m3 ...), one job
(python/tests/tune_job.py --case measure): tune from DDP's defaults, then `--pairs` pairs of
`--steps` steps, default and tuned alternating (A B A B), every step the slowest rank's wall time.
Prints one row per job: the choice, what tuning cost (steps, seconds), the median step of the
default and of the tuned settings, and their ratio (the median of the per-pair ratios of medians,
with its range); then every candidate's predicted and measured step. `--python`: the interpreter
with torch (default: this one); transformers and torchvision for gpt2-small and resnet18.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(os.path.dirname(HERE), "tests", "tune_job.py")


def run_job(python, case, model, steps, repeats, out, start_cap=None):
    """tune_job.py's `case` for `model` (rank 0's result.json); exits naming the model when the
    job fails."""
    extra = [] if start_cap is None else ["--start-cap", str(start_cap)]
    r = subprocess.run([python, JOB, out, "--case", case, "--model", model, "--steps",
                        str(steps), "--repeats", str(repeats)] + extra, capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit("tune_job %s failed:\n%s" % (model, r.stderr[-4000:]))
    with open(os.path.join(out, "result.json")) as f:
        return json.load(f)


def parse_arguments(p, table_of):
    """Adds --python, -o and --table to `p` and parses; with --table prints `table_of` of the
    saved run and returns None."""
    p.add_argument("--python", default=sys.executable,
                   help="the interpreter with torch (transformers, torchvision for their models)")
    p.add_argument("-o", "--out")
    p.add_argument("--table", metavar="JSON", help="print the markdown tables of a saved run")
    args = p.parse_args()
    if args.table:
        table_of(args.table)
        return None
    return args


def run(python, model, steps, pairs, out, start_cap=None):
    result = run_job(python, "measure", model, steps, pairs, out, start_cap)
    with open(os.path.join(out, "report.json")) as f:
        result["report"] = json.load(f)
    return result


def summarize(result):
    by = {}
    for run_ in result["runs"]:
        by.setdefault(run_["repeat"], {})[run_["mode"]] = statistics.median(run_["step_ns"]) / 1e6
    ratios = [p["tuned"] / p["default"] for p in by.values()]
    d = result["report"]["decision"]
    return {"model": result["model"], "torch": result["torch"], "switched": result["switched"],
            "paste": result["paste"],
            "tune_steps": result["report"]["steps"]["total"], "rounds": d["rounds"],
            "tune_seconds": result["tune_seconds"],
            "default_ms": statistics.median(p["default"] for p in by.values()),
            "tuned_ms": statistics.median(p["tuned"] for p in by.values()),
            "ratio": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios), "noise_floor_percent": d["noise_floor_percent"],
            "candidates": [{k: c[k] for k in ("label", "kwargs", "buckets", "predicted_step_ms",
                                               "measured_step_ms", "gain_percent",
                                               "rounds_faster", "p_value", "chosen")}
                           for c in result["report"]["candidates"]],
            "prediction": result["report"]["prediction"]}


def table(path):
    """docs/tuning.md's tables (markdown) from a saved run (-o)."""
    with open(path) as f:
        doc = json.load(f)
    rows = doc["rows"]
    start = ("bucket_cap_mb=%g" % doc["start_cap"]) if doc.get("start_cap") else "DDP's defaults"
    print("| model | tune's choice (%d repeats, from %s) | steps, seconds tuning | noise floor "
          "| before tuning, ms/step | after, ms/step | after / before: median of %d pairs "
          "per repeat (range) |" % (len(rows) // len({r["model"] for r in rows}), start,
                                  doc["pairs"]))
    print("|---|---|---|---|---|---|---|")
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        choices = {}
        for r in mine:
            choices[r["paste"]] = choices.get(r["paste"], 0) + 1
        print("| %s | %s | %d, %s s | %s %% | %s | %s | %s |" % (
            model, "; ".join("%s ×%d" % (k.replace("DistributedDataParallel(model", "DDP(model"), v)
                             for k, v in choices.items()),
            mine[0]["tune_steps"], "–".join("%.0f" % x for x in sorted(
                {min(r["tune_seconds"] for r in mine), max(r["tune_seconds"] for r in mine)})),
            "–".join("%.1f" % x for x in sorted({min(r["noise_floor_percent"] for r in mine),
                                                max(r["noise_floor_percent"] for r in mine)})),
            " / ".join("%.1f" % r["default_ms"] for r in mine),
            " / ".join("%.1f" % r["tuned_ms"] for r in mine),
            " / ".join("%.3f (%.3f–%.3f)" % (r["ratio"], r["ratio_min"], r["ratio_max"])
                       for r in mine)))
    print()
    print("| model | candidate | DDP's buckets | predicted ms/step | measured ms/step (per repeat) "
          "| rounds faster than current |")
    print("|---|---|---|---|---|---|")
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        labels = list(dict.fromkeys(c["label"] for r in mine for c in r["candidates"]))
        for label in labels:
            cs = [c for r in mine for c in r["candidates"] if c["label"] == label]
            pred = [c["predicted_step_ms"] for c in cs if c["predicted_step_ms"] is not None]
            print("| %s | %s | %s | %s | %s | %s |" % (
                model, label, "/".join(str(c["buckets"]) for c in cs),
                " / ".join("%.1f" % x for x in pred) or "–",
                " / ".join("%.1f" % c["measured_step_ms"] for c in cs),
                " / ".join("%d of %d" % (c["rounds_faster"], r.get("rounds", 8))
                           if label != "current" else "–"
                           for r in mine for c in r["candidates"] if c["label"] == label)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--models", default="mlp-wide,resnet18,gpt2-small")
    p.add_argument("--start-cap", type=float, default=None,
                   help="the jobs' bucket_cap_mb before tuning (default: left out, DDP's default)")
    args = parse_arguments(p, table)
    if args is None:
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeats):
            for model in args.models.split(","):
                out = os.path.join(tmp, "%s-%d" % (model, k))
                row = summarize(run(args.python, model, args.steps, args.pairs, out,
                                    args.start_cap))
                row["repeat"] = k
                rows.append(row)
                print("%-11s #%d %-8s %-48s tune %3d steps %6.1f s  default %8.2f ms  tuned "
                      "%8.2f ms  ratio %.3f (%.3f-%.3f)  noise %.1f %%"
                      % (model, k, "switched" if row["switched"] else "kept", row["paste"],
                         row["tune_steps"], row["tune_seconds"], row["default_ms"],
                         row["tuned_ms"], row["ratio"], row["ratio_min"], row["ratio_max"],
                         row["noise_floor_percent"]), flush=True)
                for c in row["candidates"]:
                    print("      %-40s %4s buckets  predicted %8s ms  measured %8.2f ms  "
                          "gain %+6.1f %%  won %d rounds  p %.3f%s"
                          % (c["label"][:40], c["buckets"],
                             "-" if c["predicted_step_ms"] is None
                             else "%.2f" % c["predicted_step_ms"],
                             c["measured_step_ms"], c["gain_percent"], c["rounds_faster"],
                             c["p_value"], "  <- chosen" if c["chosen"] else ""), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            torch_version = rows[0]["torch"] if rows else None
            json.dump({"torch": torch_version, "steps": args.steps, "pairs": args.pairs,
                       "start_cap": args.start_cap, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Host costs from the unprofiled host: a fit of per-op terms on the kit's timed steps. Stdlib only.

  host_phases.py FACTS.json RUN_DIR [RUN_DIR ...] [--backward-constant] [--json]

torch_job.py times every configuration (eager, DDP at each cap) without the profiler and records,
per step, how long the host took to enqueue the forward (with the loss) and the backward
(`host_ms`: until `loss.backward()` returned). The host facts (host_facts.py, FACTS.json) count
from the profiled trace what each of those phases dispatched: module calls, forward ops,
backward nodes, the CUDA runtime calls (launches) of both, parameters, DDP's buffers and, per
configuration, its buckets. Here the host's terms are fitted on the unprofiled times themselves,
by non-negative least squares on the relative error over every model and configuration (the
median of the runs' medians), so the profiler's own cost per event never enters:

  forward  = module calls x module + forward ops x op + their runtime calls x launch
             + [DDP] (wrapper + broadcasts x broadcast + buffer ops x (op + launch))
  backward = backward nodes x node + their runtime calls x launch + parameters x AccumulateGrad
             + [DDP] (parameters x per gradient (hook, copy-in, copy-back) + buckets x bucket)

DDP's buffer broadcast is costed by its ops, as the product's fit does (sim/replay/host_fit.cpp):
per buffer its copy back, per dtype group a flatten and an unflatten (an op and a launch each),
and per group c10d's broadcast call. Terms of its own per buffer cannot be told apart from the
per-call one: only resnet50 and llama-small have buffers, so with either held out the two columns
are proportional and the fit's pick between them is arbitrary.

With --backward-constant the backward's launch term is replaced by a constant per step.

and each model is predicted with the terms fitted on the others (held out). Prints the terms and
the held-out errors per model, configuration and phase (docs/spec/host-lane.md, "The unprofiled
host").
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from least_squares import nnls  # noqa: E402

FORWARD_TERMS = ["module_us", "forward_op_us", "forward_launch_us", "ddp_wrapper_us",
                 "broadcast_us"]
BACKWARD_TERMS = ["backward_node_us", "backward_launch_us", "accumulate_grad_us",
                  "ddp_gradient_us", "bucket_us"]
# --backward-constant: the backward's launch term replaced by a constant per step
BACKWARD_CONSTANT_TERMS = ["backward_node_us", "backward_step_us", "accumulate_grad_us",
                           "ddp_gradient_us", "bucket_us"]


def phases(backward_constant=False):
    return (("forward", FORWARD_TERMS),
            ("backward", BACKWARD_CONSTANT_TERMS if backward_constant else BACKWARD_TERMS))


def counts(model_facts):
    """What one profiled DDP step dispatched (the means over its steps)."""
    steps = model_facts["steps"]

    def mean(fn):
        return sum(fn(s) for s in steps) / len(steps)

    def term(name, key="count"):
        return mean(lambda s: (s["terms"].get(name) or {}).get(key, 0))

    buckets = {c: len([x for x in b.get("rebuilt_bucket_sizes", "").split(",") if x.strip()])
               for c, b in model_facts["measured_ms"].get("_buckets", {}).items()}
    def layers(key):
        return mean(lambda s: sum(v.get(key, 0) for v in s["layers"].values()))

    return {
        "module_calls": mean(lambda s: s["module_calls"]),
        "forward_ops": layers("forward_ops"),
        "forward_launches": layers("forward_runtime_events"),
        "backward_nodes": layers("backward_ops"),
        "backward_launches": layers("backward_runtime_events"),
        "parameters": term("accumulate_grad"),
        "broadcasts": term("buffer_sync", "broadcasts"),
        "buffers": term("buffer_copy"),
        "buckets": buckets,
    }


def features(c, config, phase, backward_constant=False):
    ddp = 0.0 if config == "eager" else 1.0
    if phase == "forward":
        buffer_ops = ddp * (c["buffers"] + 2 * c["broadcasts"])
        return [c["module_calls"], c["forward_ops"] + buffer_ops,
                c["forward_launches"] + buffer_ops, ddp, ddp * c["broadcasts"]]
    buckets = c["buckets"].get(config, 0) if ddp else 0
    return [c["backward_nodes"], 1.0 if backward_constant else c["backward_launches"],
            c["parameters"], ddp * c["parameters"], ddp * buckets]


def load(facts_path, runs):
    """{model: (counts, {config: {phase: median of the runs' median host ms}}, {config: runs})}"""
    with open(facts_path) as f:
        facts = json.load(f)["models"]
    out = {}
    for model, mf in sorted(facts.items()):
        per = {}
        for run in runs:
            path = os.path.join(run, f"{model}.json")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                job = json.load(f)
            for config, h in (job.get("median_host_ms") or {}).items():
                per.setdefault(config, []).append(h)
        if not per:
            continue
        host = {config: {phase: statistics.median(h[phase] for h in hs)
                         for phase in ("forward", "backward")} for config, hs in per.items()}
        out[model] = (counts(mf), host, {config: len(hs) for config, hs in per.items()})
    if len(out) < 2:
        raise SystemExit(f"host_phases.py: {len(out)} model(s) with unprofiled host times "
                         f"(median_host_ms) in {', '.join(runs)}: a held-out fit needs two")
    return out


def fit(data, models, phase, backward_constant=False):
    rows, ys = [], []
    for m in models:
        c, host, _ = data[m]
        for config, h in host.items():
            y = h[phase] * 1000  # µs
            rows.append([x / y for x in features(c, config, phase, backward_constant)])
            ys.append(1.0)
    return nnls(rows, ys)


def predict(coef, c, config, phase, backward_constant=False):
    x = features(c, config, phase, backward_constant)
    return sum(a * b for a, b in zip(coef, x)) / 1000  # ms


def report(data, backward_constant=False):
    models = sorted(data)
    result = {"all": {}, "held_out": {}, "backward_constant": backward_constant}
    for phase, names in phases(backward_constant):
        result["all"][phase] = dict(zip(names, fit(data, models, phase, backward_constant)))
    for held in models:
        rest = [m for m in models if m != held]
        c, host, _ = data[held]
        rows = {}
        for phase, names in phases(backward_constant):
            coef = fit(data, rest, phase, backward_constant)
            for config, h in host.items():
                rows.setdefault(config, {})[phase] = {
                    "measured_ms": h[phase],
                    "predicted_ms": predict(coef, c, config, phase, backward_constant)}
        result["held_out"][held] = rows
    return result


def markdown(result):
    lines = ["Terms fitted on every model (µs):", ""]
    for phase, names in phases(result["backward_constant"]):
        lines.append(f"- {phase}: " + ", ".join(f"{n} {result['all'][phase][n]:.2f}"
                                               for n in names))
    lines += ["", "Held out (terms fitted on the other models), measured / predicted ms (error):",
              "", "| model | configuration | forward | backward |", "|---|---|---|---|"]
    for model, rows in result["held_out"].items():
        for config in sorted(rows, key=lambda c: (c != "eager", c)):
            cells = []
            for phase, _ in phases(result["backward_constant"]):
                r = rows[config][phase]
                err = 100 * (r["predicted_ms"] / r["measured_ms"] - 1)
                cells.append(f"{r['measured_ms']:.2f} / {r['predicted_ms']:.2f} ({err:+.1f} %)")
            lines.append(f"| {model} | {config} | " + " | ".join(cells) + " |")
    errors = {phase: [abs(r[phase]["predicted_ms"] / r[phase]["measured_ms"] - 1)
                      for rows in result["held_out"].values() for r in rows.values()]
              for phase, _ in phases(result["backward_constant"])}
    lines += [""] + [f"- {phase}, held out: mean |error| {100 * sum(e) / len(e):.1f} %, largest "
                     f"{100 * max(e):.1f} %" for phase, e in errors.items()]
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("facts")
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--backward-constant", action="store_true",
                    help="fit the backward with a constant per step instead of a cost per launch")
    ap.add_argument("--json", action="store_true", help="print the fit as JSON")
    args = ap.parse_args(argv[1:])
    for run in args.runs:
        if not os.path.isdir(run):
            raise SystemExit(f"host_phases.py: no run folder {run}")
    result = report(load(args.facts, args.runs), args.backward_constant)
    print(json.dumps(result, indent=1, sort_keys=True) if args.json else markdown(result))


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python3
"""Measured effect of `ddpscope plan` on this machine: default vs best uniform vs planned buckets.

For each model, `ddpscope plan --cluster cpu-mpi --world-size 2 --json` gives (A) the default
(bucket_cap_mb left out), (B) the best uniform bucket_cap_mb and (C) the planned
bucket_cap_mb_list, with the simulator's predicted step time of each. Then the real CPU runtime
trains the model at 2 ranks (`ddpscope run --nproc 2 -- ...`, MPI) under each configuration,
interleaved A B C A B C ... for --repeats rounds, so slow drifts of a shared host hit every
configuration alike. Each run reports its median step over its measured iterations (after a
warm-up that covers the bucket rebuild); the script reports, per configuration, the median over
runs with the min and max, the measured gain over the default (of the medians, and paired: the
median over rounds of each round's gain over that round's default run, which cancels drifts
slower than a round) next to the predicted one, and the default's own spread (max-min over its
runs, relative to its median). A configuration counts as faster or slower only if its paired
gain has the same sign in every round (a sign test: p = 2/2^n for n rounds); otherwise the
host's noise hides the difference.

When the plan does not recommend its list (its gain is below the noise it assumes, so it keeps
a uniform bucket_cap_mb), (E) measures what it recommends instead — its `ddp_kwargs`: the best
uniform cap with the flags it recommends (gradient_as_bucket_view, static_graph) — predicted by
`ddpscope simulate` with those settings. The list (C) is still measured, labelled as not
recommended.

--from-trace adds (D) the plan of a recorded run: one default run is recorded first
(`ddpscope run ... --trace`), `ddpscope plan --from-trace` plans it with its measured compute and
cpu-mpi calibrated on its own collectives, and D joins the rounds (A B C D ...).

Uses only the standard library. Run it at normal priority (other jobs niced) and look at the load
averages it prints: on a shared 2-core host the runtime's two ranks compete with everything else.

  scripts/measure_plan_runtime.py --repeats 5 --out plan_runtime.json
  scripts/measure_plan_runtime.py --models mlp-wide --repeats 7 --from-trace
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name → (model for plan and run, global batch (runtime), extra flags for both)
MODELS = {
    "mlp-wide": ("mlp-wide", 16, []),
    "resnet18": ("resnet18", 8, ["--image-size", "64"]),
    "gpt2-small": ("gpt2:layers=4,embd=256,heads=4,vocab=8192,seq=64", 4, []),
}
LABELS = {"default": "default (bucket_cap_mb left out)",
          "best_uniform": "best uniform bucket_cap_mb={cap:g}",
          "planned": "planned bucket_cap_mb_list={caps}{not_recommended}",
          "recommended": "recommended by the plan: {kwargs}",
          "planned_from_trace": "planned from the recorded run: bucket_cap_mb_list={trace_caps}"}


def run_json(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.strip()}")
    return json.loads(proc.stdout)


def plan_json(cmd):
    plan = run_json(cmd)
    if plan["planned"] is None:
        sys.exit(f"{' '.join(cmd)}: no bucket_cap_mb_list in the plan (torch 1.13?)")
    return plan


def caps_flag(plan):
    return ["--bucket-cap-mb-list", ",".join(str(c) for c in plan["planned"]["bucket_cap_mb_list"])]


# The runtime flag of each DDP keyword the plan may recommend.
FLAG_OF_KWARG = {"gradient_as_bucket_view=True": "--gradient-as-bucket-view",
                 "static_graph=True": "--static-graph"}


def recommended_flags(plan):
    """The runtime flags of the plan's ddp_kwargs: its layout and the flags it recommends."""
    flags = caps_flag(plan) if plan["recommend_list"] else [
        "--bucket-cap-mb", f"{plan['best_uniform']['bucket_cap_mb']:g}"]
    for f in plan["flags"]:
        if f["recommended"]:
            if f["kwarg"] not in FLAG_OF_KWARG:
                sys.exit(f"plan recommends {f['kwarg']}: no runtime flag known for it")
            flags.append(FLAG_OF_KWARG[f["kwarg"]])
    return flags


def config_flags(plan, trace_plan, config):
    if config == "default":
        return []
    if config == "recommended":
        return recommended_flags(plan)
    if config == "best_uniform":
        return ["--bucket-cap-mb", f"{plan['best_uniform']['bucket_cap_mb']:g}"]
    return caps_flag(plan if config == "planned" else trace_plan)


def predicted_ns(plan, trace_plan, config, recommended_ns=None):
    if config == "planned_from_trace":
        return trace_plan["planned"]["step_time_ns"]
    if config == "recommended":
        return recommended_ns
    return plan["default" if config == "default" else config]["step_time_ns"]


def gain(base, value):
    return 100.0 * (base - value) / base


def paired(runs, config):
    """Per-round gains over the same round's default run: (median, min, max) in %."""
    gains = [gain(d, x) for d, x in zip(runs["default"], runs[config])]
    return statistics.median(gains), min(gains), max(gains)


def report(results):
    """Prints the results as a Markdown table and one noise line per model."""
    print("| model | configuration | measured median ms (min..max) | gain of medians | "
          "paired gain, median (min..max) | predicted ms | predicted gain |")
    print("|---|---|---|---|---|---|---|")
    for name, e in results["models"].items():
        for c in e["configs"]:
            r = e["configs"][c]
            label = LABELS[c].format(
                cap=e["best_uniform_cap_mb"], caps=e["planned_caps_mb"],
                trace_caps=e.get("trace_planned_caps_mb"), kwargs=e.get("plan_ddp_kwargs"),
                not_recommended="" if e.get("plan_recommends_list", True)
                else " (not recommended by the plan)")
            runs = {k: v["runs_ms"] for k, v in e["configs"].items()}
            pm, plo, phi = paired(runs, c)
            print(f"| {name} | {label} | {r['median_ms']:.1f} ({r['min_ms']:.1f}..{r['max_ms']:.1f})"
                  f" | {r['measured_gain_percent']:+.1f} % | {pm:+.1f} % ({plo:+.1f}..{phi:+.1f})"
                  f" | {r['predicted_ms']:.1f} | {r['predicted_gain_percent']:+.1f} % |")
    for name, e in results["models"].items():
        runs = {k: v["runs_ms"] for k, v in e["configs"].items()}
        # Sign test: a configuration is faster (slower) only if it won (lost) every round.
        hidden = [c for c in list(e["configs"])[1:] if paired(runs, c)[1] <= 0 <= paired(runs, c)[2]]
        rounds = len(runs["default"])
        print(f"{name}: default's spread over its runs {e['default_spread_percent']:.1f} %; "
              f"load average {e['load_average_before'][0]:.2f} before, "
              f"{e['load_average_after'][0]:.2f} after; "
              + (f"{rounds} round(s): too few for a sign test (p = 2/2^n needs n >= 3)"
                 if rounds < 3
                 else f"no consistent sign over the rounds (noise): {', '.join(hidden)}" if hidden
                 else "every configuration won or lost every round"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ddpscope", default=os.path.join(ROOT, "build", "release", "bin", "ddpscope"))
    ap.add_argument("--models", default=",".join(MODELS), help="comma list of " + ", ".join(MODELS))
    ap.add_argument("--repeats", type=int, default=5, help="rounds of A B C (default 5)")
    ap.add_argument("--iterations", type=int, default=10, help="measured iterations per run")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up iterations (covers the rebuild)")
    ap.add_argument("--from-trace", action="store_true",
                    help="also measure the plan of a recorded default run (plan --from-trace)")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--report", metavar="RESULTS.json",
                    help="print the tables of a results file written by --out, run nothing")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            report(json.load(f))
        return
    if args.repeats < 1:
        sys.exit("--repeats: expected at least 1")
    names = [m for m in args.models.split(",") if m]
    for name in names:
        if name not in MODELS:
            sys.exit(f"--models: unknown model '{name}' (expected {', '.join(MODELS)})")
    if not os.access(args.ddpscope, os.X_OK):
        sys.exit(f"--ddpscope: '{args.ddpscope}' is not an executable file (build it first)")

    base_configs = ["default", "best_uniform", "planned"] + (["planned_from_trace"]
                                                              if args.from_trace else [])
    results = {"host": os.uname().nodename, "cpus": os.cpu_count(), "repeats": args.repeats,
               "iterations": args.iterations, "warmup": args.warmup, "models": {}}
    for name in names:
        model, global_batch, extra = MODELS[name]
        run_base = [args.ddpscope, "run", "--nproc", "2", "--", "--model", model,
                    "--batch", str(global_batch), "--iterations", str(args.iterations),
                    "--warmup", str(args.warmup), "--json"] + extra
        plan_cmd = [args.ddpscope, "plan", "--model", model, "--cluster", "cpu-mpi",
                    "--world-size", "2", "--batch", str(global_batch // 2), "--json"] + extra
        plan = plan_json(plan_cmd)
        configs = list(base_configs)
        recommended_ns = None
        if not plan["recommend_list"]:
            configs.append("recommended")
            sim_cmd = [args.ddpscope, "simulate", "--model", model, "--cluster", "cpu-mpi",
                       "--world-size", "2", "--batch", str(global_batch // 2), "--json"] + extra + \
                recommended_flags(plan)
            recommended_ns = run_json(sim_cmd)["step_time_ns"]
        trace_plan, trace_plan_cmd = None, None
        if args.from_trace:
            trace = os.path.join(tempfile.mkdtemp(prefix="ddpscope-plan-"), "default.json")
            run_json(run_base + ["--trace", trace])
            trace_plan_cmd = [args.ddpscope, "plan", "--from-trace", trace, "--json"]
            trace_plan = plan_json(trace_plan_cmd)
        runs = {c: [] for c in configs}
        cmds = {}
        load_before = os.getloadavg()
        started = time.time()
        for rep in range(args.repeats):
            for config in configs:
                cmd = run_base + config_flags(plan, trace_plan, config)
                cmds[config] = cmd
                summary = run_json(cmd)
                runs[config].append(summary["median_step_ms"])
                print(f"{name} round {rep + 1}/{args.repeats} {config:12s} "
                      f"{summary['median_step_ms']:9.3f} ms  (load {os.getloadavg()[0]:.2f})",
                      file=sys.stderr, flush=True)
        load_after = os.getloadavg()
        med = {c: statistics.median(runs[c]) for c in configs}
        noise = 100.0 * (max(runs["default"]) - min(runs["default"])) / med["default"]
        entry = {
            "model": model, "global_batch": global_batch, "plan_command": " ".join(plan_cmd),
            "run_commands": {c: " ".join(cmds[c]) for c in configs},
            "best_uniform_cap_mb": plan["best_uniform"]["bucket_cap_mb"],
            "planned_caps_mb": plan["planned"]["bucket_cap_mb_list"],
            "trace_plan_command": " ".join(trace_plan_cmd) if trace_plan_cmd else None,
            "trace_planned_caps_mb": trace_plan["planned"]["bucket_cap_mb_list"] if trace_plan
            else None,
            "plan_recommends_list": plan["recommend_list"],
            "plan_ddp_kwargs": plan["ddp_kwargs"],
            "load_average_before": load_before, "load_average_after": load_after,
            "seconds": round(time.time() - started, 1),
            "default_spread_percent": noise, "configs": {}}
        for c in configs:
            pred = predicted_ns(plan, trace_plan, c, recommended_ns) / 1e6
            base = (trace_plan if c == "planned_from_trace" else plan)["default"]["step_time_ns"]
            entry["configs"][c] = {
                "runs_ms": runs[c], "median_ms": med[c], "min_ms": min(runs[c]),
                "max_ms": max(runs[c]), "predicted_ms": pred,
                "measured_gain_percent": gain(med["default"], med[c]),
                "predicted_gain_percent": gain(base / 1e6, pred),
            }
        results["models"][name] = entry

    report(results)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""How good are ddpscope.torch.tune's decisions? (docs/tuning.md's decision quality)

    PYTHONPATH=<build>/python python/bench/tune_decisions.py [--python PY] [--repeats 2]
        [--rounds 6] [--steps 6] [--models mlp-wide,resnet18,gpt2-small,mobilenet-v3-small]
        [--starts default,0.05] [-o OUT.json]
    python/bench/tune_decisions.py --table OUT.json

Each job (python/tests/tune_job.py --case sweep) tunes a real 2-rank gloo job from DDP's
defaults or from bucket_cap_mb=0.05, then measures an exhaustive sweep in the same job: caps
0.05, 1, 2, 5, 10, 25 and 100, the planned list and every other candidate tune proposed, in
`--rounds` interleaved rounds (order rotated) of `--steps`-step blocks, DDP's default twice per
round. Jobs are interleaved over models and starts (m1 s1, m1 s2, m2 s1, ...), `--repeats` times.

Per job: every layout's step as the median over rounds of its block median over the default's
block median in the same round (a paired ratio: drift between rounds cancels); the noise floor
is the median over rounds of |second default block / first - 1|. Tune's decision is good when
its layout's ratio is within the noise floor of the best layout's; it is also scored against the
best picked on the other rounds (leave one round out: `held_out_regret`), which a layout that was
only lucky does not survive. The prediction's order is
scored by Spearman's rank correlation between tune's predicted steps and the sweep's measured
ratios of the same candidates, and over the whole sweep between each layout's replay of a
recording at the job's starting layout (`replay --from-trace`, the what-if) and its measured
ratio. A miss is either the prediction's (no layout within the noise of the best was among the
candidates) or the measurement's (one was, and tune kept the current settings). Rows keep tune's
own first-round figures of each candidate (its median gain, the rounds it won), and `--table`
shows the sweep's best as the sweep and as tune's rounds measured it, and the job's own wrapper
(which tune timed as the current settings, timed in the sweep too) against a fresh wrapper of
the same settings. A run of the trial with confirmation rounds (docs/tuning.md, "Tried and not
kept") also scored what tune's first rounds alone chose: a paired before/after from the same job
and sweep. Standard library only.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tune_measure import parse_arguments, run_job  # noqa: E402  (python/bench/tune_measure.py)


def ranks(xs):
    """Average ranks (1-based), ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2.0 + 1
        i = j + 1
    return out


def spearman(xs, ys):
    """Spearman's rho (Pearson's correlation of the average ranks); None below 3 points or
    when either side has one rank only."""
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return None if sxx == 0 or syy == 0 else sxy / (sxx * syy) ** 0.5


def summarize(job):
    """One row per job: every layout's paired ratio and median step, the noise floor, tune's
    choice against the best, and the prediction's rank correlation."""
    layouts = job["layouts"]
    base = job["control"]["of"]
    blocks = [[statistics.median(b) / 1e6 for b in layout["step_ns"]] for layout in layouts]
    control = [statistics.median(b) / 1e6 for b in job["control"]["step_ns"]]
    rounds = range(len(control))
    per_round = [[blocks[i][r] / blocks[base][r] for r in rounds] for i in range(len(layouts))]
    ratios = [statistics.median(x) for x in per_round]
    noise = statistics.median(abs(control[r] / blocks[base][r] - 1) for r in rounds)
    best = min(range(len(layouts)), key=lambda i: ratios[i])
    chosen = job["chosen"]
    regret = ratios[chosen] / ratios[best] - 1
    predicted = [c for c in job["candidates"] if c["predicted_step_ms"] is not None]
    rho = spearman([c["predicted_step_ms"] for c in predicted],
                   [ratios[c["layout"]] for c in predicted])
    replayed = job["replayed_step_ms"]
    rho_sweep = spearman(replayed, ratios) if all(x is not None for x in replayed) else None
    row = {"model": job["model"], "start": job["start_cap"] or "default",
            "torch": job["torch"], "switched": job["switched"], "paste": job["paste"],
            "tune_seconds": job["tune_seconds"], "tune_noise_floor_percent":
            job["noise_floor_percent"], "noise_floor": noise, "best": best, "chosen": chosen,
            "regret": regret, "good": regret <= noise, "spearman": rho,
            "control_round_ratios": [control[r] / blocks[base][r] for r in rounds],
            "tune_steps": job.get("tune_steps"),
            "spearman_sweep": rho_sweep,
            "layouts": [{"label": layout["label"], "buckets": layout["buckets"],
                         "ratio": ratios[i], "median_ms": statistics.median(blocks[i]),
                         "replayed_ms": replayed[i], "round_ratios": per_round[i]}
                        for i, layout in enumerate(layouts)],
            "candidates": [{"label": c["label"], "predicted_step_ms": c["predicted_step_ms"],
                            "layout": c["layout"],
                            # what tune's own first rounds measured of it
                            "gain_percent": c.get("gain_percent"),
                            "rounds_faster": c.get("rounds_faster")}
                           for c in job["candidates"]]}
    if "confirmation" in job:  # the trial with confirmation rounds (docs/tuning.md)
        first = job["first_chosen"]  # what its first rounds alone chose
        first_regret = ratios[first] / ratios[best] - 1
        row.update({"first_chosen": first, "first_regret": first_regret,
                    "first_good": first_regret <= noise, "confirmation": job["confirmation"]})
    if "own" in job:  # the job's own wrapper at its starting settings, timed in the sweep too
        own = [statistics.median(b) / 1e6 for b in job["own"]["step_ns"]]
        start = start_layout(row)
        row["own_round_ratios"] = [own[r] / blocks[base][r] for r in rounds]
        row["own_ratio"] = statistics.median(row["own_round_ratios"])
        row["own_vs_fresh"] = row["own_ratio"] / ratios[start] - 1
        row.update(own_outcome(row))
    row["proposed"] = near_best_proposed(row)
    held = held_out_regret(row)
    if held is not None:
        row["held_out_regret"] = held
        row["held_out_good"] = held <= noise
    return row


def held_out_regret(row):
    """Tune's choice against the sweep's best picked on *other* rounds: for each round, the
    layout with the smallest median ratio over the remaining rounds is that round's best, and the
    choice's block over that best's block in the round is one ratio; the median over the rounds,
    minus 1. The plain regret compares the choice with the luckiest of nine to twelve noisy
    figures, which a tuner that always picked a truly best layout would still miss by about a
    standard error or two (the winner's curse); judged on rounds it was not picked on, a best
    layout that only had luck loses its advantage. None without the rounds' ratios (rows saved
    before they were kept) or with fewer than 3 rounds."""
    per = [x.get("round_ratios") for x in row["layouts"]]
    if any(p is None for p in per) or len(per[0]) < 3:
        return None
    n = len(per[0])
    chosen = row["chosen"]
    out = []
    for r in range(n):
        others = [k for k in range(n) if k != r]
        best = min(range(len(per)), key=lambda i: statistics.median(per[i][k] for k in others))
        out.append(per[chosen][r] / per[best][r])
    return statistics.median(out) - 1


def start_layout(row):
    """The index of the job's starting layout (tune's "current" candidate) in the sweep."""
    return next(c["layout"] for c in row["candidates"] if c["label"] == "current")


def own_outcome(row):
    """What tune ended on as the job runs it, the job's own wrapper when it kept the settings,
    against the best of the sweep and the own wrapper: {"own_regret", "own_good"}."""
    ratios = [x["ratio"] for x in row["layouts"]]
    ended = ratios[row["chosen"]] if row["switched"] else row["own_ratio"]
    regret = ended / min(ratios[row["best"]], row["own_ratio"]) - 1
    return {"own_regret": regret, "own_good": regret <= row["noise_floor"]}


def versus_start(row):
    """The chosen layout's measured step over the job's starting layout's, minus 1 (negative:
    tuning helped)."""
    return row["layouts"][row["chosen"]]["ratio"] / row["layouts"][start_layout(row)]["ratio"] - 1


def near_best_proposed(row):
    """Whether a layout within the noise floor of the sweep's best was among tune's candidates
    (so tune measured one): a miss with one is the measurement's, without one the prediction's."""
    ratios = [x["ratio"] for x in row["layouts"]]
    limit = ratios[row["best"]] * (1 + row["noise_floor"])
    return any(ratios[c["layout"]] <= limit for c in row["candidates"])


def prediction_error(row):
    """How far tune's predicted steps, each over the current settings' prediction, were from the
    measured ones over the current settings' measurement: the mean of |predicted - measured| over
    the other predicted candidates; None when the current settings or no other were predicted."""
    cands = [c for c in row["candidates"] if c["predicted_step_ms"] is not None]
    current = [c for c in cands if c["label"] == "current"]
    others = [c for c in cands if c["label"] != "current"]
    if not current or not others:
        return None
    pred0 = current[0]["predicted_step_ms"]
    meas0 = row["layouts"][current[0]["layout"]]["ratio"]
    return statistics.fmean(abs(c["predicted_step_ms"] / pred0 -
                                row["layouts"][c["layout"]]["ratio"] / meas0) for c in others)


def in_tunes_rounds(row):
    """The sweep's best layout as tune's own first rounds measured it against the starting
    layout: "+g % (w won)" (g: its median gain, w: the rounds it was faster in), "not a
    candidate", "the start" or None when the run did not keep tune's figures."""
    if row["best"] == start_layout(row):
        return "the start"
    best = next((c for c in row["candidates"] if c["layout"] == row["best"]), None)
    if best is None:
        return "not a candidate"
    if best.get("gain_percent") is None:
        return None
    return "%+.1f %% (%d won)" % (best["gain_percent"], best["rounds_faster"])


def table(path):
    """docs/tuning.md's decision-quality tables (markdown) from a saved run (-o). Runs that
    kept tune's own figures get a column for the sweep's best in tune's rounds; runs of the trial
    with confirmation rounds (docs/tuning.md) one for the first rounds' choice alone."""
    with open(path) as f:
        rows = json.load(f)["rows"]
    confirmed = any("confirmation" in r for r in rows)
    figures = any(c.get("gain_percent") is not None for r in rows for c in r["candidates"])
    held = any("held_out_regret" in r for r in rows)
    print("| model | start | tune's choice | choice / start - 1 | sweep's best | choice / best - 1 "
          "| noise floor | within |%s%s%s a near-best layout among the candidates "
          "| Spearman: candidates (n) | Spearman: sweep | prediction error |" % (
              " best picked on the other rounds: choice / best - 1 (within) |" if held else "",
              " first rounds alone: choice / best - 1 (within) |" if confirmed else "",
              " the sweep's best: gain over the start in the sweep; in tune's rounds |"
              if figures else ""))
    print("|---" * (12 + held + confirmed + figures) + "|")
    for r in rows:
        lay = r["layouts"]
        rho = r["spearman"]
        err = prediction_error(r)
        extra = ""
        if held:
            extra += " %+.1f %% (%s) |" % (100 * r["held_out_regret"],
                                          "yes" if r["held_out_good"] else "no")
        if confirmed:
            first, first_regret = r.get("first_chosen", r["chosen"]), r.get("first_regret")
            extra += " %s (%s) |" % (
                "same choice" if first == r["chosen"] else "%+.1f %%" % (100 * first_regret),
                "yes" if r.get("first_good", r["good"]) else "no")
        if figures:
            gain = 1 - lay[r["best"]]["ratio"] / lay[start_layout(r)]["ratio"]
            tuned = in_tunes_rounds(r)
            extra += " %+.1f %%; %s |" % (100 * gain, "–" if tuned is None else tuned)
        print("| %s | %s | %s | %+.1f %% | %s | %+.1f %% | %.1f %% | %s |%s %s | %s | %s | %s |" % (
            r["model"], "cap 0.05" if r["start"] != "default" else "defaults",
            lay[r["chosen"]]["label"], 100 * versus_start(r), lay[r["best"]]["label"],
            100 * r["regret"],
            100 * r["noise_floor"], "yes" if r["good"] else "**no**", extra,
            "yes" if near_best_proposed(r) else "no",
            "–" if rho is None else "%+.2f (%d)" % (rho, sum(
                1 for c in r["candidates"] if c["predicted_step_ms"] is not None)),
            "–" if r["spearman_sweep"] is None else "%+.2f" % r["spearman_sweep"],
            "–" if err is None else "%.3f" % err))
    print()
    line = "Within the noise floor of the sweep's best: %d of %d jobs" % (
        sum(1 for r in rows if r["good"]), len(rows))
    if held:
        line += "; with the best picked on the other rounds: %d of %d" % (
            sum(1 for r in rows if r["held_out_good"]), len(rows))
    if confirmed:
        line += ("; with the first rounds' choice alone: %d of %d. Confirmation rounds ran in %d, "
                 "and switched in %d" % (
                     sum(1 for r in rows if r.get("first_good", r["good"])), len(rows),
                     sum(1 for r in rows if r.get("confirmation")),
                     sum(1 for r in rows if r.get("confirmation") and
                         r["chosen"] != r.get("first_chosen", r["chosen"]))))
    own = [r for r in rows if "own_vs_fresh" in r]
    if own:
        line += (". The job's own wrapper (the settings tune timed as current) against a fresh "
                 "wrapper of the same settings, median over the rounds: %s. With the job's own "
                 "wrapper as what tune kept (and among the layouts), within the noise floor of "
                 "the best: %d of %d jobs" % (
                     ", ".join("%+.1f %%" % (100 * r["own_vs_fresh"]) for r in own),
                     sum(1 for r in own if r["own_good"]), len(own)))
    print(line + ".")
    print()
    print("| model | start | layouts, fastest measured first: measured / default's step "
          "(DDP's buckets; replayed ms) |")
    print("|---|---|---|")
    for r in rows:
        print("| %s | %s | %s |" % (
            r["model"], "cap 0.05" if r["start"] != "default" else "defaults",
            "; ".join("%s %.3f (%s; %.1f)" % (x["label"], x["ratio"], x["buckets"],
                                             x["replayed_ms"])
                      for x in sorted(r["layouts"], key=lambda x: x["ratio"]))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--models", default="mlp-wide,resnet18,gpt2-small,mobilenet-v3-small")
    p.add_argument("--starts", default="default,0.05",
                   help="comma-separated: default (DDP's defaults) or a bucket_cap_mb")
    args = parse_arguments(p, table)
    if args is None:
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeats):
            for model in args.models.split(","):
                for start in args.starts.split(","):
                    out = os.path.join(tmp, "%s-%s-%d" % (model, start, k))
                    row = summarize(run_job(args.python, "sweep", model, args.steps,
                                            args.rounds, out,
                                            None if start == "default" else start))
                    row["repeat"] = k
                    rows.append(row)
                    lay = row["layouts"]
                    held = row.get("held_out_regret")  # None below 3 rounds
                    print("%-18s from %-7s #%d chose %-28s best %-28s regret %+5.1f %% "
                          "(held out %s) noise %4.1f %% %s  rho %s / sweep %s" % (
                              model, start, k, lay[row["chosen"]]["label"][:28],
                              lay[row["best"]]["label"][:28], 100 * row["regret"],
                              "-" if held is None else "%+.1f %%" % (100 * held),
                              100 * row["noise_floor"], "ok" if row["good"] else "NO",
                              "-" if row["spearman"] is None else "%+.2f" % row["spearman"],
                              "-" if row["spearman_sweep"] is None
                              else "%+.2f" % row["spearman_sweep"]),
                          flush=True)
                    if args.out:  # kept after every job: a long run stopped midway keeps them
                        with open(args.out, "w") as f:
                            json.dump({"rounds": args.rounds, "steps": args.steps,
                                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

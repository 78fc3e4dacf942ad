#!/usr/bin/env python3
"""The best bucket layout ddpscope recommends, per zoo model, cluster and node count.

Runs `ddpscope plan --json` for every zoo model (but mlp-tiny) on dgx-v100, dgx-a100, dgx-h100
and gb200-nvl72 at 1, 4 and 16 nodes and records the best uniform bucket_cap_mb, the planned
bucket_cap_mb_list, their simulated step times and the gain over PyTorch's default. With two
binaries (an older ddpscope and this one) it also prints a markdown table of both side by side
and which recommendations flipped.

Usage:
  scripts/best_caps.py --ddpscope build/release/bin/ddpscope --out after.json
  scripts/best_caps.py --compare before.json after.json     # markdown table on stdout
  # one cluster, every plan with another host profile (a built-in name or a JSON file):
  scripts/best_caps.py --ddpscope B --clusters dgx-h100 --host-profile P --out before.json
Standard library only.
"""
import argparse
import json
import subprocess
import sys

CLUSTERS = ("dgx-v100", "dgx-a100", "dgx-h100", "gb200-nvl72")
NODES = (1, 4, 16)


def zoo(binary):
    out = subprocess.run([binary, "model", "list", "--json"], check=True, capture_output=True, text=True)
    return [m["name"] for m in json.loads(out.stdout) if m["name"] != "mlp-tiny"]


def plan(binary, model, cluster, nodes, host_profile=None):
    extra = ["--host-profile", host_profile] if host_profile else []
    r = subprocess.run([binary, "plan", "--model", model, "--cluster", cluster, "--nodes",
                        str(nodes), "--json"] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"}
    j = json.loads(r.stdout)
    planned = j.get("planned") or {}
    return {
        "default_ms": round(j["default"]["step_time_ns"] / 1e6, 3),
        "best_cap_mb": j["best_uniform"]["bucket_cap_mb"],
        "best_cap_ms": round(j["best_uniform"]["step_time_ns"] / 1e6, 3),
        "best_cap_buckets": j["best_uniform"]["num_buckets"],
        "list": planned.get("bucket_cap_mb_list"),
        "list_ms": round(planned["step_time_ns"] / 1e6, 3) if planned else None,
        "ddp_kwargs": j.get("ddp_kwargs"),
    }


def record(binary, out, clusters, host_profile):
    rows = []
    for model in zoo(binary):
        for cluster in clusters:
            for nodes in NODES:
                row = {"model": model, "cluster": cluster, "nodes": nodes}
                row.update(plan(binary, model, cluster, nodes, host_profile))
                rows.append(row)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    doc = {"ddpscope": version.strip().splitlines()[0] if version else "", "rows": rows}
    if host_profile:
        doc["host_profile"] = host_profile
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def short_list(values):
    if not values:
        return "-"
    if len(values) > 4:
        return "[%s, … %d]" % (", ".join("%g" % v for v in values[:3]), len(values))
    return "[%s]" % ", ".join("%g" % v for v in values)


def compare(before_path, after_path):
    before = {(r["model"], r["cluster"], r["nodes"]): r for r in json.load(open(before_path))["rows"]}
    after = json.load(open(after_path))["rows"]
    print("| model | cluster | nodes | best cap before → after (MiB) | step gain over default "
          "before → after | planned list before → after | flipped |")
    print("|---|---|---:|---|---|---|---|")
    flips = 0
    for r in after:
        b = before.get((r["model"], r["cluster"], r["nodes"]))
        if b is None or "error" in r or "error" in b:
            print("| %s | %s | %d | %s | | | |" % (r["model"], r["cluster"], r["nodes"],
                                                  (b or {}).get("error", r.get("error", "-"))))
            continue

        def gain(x):
            return 100.0 * (x["default_ms"] - x["best_cap_ms"]) / x["default_ms"]

        flipped = b["best_cap_mb"] != r["best_cap_mb"]
        flips += flipped
        print("| %s | %s | %d | %g → %g | %+.2f %% → %+.2f %% | %s → %s | %s |" % (
            r["model"], r["cluster"], r["nodes"], b["best_cap_mb"], r["best_cap_mb"], gain(b),
            gain(r), short_list(b["list"]), short_list(r["list"]), "yes" if flipped else ""))
    print("\n%d of %d best uniform caps flipped." % (flips, len(after)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ddpscope", help="the ddpscope binary to record with")
    ap.add_argument("--out", help="where to write the recorded JSON")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--clusters", default=",".join(CLUSTERS),
                    help="comma-separated built-in clusters (default: %(default)s)")
    ap.add_argument("--host-profile", help="plan with this host profile instead of the clusters'")
    args = ap.parse_args()
    if args.compare:
        compare(*args.compare)
        return 0
    if not args.ddpscope or not args.out:
        ap.error("give --ddpscope and --out, or --compare BEFORE AFTER")
    record(args.ddpscope, args.out, args.clusters.split(","), args.host_profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Measures what each DDP gradient bucket costs on the GPU, from real profiler traces.

What: for every trace, over its profiled steps (the CPU-side ProfilerStep#N ranges; a GPU
operation belongs to the step in which the host launched it), this script reports

  1. every bucket allreduce NCCL kernel (duration, message bytes, stream) and a least-squares
     fit duration = a + bytes / bandwidth, over all kernels and over the fastest kernel of each
     size; the smallest-message kernels and the other NCCL kernels (fixed per-kernel cost);
  2. the gaps between consecutive allreduce kernels on the NCCL stream, each labelled
     back-to-back (< 5 us), other NCCL kernel between (same stream), host launch (launched
     after the previous kernel ended), waiting for compute (the compute-stream work enqueued
     before its launch ended after the previous kernel) or other; the gaps after the last
     backward compute kernel are listed apart;
  3. the per-bucket copy-in/scale work (the reducer's mul_out: gradient * 1/world_size into
     the flat bucket) and copy-back work (bucket view -> .grad after the allreduce) on the
     compute stream, per bucket and per step, and whether gradient_as_bucket_view is on;
  4. stream waits: host cudaStreamWaitEvent calls by context, and on the GPU the idle time of
     the NCCL stream waiting for compute (before each allreduce) and of the compute stream
     waiting for NCCL (before each bucket's copy-back);
  5. per step: buckets, exposed NCCL after the last backward compute kernel, DDP tail.

Inputs (read-only): $DDPSCOPE_EXTERNAL_DATA/hta/*.json.gz (Holistic Trace Analysis test
traces, trimmed; external data, tests/data/EXTERNAL.md) and the repository's
tests/data/gpu/h100/run1/*-ddp-default-rank0.json.gz (PyTorch 2.11, one H100, world size 1).
A trace is named by its path relative to the repository, an external one by
"$DDPSCOPE_EXTERNAL_DATA/<path>" (tests/external_data.py).

Usage: python3 tests/data/hta/measure_bucket_costs.py [-o OUT.json] [TRACE.json.gz ...]
  Without traces it reads the files above and writes tests/data/hta/bucket_costs.json
  (sorted keys, floats rounded to 3 decimals: deterministic), then prints a table; without the
  external traces it stops and names them.
  Python 3 standard library only.

How DDP work is recognised (heuristics; the JSON repeats them under "heuristics"):
  - Backward thread: the host thread that launched the allreduce kernels, or that ran the
    allreduce record_param_comms ranges.
  - Traces with CPU op ranges (the H100 ones): exact. Copy-in/scale = GPU ops launched under
    the record_function "torch::distributed::reducer::mul_out"; copy-back = under
    "torch.distributed.ddp.reducer::copy_bucket_to_grad".
  - Traces without CPU op ranges (the trimmed HTA ones): by name and thread. Copy-in/scale =
    kernels named *AUnaryFunctor*MulFunctor* (a tensor times a host scalar) launched by the
    backward thread before the step's last allreduce launch; copy-back = "Memcpy DtoD" or
    direct_copy kernels launched by the backward thread after it. Accepted only if, in every
    step, copy-ins and copy-backs are equally many and (when message sizes are known) the
    copy-back bytes add up to the allreduced bytes; otherwise reported as unidentified, since
    backward itself launches such kernels.
  - Bucket of a copy-in: the first allreduce launched after it. Bucket of a copy-back: by
    cumulative bytes in bucket order (the reducer finalizes buckets in index order).
  - Last backward compute kernel: the last compute-stream op launched by the backward thread
    in the step that is not DDP copy-in/copy-back work.
  - Compute stream: the stream with the most GPU ops. NCCL kernel: name contains "nccl".

What it cannot measure (reported per trace under "unsupported"): allreduce kernels at world
size 1 (NCCL launches none for an in-place one-rank sum, so the H100 traces have no NCCL kernel
and no NCCL-stream timing); message sizes where neither the kernel args nor record_param_comms
carry them; host-side cudaStreamWaitEvent calls in the trimmed HTA traces (trimming kept only
runtime calls that launch GPU work), where the GPU idle is inferred from the timeline instead.
An NCCL kernel's duration on one rank includes waiting for the slowest peer to arrive; these
traces hold one rank each, so that skew cannot be separated from transfer time.
"""
import argparse
import collections
import glob
import gzip
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import external_data  # noqa: E402  (tests/external_data.py)

BACK_TO_BACK_US = 5.0
DTYPE_BYTES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2,
               "double": 8, "float64": 8, "long": 8, "int64": 8, "int": 4, "int32": 4,
               "short": 2, "byte": 1, "char": 1, "bool": 1, "uint8": 1, "int8": 1}
COPY_IN_RANGE = "torch::distributed::reducer::mul_out"
COPY_BACK_RANGE = "torch.distributed.ddp.reducer::copy_bucket_to_grad"
CPU_CATS = ("cpu_op", "user_annotation", "python_function")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
EXTERNAL_GLOB = "hta/*.json.gz"  # inside $DDPSCOPE_EXTERNAL_DATA
REPOSITORY_GLOB = "tests/data/gpu/h100/run1/*-ddp-default-rank0.json.gz"
HEURISTICS = {
    "step": "ProfilerStep#N CPU range; a GPU op belongs to the step its host launch falls in",
    "backward_thread": "host thread launching the allreduce kernels / running allreduce record_param_comms",
    "copy_in_exact": "GPU ops launched under record_function " + COPY_IN_RANGE,
    "copy_back_exact": "GPU ops launched under record_function " + COPY_BACK_RANGE,
    "copy_in_by_name": "no CPU ranges: *AUnaryFunctor*MulFunctor* kernels launched by the backward "
                       "thread before the step's last allreduce launch",
    "copy_back_by_name": "no CPU ranges: Memcpy DtoD / direct_copy kernels launched by the backward "
                         "thread after the step's last allreduce launch",
    "by_name_check": "accepted only if copy-ins == copy-backs in every step and copy-back bytes == "
                     "allreduced bytes where sizes are known",
    "bucket_of_copy_in": "first allreduce launched after the copy-in",
    "bucket_of_copy_back": "cumulative bytes in bucket order (reducer finalizes buckets in index order)",
    "last_backward_compute": "last compute-stream op launched by the backward thread in the step, "
                             "not DDP copy-in/copy-back",
    "gap_back_to_back_us": BACK_TO_BACK_US,
    "nccl_wait_for_compute": "max(0, E - max(end of the previous op on the NCCL stream, launch call end)); "
                             "E = end of the last compute-stream op launched before the allreduce's launch",
    "nccl_start_after_ready": "allreduce start - max(E, previous op on its stream end, launch call start)",
    "compute_wait_for_nccl": "max(0, allreduce end - max(previous compute op end, launch of the "
                             "bucket's first copy-back))",
}


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def rnd(x, nd=3):
    if x is None:
        return None
    if isinstance(x, float):
        return round(x, nd)
    return x


def med(xs):
    return statistics.median(xs) if xs else None


def fit_line(points):
    """Least squares duration_us = a + slope * bytes. Returns a dict or None."""
    if len(points) < 3 or len({b for b, _ in points}) < 2:
        return None
    n = len(points)
    mx = sum(b for b, _ in points) / n
    my = sum(d for _, d in points) / n
    sxx = sum((b - mx) ** 2 for b, _ in points)
    sxy = sum((b - mx) * (d - my) for b, d in points)
    slope = sxy / sxx
    a = my - slope * mx
    ss_tot = sum((d - my) ** 2 for _, d in points)
    ss_res = sum((d - a - slope * b) ** 2 for b, d in points)
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else None
    # bytes per us -> GB/s: 1 B/us = 1e-3 GB/s
    bw = 1e-3 / slope if slope > 0 else None
    return {"a_us": rnd(a), "bandwidth_GBps": rnd(bw), "r2": rnd(r2, 4), "n": n,
            "slope_us_per_MB": rnd(slope * 1e6)}


def nelems_of(dims):
    n = 1
    for d in dims:
        n *= d
    return n


class Trace:
    def __init__(self, path, rel):
        self.rel = rel
        doc = load(path)
        self.doc = doc
        ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        self.steps = sorted([e for e in ev if e.get("cat") == "user_annotation"
                             and e.get("name", "").startswith("ProfilerStep#")],
                            key=lambda e: e["ts"])
        self.cpu = [e for e in ev if e.get("cat") in CPU_CATS
                    and not e.get("name", "").startswith("ProfilerStep#")]
        self.runtime = [e for e in ev if e.get("cat") in RUNTIME_CATS]
        self.rt_by_corr = {e["args"]["correlation"]: e for e in self.runtime
                           if "correlation" in e.get("args", {})}
        self.rpc = sorted([e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "record_param_comms"],
                          key=lambda e: e["ts"])
        self.has_cpu_ops = any(e.get("cat") == "cpu_op" for e in self.cpu)
        self.ancestors = self._nest()
        self.gpu = []
        for e in ev:
            if e.get("cat") not in GPU_CATS:
                continue
            a = e.get("args", {})
            launch = self.rt_by_corr.get(a.get("correlation"))
            self.gpu.append({
                "ts": e["ts"], "dur": e.get("dur", 0.0), "end": e["ts"] + e.get("dur", 0.0),
                "name": e["name"], "cat": e["cat"], "stream": a.get("stream"),
                "bytes": a.get("bytes"), "args": a, "launch": launch,
                "tid": launch["tid"] if launch else None,
                "lts": launch["ts"] if launch else None,
                "lend": launch["ts"] + launch.get("dur", 0.0) if launch else None,
                "anc": self.ancestors.get(id(launch), []) if launch else [],
            })
        self.gpu.sort(key=lambda g: (g["ts"], g["end"]))
        for g in self.gpu:
            g["step"] = self.step_of(g["lts"] if g["lts"] is not None else g["ts"])
        counts = collections.Counter(g["stream"] for g in self.gpu)
        self.compute_stream = counts.most_common(1)[0][0] if counts else None

    def _nest(self):
        """For each runtime event: its enclosing CPU ranges on the same thread, outermost first."""
        out = {}
        by_tid = collections.defaultdict(list)
        for e in self.cpu:
            by_tid[e["tid"]].append((e["ts"], -e.get("dur", 0.0), 0, e))
        for e in self.runtime:
            by_tid[e["tid"]].append((e["ts"], -e.get("dur", 0.0), 1, e))
        for items in by_tid.values():
            items.sort(key=lambda t: (t[0], t[1], t[2]))
            stack = []
            for ts, _, kind, e in items:
                while stack and stack[-1]["ts"] + stack[-1].get("dur", 0.0) <= ts:
                    stack.pop()
                if kind == 1:
                    out[id(e)] = list(stack)
                else:
                    stack.append(e)
        return out

    def step_of(self, t):
        for i, s in enumerate(self.steps):
            if s["ts"] <= t < s["ts"] + s["dur"]:
                return i
        return None


def classify_by_name(t, per_step_buckets, comp_ops, bwd_tids):
    """Copy-in/copy-back candidates by kernel name and launching thread, and whether they pass."""
    cand = {}
    ok = True
    for s, bl in per_step_buckets.items():
        last_l = max(b["launch_ts"] for b in bl)
        mine = [g for g in comp_ops if g["step"] == s and g["tid"] in bwd_tids and g["lts"] is not None]
        ins = [g for g in mine if g["cat"] == "kernel" and "AUnaryFunctor" in g["name"]
               and "MulFunctor" in g["name"] and g["lts"] < last_l]
        backs = [g for g in mine if g["lts"] > last_l
                 and (g["name"].startswith("Memcpy DtoD") or "direct_copy_kernel" in g["name"])]
        cand[s] = (ins, backs)
        if len(ins) != len(backs) or not ins:
            ok = False
        known = [b["bytes"] for b in bl]
        if None not in known and all(g["bytes"] is not None for g in backs):
            if sum(known) != sum(g["bytes"] for g in backs):
                ok = False
    return ok, cand


def anc_names(g):
    return [a["name"] for a in g["anc"]]


def dtype_bytes(name):
    return DTYPE_BYTES.get(str(name).lower())


def analyse(path, rel):
    t = Trace(path, rel)
    doc = t.doc
    dist = doc.get("distributedInfo", {}) or {}
    props = doc.get("deviceProperties") or [{}]
    res = {
        "device": props[0].get("name"),
        "world_size": dist.get("world_size"),
        "rank": dist.get("rank"),
        "nccl_version": dist.get("nccl_version"),
        "steps": [s["name"] for s in t.steps],
        "compute_stream": t.compute_stream,
        "unsupported": [],
    }
    nccl = [g for g in t.gpu if g["cat"] == "kernel" and "nccl" in g["name"].lower()]
    ar_k = [g for g in nccl if "allreduce" in g["name"].lower() and g["step"] is not None]
    rpc_ar = [e for e in t.rpc if e["args"].get("Collective name") == "allreduce"
              and t.step_of(e["ts"]) is not None]
    waits = [e for e in t.runtime if e["name"] == "cudaStreamWaitEvent"]
    res["fields"] = {
        "cpu_op_ranges": t.has_cpu_ops,
        "nccl_kernels": len(nccl),
        "nccl_kernel_names": dict(sorted(collections.Counter(
            g["name"].split("(")[0] for g in nccl).items())),
        "allreduce_kernels_in_steps": len(ar_k),
        "allreduce_kernels_with_msg_size": sum(1 for g in ar_k if "In msg nelems" in g["args"]),
        "record_param_comms_allreduce": len(rpc_ar),
        "cudaStreamWaitEvent": len(waits),
        "cudaEventRecord": sum(1 for e in t.runtime if e["name"].startswith("cudaEventRecord")),
    }

    # ---- buckets: one per allreduce (kernel if any, else host record_param_comms) ----
    per_step_buckets = collections.defaultdict(list)
    if ar_k:
        for g in ar_k:
            a = g["args"]
            nb = None
            if "In msg nelems" in a and dtype_bytes(a.get("dtype")):
                nb = a["In msg nelems"] * dtype_bytes(a.get("dtype"))
            per_step_buckets[g["step"]].append({"kernel": g, "bytes": nb, "launch_ts": g["lts"],
                                                "host": None, "tid": g["tid"]})
        for s, bl in per_step_buckets.items():
            bl.sort(key=lambda b: b["kernel"]["ts"])
            hosts = [e for e in rpc_ar if t.step_of(e["ts"]) == s]
            if len(hosts) == len(bl):
                for b, h in zip(bl, sorted(hosts, key=lambda e: e["ts"])):
                    b["host"] = h
                    if b["bytes"] is None and dtype_bytes(h["args"].get("dtype")):
                        b["bytes"] = h["args"]["In msg nelems"] * dtype_bytes(h["args"]["dtype"])
    else:
        for h in rpc_ar:
            nb = None
            if dtype_bytes(h["args"].get("dtype")):
                nb = h["args"]["In msg nelems"] * dtype_bytes(h["args"]["dtype"])
            per_step_buckets[t.step_of(h["ts"])].append(
                {"kernel": None, "bytes": nb, "launch_ts": h["ts"], "host": h, "tid": h["tid"]})
        for bl in per_step_buckets.values():
            bl.sort(key=lambda b: b["launch_ts"])
    bwd_tids = {b["tid"] for bl in per_step_buckets.values() for b in bl}

    if not ar_k:
        if rpc_ar:
            res["unsupported"].append(
                "allreduce kernels: none in the trace although record_param_comms shows %d allreduce "
                "calls (world size %s: NCCL launches no kernel for an in-place one-rank sum); no "
                "kernel duration, fit, NCCL-stream gap, NCCL-stream wait or exposed NCCL time"
                % (len(rpc_ar), res["world_size"]))
        else:
            res["unsupported"].append(
                "allreduce: no allreduce kernel and no allreduce record_param_comms; the job's NCCL "
                "kernels are %s, not DDP bucket allreduces: nothing per bucket"
                % (", ".join(sorted(res["fields"]["nccl_kernel_names"])) or "none"))
    elif res["fields"]["allreduce_kernels_with_msg_size"] == 0 and not rpc_ar:
        res["unsupported"].append(
            "message sizes: the allreduce kernels carry no 'In msg nelems' and the trimmed trace has "
            "no record_param_comms: no bytes, no duration-vs-bytes fit, copy-back not matched to buckets")
    if not waits:
        res["unsupported"].append(
            "host cudaStreamWaitEvent: none in the trace (trimmed to launch calls); stream-wait idle "
            "inferred from the GPU timeline only")

    # ---- classify DDP copy-in / copy-back ----
    cs = t.compute_stream
    comp_ops = [g for g in t.gpu if g["stream"] == cs and g["step"] is not None]
    for g in comp_ops:
        g["role"] = "compute"
    method = None
    if t.has_cpu_ops:
        method = "exact (record_function ranges)"
        for g in comp_ops:
            names = anc_names(g)
            if COPY_IN_RANGE in names:
                g["role"] = "copy_in"
            elif COPY_BACK_RANGE in names:
                g["role"] = "copy_back"
        if not any(g["role"] != "compute" for g in comp_ops):
            method = None  # no reducer ranges recorded: fall back to names
    if per_step_buckets:
        ok, cand = classify_by_name(t, per_step_buckets, comp_ops, bwd_tids)
        counts = {t.steps[s]["name"]: {"copy_in": len(v[0]), "copy_back": len(v[1])}
                  for s, v in sorted(cand.items())}
        if method is not None:
            # validate the by-name heuristic against the exact record_function labels
            exact_in = {id(g) for g in comp_ops if g["role"] == "copy_in"}
            exact_back = {id(g) for g in comp_ops if g["role"] == "copy_back"}
            name_in = {id(g) for v in cand.values() for g in v[0]}
            name_back = {id(g) for v in cand.values() for g in v[1]}
            res["by_name_heuristic_vs_exact"] = {
                "check_passed": ok,
                "copy_in": {"exact": len(exact_in), "by_name": len(name_in), "both": len(exact_in & name_in)},
                "copy_back": {"exact": len(exact_back), "by_name": len(name_back),
                              "both": len(exact_back & name_back)}}
        elif ok:
            method = "by name and thread (checked: counts equal, bytes add up)"
            res["copy_candidates_per_step"] = counts
            for ins, backs in cand.values():
                for g in ins:
                    g["role"] = "copy_in"
                for g in backs:
                    g["role"] = "copy_back"
        else:
            method = "unidentified (name/thread candidates fail the check)"
            res["copy_candidates_per_step"] = counts
            res["unsupported"].append(
                "copy-in/scale and copy-back: candidates by name fail the check (per step %s): backward "
                "launches kernels of the same names, and without CPU ranges DDP work cannot be told apart"
                % json.dumps(counts, sort_keys=True))
    res["copy_classification"] = method
    identified = method is not None and not method.startswith("unidentified")

    # ---- per step ----
    steps_out = []
    all_points = []
    launch_lat = []
    for g_prev, g in zip(comp_ops, comp_ops[1:]):
        if g["lts"] is not None and g["lts"] > g_prev["end"]:
            launch_lat.append(g["ts"] - g["lts"])
    for s in sorted(per_step_buckets):
        bl = per_step_buckets[s]
        ops = [g for g in comp_ops if g["step"] == s]
        bwd_compute = [g for g in ops if g["tid"] in bwd_tids and g["role"] == "compute"]
        t_bwd = max((g["end"] for g in bwd_compute), default=None)
        # copy-in: assign to the first bucket launched after it
        for b in bl:
            b["copy_in"] = []
            b["copy_back"] = []
        for g in ops:
            if g["role"] == "copy_in":
                for b in bl:
                    if g["lts"] <= b["launch_ts"]:
                        b["copy_in"].append(g)
                        break
        backs = sorted([g for g in ops if g["role"] == "copy_back"], key=lambda g: g["lts"])
        if backs:
            sizes = [b["bytes"] for b in bl]
            if None not in sizes and all(g["bytes"] is not None for g in backs):
                i, acc = 0, 0
                for g in backs:
                    while i < len(bl) - 1 and acc >= sizes[i]:
                        i, acc = i + 1, 0
                    bl[i]["copy_back"].append(g)
                    acc += g["bytes"]
            else:
                bl[-1]["copy_back"].extend(backs)  # unassignable: all on the last bucket
        buckets_out = []
        prev_k = None
        for i, b in enumerate(bl):
            k = b["kernel"]
            row = {"index": i, "bytes": b["bytes"],
                   "host_record_param_comms_us": rnd(b["host"]["dur"]) if b["host"] else None,
                   "copy_in_n": len(b["copy_in"]), "copy_in_us": rnd(sum(g["dur"] for g in b["copy_in"])),
                   "copy_back_n": len(b["copy_back"]),
                   "copy_back_us": rnd(sum(g["dur"] for g in b["copy_back"]))}
            if k is not None:
                row.update({"allreduce_us": rnd(k["dur"]), "stream": k["stream"],
                            "start_rel_bwd_end_us": rnd(k["ts"] - t_bwd) if t_bwd else None})
                all_points.append((b["bytes"], k["dur"]))
                # NCCL stream waiting on compute
                before = [g for g in ops if g["lts"] is not None and g["lts"] < k["lts"]]
                e_ready = max((g["end"] for g in before), default=None)
                same = [g for g in t.gpu if g["stream"] == k["stream"] and g["ts"] < k["ts"] and g is not k]
                stream_free = max((g["end"] for g in same), default=-1e30)
                floor = max(stream_free, k["lend"] or k["lts"])
                row["nccl_wait_for_compute_us"] = rnd(max(0.0, e_ready - floor)) if e_ready else None
                row["nccl_start_after_ready_us"] = rnd(k["ts"] - max(floor, e_ready or -1e30, k["lts"]))
                if prev_k is not None:
                    gap = k["ts"] - prev_k["end"]
                    between = [g for g in same if g["ts"] >= prev_k["end"]]
                    if gap < BACK_TO_BACK_US:
                        why = "back_to_back"
                    elif between:
                        why = "other_nccl_kernel_between"
                    elif k["lts"] >= prev_k["end"]:
                        why = "host_launch"
                    elif e_ready is not None and e_ready > prev_k["end"]:
                        why = "waiting_for_compute"
                    else:
                        why = "other"
                    row["gap_from_previous_us"] = rnd(gap)
                    row["gap_cause"] = why
                # compute stream waiting on NCCL before this bucket's copy-back
                if b["copy_back"]:
                    f = b["copy_back"][0]
                    prev_ops = [g for g in ops if g["end"] <= f["ts"] and g is not f]
                    p_end = max((g["end"] for g in prev_ops), default=f["ts"])
                    row["compute_wait_for_nccl_us"] = rnd(max(0.0, k["end"] - max(p_end, f["lts"])))
                prev_k = k
            elif b["copy_back"]:
                f = b["copy_back"][0]
                prev_ops = [g for g in ops if g["end"] <= f["ts"] and g is not f]
                p_end = max((g["end"] for g in prev_ops), default=f["ts"])
                row["compute_gap_before_copy_back_us"] = rnd(f["ts"] - p_end)
                row["compute_gap_launch_bound"] = f["lts"] >= p_end
            buckets_out.append(row)
        if not identified:
            for r in buckets_out:
                for key in ("copy_in_n", "copy_in_us", "copy_back_n", "copy_back_us"):
                    r[key] = None
        srow = {"step": t.steps[s]["name"], "buckets": len(bl), "per_bucket": buckets_out,
                "copy_in_n": sum(r["copy_in_n"] for r in buckets_out) if identified else None,
                "copy_in_us": rnd(sum(r["copy_in_us"] for r in buckets_out)) if identified else None,
                "copy_back_n": sum(r["copy_back_n"] for r in buckets_out) if identified else None,
                "copy_back_us": rnd(sum(r["copy_back_us"] for r in buckets_out)) if identified else None}
        kern = [b["kernel"] for b in bl if b["kernel"] is not None]
        if kern and t_bwd is not None:
            tail = [k for k in kern if k["end"] > t_bwd]
            gaps = [b2["ts"] - b1["end"] for b1, b2 in zip(tail, tail[1:])]
            srow["end_of_backward"] = {
                "kernels_after_last_bwd_compute": len(tail),
                "first_start_rel_bwd_end_us": rnd(tail[0]["ts"] - t_bwd) if tail else None,
                "gaps_us": [rnd(x) for x in gaps],
                "serialized_back_to_back": all(x < BACK_TO_BACK_US for x in gaps) if gaps else None}
            srow["exposed_nccl_after_bwd_us"] = rnd(max(0.0, max(k["end"] for k in kern) - t_bwd))
            srow["allreduce_gap_median_us"] = rnd(med([k2["ts"] - k1["end"] for k1, k2 in zip(kern, kern[1:])]))
        copy_back_ends = [g["end"] for b in bl for g in b["copy_back"]]
        if copy_back_ends and t_bwd is not None:
            srow["ddp_tail_after_bwd_us"] = rnd(max(copy_back_ends) - t_bwd)
        if waits:
            ws = [w for w in waits if t.step_of(w["ts"]) == s]
            ctx = collections.Counter()
            for w in ws:
                rp = [a for a in t.ancestors.get(id(w), []) if a["name"] == "record_param_comms"]
                coll = rp[-1]["args"].get("Collective name") if rp else None
                if coll == "wait":
                    ctx["work.wait in forward (compute waits on NCCL)"] += 1
                elif coll:
                    ctx["before %s (NCCL stream waits on compute)" % coll] += 1
                elif w["tid"] in bwd_tids:
                    ctx["finalize after backward (compute waits on NCCL, one per bucket)"] += 1
                else:
                    ctx["other"] += 1
            srow["host_stream_waits"] = {"n": len(ws), "host_us": rnd(sum(w["dur"] for w in ws)),
                                         "by_context": dict(sorted(ctx.items()))}
        steps_out.append(srow)
    res["per_step"] = steps_out

    # ---- trace summaries ----
    sized = [(b, d) for b, d in all_points if b is not None]
    if sized:
        res["allreduce_fit_all"] = fit_line(sized) or "fewer than 3 kernels or one size only"
        best = {}
        for b, d in sized:
            best[b] = min(d, best.get(b, d))
        res["allreduce_fit_fastest_per_size"] = fit_line(sorted(best.items())) or \
            "fewer than 3 sizes"
        res["allreduce_smallest"] = [{"bytes": b, "dur_us": rnd(d), "algbw_GBps": rnd(b / d * 1e-3)}
                                     for b, d in sorted(sized)[:5]]
    elif all_points:
        res["allreduce_shortest_unknown_size_us"] = [rnd(d) for _, d in sorted(all_points, key=lambda p: p[1])[:5]]
        res["allreduce_dur_us_all"] = [rnd(d) for _, d in all_points]
    other = collections.defaultdict(list)
    for g in nccl:
        if g in ar_k:
            continue
        a = g["args"]
        nb = a["In msg nelems"] * dtype_bytes(a.get("dtype")) if "In msg nelems" in a and \
            dtype_bytes(a.get("dtype")) else None
        other[g["name"].split("(")[0]].append((nb, g["dur"]))
    res["other_nccl_kernels"] = {
        k: {"n": len(v), "min_us": rnd(min(d for _, d in v)), "median_us": rnd(med([d for _, d in v])),
            "by_bytes": {str(b): rnd(min(d for bb, d in v if bb == b)) for b in sorted({b for b, _ in v
                                                                                      if b is not None})}}
        for k, v in sorted(other.items())}
    res["compute_launch_to_start_median_us"] = rnd(med(launch_lat))
    ins = [g for g in comp_ops if g["role"] == "copy_in"]
    backs = [g for g in comp_ops if g["role"] == "copy_back"]
    summ = {"buckets_per_step": [r["buckets"] for r in steps_out],
            "copy_in_kernel_median_us": rnd(med([g["dur"] for g in ins])),
            "copy_back_op_median_us": rnd(med([g["dur"] for g in backs])),
            "copy_in_per_bucket_median_us": rnd(med([b["copy_in_us"] for r in steps_out for b in r["per_bucket"]
                                                     if b["copy_in_us"] is not None])),
            "copy_back_per_bucket_median_us": rnd(med([b["copy_back_us"] for r in steps_out for b in r["per_bucket"]
                                                       if b["copy_back_us"] is not None])),
            "copy_in_per_step_us": [r["copy_in_us"] for r in steps_out],
            "copy_back_per_step_us": [r["copy_back_us"] for r in steps_out],
            "params_per_step": [r["copy_in_n"] for r in steps_out]}
    if ins or backs:
        summ["gradient_as_bucket_view"] = "no (copy-in kernels present)" if ins else \
            "likely (no copy-in kernels, copy-back present)"
    else:
        summ["gradient_as_bucket_view"] = "undetermined"
    bk = [b for r in steps_out for b in r["per_bucket"]]
    gaps = [b["gap_from_previous_us"] for b in bk if "gap_from_previous_us" in b]
    if gaps:
        summ["allreduce_gap_median_us"] = rnd(med(gaps))
        summ["gap_causes"] = dict(sorted(collections.Counter(b["gap_cause"] for b in bk if "gap_cause" in b).items()))
    for key in ("nccl_wait_for_compute_us", "nccl_start_after_ready_us", "compute_wait_for_nccl_us",
                "compute_gap_before_copy_back_us", "host_record_param_comms_us"):
        vals = [b[key] for b in bk if b.get(key) is not None]
        if vals:
            summ[key.replace("_us", "_median_us")] = rnd(med(vals))
            summ[key.replace("_us", "_total_per_step_us")] = [
                rnd(sum(b[key] for b in r["per_bucket"] if b.get(key) is not None)) for r in steps_out]
    ivals = []
    for st_i in sorted({g["step"] for g in backs}):
        ls = sorted(g["lts"] for g in backs if g["step"] == st_i)
        ivals += [b - a for a, b in zip(ls, ls[1:])]
    if ivals:
        summ["copy_back_host_launch_interval_median_us"] = rnd(med(ivals))
    cp = [(g["bytes"], g["dur"]) for g in backs if g["bytes"] is not None]
    if cp:
        summ["copy_back_fit"] = fit_line(cp)
    # copy-in bytes from the aten::mul shapes (record_shapes) where present
    cin = []
    for g in ins:
        for a in g["anc"]:
            if a["name"] == "aten::mul" and a.get("args", {}).get("Input Dims"):
                d = a["args"]["Input Dims"][0]
                ty = (a["args"].get("Input type") or ["float"])[0]
                if isinstance(d, list) and dtype_bytes(ty):
                    cin.append((nelems_of(d) * dtype_bytes(ty), g["dur"]))
                break
    if cin:
        summ["copy_in_fit"] = fit_line(cin)
    res["summary"] = summ
    return res


def fmt(x, w=9):
    if x is None:
        return "-".rjust(w)
    if isinstance(x, float):
        return ("%.1f" % x).rjust(w)
    return str(x).rjust(w)


def print_table(out):
    print("per trace (us; a/GB/s/R2/n: allreduce fit over all kernels, a_min/GB/s_min: over the fastest "
          "kernel of each size;\n gap: median between consecutive allreduce kernels; in/bkt, back/bkt: "
          "copy-in/scale and copy-back GPU time per bucket;\n host/bkt: record_param_comms host time; "
          "ncclWait, compWait: stream-wait idle per step; exposed: NCCL after the last backward\n compute "
          "kernel; tail: last copy-back end after it; medians; '-' = not measurable in this trace)")
    hdr = ["buckets", "a_us", "GB/s", "R2", "n", "a_min", "GB/s_min", "gap", "in/bkt", "back/bkt",
           "host/bkt", "ncclWait", "compWait", "exposed", "tail"]
    print("%-44s" % "trace" + "".join(h.rjust(9) for h in hdr))
    for rel, r in sorted(out["traces"].items()):
        s = r["summary"]
        f = r.get("allreduce_fit_all")
        f = f if isinstance(f, dict) else {}
        fm = r.get("allreduce_fit_fastest_per_size")
        fm = fm if isinstance(fm, dict) else {}
        exp = [st["exposed_nccl_after_bwd_us"] for st in r["per_step"] if "exposed_nccl_after_bwd_us" in st]
        tail = [st["ddp_tail_after_bwd_us"] for st in r["per_step"] if "ddp_tail_after_bwd_us" in st]
        vals = [",".join(str(x) for x in sorted(set(s["buckets_per_step"]))) or "0",
                f.get("a_us"), f.get("bandwidth_GBps"), "%.3f" % f["r2"] if f.get("r2") is not None else None,
                f.get("n"),
                fm.get("a_us"), fm.get("bandwidth_GBps"), s.get("allreduce_gap_median_us"),
                s.get("copy_in_per_bucket_median_us"), s.get("copy_back_per_bucket_median_us"),
                s.get("host_record_param_comms_median_us"),
                med(s["nccl_wait_for_compute_total_per_step_us"]) if s.get("nccl_wait_for_compute_total_per_step_us") else None,
                med(s["compute_wait_for_nccl_total_per_step_us"]) if s.get("compute_wait_for_nccl_total_per_step_us") else None,
                med(exp) if exp else None,
                med(tail) if tail else None]
        name = rel.replace("tests/data/", "").replace(external_data.KEY_PREFIX, "")
        print("%-44s" % name[-44:] + "".join(fmt(v) for v in vals))
    for rel, r in sorted(out["traces"].items()):
        print("\n%s  (%s, world %s; copy/scale: %s)" % (rel, r["device"], r["world_size"], r["copy_classification"]))
        for st in r["per_step"]:
            eob = st.get("end_of_backward", {})
            print("  %-17s buckets %2d | copy-in %s ops %s us | copy-back %s ops %s us | exposed NCCL %s us | "
                  "DDP tail %s us | allreduce after backward: %s" % (
                      st["step"], st["buckets"], fmt(st["copy_in_n"], 3), fmt(st["copy_in_us"], 6),
                      fmt(st["copy_back_n"], 3), fmt(st["copy_back_us"], 6),
                      fmt(st.get("exposed_nccl_after_bwd_us"), 1), fmt(st.get("ddp_tail_after_bwd_us"), 1),
                      ("%d kernel(s), first +%s us, gaps %s" % (eob["kernels_after_last_bwd_compute"],
                                                                 eob["first_start_rel_bwd_end_us"], eob["gaps_us"])
                       if eob else "-")))
        s = r["summary"]
        extra = []
        for key in ("allreduce_smallest", "allreduce_shortest_unknown_size_us", "other_nccl_kernels",
                    "by_name_heuristic_vs_exact", "compute_launch_to_start_median_us"):
            if r.get(key):
                extra.append((key, r[key]))
        for key in ("copy_in_fit", "copy_back_fit", "copy_back_host_launch_interval_median_us",
                    "nccl_start_after_ready_median_us", "gap_causes", "gradient_as_bucket_view"):
            if s.get(key) is not None:
                extra.append((key, s[key]))
        waits = [st["host_stream_waits"] for st in r["per_step"] if "host_stream_waits" in st]
        if waits:
            extra.append(("host_stream_waits (first step)", waits[0]))
        for key, val in extra:
            print("  %s: %s" % (key, json.dumps(val, sort_keys=True)))
        for u in r["unsupported"]:
            print("  cannot: " + u)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", "..", ".."))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*")
    ap.add_argument("-o", "--out", default=os.path.join(here, "bucket_costs.json"))
    args = ap.parse_args()
    paths = args.traces
    if not paths:
        external = external_data.glob(EXTERNAL_GLOB)
        if not external:
            sys.exit(external_data.missing_message(EXTERNAL_GLOB))
        paths = sorted(external + glob.glob(os.path.join(root, REPOSITORY_GLOB)))
    out = {"schema": "ddpscope.bucket-costs/1",
           "command": "python3 tests/data/hta/measure_bucket_costs.py",
           "heuristics": HEURISTICS, "traces": {}}
    for p in paths:
        rel = external_data.key(p)
        out["traces"][rel] = analyse(p, rel)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

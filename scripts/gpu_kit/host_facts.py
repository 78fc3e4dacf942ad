#!/usr/bin/env python3
"""What the host (CPU) did in the profiled steps of the GPU kit's PyTorch traces. Stdlib only.

  host_facts.py [-o OUT.json] [--timing-runs NAME,NAME] [RUN_DIR ...]
                  default: tests/data/gpu/h100/run1, writes tests/data/gpu/h100/host_facts.json

For every `<model>-ddp-default-rank0.json.gz` of a run folder (torch_job.py's profiled DDP steps:
CPU + CUDA activities, record_shapes, every module's forward in a "ddpscope.layer:<path>"
range), per profiled step, and the step times the kit measured without the profiler
(`<model>.json` of the same and the other run folders: eager and DDP medians):

  layers     per layer of the zoo model (names as models/zoo: a module path, a module called
             again "<path>:2", a functional op "<parent>.add"): forward top-level aten ops, their
             profiler events (every CPU event inside, the op included) and inclusive host time,
             the kernels they launched and those kernels' GPU time; backward autograd nodes
             (mapped to the layer through the forward op with the node's sequence number), their
             events, host time, kernels and GPU time. A container module's own ops (those not
             inside a child module's range: the residual add, the attention core, head splits)
             go to the zoo's functional layers under it, split evenly; when it has none, to
             "unattributed".
  modules    module calls (ddpscope.layer ranges) per step: each costs two Python hooks and a
             record_function in a profiled step only.
  terms      the other host work, per step: count, host us, events, kernels, kernel us of
             accumulate_grad_inner (the accumulation itself inside each AccumulateGrad node: the
             rest of the node, DDP's copy-in aside, is DDP's autograd hook),
             module_self (each module call's range minus what runs inside it: nn.Module's and the
             module's own Python, and in a profiled step the hooks and record_function),
             module_self_one_op (the same for the calls whose forward is one aten op: the
             call's fixed cost), ddp_wrapper (DDP.forward's own time outside what it calls), the
             autograd thread's
             gaps between its items (backward_node_gap, accumulate_grad_gap, backward_other_gap:
             the engine's own time, which no event covers),
             accumulate_grad (the AccumulateGrad node of each parameter; DDP's copy-in and the
             allreduce call of a bucket run inside it), copy_in (reducer::mul_out),
             buffer_sync (DDP's buffer broadcast before the forward; "buffers": its copies,
             "broadcasts": its broadcast calls, one per dtype group), buffer_copy (the copies
             alone: a buffer's own share; the rest of buffer_sync is each group's),
             allreduce_call (c10d::allreduce_), copy_back (copy_bucket_to_grad), optimizer
             (Optimizer.step), zero_grad, ddp_forward_self (DDP.forward minus its modules),
             loss (main-thread ops between the forward and the backward), sync
             (cudaDeviceSynchronize).
  step       the profiled step (ProfilerStep range), its events, its kernels' GPU time.
  measured   (measured_ms) per configuration the unprofiled step medians of each timing run, and
             (_host) the host's own time to enqueue the forward and the backward in those steps,
             where the run recorded it (torch_job.py's median_host_ms).

Events count every CPU event inside an item, itself included; runtime_events the CUDA runtime and
driver calls among them (the profiler costs them differently: a CUPTI callback, not a recorded
op). All times are us; each step separately (steps[]), the fit reads them (host_fit).
"""
import argparse
import collections
import glob
import gzip
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GPU_EVENTS = ("kernel", "gpu_memcpy", "gpu_memset")
CPU_EVENTS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function")
LAYER = "ddpscope.layer:"
# DDP's buffer broadcast before the module's forward (broadcast_buffers=True): flatten, the
# broadcast call, unflatten and one copy_ back per buffer.
BUFFER_SYNC_OPS = ("aten::flatten_dense_tensors", "aten::unflatten_dense_tensors",
                   "c10d::broadcast_", "record_param_comms", "aten::copy_")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def rnd(x, nd=3):
    return round(float(x), nd)


class Node:
    __slots__ = ("e", "kids", "parent")

    def __init__(self, e, parent):
        self.e, self.kids, self.parent = e, [], parent

    @property
    def name(self):
        return self.e.get("name", "")


def forest(events):
    """Nesting of one thread's X events (sorted by start, longer first): the top-level nodes."""
    tops, stack = [], []
    for e in sorted(events, key=lambda e: (e["ts"], -e.get("dur", 0))):
        end = e["ts"] + e.get("dur", 0)
        while stack and e["ts"] >= stack[-1].e["ts"] + stack[-1].e.get("dur", 0):
            stack.pop()
        node = Node(e, stack[-1] if stack else None)
        (stack[-1].kids if stack else tops).append(node)
        if end > e["ts"] or not stack:
            stack.append(node)
    return tops


# Runtime calls that only read the runtime's state (the last error, whether a stream is being
# captured, a device attribute): they enqueue nothing, and in the kit's profiled traces each
# takes 0.14-0.72 us (median) where every call that launches, copies, sets, records or waits
# takes 1.3 us or more. Counted as events (the profiler records them), not as launches; the
# C++ reader's "state query" kind (traces/classify.h), CUDA's names and HIP's.
_QUERIES = ("GetLastError", "PeekAtLastError", "GetErrorString", "StreamIsCapturing",
            "ThreadExchangeStreamCaptureMode", "StreamGetCaptureInfo", "DeviceGetAttribute",
            "GetDevice", "GetDeviceCount")
RUNTIME_QUERIES = frozenset(api + q for api in ("cuda", "hip") for q in _QUERIES)


def totals(node, gpu):
    """(events, kernels, kernel us, runtime events) of a node and everything inside it: the
    runtime events (CUDA runtime and driver calls but the state queries of RUNTIME_QUERIES) are
    among the events."""
    events, kernels, kernel_us, runtime = 1, 0, 0.0, 0
    if node.e.get("cat") in ("cuda_runtime", "cuda_driver") and \
            node.e.get("name") not in RUNTIME_QUERIES:
        runtime = 1
        for g in gpu.get((node.e.get("args") or {}).get("correlation"), ()):
            kernels += 1
            kernel_us += g.get("dur", 0)
    for k in node.kids:
        a, b, c, d = totals(k, gpu)
        events, kernels, kernel_us, runtime = events + a, kernels + b, kernel_us + c, runtime + d
    return events, kernels, kernel_us, runtime


def walk(nodes):
    for n in nodes:
        yield n
        yield from walk(n.kids)


def zoo_layers(model):
    with open(os.path.join(ROOT, "models", "zoo", model + ".json")) as f:
        return [l["name"] for l in json.load(f)["layers"]]


class Attribution:
    """Maps a module range (path, call number) to the zoo layers its own ops belong to."""

    def __init__(self, names, modules):
        self.names = names
        self.known = set(names)
        self.modules = modules  # every module path that has a range in the trace

    def targets(self, path, call):
        """The zoo layers that own the ops a module call runs itself (not in a child module):
        the layer of that call, or for a container the functional layers right under it
        ("<path>.add", "<path>.core", ...); [] when there are none (the root: the model's own
        forward outside its modules)."""
        if path:
            name = path if call == 1 else "%s:%d" % (path, call)
            if name in self.known:
                return [name]
        prefix = path + "." if path else ""
        return [n for n in self.names if n.startswith(prefix) and "." not in n[len(prefix):]
                and n.split(":")[0] not in self.modules]


def step_facts(ev, step, gpu, attr, modules_seen):
    t0, t1 = step["ts"], step["ts"] + step["dur"]
    cpu = [e for e in ev if t0 <= e["ts"] < t1 and e.get("cat") in CPU_EVENTS and e is not step]
    by_tid = collections.defaultdict(list)
    for e in cpu:
        by_tid[e["tid"]].append(e)
    main = step["tid"]
    layers = collections.defaultdict(lambda: collections.defaultdict(float))
    terms = collections.defaultdict(lambda: collections.defaultdict(float))
    seq_layer = {}
    module_calls = 0

    def add(bucket, key, n):
        ev_, k, ku, rt = totals(n, gpu)
        b = bucket[key]
        b["count"] += 1
        b["host_us"] += n.e.get("dur", 0)
        b["events"] += ev_
        b["runtime_events"] += rt
        b["kernels"] += k
        b["kernel_us"] += ku

    def share(targets, prefix, n, weight):
        ev_, k, ku, rt = totals(n, gpu)
        for t in targets:
            b = layers[t]
            b[prefix + "ops"] += weight
            b[prefix + "host_us"] += n.e.get("dur", 0) * weight
            b[prefix + "events"] += ev_ * weight
            b[prefix + "runtime_events"] += rt * weight
            b[prefix + "kernels"] += k * weight
            b[prefix + "kernel_us"] += ku * weight

    # ---- main thread: forward (modules), loss, optimizer ----------------------------------
    calls = collections.Counter()

    # A job's own ranges around the step's phases ("## forward ##" around DDP.forward, "##
    # backward ##" around loss.backward()): their contents count as if at the top; their own
    # time is not host work (in the backward's, the main thread waits for the autograd thread).
    def unwrap(nodes):
        out = []
        for n in nodes:
            known = n.name.startswith(("DistributedDataParallel.forward", LAYER, "Optimizer."))
            if n.e.get("cat") != "user_annotation" or known or not n.kids:
                out.append(n)
            else:
                out.extend(unwrap(n.kids))
        return out

    tops = unwrap(forest(by_tid[main]))
    forward_end = None
    for top in tops:
        name = top.name
        if name.startswith("DistributedDataParallel.forward") or name.startswith(LAYER):
            root = top
            forward_end = top.e["ts"] + top.e["dur"]

            def visit(node, path, call):
                nonlocal module_calls
                for kid in node.kids:
                    if kid.name.startswith(LAYER):
                        p = kid.name[len(LAYER):]
                        calls[p] += 1
                        module_calls += 1
                        modules_seen.add(p)
                        # The module call's own time: its range minus what runs inside it.
                        own = kid.e["dur"] - sum(k_.e["dur"] for k_ in kid.kids)
                        m = terms["module_self"]
                        m["count"] += 1
                        m["host_us"] += own
                        m["events"] += 1
                        # A module whose forward is one aten op: its own time is the module
                        # call's fixed cost (in a profiled step: the hooks and the range).
                        if len(kid.kids) == 1 and kid.kids[0].e.get("cat") == "cpu_op":
                            one = terms["module_self_one_op"]
                            one["count"] += 1
                            one["host_us"] += own
                        visit(kid, p, calls[p])
                    elif kid.e.get("cat") == "cpu_op" and path is None and \
                            kid.name in BUFFER_SYNC_OPS:
                        add(terms, "buffer_sync", kid)
                        if kid.name == "aten::copy_":
                            terms["buffer_sync"]["buffers"] += 1
                            add(terms, "buffer_copy", kid)
                        elif kid.name == "c10d::broadcast_":
                            terms["buffer_sync"]["broadcasts"] += 1
                    elif kid.e.get("cat") == "cpu_op":
                        targets = attr.targets(path or "", call)
                        # An op no layer owns does not claim its sequence number: a later op
                        # of a layer may share it (BatchNorm's num_batches_tracked += 1).
                        owned = bool(targets)
                        targets = targets or ["unattributed"]
                        share(targets, "forward_", kid, 1.0 / len(targets))
                        for n in walk([kid]):
                            seq = (n.e.get("args") or {}).get("Sequence number")
                            if owned and seq is not None and n.e.get("cat") == "cpu_op":
                                seq_layer.setdefault(seq, targets)
                    elif kid.e.get("cat") == "user_annotation":
                        visit(kid, path, call)
            if name.startswith("DistributedDataParallel.forward"):
                ev_, k, ku, rt = totals(root, gpu)
                b = terms["ddp_forward"]
                b["count"] += 1
                b["host_us"] += root.e["dur"]
                b["events"] += ev_
                # DDP's wrapper: DDP.forward's own time outside everything it calls.
                w = terms["ddp_wrapper"]
                w["count"] += 1
                w["host_us"] += root.e["dur"] - sum(k_.e["dur"] for k_ in root.kids)
                visit(root, None, 1)
            else:
                p = name[len(LAYER):]
                calls[p] += 1
                module_calls += 1
                visit(top, p, calls[p])
        elif name.startswith("Optimizer.step"):
            add(terms, "optimizer", top)
        elif name.startswith("Optimizer.zero_grad"):
            add(terms, "zero_grad", top)
        elif name == "cudaDeviceSynchronize":
            add(terms, "sync", top)
        elif forward_end is not None and top.e.get("cat") == "cpu_op":
            add(terms, "loss", top)
        else:
            add(terms, "main_other", top)

    # ---- autograd thread(s): backward nodes, AccumulateGrad, DDP's reducer ----------------
    for tid, events in by_tid.items():
        # Autograd threads run backward nodes; another thread's events (a CUDA callback
        # thread's runtime calls) are none of the step's host work.
        if tid == main or not any(e["name"].startswith("autograd::engine::evaluate_function")
                                  for e in events):
            continue
        previous_end = None
        for top in forest(events):
            name = top.name
            # The autograd engine's own time before this item (no event covers it).
            if previous_end is not None:
                gap = max(0.0, top.e["ts"] - previous_end)
                kind = ("accumulate_grad_gap" if "AccumulateGrad" in name else
                        "backward_node_gap" if name.startswith("autograd::engine") else
                        "backward_other_gap")
                terms[kind]["count"] += 1
                terms[kind]["host_us"] += gap
            previous_end = top.e["ts"] + top.e.get("dur", 0)
            if name.startswith("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"):
                add(terms, "accumulate_grad", top)
                for n in walk(top.kids):
                    if n.name == "torch::autograd::AccumulateGrad":
                        add(terms, "accumulate_grad_inner", n)
                    elif n.name == "torch::distributed::reducer::mul_out":
                        add(terms, "copy_in", n)
                    elif n.name == "c10d::allreduce_":
                        add(terms, "allreduce_call", n)
            elif name.startswith("autograd::engine::evaluate_function"):
                seq = None
                for n in walk([top]):
                    seq = (n.e.get("args") or {}).get("Sequence number")
                    if seq is not None:
                        break
                targets = seq_layer.get(seq) or ["unattributed"]
                share(targets, "backward_", top, 1.0 / len(targets))
                for n in walk(top.kids):
                    if n.name == "c10d::allreduce_":
                        add(terms, "allreduce_call", n)
            elif name.startswith("torch.distributed.ddp.reducer::copy_bucket_to_grad"):
                add(terms, "copy_back", top)
            elif name == "c10d::allreduce_":
                add(terms, "allreduce_call", top)
            else:
                add(terms, "backward_other", top)

    ks = [g for e in cpu if e.get("cat") in ("cuda_runtime", "cuda_driver")
          for g in gpu.get((e.get("args") or {}).get("correlation"), ())]
    return {
        "step_us": rnd(step["dur"]),
        "events": len(cpu),
        "kernels": len(ks),
        "kernel_us": rnd(sum(g.get("dur", 0) for g in ks)),
        "module_calls": module_calls,
        "terms": {k: {kk: rnd(vv) for kk, vv in sorted(v.items())} for k, v in sorted(terms.items())},
        "layers": {k: {kk: rnd(vv) for kk, vv in sorted(v.items())} for k, v in layers.items()},
    }


def trace_facts(path, model):
    doc = load(path)
    ev = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X"]
    steps = [e for e in ev if e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    if not steps:
        raise SystemExit(f"{path}: no ProfilerStep ranges (profile with a schedule)")
    main = collections.Counter(e["tid"] for e in steps).most_common(1)[0][0]
    steps = sorted((e for e in steps if e["tid"] == main), key=lambda e: e["ts"])
    gpu = collections.defaultdict(list)
    for e in ev:
        if e.get("cat") in GPU_EVENTS:
            gpu[(e.get("args") or {}).get("correlation")].append(e)
    modules = {e["name"][len(LAYER):] for e in ev if e.get("cat") == "user_annotation"
               and e.get("name", "").startswith(LAYER)}
    attr = Attribution(zoo_layers(model), modules)
    seen = set()
    out = [step_facts(ev, s, gpu, attr, seen) for s in steps]
    return out


def measured_steps(run_dirs, model):
    """The kit's unprofiled medians (ms) of every run folder that has <model>.json."""
    out = collections.defaultdict(list)
    for d in run_dirs:
        p = os.path.join(d, model + ".json")
        if not os.path.exists(p):
            continue
        with open(p) as f:
            job = json.load(f)
        for config, ms in job["median_step_ms"].items():
            out[config].append(rnd(ms))
        # The host's own time to enqueue each phase in the same timed steps (no profiler), when
        # the run recorded it: what host_phases.py and the host fit's unprofiled route fit on.
        for config, h in (job.get("median_host_ms") or {}).items():
            host = out.setdefault("_host", {}).setdefault(config, {"forward": [], "backward": []})
            for phase in ("forward", "backward"):
                host[phase].append(rnd(h[phase]))
        out["_runs"].append(os.path.relpath(d, ROOT))
        out["_job"] = {k: job.get(k) for k in ("batch", "seq_len", "image_size", "dtype")}
        out["_buckets"] = job.get("buckets")
    return dict(out)


DEFAULT_RUNS = [os.path.join(ROOT, "tests/data/gpu/h100/run1")]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", default=DEFAULT_RUNS)
    ap.add_argument("-o", "--out", default=os.path.join(ROOT, "tests/data/gpu/h100/host_facts.json"))
    ap.add_argument("--timing-runs", metavar="NAME,NAME",
                    help="the run folders (beside the first RUN_DIR) whose unprofiled medians "
                         "count, e.g. run1,run2,run3: a later session on another host's CPU "
                         "is left out (default: every run* folder there)")
    args = ap.parse_args(argv)
    runs = [os.path.abspath(r) for r in args.runs]
    timing_dirs = sorted(glob.glob(os.path.join(os.path.dirname(runs[0]), "run*")))
    if args.timing_runs:
        names = args.timing_runs.split(",")
        missing = [n for n in names if os.path.join(os.path.dirname(runs[0]), n) not in timing_dirs]
        if missing:
            ap.error(f"--timing-runs: no run folder {', '.join(missing)} beside {args.runs[0]}")
        timing_dirs = [d for d in timing_dirs if os.path.basename(d) in names]
    result = {"schema": "ddpscope.host-facts/1",
              "command": " ".join(["python3 scripts/gpu_kit/host_facts.py"] +
                                  ([f"--timing-runs {args.timing_runs}"] if args.timing_runs else []) +
                                  [os.path.relpath(os.path.abspath(r), ROOT) for r in args.runs
                                   if args.runs != DEFAULT_RUNS]),
              "models": {}}
    for run in runs:
        for path in sorted(glob.glob(os.path.join(run, "*-ddp-default-rank0.json.gz"))):
            model = os.path.basename(path)[:-len("-ddp-default-rank0.json.gz")]
            job = os.path.join(run, model + ".json")
            if os.path.exists(job):
                with open(job) as f:
                    if json.load(f).get("tag"):
                        continue  # a batch variant (resnet50-b64): not a zoo model's own job
            result["models"][model] = {
                "trace": os.path.relpath(path, ROOT),
                "measured_ms": measured_steps(timing_dirs, model),
                "steps": trace_facts(path, model),
            }
            print(model, file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

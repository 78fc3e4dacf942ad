#!/usr/bin/env python3
"""The comparison half of the GPU evidence kit (scripts/gpu-kit). Standard library only.

  analyze.py provenance OUT --kit KIT --mode gpu|cpu   OUT/provenance.json: machine, GPU, driver,
                                                       torch, NCCL, date, kit
  analyze.py analyze OUT --ddpscope BIN [--expect F]   OUT/report.json and OUT/report.md from what
                                                       `gpu-kit run` wrote into OUT
  analyze.py across RUN RUN [RUN...]                   several runs of one machine: per model and
                                                       configuration the median of the runs'
                                                       medians (and their range), the zero-shot
                                                       prediction of the runs' report.json against
                                                       it, cap 1 - cap 25 and DDP - eager per run
  analyze.py check-schema FILE                         one torch_job.py result against schema.json
  analyze.py check-params FILE --zoo ZOO.json          torch_job.py --param-names: the torch
                                                       model's parameters equal the zoo model's
                                                       (names, shapes, order)

What `analyze` computes, per model, from the files of a run:
  gtest          the GPU tests' counts (passed, failed, skipped) from their XML
  runtime        ddpscope-run's median step (cap 25 and cap 1, two interleaved rounds)
  runtime/torch  that step over torch's: eager (no DDP) and DDP with the default cap
  bucket cost    torch DDP at world size 1: (step at cap 1 - step at cap 25) / (buckets at cap 1 -
                 buckets at cap 25), with the spread of the interleaved rounds as noise floor
  layers         per-layer forward and backward GPU kernel time of the profiled torch steps
                 (kernels attributed to the innermost "ddpscope.layer:<path>" range of their
                 launch; backward kernels through the autograd sequence number of the forward op
                 that made the node) against `ddpscope simulate` at world size 1 on the cluster
                 matching the GPU (dgx-h100, hgx-h200), same batch, shape and bf16; simulated
                 layers timed with the module that runs them (layer_groups), dropout left out
                 (the kit runs it at p = 0)
  zero-shot      every timed configuration (eager, each cap, the default) against `ddpscope
                 simulate` at world size 1 with the built-in host profile and nothing from the
                 run; cap 1 against cap 25 and DDP's overhead over eager, measured and predicted;
                 models the profile was not fitted on are marked held out
  import         `ddpscope import-torch` of every trace: buckets, step, overlap
  replay         `ddpscope replay` of the runtime's own trace at its own settings: error; and of
                 every profiled DDP trace imported with the zoo model (per config, "replay")

With --expect, the report's numbers must equal the expected file's (exact for integers, 1e-6
relative for floats): the dry run checks the comparison code that way on a committed sample.
"""
import glob
import gzip
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(cmd, timeout=60):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, "", str(e)


# ---- provenance ----------------------------------------------------------------------------

def cpu_model():
    """The first "model name" of /proc/cpuinfo (None where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def provenance(out, kit, mode):
    p = {"date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "mode": mode,
         "host": {"machine": platform.machine(), "kernel": platform.release(),
                  "cpus": os.cpu_count(), "python": platform.python_version()},
         "command": "scripts/gpu-kit run " + ("--cpu " if mode == "cpu" else "") + "OUT"}
    # The CPU that launches every op sets the pace of small steps: host costs hold for one CPU
    # model, so the run names it (and the load it started under).
    p["host"]["cpu_model"] = cpu_model()
    if hasattr(os, "getloadavg"):
        p["host"]["load_1min"] = round(os.getloadavg()[0], 2)
    rc, so, _ = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,"
                    "clocks.max.mem,power.limit,pci.bus_id", "--format=csv,noheader"])
    if rc == 0 and so.strip():
        f = [x.strip() for x in so.strip().splitlines()[0].split(",")]
        keys = ["name", "driver", "memory", "max_sm_clock", "max_mem_clock", "power_limit",
                "pci_bus"]
        p["gpu"] = dict(zip(keys, f))
        p["gpu_count"] = len(so.strip().splitlines())
    rc, so, _ = sh(["nvidia-smi"])
    m = re.search(r"CUDA Version:\s*([0-9.]+)", so or "")
    if m:
        p["driver_cuda"] = m.group(1)
    try:
        import torch  # noqa: F401 (only the versions)
        p["torch"] = torch.__version__
        p["torch_cuda"] = getattr(torch.version, "cuda", None)
        if torch.cuda.is_available():
            v = torch.cuda.nccl.version()
            p["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
            p["gpu_torch"] = torch.cuda.get_device_name(0)
    except Exception as e:  # noqa: BLE001 (recorded, not fatal)
        p["torch_error"] = str(e)
    man = os.path.join(kit, "MANIFEST.txt")
    if os.path.exists(man):
        with open(man) as f:
            p["kit"] = [line.rstrip("\n") for line in f][:2]
    with open(os.path.join(out, "provenance.json"), "w") as f:
        json.dump(p, f, indent=1)
    print(json.dumps(p, indent=1))


# ---- helpers -------------------------------------------------------------------------------

def load_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def median(xs):
    return statistics.median(xs) if xs else None


def rel(a, b):
    """(a - b) / b, or None."""
    if a is None or b is None or b == 0:
        return None
    return (a - b) / b


def rnd(x, n=4):
    return None if x is None else round(x, n)


def parse_list(text):
    return [int(v) for v in re.findall(r"\d+", text or "")]


# ---- the GPU tests -------------------------------------------------------------------------

def gtest_counts(out):
    res = {}
    paths = glob.glob(os.path.join(out, "gtest-*.xml")) + \
        glob.glob(os.path.join(out, "gtest-*.xml.gz"))
    for path in sorted(paths):
        name = re.sub(r"\.xml(\.gz)?$", "", os.path.basename(path)[6:])
        try:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as f:
                root = ET.parse(f).getroot()
        except (ET.ParseError, OSError) as e:
            res[name] = {"error": str(e)}
            continue
        cases = root.iter("testcase")
        c = {"tests": 0, "failed": 0, "skipped": 0, "failures": []}
        for case in cases:
            c["tests"] += 1
            if case.find("failure") is not None:
                c["failed"] += 1
                c["failures"].append(case.get("classname", "") + "." + case.get("name", ""))
            elif case.find("skipped") is not None or case.get("result") == "skipped":
                c["skipped"] += 1
        c["passed"] = c["tests"] - c["failed"] - c["skipped"]
        res[name] = c
    return res


# ---- the runtime ---------------------------------------------------------------------------

def runtime_steps(out, model):
    res = {}
    for cap in ("25", "1"):
        meds = []
        for path in sorted(glob.glob(os.path.join(out, f"runtime-{model}-cap{cap}-r*.json"))):
            try:
                meds.append(load_json(path)["median_step_ms"])
            except (OSError, ValueError, KeyError):
                pass
        if meds:
            res[f"cap{cap}"] = {"median_step_ms": rnd(median(meds)), "runs": [rnd(m) for m in meds]}
    return res


# ---- per-layer kernel time from a Kineto trace ---------------------------------------------

LAUNCH = re.compile(r"^(cuda|cu)(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|"
                    r"MemcpyAsync|MemsetAsync|GraphLaunch|LaunchKernelEx)")


def layer_lookup(ev):
    """(innermost, seq_layer) of a torch_job trace's complete events: innermost(tid, ts) names the
    innermost ddpscope.layer range on that thread at that time (None outside every layer);
    seq_layer maps an autograd sequence number to the layer whose forward op carried it (a
    backward node's layer)."""
    layers_by_tid = {}
    for e in ev:
        if e.get("cat") == "user_annotation" and e["name"].startswith("ddpscope.layer:"):
            layers_by_tid.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"],
                                                           e["name"][15:]))

    def innermost(tid, ts):
        best = None
        for a, b, name in layers_by_tid.get(tid, ()):
            if a <= ts <= b and (best is None or b - a < best[1] - best[0]):
                best = (a, b, name)
        return best[2] if best else None

    seq_layer = {}
    for e in ev:
        if e.get("cat") != "cpu_op":
            continue
        seq = (e.get("args") or {}).get("Sequence number")
        if seq is None or e["name"].startswith("autograd::engine"):
            continue
        layer = innermost(e["tid"], e["ts"])
        if layer is not None:
            seq_layer.setdefault(seq, layer)
    return innermost, seq_layer


# An add kernel in backward: autograd summing the gradients a tensor gets from its several
# readers (in the node of the reader that delivers the second), or a shared parameter's.
GRADIENT_SUM_KERNEL = "CUDAFunctor_add"
# A copy kernel in a matrix product's or convolution's module: autocast's cast of an fp32
# parameter or input to the half dtype (forward) or of its gradient back (backward).
CAST_KERNEL = "copy_kernel"
# A reduction kernel in a matrix product's backward: its bias's gradient, the output gradient
# summed over the tokens (at::native::reduce_kernel with a sum).
BIAS_GRAD_KERNEL = "reduce_kernel"


def layer_times(trace_path):
    """Per layer: forward and backward GPU kernel time (us per step) of a torch_job trace; of the
    backward, the time of its gradient sums ("backward_sums": GRADIENT_SUM_KERNEL) and of its
    reductions ("backward_bias": BIAS_GRAD_KERNEL, a bias's gradient where the layer is a matrix
    product); of each pass, the time of its copy kernels ("forward_casts", "backward_casts":
    CAST_KERNEL)."""
    d = load_json(trace_path)
    ev = [e for e in d.get("traceEvents", []) if e.get("ph") == "X"]
    steps = {e["name"] for e in ev if e.get("cat") in ("user_annotation", "cpu_op")
             and e.get("name", "").startswith("ProfilerStep#")}
    nsteps = max(1, len(steps))
    innermost, seq_layer = layer_lookup(ev)
    bwd = []  # (start, end, tid, layer)
    for e in ev:
        if e.get("cat") == "cpu_op" and e["name"].startswith("autograd::engine::evaluate_function"):
            seq = (e.get("args") or {}).get("Sequence number")
            bwd.append((e["ts"], e["ts"] + e["dur"], e["tid"], seq_layer.get(seq)))
    corr = {}
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and LAUNCH.match(e.get("name", "")):
            c = (e.get("args") or {}).get("correlation")
            if c is None:
                continue
            fwd = innermost(e["tid"], e["ts"])
            if fwd is not None:
                corr[c] = ("forward", fwd)
                continue
            owner = None
            for a, b, tid, layer in bwd:
                if tid == e["tid"] and a <= e["ts"] <= b:
                    if owner is None or b - a < owner[1] - owner[0]:
                        owner = (a, b, layer)
            if owner is not None:
                corr[c] = ("backward", owner[2] or "(autograd, no layer)")
            else:
                corr[c] = ("other", "(outside layers)")
    per = {}
    totals = {"forward": 0.0, "backward": 0.0, "other": 0.0, "communication": 0.0}
    for e in ev:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        name = e.get("name", "")
        dur = float(e.get("dur", 0))
        if "nccl" in name.lower():
            totals["communication"] += dur
            continue
        phase, layer = corr.get((e.get("args") or {}).get("correlation"), ("other", "(unmatched)"))
        totals[phase] += dur
        if phase in ("forward", "backward"):
            t = per.setdefault(layer, {"forward": 0.0, "backward": 0.0, "backward_sums": 0.0,
                                       "backward_bias": 0.0, "forward_casts": 0.0,
                                       "backward_casts": 0.0})
            t[phase] += dur
            if phase == "backward" and GRADIENT_SUM_KERNEL in name:
                t["backward_sums"] += dur
            if phase == "backward" and BIAS_GRAD_KERNEL in name:
                t["backward_bias"] += dur
            if CAST_KERNEL in name:
                t[phase + "_casts"] += dur
    scale = 1.0 / nsteps
    return ({k: {p: v * scale for p, v in t.items()} for k, t in per.items()},
            {k: v * scale for k, v in totals.items()}, nsteps)


def simulate_job_cmd(ddpscope, model, job, cluster):
    """`ddpscope simulate --json` at world size 1 with the job's batch, shape and dtype."""
    cmd = [ddpscope, "simulate", "--model", model, "--cluster", cluster, "--world-size", "1",
           "--batch", str(job["batch"]), "--json"]
    cmd += ["--dtype", "bf16", "--autocast"] if job["dtype"] == "bf16" else ["--dtype", "fp32"]
    if job.get("seq_len"):
        cmd += ["--seq-len", str(job["seq_len"])]
    if job.get("image_size"):
        cmd += ["--image-size", str(job["image_size"])]
    return cmd


def simulated_layers(ddpscope, model, job, cluster):
    """`simulate --json`'s per-layer kernels (name, type, kernel_class, forward, backward) and
    its summary, at world size 1 on `cluster` (a built-in name or a cluster file)."""
    cmd = simulate_job_cmd(ddpscope, model, job, cluster)
    rc, so, se = sh(cmd, timeout=120)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {rc}: {se.strip()[-300:]}")
    summary = json.loads(so)
    return summary["layers"], summary


# The kit's models run dropout with p = 0 (no kernel; deterministic numerics), the zoo's with
# Hugging Face's p = 0.1: those layers are left out of every per-layer comparison.
SKIPPED_LAYER_TYPES = ("Dropout",)


def layer_us(layer, phase):
    k = layer.get(phase) or {}
    return k.get("time_ns", 0) / 1e3


def layer_groups(measured, sim_layers):
    """The simulated layers grouped by the measured module whose range holds their kernels: a
    module called more than once ("layer1.0.relu" and the simulator's "layer1.0.relu:2") or a
    functional op inside a module ("h.0.add", "h.0.attn.core" run in "h.0" / "h.0.attn") is timed
    with its owner. Returns [(owner, phase, measured_us, [layers])] for every owner with measured
    and simulated time in that phase."""
    owned = {}
    for layer in sim_layers:
        if layer["type"] in SKIPPED_LAYER_TYPES:
            continue
        name = layer["name"].split(":")[0]
        while name and name not in measured:
            name = name.rpartition(".")[0]
        if name:
            owned.setdefault(name, []).append(layer)
    groups = []
    for owner, layers in owned.items():
        for phase in ("forward", "backward"):
            m = measured[owner][phase]
            if m > 0 and sum(layer_us(x, phase) for x in layers) > 0:
                groups.append((owner, phase, m, layers))
    return groups


def own_kernels(measured, sim_layers):
    """Per module: forward and backward kernel time without the backward's gradient sums, which
    the simulator charges to the Add layer whose input the shared tensor is (an Add's measured
    backward holds none: the trace runs them in the node of the reader that delivers the second
    gradient), so a module and its simulated layers are compared on the same kernels. An
    embedding module keeps its sum: the one of a tied weight's two gradients (gpt2-small's wte),
    which no layer charges."""
    embedding = {owner for owner, _p, _m, layers in layer_groups(measured, sim_layers)
                 if {x["kernel_class"] for x in layers} == {"embedding"}}
    return {o: dict(v, backward=v["backward"] - (0.0 if o in embedding
                                                  else v.get("backward_sums", 0.0)))
            for o, v in measured.items()}


def compare_layers(measured, sim_layers, sums_on_adds=False):
    """Per pass: the simulated layers against the measured modules. `sums_on_adds`: the
    simulation is the cluster's kernel model, which charges the gradient sums to Add layers, so
    the modules are measured without them (own_kernels); a simulation from a trace or a kernel
    benchmark times them in the readers, as the trace does."""
    if sums_on_adds:
        measured = own_kernels(measured, sim_layers)
    rows = [(owner, phase, m, sum(layer_us(x, phase) for x in layers))
            for owner, phase, m, layers in layer_groups(measured, sim_layers)]
    out = {}
    for phase in ("forward", "backward"):
        errs = [abs(s - m) / m for _, p, m, s in rows if p == phase]
        wm = sum(m for _, p, m, _s in rows if p == phase)
        ws = sum(s for _, p, _m, s in rows if p == phase)
        out[phase] = {"layers": len(errs),
                      "median_abs_error": rnd(median(errs)),
                      "p90_abs_error": rnd(sorted(errs)[int(0.9 * (len(errs) - 1))] if errs else None),
                      "matched_measured_us": rnd(wm, 1), "matched_simulated_us": rnd(ws, 1),
                      "matched_total_error": rnd(rel(ws, wm))}
    worst = sorted(rows, key=lambda r: -abs(r[3] - r[2]))[:8]
    out["largest_gaps"] = [{"layer": n, "phase": p, "measured_us": rnd(m, 1),
                            "simulated_us": rnd(s, 1), "error": rnd(rel(s, m))}
                           for n, p, m, s in worst]
    return out


def cluster_for(gpu_name):
    """The built-in cluster of the lent GPU (nvidia-smi's name), and a note when there is none:
    the comparisons then run on dgx-h100's, another GPU's, and the report says so."""
    n = (gpu_name or "").upper()
    if "A100" in n:
        # "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe": the PCIe server's; SXM4: the DGX's.
        return ("pcie-a100-100gbe" if "PCIE" in n else "dgx-a100"), None
    for chip, cluster in (("H200", "hgx-h200"), ("H100", "dgx-h100"), ("B200", "dgx-b200")):
        if chip in n:
            return cluster, None
    return "dgx-h100", (f"GPU {gpu_name or '(unnamed)'} has no built-in cluster: every prediction "
                        "below runs on dgx-h100's H100, another GPU")


# ---- zero-shot: simulate every timed configuration -----------------------------------------

# The built-in host profile the kit's zero-shot predictions use, and the models it was fitted on
# (`ddpscope host-profile show h100-torch211`: its source); the others are held out.
HOST_PROFILE = "h100-torch211"
FITTED_ON = ("resnet50", "gpt2-small", "bert-base")


def simulate_config(ddpscope, model, job, cluster, cap):
    """`ddpscope simulate` at world size 1 for one timed configuration: cap None is PyTorch's
    default (bucket_cap_mb not given)."""
    cmd = simulate_job_cmd(ddpscope, model, job, cluster) + ["--host-profile", HOST_PROFILE]
    if cap is not None:
        cmd += ["--bucket-cap-mb", cap]
    rc, so, se = sh(cmd, timeout=120)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd[1:])}: exit {rc}: {se.strip()[-300:]}")
    return json.loads(so)


def zero_shot(ddpscope, model, job, cluster):
    """Every timed configuration predicted with nothing from this run: the zoo model, the
    cluster's roofline kernels and the built-in host profile. eager is the default run's plain
    step (the same host lane without DDP)."""
    med = job["median_step_ms"]
    res = {"host_profile": HOST_PROFILE, "held_out": model not in FITTED_ON, "configs": {}}
    sims = {}
    for cfg in med:
        if cfg == "eager":
            continue
        cap = None if cfg == "ddp-default" else cfg[len("ddp-cap"):]
        sims[cfg] = simulate_config(ddpscope, model, job, cluster, cap)
    default = sims.get("ddp-default")
    for cfg, measured in med.items():
        if cfg == "eager":
            if default is None or not default.get("plain_step_simulated"):
                continue
            pred = default["plain_step_ns"] / 1e6
        else:
            pred = sims[cfg]["step_time_ns"] / 1e6
        res["configs"][cfg] = {"measured_ms": rnd(measured), "predicted_ms": rnd(pred),
                               "error": rnd(rel(pred, measured)),
                               "buckets": sims[cfg]["num_buckets"] if cfg in sims else None}
    c = res["configs"]
    if "ddp-cap1" in c and "ddp-cap25" in c:
        res["cap1_over_cap25"] = {
            "measured": rnd(rel(c["ddp-cap1"]["measured_ms"], c["ddp-cap25"]["measured_ms"])),
            "predicted": rnd(rel(c["ddp-cap1"]["predicted_ms"], c["ddp-cap25"]["predicted_ms"]))}
    if "eager" in c and "ddp-default" in c:
        res["ddp_overhead_ms"] = {
            "measured": rnd(c["ddp-default"]["measured_ms"] - c["eager"]["measured_ms"]),
            "predicted": rnd(c["ddp-default"]["predicted_ms"] - c["eager"]["predicted_ms"])}
    errs = [abs(v["error"]) for v in c.values() if v["error"] is not None]
    res["mean_abs_error"] = rnd(sum(errs) / len(errs)) if errs else None
    return res


# ---- import-torch and replay ---------------------------------------------------------------

def import_trace(ddpscope, trace, out):
    run = os.path.join(out, os.path.basename(trace).replace("-rank0.json.gz", "-imported.json"))
    rc, so, se = sh([ddpscope, "import-torch", trace, "-o", run, "--json", "--quiet"], timeout=120)
    if rc != 0:
        return {"error": se.strip()[-400:]}
    s = json.loads(so)
    os.remove(run)
    return {k: s[k] for k in ("ranks", "iterations", "median_step_ns", "bucket_bytes",
                               "buckets_consistent", "comm_ns", "exposed_comm_ns",
                               "overlap_percent", "hta_overlap") if k in s}


def replay_profile(ddpscope, trace, model, cluster, out, host_work=False):
    """A profiled DDP trace imported with the zoo model (kernels named by layer through the
    ddpscope.layer: ranges) and replayed at its own settings: the profiled step against the
    replay (world size 1). `host_work`: also the host lane's unprofiled host work by phase."""
    run = os.path.join(out, os.path.basename(trace).replace("-rank0.json.gz", "-layers.json"))
    rc, so, se = sh([ddpscope, "import-torch", trace, "--model", model, "-o", run, "--json",
                     "--quiet"], timeout=120)
    if rc != 0:
        return {"error": se.strip()[-400:]}
    try:
        return replay_runtime(ddpscope, run, model, cluster, host_work)
    finally:
        os.remove(run)


def replay_runtime(ddpscope, trace, model, cluster, host_work=False):
    """`ddpscope replay` of the runtime's own trace at its own settings (world size 1: the
    cluster only names the device; there is no communication to model). `host_work`: also the
    host lane's unprofiled host work per phase (ms), where the trace has a host lane."""
    rc, so, se = sh([ddpscope, "replay", "--from-trace", trace, "--model", model, "--cluster", cluster,
                     "--world-size", "1", "--json"], timeout=120)
    if rc != 0:
        return {"error": se.strip()[-400:]}
    s = json.loads(so)
    res = {"measured_step_ms": rnd(s["measured_step_ms"]),
           "replayed_step_ms": rnd(s["replayed_step_ms"]),
           "error": rnd(s["replay_error_percent"] / 100)}
    lane = s.get("host_lane") or {}
    if host_work and lane.get("unprofiled_host_work_ms"):
        res["host_work_ms"] = {k: rnd(v) for k, v in lane["unprofiled_host_work_ms"].items()}
    return res


# The committed H100 run whose traces the cross-GPU check carries to a lent GPU of another kind
# (present in a checkout, not in the kit folder: `scripts/gpu-kit analyze OUT` adds the check
# when the results are back).
REFERENCE_RUN = os.path.join(HERE, "..", "..", "tests", "data", "gpu", "h100", "run1")
REFERENCE_CLUSTER = "dgx-h100"


def cross_gpu(ddpscope, out, model, job, cluster, trace):
    """The committed H100 trace of `model` carried to this run's GPU (`simulate --compute-from`
    on `cluster`: each layer's kernels by the ratio of the two GPUs' rooflines) against this
    run's own profiled kernels, forward and backward sums (µs). None on the reference's own GPU
    or without the reference traces."""
    ref = os.path.join(REFERENCE_RUN, f"{model}-ddp-default-rank0.json.gz")
    if cluster == REFERENCE_CLUSTER or not os.path.exists(ref):
        return None
    sums = {}
    for name, path in (("carried", ref), ("measured", trace)):
        run = os.path.join(out, f"{model}-{name}-cross-gpu.json")
        cmd = [ddpscope, "import-torch", path, "--model", model, "-o", run, "--json", "--quiet"]
        if job["dtype"] == "bf16":
            cmd.append("--autocast")
        rc, _so, se = sh(cmd, timeout=120)
        if rc != 0:
            return {"error": f"import-torch {path}: {se.strip()[-300:]}"}
        try:
            cmd = simulate_job_cmd(ddpscope, model, job, cluster) + [
                "--compute-from", run, "--host-profile", HOST_PROFILE]
            rc, so, se = sh(cmd, timeout=120)
            if rc != 0:
                return {"error": f"{' '.join(cmd[1:])}: exit {rc}: {se.strip()[-300:]}"}
            layers = [x for x in json.loads(so)["layers"] if x["type"] not in SKIPPED_LAYER_TYPES]
            sums[name] = {phase: sum(layer_us(x, phase) for x in layers)
                          for phase in ("forward", "backward")}
        finally:
            os.remove(run)
    c, m = sums["carried"], sums["measured"]
    return {"reference": f"tests/data/gpu/h100/run1/{os.path.basename(ref)}",
            "carried_forward_us": rnd(c["forward"], 1), "carried_backward_us": rnd(c["backward"], 1),
            "measured_forward_us": rnd(m["forward"], 1), "measured_backward_us": rnd(m["backward"], 1),
            "forward_error": rnd(rel(c["forward"], m["forward"])),
            "backward_error": rnd(rel(c["backward"], m["backward"])),
            "total_error": rnd(rel(c["forward"] + c["backward"], m["forward"] + m["backward"]))}


def batch_what_if(ddpscope, out, base_job, job, cluster):
    """The host lane's batch what-if against a measurement: the model's profiled default-cap
    trace (at the main job's batch) imported and replayed at `job`'s batch (replay --batch, world
    size 1, without the profiler), against the measured unprofiled DDP step of `job` (the same
    model run at that batch: a tagged torch_job)."""
    res = {"trace_batch": base_job["batch"], "batch": job["batch"],
           "measured_ms": rnd((job["median_step_ms"] or {}).get("ddp-default"))}
    if job.get("memory_format"):  # the variant differs in layout too: the replay cannot know it
        res["memory_format"] = job["memory_format"]
    trace = (base_job.get("traces") or {}).get("ddp-default")
    if not trace or not os.path.exists(os.path.join(out, trace)) or res["measured_ms"] is None:
        res["error"] = "no profiled ddp-default trace of the main job, or no measured ddp-default"
        return res
    run = os.path.join(out, f"{base_job['model']}-batch-what-if-imported.json")
    cmd = [ddpscope, "import-torch", os.path.join(out, trace), "--model", base_job["model"],
           "--batch-per-rank", str(base_job["batch"]), "-o", run, "--quiet"]
    if base_job.get("dtype") == "bf16":
        cmd.append("--autocast")
    rc, _so, se = sh(cmd, timeout=120)
    if rc != 0:
        res["error"] = se.strip()[-400:]
        return res
    try:
        cmd = [ddpscope, "replay", "--from-trace", run, "--cluster", cluster, "--world-size", "1",
               "--batch", str(job["batch"]), "--json"]
        if job.get("seq_len"):
            cmd += ["--seq-len", str(job["seq_len"])]
        if job.get("image_size"):
            cmd += ["--image-size", str(job["image_size"])]
        rc, so, se = sh(cmd, timeout=120)
        if rc != 0:
            res["error"] = se.strip()[-400:]
            return res
        lane = json.loads(so).get("host_lane")
        if not lane or lane.get("what_if_unprofiled_step_ms") is None:
            res["error"] = "replay gave no host lane (no host facts in the trace)"
            return res
        res["trace_own_unprofiled_ms"] = rnd(lane["unprofiled_step_ms"])
        res["predicted_ms"] = rnd(lane["what_if_unprofiled_step_ms"])
        res["error"] = rnd(rel(res["predicted_ms"], res["measured_ms"]))
    finally:
        if os.path.exists(run):
            os.remove(run)
    return res


def batch_kernels(ddpscope, out, base_job, job, cluster):
    """How each module's kernels grow with the batch, measured, against the ways the simulator
    can predict it: the main job's profiled default-cap trace (its batch) and the tagged job's
    (the same model at another batch), module by module. A kernel fit from one batch cannot say
    how much of a layer's time is a floor and how much grows with the batch (every layer of one
    trace has one batch); two batches can. Per pass: the measured sums and their growth, and per
    predictor the median |error| per module and the error of the matched sum at `job`'s batch:
    proportional (the trace's kernels times the batch ratio), trace_scaled (`simulate
    --compute-from` the trace at the new batch: what replay and --compute-from do), trace_fit
    (`calibrate` on the trace, its kernel fit simulated at the new batch) and cluster (the
    cluster's own kernel model, nothing measured)."""
    res = {"trace_batch": base_job["batch"], "batch": job["batch"]}
    paths = [os.path.join(out, (j.get("traces") or {}).get("ddp-default") or "")
             for j in (base_job, job)]
    if not all(os.path.isfile(p) for p in paths):
        res["error"] = "no profiled ddp-default trace of the main job and of the variant"
        return res
    base, var = (layer_times(p)[0] for p in paths)
    shared = sorted(set(base) & set(var))
    if not any(base[n][p] > 0 and var[n][p] > 0 for n in shared for p in ("forward", "backward")):
        res["error"] = "no GPU kernels attributed to layers in both traces (a CPU run?)"
        return res
    ratio = job["batch"] / base_job["batch"]
    for phase in ("forward", "backward"):
        rows = [(base[n][phase], var[n][phase]) for n in shared
                if base[n][phase] > 0 and var[n][phase] > 0]
        b = sum(r[0] for r in rows)
        v = sum(r[1] for r in rows)
        res[phase] = {"modules": len(rows), "measured_trace_us": rnd(b, 1),
                      "measured_us": rnd(v, 1), "growth": rnd(v / b),
                      "proportional": {
                          "median_abs_error": rnd(median([abs(x * ratio - y) / y for x, y in rows])),
                          "sum_error": rnd(rel(b * ratio, v))}}
    model = base_job["model"]
    run = os.path.join(out, f"{model}-batch-kernels-imported.json")
    cal = os.path.join(out, f"{model}-batch-kernels-cluster.json")
    shape = []
    if base_job.get("seq_len"):
        shape += ["--seq-len", str(base_job["seq_len"])]
    if base_job.get("image_size"):
        shape += ["--image-size", str(base_job["image_size"])]
    try:
        cmd = [ddpscope, "import-torch", paths[0], "--model", model, "--batch-per-rank",
               str(base_job["batch"]), "-o", run, "--quiet"]
        if base_job.get("dtype") == "bf16":
            cmd.append("--autocast")
        rc, _so, se = sh(cmd, timeout=120)
        if rc != 0:
            res["error"] = f"import-torch: {se.strip()[-300:]}"
            return res
        rc, _so, se = sh([ddpscope, "calibrate", run, "--base", cluster, "-o", cal] + shape,
                         timeout=120)
        predictors = {"cluster": simulate_job_cmd(ddpscope, model, job, cluster),
                      "trace_scaled": simulate_job_cmd(ddpscope, model, job, cluster) +
                      ["--compute-from", run, "--host-profile", HOST_PROFILE]}
        if rc == 0:
            predictors["trace_fit"] = simulate_job_cmd(ddpscope, model, job, cal)
        else:
            res["trace_fit_error"] = f"calibrate: {se.strip()[-300:]}"
        for name, cmd in predictors.items():
            rc, so, se = sh(cmd, timeout=120)
            if rc != 0:
                res[f"{name}_error"] = f"{' '.join(cmd[1:])}: exit {rc}: {se.strip()[-300:]}"
                continue
            c = compare_layers(var, json.loads(so)["layers"], sums_on_adds=name == "cluster")
            for phase in ("forward", "backward"):
                res[phase][name] = {"median_abs_error": c[phase]["median_abs_error"],
                                    "sum_error": c[phase]["matched_total_error"]}
    finally:
        for f in (run, cal):
            if os.path.exists(f):
                os.remove(f)
    return res


# ---- analyze -------------------------------------------------------------------------------

def analyze(out, ddpscope):
    report = {"schema": "ddpscope.gpu-kit.report/1", "models": {}, "notes": []}
    prov_path = os.path.join(out, "provenance.json")
    prov = load_json(prov_path) if os.path.exists(prov_path) else {}
    report["provenance"] = prov
    report["gtest"] = gtest_counts(out)
    gpu_name = (prov.get("gpu") or {}).get("name")
    cluster, cluster_note = cluster_for(gpu_name)
    report["cluster"] = cluster
    if cluster_note:
        report["notes"].append(cluster_note)
    tagged, main_jobs = [], {}
    for job_path in sorted(glob.glob(os.path.join(out, "*.json"))):
        base = os.path.basename(job_path)
        if base.startswith(("runtime-", "numerics-", "provenance", "report", "sim-")) or \
                base.endswith("-imported.json") or "-numerics-" in base:
            continue
        try:
            job = load_json(job_path)
        except ValueError:
            continue
        if job.get("schema") != "ddpscope.gpu-kit.torch/1":
            continue
        if job.get("tag"):  # a variant of a model's job: compared after the main ones
            tagged.append(job)
            continue
        model = job["model"]
        main_jobs[model] = job
        r = {"torch": {"median_step_ms": {k: rnd(v) for k, v in job["median_step_ms"].items()},
                       "batch": job["batch"], "dtype": job["dtype"],
                       "seq_len": job.get("seq_len"), "image_size": job.get("image_size")}}
        # Noise floor: the spread of one configuration's per-round medians.
        k = job["steps_per_round"]
        spread = {}
        for name, xs in job["step_ms"].items():
            rounds = [median(xs[i:i + k]) for i in range(0, len(xs), k)]
            spread[name] = rnd((max(rounds) - min(rounds)) / median(rounds)) if rounds else None
        r["torch"]["round_spread"] = spread
        # DDP at world size 1 computes what eager computes: the first losses must agree.
        losses = job.get("first_losses", {})
        if "eager" in losses:
            worst = 0.0
            for name, ls in losses.items():
                for a, b in zip(ls, losses["eager"]):
                    worst = max(worst, abs(a - b) / max(abs(b), 1e-12))
            r["torch"]["ddp_vs_eager_first_losses_max_rel"] = rnd(worst, 8)
        # Per-bucket host cost from cap 1 against cap 25.
        med = job["median_step_ms"]
        nb = {name: len(parse_list(b.get("rebuilt_bucket_sizes")) or parse_list(b.get("bucket_sizes")))
              for name, b in job.get("buckets", {}).items()}
        r["torch"]["buckets"] = nb
        if "ddp-cap1" in med and "ddp-cap25" in med and nb.get("ddp-cap1", 0) > nb.get("ddp-cap25", 0):
            extra = med["ddp-cap1"] - med["ddp-cap25"]
            r["bucket_cost"] = {
                "cap1_minus_cap25_ms": rnd(extra),
                "cap1_over_cap25": rnd(rel(med["ddp-cap1"], med["ddp-cap25"])),
                "extra_buckets": nb["ddp-cap1"] - nb["ddp-cap25"],
                "per_extra_bucket_us": rnd(1e3 * extra / (nb["ddp-cap1"] - nb["ddp-cap25"]), 2),
                "noise_floor": rnd(max(spread.get("ddp-cap1") or 0, spread.get("ddp-cap25") or 0))}
        if "eager" in med and "ddp-default" in med:
            r["torch"]["ddp_over_eager"] = rnd(rel(med["ddp-default"], med["eager"]))
        # The unprofiled host: its own time per phase, and its share of the step (near 1: the
        # step waited for the host; well below: for the device).
        host = job.get("median_host_ms") or {}
        if host:
            r["torch"]["host_ms"] = {name: {k: rnd(v) for k, v in h.items()}
                                     for name, h in host.items()}
            r["torch"]["host_over_step"] = {name: rnd(h["step"] / med[name])
                                            for name, h in host.items() if med.get(name)}
        # Our runtime against torch.
        rt = runtime_steps(out, model)
        if rt:
            r["runtime"] = rt
            if "cap25" in rt:
                s = rt["cap25"]["median_step_ms"]
                r["runtime_over_torch"] = {"eager": rnd(s / med["eager"]) if med.get("eager") else None,
                                           "ddp_default": rnd(s / med["ddp-default"])
                                           if med.get("ddp-default") else None}
            trace = os.path.join(out, f"runtime-{model}.json")
            if not os.path.exists(trace):
                trace += ".gz"
            if os.path.exists(trace):
                r["runtime_replay"] = replay_runtime(ddpscope, trace, model, cluster)
        try:
            r["zero_shot"] = zero_shot(ddpscope, model, job, cluster)
        except Exception as e:  # noqa: BLE001 (the report says what failed)
            r["zero_shot"] = {"error": f"{type(e).__name__}: {e}"}
        # Per-layer compute against the simulator, and import of every trace.
        r["import"] = {}
        for cfg, tr in sorted(job.get("traces", {}).items()):
            path = os.path.join(out, tr)
            if os.path.exists(path):
                r["import"][cfg] = import_trace(ddpscope, path, out)
                if cfg.startswith("ddp"):
                    measured_host = (job.get("median_host_ms") or {}).get(cfg)
                    rep = replay_profile(ddpscope, path, model, cluster, out,
                                         host_work=bool(measured_host))
                    r["import"][cfg]["replay"] = rep
                    # The host lane's unprofiled host (from this profiled trace) against the
                    # host measured without the profiler in the timed steps.
                    if measured_host and rep.get("host_work_ms"):
                        r["torch"].setdefault("host_lane_vs_measured", {})[cfg] = {
                            phase: {"measured_ms": rnd(measured_host[key]),
                                    "predicted_ms": rep["host_work_ms"][phase],
                                    "error": rnd(rel(rep["host_work_ms"][phase],
                                                     measured_host[key]))}
                            for phase, key in (("forward", "forward"), ("backward", "backward"),
                                               ("optimizer", "optimizer"), ("total", "step"))}
        tr = job.get("traces", {}).get("ddp-default")
        if tr and os.path.exists(os.path.join(out, tr)):
            try:
                carried = cross_gpu(ddpscope, out, model, job, cluster, os.path.join(out, tr))
            except Exception as e:  # noqa: BLE001 (the report says what failed)
                carried = {"error": f"{type(e).__name__}: {e}"}
            if carried is not None:
                r["cross_gpu"] = carried
            try:
                per, totals, nsteps = layer_times(os.path.join(out, tr))
                sim, summ = simulated_layers(ddpscope, model, job, cluster)
                cmp_ = compare_layers(per, sim, sums_on_adds=True)
                run = [x for x in sim if x["type"] not in SKIPPED_LAYER_TYPES]
                sim_fwd = sum(layer_us(x, "forward") for x in run)
                sim_bwd = sum(layer_us(x, "backward") for x in run)
                cmp_["totals"] = {
                    "profiled_steps": nsteps,
                    "measured_forward_us": rnd(totals["forward"], 1),
                    "measured_backward_us": rnd(totals["backward"], 1),
                    "measured_other_us": rnd(totals["other"], 1),
                    "measured_nccl_us": rnd(totals["communication"], 1),
                    "simulated_forward_us": rnd(sim_fwd, 1),
                    "simulated_backward_us": rnd(sim_bwd, 1),
                    "forward_error": rnd(rel(sim_fwd, totals["forward"])),
                    "backward_error": rnd(rel(sim_bwd, totals["backward"])),
                    "simulated_step_ms": rnd(summ["step_time_ns"] / 1e6),
                    "measured_step_ms": med.get("ddp-default"),
                    "step_error": rnd(rel(summ["step_time_ns"] / 1e6, med.get("ddp-default")))}
                r["layers"] = cmp_
            except Exception as e:  # noqa: BLE001 (the report says what failed)
                r["layers"] = {"error": f"{type(e).__name__}: {e}"}
        report["models"][model] = r
    for job in tagged:
        base_job = main_jobs.get(job["model"])
        if base_job is None:
            report["notes"].append(f"{job['model']}-{job['tag']}: no main job of the model")
            continue
        report.setdefault("batch_what_if", {})[f"{job['model']}-{job['tag']}"] = \
            batch_what_if(ddpscope, out, base_job, job, cluster)
        try:
            kernels = batch_kernels(ddpscope, out, base_job, job, cluster)
        except Exception as e:  # noqa: BLE001 (the report says what failed)
            kernels = {"error": f"{type(e).__name__}: {e}"}
        report.setdefault("batch_kernels", {})[f"{job['model']}-{job['tag']}"] = kernels
    report["numerics"] = {}
    for path in sorted(glob.glob(os.path.join(out, "*-numerics-*.json"))):
        n = load_json(path)
        report["numerics"][f"{n['model']}-{n['dtype']}"] = {
            "first_loss_runtime_vs_torch": rnd(n["runtime_vs_torch"][0], 8),
            "max_runtime_vs_torch": rnd(max(n["runtime_vs_torch"]), 8),
            "max_torch_vs_fp64": rnd(max(n["torch_vs_fp64"]), 8),
            "max_runtime_vs_fp64": rnd(max(n["runtime_vs_fp64"]), 8),
            "steps": len(n["torch_losses"])}
    if prov.get("gpu_count", 0) <= 1:
        report["notes"].append(
            "one GPU: NCCL collectives between ranks (bandwidth, latency, contention with "
            "compute across GPUs) are not measured; world size 1 DDP runs its allreduces on "
            "one rank, which NCCL completes without moving data between GPUs")
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown(report))
    return report


def fmt(x, pct=False):
    if x is None:
        return "n/a"
    return f"{100 * x:+.1f} %" if pct else (f"{x:.3f}" if isinstance(x, float) else str(x))


def markdown(rep):
    p = rep.get("provenance", {})
    g = p.get("gpu", {})
    lines = [f"# GPU kit report: {g.get('name', 'no GPU')} (driver {g.get('driver', 'n/a')}, "
             f"torch {p.get('torch', 'n/a')}, NCCL {p.get('nccl', 'n/a')}, {p.get('date_utc', '')})",
             ""]
    host = p.get("host", {})
    if host.get("cpu_model"):  # runs before the kit recorded it have none
        lines += [f"Host: {host['cpu_model']}, {host.get('cpus')} CPUs, load {host.get('load_1min')} "
                  "at the start: the CPU that launches every op", ""]
    lines += ["| tests | passed | failed | skipped |", "| --- | --- | --- | --- |"]
    for name, c in rep.get("gtest", {}).items():
        lines.append(f"| {name} | {c.get('passed')} | {c.get('failed')} | {c.get('skipped')} |")
    lines += ["", "| model | torch eager ms | torch DDP ms | runtime ms | runtime/torch DDP | "
              "runtime replay err | cap1-cap25 per extra bucket us (noise) | fwd err | bwd err | "
              "layer med err f/b | step err (simulate) |", "| --- " * 11 + "|"]
    for m, r in rep.get("models", {}).items():
        t = r["torch"]["median_step_ms"]
        rt = (r.get("runtime") or {}).get("cap25", {}).get("median_step_ms")
        bc = r.get("bucket_cost", {})
        lt = (r.get("layers") or {}).get("totals", {})
        lf = (r.get("layers") or {}).get("forward", {})
        lb = (r.get("layers") or {}).get("backward", {})
        lines.append(
            f"| {m} | {fmt(t.get('eager'))} | {fmt(t.get('ddp-default'))} | {fmt(rt)} | "
            f"{fmt((r.get('runtime_over_torch') or {}).get('ddp_default'))} | "
            f"{fmt((r.get('runtime_replay') or {}).get('error'), True)} | "
            f"{fmt(bc.get('per_extra_bucket_us'))} ({fmt(bc.get('noise_floor'), True)}) | "
            f"{fmt(lt.get('forward_error'), True)} | {fmt(lt.get('backward_error'), True)} | "
            f"{fmt(lf.get('median_abs_error'), True)} / {fmt(lb.get('median_abs_error'), True)} | "
            f"{fmt(lt.get('step_error'), True)} |")
    zs = [(m, r["zero_shot"]) for m, r in rep.get("models", {}).items()
          if "configs" in (r.get("zero_shot") or {})]
    if zs:
        lines += ["", f"Zero-shot (`ddpscope simulate`, world size 1, host profile "
                      f"{zs[0][1]['host_profile']}; measured / predicted ms, error):", "",
                  "| model | fit | " + " | ".join(c for c in zs[0][1]["configs"]) +
                  " | cap1 vs cap25 measured / predicted | DDP - eager ms measured / predicted |",
                  "| --- " * (4 + len(zs[0][1]["configs"])) + "|"]
        for m, z in zs:
            cells = [f"{v['measured_ms']:.2f} / {v['predicted_ms']:.2f} ({fmt(v['error'], True)})"
                     for v in z["configs"].values()]
            cc = z.get("cap1_over_cap25", {})
            do = z.get("ddp_overhead_ms", {})
            lines.append(f"| {m} | {'held out' if z['held_out'] else 'fitted'} | " +
                         " | ".join(cells) + f" | {fmt(cc.get('measured'), True)} / "
                         f"{fmt(cc.get('predicted'), True)} | {fmt(do.get('measured'))} / "
                         f"{fmt(do.get('predicted'))} |")
    for m, r in rep.get("models", {}).items():
        if "error" in (r.get("zero_shot") or {}):
            lines += ["", f"- zero-shot {m}: {r['zero_shot']['error']}"]
    hosts = [(m, r["torch"]) for m, r in rep.get("models", {}).items()
             if r["torch"].get("host_ms")]
    if hosts:
        lines += ["", "Unprofiled host (the timed steps: the host's own time to enqueue forward, "
                      "backward and optimizer, and its share of the step; near 1: host-bound):",
                  "", "| model | configuration | forward ms | backward ms | optimizer ms | "
                      "host step / step |", "| --- " * 6 + "|"]
        for m, t in hosts:
            for name, h in t["host_ms"].items():
                lines.append(f"| {m} | {name} | {fmt(h.get('forward'))} | "
                             f"{fmt(h.get('backward'))} | {fmt(h.get('optimizer'))} | "
                             f"{fmt(h.get('step'))} / {fmt(t['median_step_ms'].get(name))} "
                             f"({fmt((t.get('host_over_step') or {}).get(name))}) |")
        lanes = [(m, name, c) for m, t in hosts
                 for name, c in (t.get("host_lane_vs_measured") or {}).items()]
        if lanes:
            lines += ["", "The host lane's unprofiled host (`replay` of each profiled trace at its "
                          "own settings: its host facts less the profiler's cost) against it, "
                          "measured / predicted ms (error):", "",
                      "| model | configuration | forward | backward | optimizer | total |",
                      "| --- " * 6 + "|"]
            for m, name, c in lanes:
                lines.append(f"| {m} | {name} | " + " | ".join(
                    f"{fmt(c[p]['measured_ms'])} / {fmt(c[p]['predicted_ms'])} "
                    f"({fmt(c[p]['error'], True)})"
                    for p in ("forward", "backward", "optimizer", "total")) + " |")
    carried = [(m, r["cross_gpu"]) for m, r in rep.get("models", {}).items() if r.get("cross_gpu")]
    if carried:
        lines += ["", f"Cross-GPU: the committed H100 traces' kernels carried to this GPU "
                      f"({rep.get('cluster')}; `simulate --compute-from`, each layer by the ratio of "
                      "the two GPUs' rooflines) against this GPU's own, carried / measured ms:", "",
                  "| model | forward | backward | forward + backward |", "| --- " * 4 + "|"]
        for m, c in carried:
            if "error" in c:
                lines.append(f"| {m} | {c['error']} | | |")
                continue
            lines.append(
                f"| {m} | {c['carried_forward_us'] / 1e3:.2f} / {c['measured_forward_us'] / 1e3:.2f} "
                f"({fmt(c['forward_error'], True)}) | {c['carried_backward_us'] / 1e3:.2f} / "
                f"{c['measured_backward_us'] / 1e3:.2f} ({fmt(c['backward_error'], True)}) | "
                f"{fmt(c['total_error'], True)} |")
    if rep.get("batch_what_if"):
        lines += ["", "Batch what-if (`replay --batch` of the default-cap profiled trace, host lane "
                      "without the profiler) against the same model measured at that batch:", "",
                  "| job | trace batch | batch | own step (replayed) ms | measured ms | "
                  "predicted ms | error |", "| --- " * 7 + "|"]
        for k, v in rep["batch_what_if"].items():
            err = v.get("error")
            label = k + (f" ({v['memory_format']})" if v.get("memory_format") else "")
            lines.append(f"| {label} | {v.get('trace_batch')} | {v.get('batch')} | "
                         f"{fmt(v.get('trace_own_unprofiled_ms'))} | {fmt(v.get('measured_ms'))} | "
                         f"{fmt(v.get('predicted_ms'))} | "
                         f"{fmt(err, True) if isinstance(err, (int, float)) else err} |")
    if rep.get("batch_kernels"):
        lines += ["", "Kernels at another batch, module by module (median |error| / error of the "
                      "sum against the variant's own trace; growth: its kernels over the main "
                      "trace's):", "",
                  "| job | pass | modules | kernels: trace / variant ms (growth) | proportional | "
                  "trace scaled | trace's fit | cluster |", "| --- " * 8 + "|"]
        for k, v in rep["batch_kernels"].items():
            if "forward" not in v:
                lines.append(f"| {k} | {v.get('error')} |" + " |" * 6)
                continue
            for phase in ("forward", "backward"):
                r = v[phase]
                med = {n: r[n]["median_abs_error"] for n in r if isinstance(r[n], dict)}
                cells = [f"{'n/a' if med[n] is None else f'{100 * med[n]:.1f} %'} / "
                         f"{fmt(r[n]['sum_error'], True)}"
                         if n in r else v.get(f"{n}_error", "n/a")
                         for n in ("proportional", "trace_scaled", "trace_fit", "cluster")]
                lines.append(f"| {k} | {phase} | {r['modules']} | "
                             f"{r['measured_trace_us'] / 1e3:.2f} / {r['measured_us'] / 1e3:.2f} "
                             f"({r['growth']:.2f}x) | " + " | ".join(cells) + " |")
    if rep.get("numerics"):
        lines += ["", "| numerics (losses of the first steps) | step 1 runtime vs torch | "
                  "max runtime vs torch | max torch vs float64 | max runtime vs float64 |",
                  "| --- | --- | --- | --- | --- |"]
        for k, v in rep["numerics"].items():
            lines.append(f"| {k} | {v['first_loss_runtime_vs_torch']:.2e} | "
                         f"{v['max_runtime_vs_torch']:.2e} | {v['max_torch_vs_fp64']:.2e} | "
                         f"{v['max_runtime_vs_fp64']:.2e} |")
    for n in rep.get("notes", []):
        lines += ["", "- " + n]
    return "\n".join(lines) + "\n"


def compare_expected(report, expected, path=""):
    errs = []
    if isinstance(expected, dict):
        for k, v in expected.items():
            if k not in report:
                errs.append(f"{path}/{k}: missing")
            else:
                errs += compare_expected(report[k], v, f"{path}/{k}")
    elif isinstance(expected, float):
        if not isinstance(report, (int, float)) or \
                abs(report - expected) > 1e-6 * max(1.0, abs(expected)):
            errs.append(f"{path}: {report} != {expected}")
    elif report != expected:
        errs.append(f"{path}: {report!r} != {expected!r}")
    return errs


def check_schema(path):
    with open(os.path.join(HERE, "schema.json")) as f:
        schema = json.load(f)
    doc = load_json(path)
    errs = []
    for key, typ in schema["required"].items():
        if key not in doc:
            errs.append(f"{path}: no field '{key}'")
        elif not isinstance(doc[key], {"string": str, "object": dict, "integer": int,
                                       "number": (int, float), "array": list}[typ]):
            errs.append(f"{path}: field '{key}' is not a {typ}")
    if doc.get("schema") != schema["schema"]:
        errs.append(f"{path}: schema '{doc.get('schema')}', expected '{schema['schema']}'")
    for name, xs in (doc.get("step_ms") or {}).items():
        if not xs or any(not isinstance(x, (int, float)) or x <= 0 or math.isnan(x) for x in xs):
            errs.append(f"{path}: step_ms.{name} holds a value that is not a positive time")
    for name, hs in (doc.get("host_ms") or {}).items():
        steps = (doc.get("step_ms") or {}).get(name) or []
        if len(hs) != len(steps):
            errs.append(f"{path}: host_ms.{name} has {len(hs)} steps, step_ms.{name} {len(steps)}")
            continue
        for h, step in zip(hs, steps):
            if not isinstance(h, list) or len(h) != 4 or \
                    any(not isinstance(x, (int, float)) or x < 0 or math.isnan(x) for x in h):
                errs.append(f"{path}: host_ms.{name} holds {h!r}, not 4 times ≥ 0 "
                            "[forward, backward, optimizer, step]")
                break
            if h[3] > step * 1.001 + 1e-3:
                errs.append(f"{path}: host_ms.{name}: the host's {h[3]} ms exceeds its step's "
                            f"{step} ms")
                break
    if errs:
        raise SystemExit("\n".join(errs))
    print(f"analyze: {path} follows {schema['schema']}")


def check_params(path, zoo_path):
    got = load_json(path)
    zoo = load_json(zoo_path)
    want = [[p["name"], p["shape"]] for p in zoo["parameters"]]
    errs = []
    for i, (g, w) in enumerate(zip(got["parameters"], want)):
        if g != w:
            errs.append(f"parameter {i}: torch {g[0]} {g[1]}, zoo {w[0]} {w[1]}")
            break
    if len(got["parameters"]) != len(want):
        errs.append(f"torch has {len(got['parameters'])} parameters, the zoo {len(want)}")
    if errs:
        raise SystemExit(f"analyze: {path} against {zoo_path}: " + "; ".join(errs))
    print(f"analyze: {got['model']}: {len(want)} parameters equal {os.path.basename(zoo_path)}'s")


ACROSS_CONFIGS = ["eager", "ddp-cap1", "ddp-cap5", "ddp-cap25", "ddp-cap100", "ddp-default"]


def across(runs):
    """Markdown: the zero-shot predictions against the median of several runs' medians.

    One run's median is noise-bound on a host that sets the pace (the same configuration's
    run medians spread by up to 1.5x on the H200 machine), so an error is judged against the
    median of the runs, with their range beside it. The predictions are taken from the runs'
    report.json (`analyze` computed them; they do not depend on the run) and must agree."""
    measured, predicted, held_out = {}, {}, {}
    for run in runs:
        rep = load_json(os.path.join(run, "report.json")) if os.path.exists(
            os.path.join(run, "report.json")) else {}
        for path in sorted(glob.glob(os.path.join(run, "*.json"))):
            job = load_json(path)
            if job.get("schema") != "ddpscope.gpu-kit.torch/1" or job.get("tag"):
                continue
            for config, ms in job.get("median_step_ms", {}).items():
                measured.setdefault(job["model"], {}).setdefault(config, {})[run] = ms
        for model, m in rep.get("models", {}).items():
            z = m.get("zero_shot") or {}
            for config, c in z.get("configs", {}).items():
                old = predicted.setdefault(model, {}).setdefault(config, c["predicted_ms"])
                if abs(old - c["predicted_ms"]) > 1e-6 * max(1.0, old):
                    raise SystemExit(f"analyze.py across: {run}/report.json predicts {model} "
                                     f"{config} at {c['predicted_ms']} ms, another run at {old}: "
                                     "the reports come from different builds")
            if "held_out" in z:
                held_out[model] = z["held_out"]
    if not measured:
        raise SystemExit("analyze.py across: no torch_job.py results (<model>.json) in " +
                         ", ".join(runs))
    names = [os.path.basename(os.path.normpath(r)) for r in runs]
    lines = [f"Zero-shot against the median of {len(runs)} runs ({', '.join(names)}); measured "
             "median (range of the runs' medians) / predicted ms, error:", "",
             "| model | fit | " + " | ".join(ACROSS_CONFIGS) +
             " | cap 1 - cap 25 ms: runs / predicted | DDP - eager ms: runs / predicted |",
             "| --- " * (len(ACROSS_CONFIGS) + 4) + "|"]
    errors = {}
    for model in sorted(measured):
        cells = []
        for config in ACROSS_CONFIGS:
            v = list(measured[model].get(config, {}).values())
            pr = predicted.get(model, {}).get(config)
            if not v:
                cells.append("n/a")
                continue
            med = median(v)
            cell = f"{med:.2f} ({min(v):.2f}-{max(v):.2f})"
            if pr is not None:
                err = rel(pr, med)
                errors.setdefault(model, []).append(abs(err))
                cell += f" / {pr:.2f} ({100 * err:+.1f} %)"
            cells.append(cell)

        def per_run(a, b):
            ra, rb = measured[model].get(a, {}), measured[model].get(b, {})
            return [ra[r] - rb[r] for r in runs if r in ra and r in rb]

        def pred_diff(a, b):
            pa, pb = predicted.get(model, {}).get(a), predicted.get(model, {}).get(b)
            return "n/a" if pa is None or pb is None else f"{pa - pb:.2f}"
        for a, b in (("ddp-cap1", "ddp-cap25"), ("ddp-default", "eager")):
            d = per_run(a, b)
            cells.append((", ".join(f"{x:.2f}" for x in d) or "n/a") + " / " + pred_diff(a, b))
        fit = {True: "held out", False: "fitted"}.get(held_out.get(model), "n/a")
        lines.append(f"| {model} | {fit} | " + " | ".join(cells) + " |")
    lines.append("")
    for model, errs in sorted(errors.items()):
        lines.append(f"- {model}: mean |error| {100 * sum(errs) / len(errs):.1f} % over "
                     f"{len(errs)} configurations")
    return "\n".join(lines)


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    verb, out = argv[1], argv[2]
    if verb == "across":
        print(across(argv[2:]))
        return
    opts = dict(zip(argv[3::2], argv[4::2]))
    if verb == "provenance":
        provenance(out, opts.get("--kit", ""), opts.get("--mode", "gpu"))
    elif verb == "analyze":
        t0 = time.time()
        rep = analyze(out, opts.get("--ddpscope", "ddpscope"))
        print(markdown(rep))
        print(f"analyze: {time.time() - t0:.1f} s")
        if "--expect" in opts:
            errs = compare_expected(rep, load_json(opts["--expect"]))
            if errs:
                raise SystemExit("analyze: the report differs from " + opts["--expect"] + ":\n  " +
                                 "\n  ".join(errs))
            print("analyze: report equals " + opts["--expect"])
    elif verb == "check-schema":
        check_schema(out)
    elif verb == "check-params":
        if "--zoo" not in opts:
            raise SystemExit("analyze.py check-params FILE --zoo ZOO.json")
        check_params(out, opts["--zoo"])
    else:
        raise SystemExit(f"analyze.py: unknown verb '{verb}'")


if __name__ == "__main__":
    main(sys.argv)

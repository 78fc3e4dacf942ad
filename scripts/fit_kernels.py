#!/usr/bin/env python3
"""Fit a GPU's per-layer kernel times on real PyTorch profiler traces (device.kernel_fit).

  fit_kernels.py --ddpscope BIN [--kit DIR] [--cluster FILE] [--transfer-to FILE]...
                 [--write] [--check] [--report FILE] [--markdown FILE]

Input: a GPU kit run (scripts/gpu-kit; default tests/data/gpu/h100/run1): per model its job file
(<model>.json: batch, shape, dtype) and its profiled DDP trace (<model>-ddp-default-rank0.json.gz).
Per model, the measured forward and backward kernel time of every module (scripts/gpu_kit/
analyze.py layer_times: kernels attributed to the module range of their launch, backward ones
through the autograd sequence number) is set against `ddpscope simulate --json`'s layers of the
zoo model at the job's batch and dtype: their op class (kernel_class), FLOPs and bytes. Simulated
layers are timed with the module that runs them (analyze.py layer_groups).

Fit, per op class and pass: time = floor_us + FLOPs / (tflops x 1e12) for matmul, conv and
attention, floor_us + bytes / (GBps x 1e9) for the rest (the cast class: a floor per kernel; the
batchnorm class: bytes / (GBps x min(1, channels / (channels_per_sm x SMs))), channels_per_sm the
whole blocks per SM, 0-4, that fit best: PyTorch's BatchNorm kernels give a channel one block), by
least squares on the relative error
over the modules whose layers are all of that class, both terms non-negative (else the rate alone).
A class and pass with fewer than MIN_SAMPLES modules is not fitted (the simulator falls back).

Autocast's casts: a matrix product or convolution under autocast casts its fp32 parameters and
fp32 input to the half dtype (forward) and their gradients back (backward), each a copy kernel in
its module (analyze.py CAST_KERNEL); the simulator times them as kernels of their own, the cast
class (`simulate --json`'s per-pass "cast": kernels, bytes). So the matmul and conv classes are
fitted on their modules' kernels without the casts, and the cast class on the casts against the
cast bytes (the modules where the simulator gives some and the trace ran some). Two groups of
casts, two classes: a module's fp32 parameters (its weight and bias) are the cast class, fitted
on the modules that cast no input; an fp32 input (a LayerNorm's output; in backward its gradient,
a tensor as large as the activations) is the cast_input class, fitted on what the modules that
cast one ran beyond their parameters' casts as the cast class times them.

A bias's gradient: a matrix product with a bias sums its output gradient over the tokens in
backward, a reduction kernel (analyze.py BIAS_GRAD_KERNEL) of 13-33 us a Linear in the
transformers' traces that a FLOP rate would learn as a floor (and charge to llama-small's
bias-free projections too). The bias_grad class is fitted on those reductions against the bytes
of the output gradient (simulate --json's backward "bias_grad"), and the matrix products'
backward without them.

Gradient sums: where a tensor has several readers, autograd adds their gradients in the backward
node of the reader that delivers the second (analyze.py GRADIENT_SUM_KERNEL); the simulator
charges those sums to the Add layer whose input the shared tensor is (autocastAddBackward) and
times them as elementwise kernels. So every module's measured backward here is without them
(bert-base: 48 sums, 1.08 ms per step, in its query, key, value and intermediate Linears), else
the reader's class would learn them and the step count them twice. The exception is an
embedding's: the sum of a tied weight's two gradients (gpt2-small's wte), which no layer charges.

Evaluation, through the product: the cluster file with the fit (in-sample: fitted on every model)
and with a fit on all models but one (held out: predicting the one left out), each run by
`ddpscope simulate --cluster FILE`; per model and pass the median absolute per-module error and
the error of the sum, beside the roofline alone. The script also checks that the simulator's
per-layer times equal the fit's formula (the C++ and this script read the fit the same way).

  --transfer-to  another cluster file of the same GPU architecture: --write writes it the fit
              carried over through the devices' specs (a FLOP-timed class keeps its fraction of
              the dtype's peak, a byte-timed one its fraction of the memory bandwidth, PyTorch's
              own bf16 BatchNorm kernels go by the SM count, floors as measured: the simulator's
              transferKernelFit), --check checks it
  --write     write the fit into the cluster file's device.kernel_fit
  --check     exit 1 unless the cluster file's device.kernel_fit equals the fit of the traces
              (and the --markdown file equals the table, instead of writing it)
  --self-test --check must fail on a cluster whose fit differs by one term
  --report    the evaluation as JSON; --markdown as a Markdown table
Standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "gpu_kit"))
import analyze  # noqa: E402  (scripts/gpu_kit/analyze.py)

MIN_SAMPLES = 3
PASSES = ("forward", "backward")
FLOP_CLASSES = ("matmul", "conv", "attention")


def load_kit(kit):
    """[(model, job, measured per module)] for every bf16 job with a profiled DDP trace."""
    runs = []
    for name in sorted(os.listdir(kit)):
        path = os.path.join(kit, name)
        if not name.endswith(".json"):
            continue
        try:
            job = analyze.load_json(path)
        except (ValueError, OSError, UnicodeDecodeError):
            continue
        if not isinstance(job, dict) or job.get("schema") != "ddpscope.gpu-kit.torch/1":
            continue
        trace = job.get("traces", {}).get("ddp-default")
        if not trace or not os.path.exists(os.path.join(kit, trace)):
            continue
        measured, _totals, _steps = analyze.layer_times(os.path.join(kit, trace))
        runs.append((job["model"], job, measured))
    if not runs:
        sys.exit(f"fit_kernels.py: {kit}: no GPU kit job with a profiled DDP trace")
    dtypes = {job["dtype"] for _m, job, _x in runs}
    if len(dtypes) != 1:
        sys.exit(f"fit_kernels.py: {kit}: jobs at more than one dtype ({sorted(dtypes)})")
    return runs


CAST_OWNERS = ("matmul", "conv")


def cast_bytes(layer, phase, key="bytes"):
    """A layer pass's autocast cast bytes (simulate --json's "cast"): all of them ("bytes") or
    the fp32 input's ("input_bytes")."""
    return ((layer.get(phase) or {}).get("cast") or {}).get(key, 0.0)


def param_cast_bytes(layer, phase):
    return cast_bytes(layer, phase) - cast_bytes(layer, phase, "input_bytes")


def bias_bytes(layer):
    """The bytes of a layer's bias-gradient reduction in backward (simulate --json's "bias_grad")."""
    return ((layer.get("backward") or {}).get("bias_grad") or {}).get("bytes", 0.0)


def bias_us(measured, owner):
    """The measured time of a module's reductions in backward (analyze.layer_times)."""
    return measured.get(owner, {}).get("backward_bias", 0.0)


def param_cast_kernels(layer, phase):
    """The parameters' cast kernels of a layer pass (the input's is one more where it has one)."""
    cast = (layer.get(phase) or {}).get("cast") or {}
    return cast.get("kernels", 0) - (1 if cast.get("input_bytes", 0) > 0 else 0)


def term_us(term, work, kernels=1):
    """A fit term's time (us) for `work` FLOPs or bytes in `kernels` kernels (a floor each: the
    cast class; the other classes' floor is the pass's); 0 for no work."""
    if work <= 0:
        return 0.0
    rate = term["tflops"] * 1e12 if "tflops" in term else term["GBps"] * 1e9
    return kernels * term["floor_us"] + work / rate * 1e6


def casts_us(measured, owner, phase):
    """The measured time of a module's autocast casts in a pass (analyze.layer_times)."""
    return measured.get(owner, {}).get(phase + "_casts", 0.0)


def samples(groups, kernel_class, phase, measured_by_owner, cast_term=None, bias_apart=False):
    """(work, measured us) per module whose simulated layers are all of `kernel_class`; work is
    FLOPs for the FLOP-timed classes, bytes for the rest. A matrix product's or convolution's
    kernels without its casts (casts_us of `measured_by_owner`); the cast class: the casts of
    those modules that cast no input, against their cast bytes; cast_input: of those that do,
    what their casts took beyond their parameters' as `cast_term` times them, against the
    input's cast bytes; bias_grad: the backward reductions of the modules whose layers have a
    bias, against the bytes of its gradient's reduction. With `bias_apart` (bias_grad is fitted)
    a matrix product's or convolution's backward is also without those reductions."""
    key = "flops" if kernel_class in FLOP_CLASSES else "bytes"
    out = []
    for owner, p, measured, layers in groups:
        classes = {x["kernel_class"] for x in layers}
        if p != phase or len(classes) != 1:
            continue
        cls = classes.pop()
        casts = casts_us(measured_by_owner, owner, phase) if cls in CAST_OWNERS else 0.0
        bias = (sum(bias_bytes(x) for x in layers) if cls in CAST_OWNERS and phase == "backward"
                else 0.0)
        if kernel_class == "bias_grad":
            if bias > 0 and bias_us(measured_by_owner, owner) > 0:
                out.append((bias, bias_us(measured_by_owner, owner)))
            continue
        if kernel_class in ("cast", "cast_input"):
            if cls not in CAST_OWNERS or casts <= 0:
                continue
            params = sum(param_cast_bytes(x, phase) for x in layers)
            inputs = sum(cast_bytes(x, phase, "input_bytes") for x in layers)
            if kernel_class == "cast" and params > 0 and inputs == 0:
                out.append((params, casts, sum(param_cast_kernels(x, phase) for x in layers)))
            elif kernel_class == "cast_input" and inputs > 0 and cast_term is not None:
                beyond = casts - sum(term_us(cast_term, param_cast_bytes(x, phase),
                                             param_cast_kernels(x, phase)) for x in layers)
                if beyond > 0:
                    out.append((inputs, beyond))
        elif cls == kernel_class:
            own = measured - casts - (bias_us(measured_by_owner, owner)
                                      if bias_apart and bias > 0 else 0.0)
            if own > 0:
                work = sum((x.get(phase) or {}).get(key, 0.0) for x in layers)
                # a BatchNorm's layer rides along: its channels set the share of the rate
                out.append((work, own, 1, layers[0]) if cls == "batchnorm" else (work, own))
    return out


def fit_term(points):
    """floor (us) and seconds per unit of work minimising sum(((n*floor + a*w) / t - 1)^2), both
    >= 0, over points (w, t) or (w, t, n) (n: how many floors the sample pays, 1 when absent); the
    slope alone when the joint fit would make either negative."""
    rows = [(p[2] if len(p) > 2 else 1, p[0], p[1]) for p in points]
    # Normal equations of the 2-variable weighted least squares (rows [n/t, w/t], target 1).
    s11 = sum((n / t) ** 2 for n, _w, t in rows)
    s12 = sum(n * w / t ** 2 for n, w, t in rows)
    s22 = sum(w * w / t ** 2 for _n, w, t in rows)
    b1 = sum(n / t for n, _w, t in rows)
    b2 = sum(w / t for _n, w, t in rows)
    det = s11 * s22 - s12 * s12
    if det > 0:
        floor = (b1 * s22 - b2 * s12) / det
        slope = (s11 * b2 - s12 * b1) / det
        if floor >= 0 and slope > 0:
            return floor, slope
    return 0.0, b2 / s22


# A batchnorm term's channels_per_sm, tried in turn: 0 (none) or whole blocks per SM.
CHANNELS_PER_SM = (0, 1, 2, 3, 4)


def channel_share(layer, channels_per_sm, sm_count):
    """The share of a batchnorm term's rate a BatchNorm layer reaches: PyTorch gives a channel
    one block, so fewer channels than channels_per_sm x SMs leave SMs idle."""
    c = layer.get("num_features", 0)
    if not channels_per_sm or not c or not sm_count:
        return 1.0
    return min(1.0, c / (channels_per_sm * sm_count))


def relative_sse(points, floor, slope):
    return sum(((n * floor + slope * w) / t - 1) ** 2 for w, t, n in points)


def fit(groups_by_model, measured_by_model, models, dtype, source, sm_count):
    groups = [g for m in models for g in groups_by_model[m]]
    measured = {o: v for m in models for o, v in measured_by_model[m].items()}
    result = {"dtype": dtype, "source": source}
    for kernel_class in ("bias_grad", "matmul", "conv", "attention", "norm", "batchnorm",
                         "elementwise", "embedding", "pool", "cast", "cast_input"):
        terms = {}
        for phase in PASSES:
            if kernel_class == "bias_grad" and phase == "forward":
                continue
            cast_term = fitted_term(result, "cast", phase) if kernel_class == "cast_input" else None
            points = samples(groups, kernel_class, phase, measured, cast_term,
                             bias_apart="backward" in result.get("bias_grad", {}))
            if len(points) < MIN_SAMPLES:
                continue
            best = None
            for k in (CHANNELS_PER_SM if kernel_class == "batchnorm" else (0,)):
                # a layer's bytes over the share of the rate it reaches: the work at full rate
                pts = ([(w / channel_share(layer, k, sm_count), t, 1) for w, t, _n, layer in points]
                       if kernel_class == "batchnorm" else points)
                floor, slope = fit_term(pts)
                pts = [p if len(p) > 2 else (p[0], p[1], 1) for p in pts]
                sse = relative_sse(pts, floor, slope)
                if best is None or sse < best[0] - 1e-9:
                    best = (sse, k, floor, slope)
            _sse, k, floor, slope = best
            rate = 1e6 / slope / (1e12 if kernel_class in FLOP_CLASSES else 1e9)  # slope: us/unit
            terms[phase] = {"floor_us": float(f"{floor:.4g}"),
                            ("tflops" if kernel_class in FLOP_CLASSES else "GBps"):
                                float(f"{rate:.5g}")}
            if k:
                terms[phase]["channels_per_sm"] = k
        if terms:
            result[kernel_class] = terms
    return result


def simulated(ddpscope, model, job, cluster):
    """simulate --json's layers of the zoo model (analyze.simulated_layers), each with its
    num_features from the model file where it has one (a BatchNorm's channels)."""
    layers = analyze.simulated_layers(ddpscope, model, job, cluster)[0]
    with open(os.path.join(ROOT, "models", "zoo", model + ".json")) as f:
        attrs = {x["name"]: x.get("attrs", {}) for x in json.load(f)["layers"]}
    for layer in layers:
        c = attrs.get(layer["name"], {}).get("num_features")
        if c:
            layer["num_features"] = c
    return layers


def cluster_with(base, kernel_fit, directory, name):
    cluster = json.loads(json.dumps(base))
    if kernel_fit is None:
        cluster["device"].pop("kernel_fit", None)
    else:
        cluster["device"]["kernel_fit"] = kernel_fit
    path = os.path.join(directory, name + ".json")
    with open(path, "w") as f:
        json.dump(cluster, f)
    return path


def evaluate(measured, sim_layers):
    """Per pass: modules, median absolute error, error of the sum."""
    out = {}
    for phase in PASSES:
        rows = [(m, sum(analyze.layer_us(x, phase) for x in layers))
                for _o, p, m, layers in analyze.layer_groups(measured, sim_layers) if p == phase]
        errs = [abs(s - m) / m for m, s in rows]
        total_m = sum(m for m, _s in rows)
        total_s = sum(s for _m, s in rows)
        out[phase] = {"modules": len(rows),
                      "median_abs_error": round(statistics.median(errs), 4),
                      "sum_error": round((total_s - total_m) / total_m, 4),
                      "measured_us": round(total_m, 1), "predicted_us": round(total_s, 1)}
    return out


FALLBACK = {"conv": "matmul", "attention": "matmul", "pool": "elementwise", "cast": "elementwise",
            "cast_input": "cast"}


def fitted_term(kernel_fit, cls, phase):
    while cls and (phase not in kernel_fit.get(cls, {})):
        cls = FALLBACK.get(cls)
    return kernel_fit[cls][phase] if cls else None


def formula_us(kernel_fit, layer, phase, sm_count):
    """A layer pass's time under `kernel_fit` as FORMAT.md states it (its autocast casts
    included); None when not fitted."""
    k = layer.get(phase) or {}
    term = fitted_term(kernel_fit, layer["kernel_class"], phase)
    if term is None:
        return None
    if k.get("flops", 0) == 0 and k.get("bytes", 0) == 0:
        return 0.0
    if "tflops" in term:
        us = term["floor_us"] + k["flops"] / (term["tflops"] * 1e12) * 1e6
    else:
        share = (channel_share(layer, term.get("channels_per_sm", 0), sm_count)
                 if layer["kernel_class"] == "batchnorm" else 1.0)
        us = term["floor_us"] + k["bytes"] / (term["GBps"] * share * 1e9) * 1e6
    for cls, work, kernels in (
            ("cast", param_cast_bytes(layer, phase), param_cast_kernels(layer, phase)),
            ("cast_input", cast_bytes(layer, phase, "input_bytes"), 1)):
        if work > 0:
            cast = fitted_term(kernel_fit, cls, phase)
            if cast is None:
                return None
            us += term_us(cast, work, kernels)
    bias = fitted_term(kernel_fit, "bias_grad", phase) if phase == "backward" else None
    if bias is not None and bias_bytes(layer) > 0:
        us += term_us(bias, bias_bytes(layer))
    return us


def check_formula(kernel_fit, sim_layers, model, sm_count):
    worst = 0.0
    for layer in sim_layers:
        for phase in PASSES:
            want = formula_us(kernel_fit, layer, phase, sm_count)
            if want is None:
                continue
            if layer[phase].get("timed_by") != "kernel fit" and want > 0:
                sys.exit(f"fit_kernels.py: {model} {layer['name']} {phase}: simulate did not "
                         f"time it by the kernel fit ({layer[phase].get('timed_by')})")
            worst = max(worst, abs(analyze.layer_us(layer, phase) - want))
    if worst > 0.002:  # ns rounding of two terms
        sys.exit(f"fit_kernels.py: {model}: simulate's layer times differ from the fit's formula "
                 f"by up to {worst:.4f} us")


def write_cluster(path, kernel_fit):
    """Replace (or add) device.kernel_fit in the cluster file, keeping the rest of its text."""
    with open(path) as f:
        text = f.read()
    rows = [f'"{k}": {json.dumps(v)}' for k, v in kernel_fit.items()]
    block = "{\n      " + ",\n      ".join(rows) + "\n    }"
    start = text.find('"kernel_fit": {')
    if start >= 0:
        depth, end = 0, start + len('"kernel_fit": ')
        for i in range(end, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                end = i + 1
                break
        text = text[:start] + '"kernel_fit": ' + block + text[end:]
    else:
        anchor = text.index('"launch_overhead_us"')
        line_end = text.index("\n", anchor)
        text = text[:line_end] + ',\n    "kernel_fit": ' + block + text[line_end:]
    with open(path, "w") as f:
        f.write(text)


def by_class(measured, sim_layers):
    """Per op class (the modules whose layers are all of one class) and pass: modules, median
    signed error, measured and predicted sums: where the fit is still off. The matrix products'
    and convolutions' autocast casts also on their own ("cast"), where the trace ran some."""
    rows = {}
    for owner, phase, m, layers in analyze.layer_groups(measured, sim_layers):
        classes = {x["kernel_class"] for x in layers}
        if len(classes) != 1:
            continue
        s = sum(analyze.layer_us(x, phase) for x in layers)
        cls = classes.pop()
        rows.setdefault(f"{cls} {phase}", []).append((m, s))
        bm = bias_us(measured, owner) if phase == "backward" else 0.0
        bs = sum(((x.get(phase) or {}).get("bias_grad") or {}).get("time_ns", 0) / 1e3
                 for x in layers)
        if cls in CAST_OWNERS and bm > 0 and bs > 0:
            rows.setdefault(f"bias_grad {phase}", []).append((bm, bs))
        cm = casts_us(measured, owner, phase)
        if cls in CAST_OWNERS and cm > 0:
            cs = sum(((x.get(phase) or {}).get("cast") or {}).get("time_ns", 0) / 1e3
                     for x in layers)
            rows.setdefault(f"cast {phase}", []).append((cm, cs))
    return {key: {"modules": len(v),
                  "median_error": round(statistics.median((s - m) / m for m, s in v), 4),
                  "measured_us": round(sum(m for m, _s in v), 1),
                  "predicted_us": round(sum(s for _m, s in v), 1)}
            for key, v in sorted(rows.items())}


def markdown(report):
    lines = ["| model | pass | modules | roofline median / sum | in-sample fit median / sum | "
             "held out median / sum |", "|---|---|---|---|---|---|"]
    pct = lambda x: f"{100 * x:+.1f} %"  # noqa: E731
    med = lambda x: f"{100 * x:.1f} %"  # noqa: E731
    for model, r in report["models"].items():
        for phase in PASSES:
            a, b, c = r["roofline"][phase], r["in_sample"][phase], r["held_out"][phase]
            lines.append(f"| {model} | {phase} | {a['modules']} | {med(a['median_abs_error'])} / "
                         f"{pct(a['sum_error'])} | {med(b['median_abs_error'])} / "
                         f"{pct(b['sum_error'])} | {med(c['median_abs_error'])} / "
                         f"{pct(c['sum_error'])} |")
    lines += ["", "In sample, per op class (modules whose layers are all of one class): median "
              "signed error, measured and predicted sums.", "",
              "| model | class and pass | modules | median error | measured us | predicted us |",
              "|---|---|---|---|---|---|"]
    for model, r in report["models"].items():
        for key, c in r["in_sample_by_class"].items():
            lines.append(f"| {model} | {key} | {c['modules']} | {pct(c['median_error'])} | "
                         f"{c['measured_us']:.0f} | {c['predicted_us']:.0f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ddpscope", required=True)
    ap.add_argument("--kit", default=os.path.join(ROOT, "tests/data/gpu/h100/run1"))
    ap.add_argument("--cluster", default=os.path.join(ROOT, "sim/cost/clusters/dgx-h100.json"))
    ap.add_argument("--transfer-to", action="append", default=[])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--report")
    ap.add_argument("--markdown")
    args = ap.parse_args()

    runs = load_kit(args.kit)
    models = [m for m, _j, _x in runs]
    dtype = runs[0][1]["dtype"]
    gpu = runs[0][1]["device"].get("name", "GPU")
    torch = runs[0][1]["device"].get("torch", "?")
    kit = os.path.relpath(os.path.abspath(args.kit), ROOT)
    source = (f"scripts/fit_kernels.py on {kit}: PyTorch {torch} profiler traces of "
              f"{', '.join(models)} DDP steps on one {gpu}, {dtype} autocast")
    with open(args.cluster) as f:
        base = json.load(f)

    with tempfile.TemporaryDirectory() as tmp:
        roofline = cluster_with(base, None, tmp, "roofline")
        sims = {m: simulated(args.ddpscope, m, job, roofline)
                for m, job, _x in runs}
        measured = {m: analyze.own_kernels(x, sims[m]) for m, _j, x in runs}
        groups = {m: analyze.layer_groups(measured[m], sims[m]) for m in models}
        sm_count = base["device"].get("sm_count", 0)
        full = fit(groups, measured, models, dtype, source, sm_count)
        report = {"source": source, "min_samples": MIN_SAMPLES, "kernel_fit": full, "models": {}}
        in_sample = cluster_with(base, full, tmp, "in-sample")
        for m, job, _x in runs:
            x = measured[m]
            held = fit(groups, measured, [o for o in models if o != m], dtype, source, sm_count)
            held_path = cluster_with(base, held, tmp, "held-out-" + m)
            fitted = simulated(args.ddpscope, m, job, in_sample)
            check_formula(full, fitted, m, sm_count)
            held_layers = simulated(args.ddpscope, m, job, held_path)
            check_formula(held, held_layers, m, sm_count)
            report["models"][m] = {"roofline": evaluate(x, sims[m]),
                                   "in_sample": evaluate(x, fitted),
                                   "in_sample_by_class": by_class(x, fitted),
                                   "held_out": evaluate(x, held_layers),
                                   "held_out_fit": held}

    if args.self_test:
        planted = json.loads(json.dumps(full))
        planted["matmul"]["forward"]["floor_us"] += 1
        if fit_differs(planted, full) is None or fit_differs(full, full) is not None:
            sys.exit("fit_kernels.py: self-test: --check does not see a changed term")
        print("self-test passed: --check fails on a fit with one term changed")
        return
    table = markdown(report)
    if args.report and not args.check:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    if args.markdown and args.check:
        with open(args.markdown) as f:
            if f.read() != table:
                sys.exit(f"fit_kernels.py: {args.markdown} differs from the evaluation (run "
                         f"scripts/fit_kernels.py --markdown {args.markdown})")
    elif args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)
    print(table, end="")
    targets = []
    for path in args.transfer_to:
        with open(path) as f:
            target = json.load(f)
        targets.append((path, target, transfer(full, base["device"], target["device"],
                                               base["name"])))
    if args.write:
        write_cluster(args.cluster, full)
        print(f"wrote device.kernel_fit into {args.cluster}")
        for path, _target, carried in targets:
            write_cluster(path, carried)
            print(f"wrote the fit carried over into {path}")
    if args.check:
        error = fit_differs(base["device"].get("kernel_fit"), full)
        if error:
            sys.exit(f"fit_kernels.py: {args.cluster}: device.kernel_fit differs from the fit of "
                     f"{kit} (run scripts/fit_kernels.py --write): {error}")
        print(f"{args.cluster}: device.kernel_fit equals the fit of {kit}")
        for path, target, carried in targets:
            error = fit_differs(target["device"].get("kernel_fit"), carried)
            if error:
                sys.exit(f"fit_kernels.py: {path}: device.kernel_fit differs from {base['name']}'s "
                         f"fit carried over (run scripts/fit_kernels.py --write): {error}")
            print(f"{path}: device.kernel_fit equals {base['name']}'s fit carried over")


def transfer(kernel_fit, source_device, target_device, source_name):
    """The fit re-expressed for another GPU at the fit's dtype (transferKernelFit's rule)."""
    dtype = kernel_fit["dtype"]
    if source_device.get("arch") != target_device.get("arch"):
        sys.exit(f"fit_kernels.py: --transfer-to: {target_device.get('name')} is "
                 f"{target_device.get('arch')}, the fit's GPU {source_device.get('arch')}: a fit "
                 "carries over within one architecture only")
    flop_scale = target_device["peak_tflops"][dtype] / source_device["peak_tflops"][dtype]
    byte_scale = target_device["memory_GBps"] / source_device["memory_GBps"]
    # PyTorch's own BatchNorm kernels (bf16: one block per channel) by the SM count, within the
    # architecture (transferKernelFit's rule).
    sm_scale = target_device["sm_count"] / source_device["sm_count"]
    own_batchnorm = dtype == "bf16" and "batchnorm" in kernel_fit
    out = {"dtype": dtype,
           "source": f"{source_name}'s fit carried over through peak and memory bandwidth"
                     f"{', batchnorm by the SM count' if own_batchnorm else ''} "
                     f"(scripts/fit_kernels.py --transfer-to; not measured on this GPU)"}
    for cls, passes in kernel_fit.items():
        if cls in ("dtype", "source"):
            continue
        out[cls] = {}
        for phase, term in passes.items():
            if "tflops" in term:
                out[cls][phase] = {"floor_us": term["floor_us"],
                                   "tflops": float(f"{term['tflops'] * flop_scale:.5g}")}
            else:
                scale = sm_scale if cls == "batchnorm" and own_batchnorm else byte_scale
                out[cls][phase] = {"floor_us": term["floor_us"],
                                   "GBps": float(f"{term['GBps'] * scale:.5g}")}
                if "channels_per_sm" in term:  # blocks per SM: the kernels', not the GPU's
                    out[cls][phase]["channels_per_sm"] = term["channels_per_sm"]
    return out


def fit_differs(have, want):
    """None when equal, else what differs first."""
    if have == want:
        return None
    if not isinstance(have, dict):
        return "the cluster has no device.kernel_fit"
    for key in sorted(set(have) | set(want)):
        if have.get(key) != want.get(key):
            return f"{key}: have {json.dumps(have.get(key))}, want {json.dumps(want.get(key))}"
    return "differs"


if __name__ == "__main__":
    main()

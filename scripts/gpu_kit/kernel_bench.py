#!/usr/bin/env python3
"""Kernel times of single layers on a shape grid: what a per-op kernel model is fitted on.

  kernel_bench.py --out DIR [--device cuda|cpu] [--dtype bf16|fp32] [--reps N]
                  [--families a,b,...] [--quick] [--limit-s S]

Every case is one module or functional op as the GPU kit's models run it (fp32 parameters, bf16
autocast on a GPU; the input in the dtype a layer of those models receives), run `--reps` times
forward and backward inside torch.profiler, each pass in its own record_function range. A
kernel (or memcpy/memset) belongs to the range its launch was issued in, by the profiler's
correlation id; backward launches come from the autograd thread while the main thread's range
is open, so ranges are matched by time, not thread. Per case and pass the file keeps the kernel
time of every repetition (us), the kernels per repetition and the most common kernel names.
On CPU (--device cpu, the rehearsal) there are no kernels: the range's own time is kept.

The shapes are a grid chosen to span the kit's models (token counts 256-16384, widths 256-4096,
vocabularies, ResNet's channels and image sizes) without being their layers: the models' own
layers are what a fitted model is checked against.

Output: DIR/kernel-bench.json (format "ddpscope-kernel-bench", version 1). Needs torch only.
"""
import argparse
import bisect
import collections
import gzip
import json
import os
import random
import statistics
import sys
import tempfile
import time

FORMAT = "ddpscope-kernel-bench"
VERSION = 1
FAMILIES = ("linear", "conv2d", "batchnorm2d", "relu", "gelu", "gelu_tanh", "silu_mul", "add",
            "cast", "layernorm", "rmsnorm", "sdpa", "embedding", "cross_entropy", "maxpool2d",
            "copy")
KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


PARTS = ("grid", "supplement", "stems")


def grid(family, quick, rng, parts=PARTS):
    """The cases of one family: a list of dicts of shape parameters (the first H200 run's grid,
    then the supplements added after it)."""
    cases = []
    if "grid" in parts:
        cases += main_grid(family, rng)
    if "supplement" in parts:
        cases += supplement(family)
    if "stems" in parts:
        cases += stems(family)
    if quick:  # the CPU rehearsal: the two smallest cases, shrunk
        cases = [shrink(c) for c in cases[:2]]
    return cases


def main_grid(family, rng):
    if family == "linear":
        ms = [256, 1024, 2048, 4096, 6304, 8192, 16384]
        ws = [256, 768, 1024, 2048, 3072, 4096]
        cases = [dict(m=m, k=k, n=n, bias=1) for m in ms for k in ws for n in ws]
        cases += [dict(m=m, k=768, n=v, bias=0) for m in (1024, 4096, 8192)
                  for v in (30522, 32000, 50257)]
        cases += [dict(m=m, k=k, n=n, bias=0) for m in (2048, 8192) for k in (768, 2048)
                  for n in (768, 2048)]
        return cases
    if family == "conv2d":
        kinds = [(3, 64, 7, 2), (64, 64, 1, 1), (64, 64, 3, 1), (64, 256, 1, 1), (256, 64, 1, 1),
                 (128, 128, 3, 1), (128, 128, 3, 2), (128, 512, 1, 1), (512, 128, 1, 1),
                 (256, 256, 3, 1), (256, 256, 3, 2), (256, 1024, 1, 1), (1024, 256, 1, 1),
                 (512, 512, 3, 1), (512, 2048, 1, 1), (2048, 512, 1, 1), (256, 512, 1, 2),
                 (512, 1024, 1, 2), (96, 96, 3, 1), (3, 768, 16, 16), (192, 192, 3, 2),
                 (32, 32, 3, 1), (1024, 2048, 1, 2), (384, 384, 1, 1)]
        cases = []
        for cin, cout, k, s in kinds:
            for h in (8, 14, 20, 28, 40, 56, 80, 112, 224):
                for n in (8, 16, 32, 64):
                    # activations up to 2^28 elements; the 7x7 and 16x16 stems see images only
                    if max(cin, cout) * n * h * h > 2 ** 28 or (k >= 7 and h < 112):
                        continue
                    if k < 7 and h > 112:
                        continue
                    cases.append(dict(n=n, cin=cin, cout=cout, k=k, stride=s, h=h))
        rng.shuffle(cases)
        return sorted(cases[:170], key=lambda c: (c["cin"], c["cout"], c["k"], c["h"], c["n"]))
    if family == "batchnorm2d":
        return [dict(n=n, c=c, h=h) for n in (16, 32, 64) for c in (64, 128, 256, 512, 1024, 2048)
                for h in (7, 14, 28, 56, 112) if n * c * h * h <= 2 ** 27]
    if family in ("relu", "gelu", "gelu_tanh", "silu_mul", "add", "cast"):
        return [dict(numel=2 ** e) for e in range(14, 29)]
    if family in ("layernorm", "rmsnorm"):
        return [dict(m=m, d=d) for m in (512, 1024, 2048, 4096, 8192, 16384)
                for d in (512, 768, 1024, 2048, 4096)]
    if family == "sdpa":
        return [dict(b=b, h=h, s=s, d=64, causal=c) for b in (4, 8, 16, 32) for h in (12, 16)
                for s in (128, 197, 256, 512, 1024) for c in (0, 1)]
    if family == "embedding":
        return [dict(v=v, d=d, tokens=t) for v in (512, 30522, 32000, 50257) for d in (768, 1024)
                for t in (1024, 4096, 8192)]
    if family == "cross_entropy":
        return [dict(m=m, v=v) for m in (256, 1024, 4096, 8192)
                for v in (1000, 30522, 32000, 50257)]
    if family == "maxpool2d":
        return [dict(n=n, c=c, h=h) for n in (16, 32, 64) for c in (64, 128) for h in (56, 112)]
    if family == "copy":
        return []
    raise SystemExit(f"kernel_bench.py: unknown family {family!r} (known: {', '.join(FAMILIES)})")


def supplement(family):
    """Cases added after the first H200 run: inputs in fp32 (a LayerNorm's output or a residual
    stream under autocast: the activation's cast is the layer's too) or mixed, layout copies
    (heads split or merged), and the stems at full image size (the first grid capped them by
    their widest activation, which left ViT's 16x16 patch embedding out)."""
    if family == "linear":
        return ([dict(m=m, k=k, n=n, bias=1, x="fp32") for m in (1024, 4096, 6304, 8192, 16384)
                 for k in (768, 1024, 3072, 4096) for n in (768, 1024, 3072, 4096)] +
                [dict(m=m, k=768, n=n, bias=0, x="fp32") for m in (1024, 4096, 8192)
                 for n in (768, 2048, 32000, 50257)])
    if family == "conv2d":
        return [dict(n=n, cin=3, cout=cout, k=k, stride=s, h=224)
                for cout, k, s in ((768, 16, 16), (768, 14, 14), (64, 7, 2))
                for n in (8, 16, 32, 64)]
    if family == "add":  # residual streams in fp32: both inputs, or one of them
        return [dict(numel=2 ** e, x=x) for x in ("fp32", "mixed") for e in range(14, 29)]
    if family == "copy":  # heads split or merged: a transposed activation made contiguous
        return [dict(numel=(2 ** e // 49152) * 49152) for e in range(16, 29)]
    if family in ("layernorm", "rmsnorm"):
        return [dict(m=m, d=d, x="fp32") for m in (512, 1024, 2048, 4096, 8192, 16384)
                for d in (512, 768, 1024, 2048, 4096)]
    return []


def stems(family):
    """The first layer's convolutions as a model runs them: its input (the images) needs no
    gradient, so the backward computes the weight's gradient only (the second H200 supplement)."""
    if family == "conv2d":
        return [dict(n=n, cin=3, cout=cout, k=k, stride=s, h=224, input_grad=0)
                for cout, k, s in ((768, 16, 16), (64, 7, 2)) for n in (8, 16, 32, 64)]
    return []


def shrink(case):
    small = {"m": 8, "k": 16, "n": 16, "numel": 256, "h": 8, "c": 4, "cin": 3, "cout": 4,
             "d": 16, "s": 8, "b": 1, "tokens": 8, "v": 32}
    return {k: (min(v, small[k]) if k in small else v) for k, v in case.items()}


def build(torch, family, c, device, act):
    """(module or None, inputs, call): `call(module, *inputs)` runs the forward. `act` is the
    dtype of the activations the models hand a layer (bf16 under autocast)."""
    nn, F = torch.nn, torch.nn.functional

    def t(*shape, dtype=act, grad=True):
        x = torch.randn(*shape, device=device, dtype=dtype)
        return x.requires_grad_(grad)

    xdt = torch.float32 if c.get("x") in ("fp32", "mixed") else act

    if family == "linear":
        mod = nn.Linear(c["k"], c["n"], bias=bool(c["bias"])).to(device)
        return mod, [t(c["m"], c["k"], dtype=xdt)], lambda m, x: m(x)
    if family == "conv2d":
        pad = c["k"] // 2 if c["stride"] != c["k"] else 0
        mod = nn.Conv2d(c["cin"], c["cout"], c["k"], stride=c["stride"], padding=pad,
                        bias=False).to(device)
        # the stem sees fp32 images, every other convolution the previous layer's activations
        dtype = torch.float32 if c["cin"] == 3 else act
        x = t(c["n"], c["cin"], c["h"], c["h"], dtype=dtype, grad=bool(c.get("input_grad", 1)))
        return mod, [x], lambda m, x: m(x)
    if family == "batchnorm2d":
        mod = nn.BatchNorm2d(c["c"]).to(device)
        return mod, [t(c["n"], c["c"], c["h"], c["h"])], lambda m, x: m(x)
    if family == "maxpool2d":
        mod = nn.MaxPool2d(3, stride=2, padding=1)
        return mod, [t(c["n"], c["c"], c["h"], c["h"])], lambda m, x: m(x)
    if family == "relu":
        return None, [t(c["numel"])], lambda m, x: F.relu(x)
    if family == "gelu":
        return None, [t(c["numel"])], lambda m, x: F.gelu(x)
    if family == "gelu_tanh":
        return None, [t(c["numel"])], lambda m, x: F.gelu(x, approximate="tanh")
    if family == "silu_mul":
        return None, [t(c["numel"]), t(c["numel"])], lambda m, a, b: F.silu(a) * b
    if family == "add":
        first = act if c.get("x") == "mixed" else xdt
        return None, [t(c["numel"], dtype=first), t(c["numel"], dtype=xdt)], lambda m, a, b: a + b
    if family == "copy":
        n = c["numel"]
        return None, [t(max(1, n // 49152), 64, 12, 64)], \
            lambda m, x: x.transpose(1, 2).contiguous()
    if family == "cast":  # what autocast does to an fp32 tensor a bf16 op reads
        return None, [t(c["numel"], dtype=torch.float32)], lambda m, x: x.to(act)
    if family == "layernorm":
        mod = nn.LayerNorm(c["d"]).to(device)
        return mod, [t(c["m"], c["d"], dtype=xdt)], lambda m, x: m(x)
    if family == "rmsnorm":
        if not hasattr(nn, "RMSNorm"):
            return None
        mod = nn.RMSNorm(c["d"]).to(device)
        return mod, [t(c["m"], c["d"], dtype=xdt)], lambda m, x: m(x)
    if family == "sdpa":
        if not hasattr(F, "scaled_dot_product_attention"):  # torch < 2.0
            return None
        q, k, v = (t(c["b"], c["h"], c["s"], c["d"]) for _ in range(3))
        return None, [q, k, v], lambda m, a, b, cc: F.scaled_dot_product_attention(
            a, b, cc, is_causal=bool(c["causal"]))
    if family == "embedding":
        mod = nn.Embedding(c["v"], c["d"]).to(device)
        idx = torch.randint(0, c["v"], (c["tokens"],), device=device)
        return mod, [idx], lambda m, i: m(i)
    if family == "cross_entropy":
        # the models' loss: the logits in the activation dtype, cast to fp32 first
        y = torch.randint(0, c["v"], (c["m"],), device=device)
        return None, [t(c["m"], c["v"]), y], lambda m, x, yy: F.cross_entropy(x.float(), yy)
    raise AssertionError(family)


def attribute(events, prefix="kb:"):
    """Kernel time per record_function range named prefix...: {name: [(us, count, {kernel:
    count})] per occurrence in order}. A kernel belongs to the range in which its launch (a
    runtime or driver call with the same correlation id) was issued; ranges are matched by time
    on any thread (backward launches run on the autograd thread)."""
    ranges = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                    if e.get("ph") == "X" and e.get("cat", "user_annotation") == "user_annotation"
                    and e.get("name", "").startswith(prefix))
    starts = [r[0] for r in ranges]
    owner = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in LAUNCH_CATS:
            continue
        corr = (e.get("args") or {}).get("correlation")
        i = bisect.bisect_right(starts, e["ts"]) - 1
        if corr is not None and i >= 0 and e["ts"] <= ranges[i][1]:
            owner[corr] = i
    sums = [[0.0, 0, collections.Counter()] for _ in ranges]
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in KERNEL_CATS:
            continue
        i = owner.get((e.get("args") or {}).get("correlation"))
        if i is not None:
            sums[i][0] += float(e.get("dur", 0))
            sums[i][1] += 1
            sums[i][2][e.get("name", "")] += 1
    out = collections.OrderedDict()
    for (a, b, name), (us, n, names) in zip(ranges, sums):
        out.setdefault(name, []).append({"us": us, "kernels": n, "names": names, "range_us": b - a})
    return out


def load_trace(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    # Kineto writes {"traceEvents": [...]}; a torch without Kineto (Debian's 1.13) a bare list
    return doc if isinstance(doc, list) else doc.get("traceEvents", [])


def run_family(torch, family, cases, device, act, reps, deadline):
    """Measure every case of one family in one profiler session; returns the case records."""
    from torch.profiler import ProfilerActivity, profile, record_function
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    autocast = (torch.autocast(device_type="cuda", dtype=act) if device.type == "cuda" and
                act != torch.float32 else None)

    def forward(mod, call, inputs):
        if autocast is None:
            return call(mod, *inputs)
        with torch.autocast(device_type="cuda", dtype=act):
            return call(mod, *inputs)

    def clear(mod, inputs):
        for x in inputs:
            if x.is_floating_point():
                x.grad = None
        if mod is not None:
            for p in mod.parameters():
                p.grad = None

    kept, done = [], []
    with profile(activities=activities) as prof:
        for idx, c in enumerate(cases):
            if time.monotonic() > deadline:
                break
            try:
                built = build(torch, family, c, device, act)
                if built is None:
                    continue
                mod, inputs, call = built
                y = forward(mod, call, inputs)  # warm: algorithm choice, workspace, caches
                g = torch.randn_like(y)
                y.backward(g)
                clear(mod, inputs)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                for r in range(reps):
                    with record_function(f"kb:{idx}:forward"):
                        y = forward(mod, call, inputs)
                    with record_function(f"kb:{idx}:backward"):
                        y.backward(g)
                    clear(mod, inputs)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                kept.append((idx, c))
            except RuntimeError as err:  # out of memory included: that case is reported
                done.append({"family": family, "shape": c, "error": str(err).splitlines()[0][:200]})
            finally:
                built = mod = inputs = call = y = g = None
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        by_range = attribute(load_trace(path))
    for idx, c in kept:
        rec = {"family": family, "shape": c}
        for phase in ("forward", "backward"):
            occ = by_range.get(f"kb:{idx}:{phase}", [])
            names = collections.Counter()
            for o in occ:
                names.update(o["names"])
            rec[phase] = {
                "kernel_us": [round(o["us"], 3) for o in occ] if device.type == "cuda" else None,
                "kernels": (round(statistics.median([o["kernels"] for o in occ]), 1)
                            if occ and device.type == "cuda" else None),
                "range_us": [round(o["range_us"], 1) for o in occ],
                "names": [n for n, _ in names.most_common(4)],
            }
        done.append(rec)
    return done


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for kernel-bench.json")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"),
                    help="bf16: autocast with fp32 parameters, as the kit's models run")
    ap.add_argument("--reps", type=int, default=7, help="repetitions of each pass (default 7)")
    ap.add_argument("--families", default=",".join(FAMILIES),
                    help="comma-separated families (default: all)")
    ap.add_argument("--quick", action="store_true", help="two tiny cases per family (rehearsal)")
    ap.add_argument("--limit-s", type=float, default=100.0,
                    help="stop starting new cases after this many seconds (default 100)")
    ap.add_argument("--parts", default=",".join(PARTS),
                    help="which cases: grid (the first H200 run's), supplement (fp32 and mixed "
                         "inputs, layout copies, the stems at full image size), stems (the first "
                         "convolution without an input gradient); default all")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    import torch
    if args.reps < 1:
        ap.error("--reps: give at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: this torch sees no CUDA device (rehearse with --device cpu)")
    device = torch.device(args.device)
    act = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    if args.device == "cpu":
        act = torch.float32  # the rehearsal: no autocast on CPU
    parts = [p for p in args.parts.split(",") if p]
    for p in parts:
        if p not in PARTS:
            ap.error(f"--parts: unknown part {p!r} (known: {', '.join(PARTS)})")
    families = [f for f in args.families.split(",") if f]
    for f in families:
        if f not in FAMILIES:
            ap.error(f"--families: unknown family {f!r} (known: {', '.join(FAMILIES)})")
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    deadline = t0 + args.limit_s
    cases = []
    for f in families:
        fam_cases = grid(f, args.quick, rng, parts)
        recs = run_family(torch, f, fam_cases, device, act, args.reps, deadline)
        cases += recs
        print(f"kernel_bench: {f}: {len(recs)} of {len(fam_cases)} cases "
              f"({time.monotonic() - t0:.1f} s)", flush=True)
    doc = {
        "format": FORMAT, "version": VERSION,
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "torch": torch.__version__, "dtype": args.dtype,
        "autocast": args.device == "cuda" and args.dtype == "bf16",
        "reps": args.reps, "seconds": round(time.monotonic() - t0, 1),
        "complete": time.monotonic() <= deadline, "cases": cases,
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "kernel-bench.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=0, sort_keys=True)
        f.write("\n")
    print(f"kernel_bench: {len(cases)} cases in {doc['seconds']} s -> {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Tests models/export/torch_export.py against the zoo and against real PyTorch 1.13 records.

Usage: export_test.py DDPSCOPE_BINARY
Exit 0 = pass, 1 = failure, 77 = skipped (torch or torchvision not importable; ctest
SKIP_RETURN_CODE). Also used as a module by the CLI check (`unsupported_factory`).
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SKIP = 77
CLUSTER = "dgx-a100"

try:
    import torch
    import torch.nn as nn
except ImportError as e:  # pragma: no cover - depends on the machine
    if __name__ == "__main__":
        print("SKIP: cannot import torch (%s); install python3-torch" % e)
        sys.exit(SKIP)
    raise

sys.path.insert(0, os.path.join(ROOT, "models", "export"))
from torch_export import ExportError, export_model  # noqa: E402

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what)


def zoo(name):
    with open(os.path.join(ROOT, "models", "zoo", name + ".json")) as f:
        return json.load(f)


def model_ready_order(spec):
    """ModelSpec::gradReadyOrder() (models/FORMAT.md) computed from a model file's layers."""
    names = [p["name"] for p in spec["parameters"]]
    first_owner = {}
    for li, layer in enumerate(spec["layers"]):
        for p in layer.get("params", []):
            first_owner.setdefault(p, li)
    order = []
    for li in reversed(range(len(spec["layers"]))):
        layer = spec["layers"][li]
        for p in layer.get("grad_ready_order", layer.get("params", [])):
            if first_owner[p] == li:
                order.append(p)
    owned = set(first_owner)
    order += [n for n in reversed(names) if n not in owned]
    return [names.index(n) for n in order]


class Unsupported(nn.Module):
    """Owns a parameter directly: ddpscope cannot cost it."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return x * self.scale


def unsupported_factory():
    return nn.Sequential(nn.Linear(3, 4), Unsupported())


def mlp_tiny_factory():
    # models/zoo/gen_zoo.py: mlp("mlp-tiny", ..., 20, [10, 50, 1])
    return nn.Sequential(nn.Linear(10, 50), nn.ReLU(), nn.Linear(50, 1))


def compare_with_zoo(exported, zoo_spec, recorded):
    name = zoo_spec["name"]
    check(exported["parameters"] == zoo_spec["parameters"], name + ": parameters differ from zoo")
    zoo_layers = {l["name"]: l for l in zoo_spec["layers"]}
    with_params = [l for l in exported["layers"] if l.get("params")]
    check(len(with_params) == sum(1 for l in zoo_spec["layers"] if l.get("params")),
          name + ": number of layers with parameters differs from zoo")
    for layer in exported["layers"]:
        z = zoo_layers.get(layer["name"])
        check(z is not None, "%s: layer %s not in the zoo" % (name, layer["name"]))
        if z is None:
            continue
        for key in ("type", "params", "grad_ready_order", "attrs"):
            if key == "attrs":
                continue  # the zoo writes a few extra attrs (inplace); costs are what matter
            check(layer.get(key) == z.get(key),
                  "%s: layer %s %s: exported %s, zoo %s" % (name, layer["name"], key,
                                                            layer.get(key), z.get(key)))
        for key in ("flops", "bytes", "backward_flops"):
            a, b = layer.get(key), z.get(key)
            same = (a is None and b is None) or (
                a is not None and b is not None and a.keys() == b.keys() and
                all(abs(a[k] - b[k]) <= 1e-9 * max(1.0, abs(b[k])) for k in a))
            check(same, "%s: layer %s %s: exported %s, zoo %s" % (name, layer["name"], key, a, b))
    # The measured model-level ready order equals the zoo's (FORMAT.md rule), equals what the
    # exported layers imply, and equals real PyTorch 1.13's recorded order.
    check(exported["grad_ready_order"] == model_ready_order(zoo_spec),
          name + ": gradient-ready order differs from the zoo's")
    check(exported["grad_ready_order"] == model_ready_order(exported),
          name + ": top-level order differs from the order its layers imply")
    if recorded is not None:
        check(exported["grad_ready_order"] == recorded["grad_ready_order"],
              name + ": gradient-ready order differs from tests/data/pytorch-1.13-buckets.json")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def check_cli_loads(ddpscope, path, zoo_name):
    # (`ddpscope models` lists the zoo only; simulate loads and costs every layer.)
    r = run([ddpscope, "simulate", "--model", path, "--cluster", CLUSTER, "--world-size",
             "2", "--iterations", "3", "--json"])
    check(r.returncode == 0 and json.loads(r.stdout).get("step_time_ns", 0) > 0,
          "ddpscope simulate --model %s: rc %d: %s" % (path, r.returncode, r.stderr))
    for cap in ("1", "25"):
        a = run([ddpscope, "buckets", "--model", path, "--bucket-cap-mb", cap, "--json"])
        b = run([ddpscope, "buckets", "--model", zoo_name, "--bucket-cap-mb", cap, "--json"])
        check(a.returncode == 0, "ddpscope buckets --model %s: rc %d: %s"
              % (path, a.returncode, a.stderr))
        if a.returncode == 0 and b.returncode == 0:
            pa, pb = json.loads(a.stdout), json.loads(b.stdout)
            check(pa.get("buckets") == pb.get("buckets"),
                  "%s: bucket plan at cap %s MiB differs from the zoo model's" % (path, cap))
        # The exported file doubles as a --ready-order-file.
        c = run([ddpscope, "buckets", "--model", path, "--bucket-cap-mb", cap,
                 "--ready-order-file", path, "--json"])
        check(c.returncode == 0 and json.loads(c.stdout).get("buckets") ==
              json.loads(a.stdout).get("buckets") if a.returncode == 0 else False,
              "%s: --ready-order-file with the exported order gives another plan" % path)


def main():
    if len(sys.argv) != 2:
        print("usage: export_test.py DDPSCOPE_BINARY", file=sys.stderr)
        return 2
    ddpscope = sys.argv[1]
    try:
        import torchvision
    except ImportError as e:
        print("SKIP: cannot import torchvision (%s); install python3-torchvision" % e)
        return SKIP
    with open(os.path.join(ROOT, "tests", "data", "pytorch-1.13-buckets.json")) as f:
        recorded = json.load(f)["models"]
    tmp = tempfile.mkdtemp(prefix="ddpscope-export-test-")

    torch.manual_seed(0)
    mlp = export_model(mlp_tiny_factory(), torch.randn(20, 10), "mlp-tiny", measure=True,
                       repeat=3)
    compare_with_zoo(mlp, zoo("mlp-tiny"), recorded.get("tiny_mlp"))
    check(all("forward_ms" in l.get("measured", {}) for l in mlp["layers"]),
          "mlp-tiny --measure: every layer has measured.forward_ms")
    check(all(l["measured"]["forward_ms"] >= 0 for l in mlp["layers"] if "measured" in l),
          "mlp-tiny --measure: forward times are non-negative")
    mlp_path = os.path.join(tmp, "mlp-tiny.json")
    with open(mlp_path, "w") as f:
        json.dump(mlp, f)
    check_cli_loads(ddpscope, mlp_path, "mlp-tiny")

    # resnet18 at 2 images of 224x224: the polynomials scale to the zoo's batch 32.
    resnet = export_model(torchvision.models.resnet18(), torch.randn(2, 3, 224, 224),
                          "resnet18")
    compare_with_zoo(resnet, zoo("resnet18"), recorded.get("resnet18"))
    resnet_path = os.path.join(tmp, "resnet18.json")
    with open(resnet_path, "w") as f:
        json.dump(resnet, f)
    check_cli_loads(ddpscope, resnet_path, "resnet18")

    # Unsupported module: the library error and the CLI's (exit 2, message on stderr).
    expected = ("module '1' (Unsupported) owns parameters scale directly and is not a supported "
                "layer type")
    try:
        export_model(unsupported_factory(), torch.randn(2, 3), "bad")
        check(False, "unsupported module: no ExportError raised")
    except ExportError as e:
        check(str(e).startswith(expected), "unsupported module message: %s" % e)
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = run([sys.executable, os.path.join(ROOT, "models", "export", "torch_export.py"),
             "--module", "export_test:unsupported_factory", "--input-shape", "2,3", "-o",
             os.path.join(tmp, "bad.json")], env=env)
    check(r.returncode == 2, "CLI on an unsupported module: rc %d (expected 2)" % r.returncode)
    check(("torch_export: error: " + expected) in r.stderr, "CLI stderr: " + r.stderr)
    r = run([sys.executable, os.path.join(ROOT, "models", "export", "torch_export.py"),
             "--module", "export_test:mlp_tiny_factory", "--input-shape", "20,x", "-o",
             os.path.join(tmp, "x.json")], env=env)
    check(r.returncode == 2 and "--input-shape: expected positive integers" in r.stderr,
          "CLI bad --input-shape: rc %d, %s" % (r.returncode, r.stderr))
    r = run([sys.executable, os.path.join(ROOT, "models", "export", "torch_export.py"),
             "--module", "export_test:mlp_tiny_factory", "--input-shape", "20,10", "-o",
             os.path.join(tmp, "cli.json")], env=env)
    check(r.returncode == 0, "CLI export of mlp-tiny: rc %d, %s" % (r.returncode, r.stderr))
    r = run([sys.executable, os.path.join(ROOT, "models", "export", "torch_export.py"),
             "--module", "export_test:mlp_tiny_factory", "--input-shape", "20,10", "--output",
             os.path.join(tmp, "old.json")], env=env)
    check(r.returncode == 0 and "--output is deprecated and goes in the next release; use --out"
          in r.stderr and os.path.exists(os.path.join(tmp, "old.json")),
          "CLI export with the old --output: rc %d, %s" % (r.returncode, r.stderr))

    # models/export/kineto_trace.py: a profile of this (Kineto-less) torch imports.
    import kineto_trace
    model = mlp_tiny_factory()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
                                record_shapes=True) as prof:
        for _ in range(4):
            opt.zero_grad()
            model(torch.randn(20, 10)).sum().backward()
            opt.step()
            prof.step()
    trace_path = os.path.join(tmp, "rank0.json.gz")
    kineto_trace.export(prof, trace_path, rank=0, world_size=1, backend="none")
    r = run([ddpscope, "import-torch", trace_path, "-o", os.path.join(tmp, "run.json"),
             "--model", mlp_path, "--json"])
    check(r.returncode == 0, "import-torch of a kineto_trace.export file: rc %d, %s"
          % (r.returncode, r.stderr))
    if r.returncode == 0:
        summary = json.loads(r.stdout)
        check(summary["iterations"] == 2 and summary["median_step_ns"] > 0,
              "import-torch of a kineto_trace.export file: %s" % r.stdout)

    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("OK: mlp-tiny and resnet18 exports equal the zoo (parameters, layers, costs, ready "
          "order) and PyTorch 1.13's recorded ready orders; files load in ddpscope")
    return 0


if __name__ == "__main__":
    sys.exit(main())

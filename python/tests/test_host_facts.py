"""scripts/gpu_kit/host_facts.py on the H100 kit's profiled traces: it reproduces the committed
tests/data/gpu/h100/host_facts.json byte for byte (what the built-in host profile h100-torch211 is
fitted on, docs/spec/host-lane.md), and the facts it states hold in it."""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "gpu_kit", "host_facts.py")
COMMITTED = os.path.join(ROOT, "tests", "data", "gpu", "h100", "host_facts.json")


def test_the_facts_reproduce_the_committed_file(tmp_path):
    out = tmp_path / "host_facts.json"
    subprocess.run([sys.executable, SCRIPT, "-o", str(out)], check=True, cwd=ROOT,
                   stderr=subprocess.DEVNULL)
    with open(COMMITTED, "rb") as f:
        assert out.read_bytes() == f.read()


def test_every_zoo_layer_and_parameter_is_accounted_for():
    with open(COMMITTED) as f:
        models = json.load(f)["models"]
    parameters = {"resnet50": 161, "gpt2-small": 148, "bert-base": 199}
    for model, count in parameters.items():
        with open(os.path.join(ROOT, "models", "zoo", model + ".json")) as f:
            layers = [l["name"] for l in json.load(f)["layers"]]
        for step in models[model]["steps"]:
            assert set(layers) <= set(step["layers"]), model
            assert step["terms"]["accumulate_grad"]["count"] == count, model
            assert step["terms"]["accumulate_grad_inner"]["count"] == count, model
            # every module call was seen, and the profiled step is at least its host work
            assert step["module_calls"] > len(layers) / 2, model
            assert step["step_us"] > step["terms"]["ddp_forward"]["host_us"], model

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


def test_the_h200_facts_reproduce_with_the_command_they_record(tmp_path):
    """The H200 facts (the held-out host fit's input) are what their recorded command writes:
    run1's traces, the unprofiled medians of runs 1-3 only (run4 ran on another host's CPU)."""
    committed = os.path.join(ROOT, "tests", "data", "gpu", "h200", "host_facts.json")
    with open(committed) as f:
        command = json.load(f)["command"].split()
    assert command[:2] == ["python3", "scripts/gpu_kit/host_facts.py"]
    assert "--timing-runs" in command
    out = tmp_path / "host_facts.json"
    subprocess.run([sys.executable, SCRIPT, "-o", str(out)] + command[2:], check=True, cwd=ROOT,
                   stderr=subprocess.DEVNULL)
    with open(committed, "rb") as f:
        assert out.read_bytes() == f.read()


def test_a_timing_run_that_is_not_there_is_refused_by_name(tmp_path):
    r = subprocess.run([sys.executable, SCRIPT, "-o", str(tmp_path / "f.json"), "--timing-runs",
                        "run1,run9", os.path.join("tests", "data", "gpu", "h200", "run1")],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    assert "--timing-runs: no run folder run9 beside" in r.stderr


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


def test_the_state_queries_are_the_documented_ones():
    """The runtime calls host_facts.py counts as events but not as launches are the "state
    query" rows of docs/spec/trace-formats.md, which KinetoImportTest.
    RuntimeCallTableIsTheDocumentedOne holds equal to the C++ reader's table: one list for
    both readers, including the names the kit's traces do not have (HIP's)."""
    sys.path.insert(0, os.path.dirname(SCRIPT))
    import host_facts  # noqa: E402
    with open(os.path.join(ROOT, "docs", "spec", "trace-formats.md")) as f:
        documented = {line.split("`")[1] for line in f
                      if line.startswith("| `") and "| state query |" in line}
    assert len(documented) == 18
    assert host_facts.RUNTIME_QUERIES == documented

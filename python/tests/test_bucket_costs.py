"""tests/data/hta/measure_bucket_costs.py on the real traces (HTA's, external data, and the H100
kit's): it reproduces the committed bucket_costs.json byte for byte (the numbers
docs/spec/bucket-costs.md quotes), and the facts the document rests on hold in it."""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "tests", "data", "hta", "measure_bucket_costs.py")
COMMITTED = os.path.join(ROOT, "tests", "data", "hta", "bucket_costs.json")


def test_the_measurement_reproduces_the_committed_numbers(tmp_path, external):
    for name in ("resnet_2gpu_rank0", "trace_diff_8gpu_rank3", "sampled_128gpu_rank0",
                 "sampled_128gpu_rank1"):
        external("hta/%s.json.gz" % name)
    out = tmp_path / "bucket_costs.json"
    subprocess.run([sys.executable, SCRIPT, "-o", str(out)], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    with open(COMMITTED, "rb") as f:
        assert out.read_bytes() == f.read()


def test_one_copy_in_and_one_copy_back_per_parameter_on_the_h100():
    with open(COMMITTED) as f:
        traces = json.load(f)["traces"]
    parameters = {"resnet50": 161, "gpt2-small": 148, "bert-base": 199}
    for model, count in parameters.items():
        trace = traces["tests/data/gpu/h100/run1/%s-ddp-default-rank0.json.gz" % model]
        assert trace["per_step"], model
        for step in trace["per_step"]:
            assert step["copy_in_n"] == count, model
            assert step["copy_back_n"] == count, model
            assert sum(b["copy_back_n"] for b in step["per_bucket"]) == count, model

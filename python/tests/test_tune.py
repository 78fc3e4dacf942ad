"""ddpscope.torch.tune on real 2-rank gloo DDP jobs (tune_job.py) with the installed torch.

The decisions are tested on effects far larger than this host's noise: a layout with hundreds of
one-tensor buckets against sane caps (5-10x per step here), never a threshold near the noise.
"""

import json
import os
import subprocess
import sys

import jsonschema
import pytest

import ddpscope

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch without gloo", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCHEMA = os.path.join(ROOT, "docs", "schemas", "tune-report.schema.json")


def _job(out, case):
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(ddpscope.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    r = subprocess.run([sys.executable, os.path.join(HERE, "tune_job.py"), str(out), "--case",
                        case], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(out, "result.json")) as f:
        return json.load(f)


def _report(out, name="report.json"):
    with open(os.path.join(out, name)) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def poor(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune-poor")
    return out, _job(out, "poor")


@pytest.fixture(scope="module")
def nothing(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune-nothing")
    return out, _job(out, "nothing")


@pytest.fixture(scope="module")
def schema():
    with open(SCHEMA) as f:
        return json.load(f)


def test_poor_layout_moves_to_a_faster_one(poor):
    out, result = poor
    assert result["initial_buckets"] > 200  # bucket_cap_mb=0.0001: a bucket per tensor
    assert result["switched"] and not result["same_object"]
    report = _report(out)
    chosen = report["candidates"][report["decision"]["chosen"]]
    assert not chosen["current"] and chosen["eligible"]
    assert chosen["buckets"] < 20
    assert chosen["rounds_faster"] == report["decision"]["rounds"]
    assert chosen["measured_step_ms"] < report["candidates"][0]["measured_step_ms"]
    # The proposal came from the recorded run, with a prediction for every candidate. Its
    # buckets had several sizes (DDP's 1 MiB first bucket and one 128x128 weight each), so it
    # was recorded once.
    assert report["prediction"] == ("predicted by ddpscope plan --from-trace on the 6 recorded "
                                    "steps (cpu-mpi's model calibrated on the run's own "
                                    "collectives)")
    assert report["steps"]["record"] == 2 + report["settings"]["record_steps"]
    assert all(c["predicted_step_ms"] > 0 for c in report["candidates"])
    assert result["paste"] == report["decision"]["paste"]
    assert result["paste"].startswith("DistributedDataParallel(model, bucket_cap_mb")
    steps = report["steps"]
    assert steps["total"] == steps["record"] + steps["warmup"] + steps["measured"]


def test_every_rank_continues_with_the_same_settings(poor, nothing):
    for _, result in (poor, nothing):
        ranks = result["ranks"]
        assert len(ranks) == 2
        assert ranks[0] == ranks[1]


def test_nothing_helps_keeps_the_settings(nothing):
    out, result = nothing
    assert not result["switched"] and result["same_object"]
    report = _report(out)
    assert report["decision"]["chosen"] == 0 and report["decision"]["confidence"] is None
    assert report["decision"]["reason"].startswith("kept the current settings: no candidate")
    assert report["decision"]["paste"] == "DistributedDataParallel(model)"
    worse = report["candidates"][1]
    assert worse["ddp_kwargs"]["bucket_cap_mb"] == 0.0001 and not worse["eligible"]
    assert worse["predicted_step_ms"] is None  # given by the caller: not predicted
    # One parameter tensor: every layout is the same single bucket, so nothing is measured
    # against it.
    assert result["single_candidates"] == 1
    assert not result["single_switched"] and result["single_same_object"]
    assert result["single_reason"] == "kept the current settings: nothing else to try"
    # Its one bucket is one message size: alone, the recording cannot tell a call's fixed cost
    # from its bandwidth, so a second layout (cap 1: the job runs DDP's 25) was recorded and
    # calibrated with it.
    single = _report(out, "single.json")
    assert single["prediction"] == (
        "predicted by ddpscope plan --from-trace on the 6 recorded steps (cpu-mpi's model "
        "calibrated on the run's own collectives and on a second recording at bucket_cap_mb=1: "
        "the first one's buckets of >= 64 KiB had one size)")
    assert single["steps"]["record"] == 2 * (2 + single["settings"]["record_steps"])


def test_the_cli_opens_the_report(poor, nothing, cli):
    for out, paste in ((poor[0], poor[1]["paste"]), (nothing[0], "DistributedDataParallel(model)")):
        r = cli.run("tune-report", os.path.join(out, "report.json"))
        assert r.returncode == 0, r.stderr
        assert "next time: " + paste in r.stdout
        assert "decision: " in r.stdout


def test_reports_validate_against_the_schema(poor, nothing, schema):
    for out, name in ((poor[0], "report.json"), (nothing[0], "report.json"),
                      (nothing[0], "single.json")):
        jsonschema.validate(_report(out, name), schema)
    # The schema is strict enough to fail: a report without its decision, a candidate with a
    # field the format does not have.
    broken = _report(poor[0])
    del broken["decision"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    broken = _report(poor[0])
    broken["candidates"][1]["ddp_kwargs"]["lr"] = 0.1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_tuned_run_trains_the_same_model(tmp_path):
    # At world size 2 each averaged gradient is (a + b) * 0.5 whatever the bucket layout: the
    # sum of two floats does not depend on their order and scaling by 0.5 is exact, so the
    # noise floor between layouts is zero and the comparison is bitwise. The job has buffers
    # (BatchNorm), an unused branch (find_unused_parameters) and no_sync accumulation.
    result = _job(tmp_path, "equal")
    assert result["trained"]
    assert result["tuning_steps"] > 0
    assert result["differing"] == [[], []]
    assert result["max_abs_diff"] == 0.0
    assert result["unused_grad_none"]


def test_refusals_name_their_reason(tmp_path):
    r = _job(tmp_path, "refuse")
    p = "ddpscope.torch.tune: "
    assert r["compiled"] == p + (
        "a compiled model (torch.compile): re-wrapping it in a new DDP per candidate would "
        "recompile it each time; tune the eager model, then compile the result")
    assert r["not_ddp"] == p + "expected a DistributedDataParallel model, got Deep"
    assert r["rounds"] == p + "rounds: expected an integer >= 1, got 0"
    assert r["candidate_key"] == p + (
        "candidates[0]: lr cannot be tuned (only bucket_cap_mb, bucket_cap_mb_list, "
        "gradient_as_bucket_view, static_graph)")
    assert r["stateful_hook"].startswith(p) and "powerSGD_hook" in r["stateful_hook"]
    assert r["parameters_change"] == p + (
        "the module's parameters changed during a step (added, removed, replaced or reshaped): "
        "a DDP wrapper built before cannot reduce them; tune a job whose parameters stay the "
        "same")


def test_api_errors_before_any_collective():
    with pytest.raises(TypeError):
        ddpscope.torch.tune()  # noqa: the two positional arguments are required
    with pytest.raises(ddpscope.torch.TuneError, match="expected a DistributedDataParallel"):
        ddpscope.torch.tune(torch.nn.Linear(2, 2), lambda m: None)


def test_the_guide_states_the_wins_the_sign_test_needs():
    # docs/tuning.md's "Decide" lists the rounds a candidate must win at alpha 0.05
    import re
    from ddpscope import tune as t
    with open(os.path.join(ROOT, "docs", "tuning.md"), encoding="utf-8") as f:
        text = " ".join(f.read().split())
    listed = re.search(r"p ≤ `alpha` \(0\.05; ([^)]*)\)", text).group(1)
    pairs = [tuple(int(x) for x in m) for m in re.findall(r"(\d+) of (\d+)", listed)]
    assert len(pairs) == 5
    for wins, rounds in pairs:
        needed = next(w for w in range(rounds + 1) if t._sign_test_p(w, rounds) <= 0.05)
        assert wins == needed, (wins, rounds)

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
    for ranks in (poor[1]["ranks"], nothing[1]["ranks"], poor[1]["confirmed_ranks"]):
        assert len(ranks) == 2
        assert ranks[0] == ranks[1]


def test_confirmation_rounds_decide_when_the_first_rounds_cannot(poor):
    # tune_job.py --case poor tunes a bucket-per-tensor layout a second time with one first
    # round (a sign test of one round cannot reject) and six confirmation rounds: DDP's default
    # cap, several times faster, leads the first round and wins the confirmation.
    out, result = poor
    assert result["confirmed_switched"]
    report = _report(out, "confirmed.json")
    d = report["decision"]
    assert report["settings"]["rounds"] == 1 and report["settings"]["confirm_rounds"] == 6
    assert d["rounds"] == 1 and d["rounds_needed"] is None and d["chosen"] == 1
    conf = d["confirmation"]
    assert conf["rounds"] == 6 and conf["rounds_needed"] == 6
    assert [f["candidate"] for f in conf["candidates"]] == [1]
    assert conf["candidates"][0]["rounds_faster"] == 6 and conf["candidates"][0]["eligible"]
    assert d["reason"].startswith(
        "bucket_cap_mb=25 was faster than the current settings in 6 of 6 confirmation rounds "
        "(one-sided sign test p = 0.0156 <= 0.05)")
    assert ("; in the first 1 rounds no candidate beat them in enough rounds (the sign test at "
            "alpha 0.05 cannot reject with 1 rounds)") in d["reason"]
    assert d["confidence"] == pytest.approx(1 - 1 / 64)
    # the first round's figures stay with the candidates; the steps count both stages
    assert len(report["candidates"][1]["ratio_to_current"]) == 1
    assert report["steps"]["measured"] == 1 * 3 * 3 + 6 * 3 * 3
    # the first tune, decided in its own rounds, has no confirmation
    assert _report(out)["decision"]["confirmation"] is None


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
    for out, name in ((poor[0], "report.json"), (poor[0], "confirmed.json"),
                      (nothing[0], "report.json"), (nothing[0], "single.json")):
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
    assert r["confirm_rounds"] == p + "confirm_rounds: expected an integer >= 0, got -1"
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


def _candidates(*labels):
    return [{"label": label, "current": i == 0} for i, label in enumerate(labels)]


def test_the_leaders_of_undecided_first_rounds_are_measured_again():
    from ddpscope import tune as t
    cands = _candidates("current", "a", "b", "c", "d")
    cur = [100.0] * 8
    # a: 9 % faster in the median but in only 5 of 8 rounds; b: 3 % faster; c: slower; d: 0.5 %
    # faster, under min_gain
    a = [91.0] * 5 + [102.0] * 3
    b = [97.0] * 6 + [101.0] * 2
    c = [104.0] * 8
    d = [99.5] * 8
    control = [101.0, 99.0] * 4
    decision = t._decide(cands, [cur, a, b, c, d], control, 0.05, 0.01)
    assert not decision["switched"] and decision["rounds_needed"] == 7
    assert decision["confirmation"] is None
    assert t._finalists(cands, decision) == [1, 2]  # a and b, largest gain first; not c, not d
    assert t._finalists(cands, decision, most=1) == [1]
    # the confirmation rounds alone decide: b wins all 8 by 4 %, a only 4 of 8
    noisy = [100.0, 100.5] * 4
    again = t._confirm(cands, decision, [1, 2], [cur, [99.0, 101.0] * 4, [96.0] * 8], noisy)
    assert again is decision and decision["switched"] and decision["chosen"] == 2
    assert [c["chosen"] for c in cands] == [False, False, True, False, False]
    assert decision["confidence"] == pytest.approx(1 - 1 / 256)
    conf = decision["confirmation"]
    assert conf["rounds"] == 8 and conf["rounds_needed"] == 7
    assert conf["noise_floor_percent"] == pytest.approx(0.25)
    assert [(f["candidate"], f["rounds_faster"], f["eligible"]) for f in conf["candidates"]] == [
        (1, 4, False), (2, 8, True)]
    assert decision["reason"] == (
        "b was faster than the current settings in 8 of 8 confirmation rounds (one-sided sign "
        "test p = 0.0039 <= 0.05) by a median 4.0 %, above those rounds' noise floor of 0.2 %; "
        "in the first 8 rounds no candidate beat them in enough rounds (the sign test at alpha "
        "0.05 needs 7 of 8) by more than the noise floor of 1.0 % and min_gain 1.0 %; the best, "
        "a, was faster in 5 of 8 rounds and faster by a median 9.0 %")
    # the first rounds' figures stay with the candidates
    assert cands[1]["rounds_faster"] == 5 and cands[2]["rounds_faster"] == 6


def test_confirmation_without_a_winner_keeps_the_settings():
    from ddpscope import tune as t
    cands = _candidates("current", "a")
    cur = [100.0] * 6
    decision = t._decide(cands, [cur, [95.0] * 4 + [105.0] * 2], [100.0] * 6, 0.05, 0.0)
    assert t._finalists(cands, decision) == [1]
    t._confirm(cands, decision, [1], [cur, [98.0] * 6], [104.0, 96.0] * 3)
    # 6 of 6 but by 2 %, under these rounds' noise floor of 4 %
    assert not decision["switched"] and decision["chosen"] == 0
    assert decision["confidence"] is None and cands[0]["chosen"] and not cands[1]["chosen"]
    assert decision["reason"].endswith(
        "; measured again in 6 confirmation rounds, no candidate beat them in enough rounds (the "
        "sign test at alpha 0.05 needs 6 of 6) by more than the noise floor of 4.0 %; the best, "
        "a, was faster in 6 of 6 rounds and faster by a median 2.0 %")


def test_a_first_round_winner_is_not_measured_again():
    from ddpscope import tune as t
    cands = _candidates("current", "a", "b")
    cur = [100.0] * 8
    decision = t._decide(cands, [cur, [90.0] * 8, [95.0] * 8], [100.5] * 8, 0.05, 0.0)
    assert decision["switched"] and decision["chosen"] == 1
    assert t._finalists(cands, decision) == []

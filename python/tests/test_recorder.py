"""ddpscope.torch.record on a real 2-rank gloo DDP job (recorder_job.py): the parameters are
bitwise those of the same job without it; the trace's bucket allreduces have DDP's own bucket
sizes (its logging data) in DDP's order; replay, calibrate and overlap open the trace."""

import json
import os
import subprocess
import sys

import pytest

import ddpscope

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch without gloo", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
ITERATIONS = 6


def _job(out, world):
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(ddpscope.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    r = subprocess.run([sys.executable, os.path.join(HERE, "recorder_job.py"), str(out),
                        "--world", str(world), "--iterations", str(ITERATIONS)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(out, "result.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("recorder")
    return out, _job(out, 2)


def _sizes(text):
    return [int(x) for x in text.split(",")]


def test_parameters_unchanged(job):
    _, result = job
    assert result["parameters_trained"]
    assert result["parameters_identical"]


def test_parameters_unchanged_at_world_size_3(tmp_path):
    # 1/3 is not exact: the hook scales as DDP's built-in path does (a multiply, not a divide).
    result = _job(tmp_path, 3)
    assert result["parameters_identical"]


def test_trace_buckets_are_ddps(job, cli):
    out, result = job
    trace = os.path.join(out, "run.json")
    with open(trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    allreduces = [e for e in events if e.get("ph") == "X" and e.get("cat") == "allreduce"]
    for rank in (0, 1):
        mine = [e for e in allreduces if e["pid"] == rank]
        by_iter = {}
        for e in sorted(mine, key=lambda e: e["ts"]):
            by_iter.setdefault(e["args"]["iteration"], []).append(e["args"])
        assert sorted(by_iter) == list(range(1, ITERATIONS + 1))
        # Iteration 1: the construction plan; from iteration 2 on, the rebuilt plan. Buckets
        # launch in index order; their bytes are DDP's own.
        assert [a["bytes"] for a in by_iter[1]] == _sizes(result["bucket_sizes"])
        for it in range(2, ITERATIONS + 1):
            assert [a["bucket"] for a in by_iter[it]] == list(range(len(by_iter[it])))
            assert [a["bytes"] for a in by_iter[it]] == _sizes(result["rebuilt_bucket_sizes"])
    # ddpscope's own plan of the same model agrees with DDP's.
    meta = doc.get("otherData", {})
    assert meta["world_size"] == 2 and meta["bucket_cap_mb"] == 0.5


def test_trace_opens_in_overlap_replay_calibrate(job, cli, tmp_path):
    out, _ = job
    trace = os.path.join(out, "run.json")
    o = ddpscope.overlap(trace)
    assert o == cli.json("overlap", trace)
    sys.path.insert(0, HERE)
    import recorder_job

    model = ddpscope.Model.from_torch(recorder_job.make_model(),
                                      torch.randn(recorder_job.BATCH, recorder_job.IN), "job")
    r = ddpscope.replay(trace, model=model)
    assert r["measured_step_ms"] > 0 and r["replayed_step_ms"] > 0
    w = ddpscope.replay(trace, model=model, world_size=4)
    assert w["what_if"]["world_size"] == 4
    c = ddpscope.calibrate(trace, out=tmp_path / "fit.json", model=model)
    assert os.path.exists(tmp_path / "fit.json") and c

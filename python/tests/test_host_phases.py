"""scripts/gpu_kit/host_phases.py: host terms fitted on the unprofiled host times of the kit's
timed steps. The solver recovers known terms; on the H200 runs its table is the committed
docs/measurements/host-phases-h200.md (regenerated with DDPSCOPE_REGENERATE_DOCS=1), and each
model's backward host, held out of the fit, is predicted within 15 % in every configuration."""
import importlib.util
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "gpu_kit", "host_phases.py")
H200 = os.path.join("tests", "data", "gpu", "h200")
ARGS = [os.path.join(H200, "host_facts.json")] + [os.path.join(H200, r)
                                                  for r in ("run1", "run2", "run3")]
TABLE = os.path.join(ROOT, "docs", "measurements", "host-phases-h200.md")
HEADER = ("# Host terms from the unprofiled host (H200)\n\nWritten by `python3 "
          "scripts/gpu_kit/host_phases.py " + " ".join(ARGS) + "` "
          "(checked by python/tests/test_host_phases.py); what it fits: docs/spec/host-lane.md, "
          "\"The unprofiled host\".\n\n")


def module():
    spec = importlib.util.spec_from_file_location("host_phases", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_nnls_recovers_known_terms_and_keeps_them_non_negative():
    hp = module()
    rows = [[1, 2, 0], [2, 1, 1], [3, 5, 2], [1, 1, 4], [4, 0, 1]]
    truth = [3.0, 0.5, 7.0]
    b = [sum(x * t for x, t in zip(r, truth)) for r in rows]
    for got, want in zip(hp.nnls(rows, b), truth):
        assert abs(got - want) < 1e-9
    # the unconstrained answer has a negative second term: it is dropped and the rest refitted
    coef = hp.nnls([[1, 1], [2, 1], [3, 1]], [3, 2, 1])
    assert coef[0] == 0 and abs(coef[1] - 2) < 1e-9


def test_the_h200_table_and_held_out_backward():
    r = subprocess.run([sys.executable, SCRIPT] + ARGS, cwd=ROOT, check=True, capture_output=True,
                       text=True)
    text = HEADER + r.stdout
    if os.environ.get("DDPSCOPE_REGENERATE_DOCS") == "1":
        with open(TABLE, "w") as f:
            f.write(text)
    with open(TABLE) as f:
        assert f.read() == text, "docs/measurements/host-phases-h200.md is stale"
    hp = module()
    result = hp.report(hp.load(*[os.path.join(ROOT, a) for a in ARGS[:1]],
                               [os.path.join(ROOT, a) for a in ARGS[1:]]))
    assert set(result["held_out"]) == {"bert-base", "gpt2-small", "llama-small", "resnet50",
                                       "vit-b16"}
    for model, rows in result["held_out"].items():
        assert len(rows) == 6, model  # eager, caps 1, 5, 25, 100 and the default
        for config, row in rows.items():
            b = row["backward"]
            assert abs(b["predicted_ms"] / b["measured_ms"] - 1) < 0.15, (model, config)


def test_runs_without_host_times_are_refused(tmp_path):
    r = subprocess.run([sys.executable, SCRIPT, ARGS[0], str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "0 model(s) with unprofiled host times" in r.stderr

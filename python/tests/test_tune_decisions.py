"""The statistics of python/bench/tune_decisions.py (docs/tuning.md's decision quality), on
hand-made sweep results: the paired ratios, the noise floor, the verdict and Spearman's rho."""

import importlib.util
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "tune_decisions", os.path.join(os.path.dirname(HERE), "bench", "tune_decisions.py"))
td = importlib.util.module_from_spec(spec)
spec.loader.exec_module(td)


def test_ranks_share_ties():
    assert td.ranks([30, 10, 20, 10]) == [4.0, 1.5, 3.0, 1.5]


def test_spearman_of_known_orders():
    assert td.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert td.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # one swap among four: 1 - 6 * 2 / (4 * 15)
    assert td.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert td.spearman([1, 2], [2, 1]) is None  # too few points
    assert td.spearman([1, 1, 1], [1, 2, 3]) is None  # one rank only


def _job(blocks_ms, control_ms, chosen, replayed):
    ns = lambda ms: [[int(x * 1e6)] * 3 for x in ms]  # noqa: E731 - three equal steps a block
    return {"model": "m", "start_cap": None, "torch": "t", "switched": chosen != 1,
            "paste": "p", "tune_seconds": 1.0, "noise_floor_percent": 2.0, "chosen": chosen,
            "layouts": [{"label": "L%d" % i, "buckets": i + 1, "step_ns": ns(b)}
                        for i, b in enumerate(blocks_ms)],
            "control": {"of": 1, "step_ns": ns(control_ms)},
            "candidates": [{"label": "L0", "predicted_step_ms": 9.0, "layout": 0},
                           {"label": "L1", "predicted_step_ms": 10.0, "layout": 1},
                           {"label": "L2", "predicted_step_ms": 11.0, "layout": 2}],
            "replayed_step_ms": replayed}


def _table(tmp_path, capsys, rows):
    """What --table prints of a saved run of `rows`."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": rows}))
    td.table(str(path))
    return capsys.readouterr().out


def test_a_choice_within_the_noise_of_the_best_is_good():
    # rounds drift (100 then 120 ms) but each ratio is paired within its round
    job = _job([[95, 114], [100, 120], [110, 132]], [102, 118], chosen=1,
               replayed=[9.0, 10.0, 11.0])
    row = td.summarize(job)
    assert [x["ratio"] for x in row["layouts"]] == pytest.approx([0.95, 1.0, 1.1])
    assert row["noise_floor"] == pytest.approx((0.02 + 1 / 60) / 2)
    assert row["best"] == 0
    assert row["regret"] == pytest.approx(1 / 0.95 - 1)
    assert not row["good"]  # 5.3 % lost against a 1.8 % noise floor
    assert row["spearman"] == pytest.approx(1.0)
    assert row["spearman_sweep"] == pytest.approx(1.0)
    assert row["proposed"]
    job["candidates"] = job["candidates"][1:]  # the best, L0, never measured by tune
    assert not td.summarize(job)["proposed"]
    job["chosen"] = 0
    assert td.summarize(job)["good"]
    job["control"]["step_ns"] = [[int(110e6)] * 3, [int(132e6)] * 3]  # a 10 % noise floor
    job["chosen"] = 1
    assert td.summarize(job)["good"]


def test_prediction_error_compares_ratios_to_the_current_settings():
    job = _job([[95], [100], [110]], [101], chosen=1, replayed=[9.0, 10.0, 11.0])
    row = td.summarize(job)
    assert td.prediction_error(row) is None  # no candidate is the current settings
    row["candidates"][1]["label"] = "current"  # L1: measured 1.0, predicted 10 ms
    # L0: predicted 0.9, measured 0.95; L2: predicted 1.1, measured 1.1
    assert td.prediction_error(row) == pytest.approx((0.05 + 0.0) / 2)
    row["candidates"] = row["candidates"][1:2]
    assert td.prediction_error(row) is None  # nothing else predicted


def test_a_sweep_without_every_replay_has_no_sweep_rho():
    job = _job([[95], [100], [110]], [101], chosen=0, replayed=[9.0, None, 11.0])
    assert td.summarize(job)["spearman_sweep"] is None


def test_the_committed_tables_are_the_scripts(capsys):
    """docs/measurements/tune_2026-11-*.md hold what --table prints of their JSON."""
    docs = os.path.join(os.path.dirname(os.path.dirname(HERE)), "docs", "measurements")
    for name in ("tune_2026-11-29_decisions", "tune_2026-11-29_second-recording",
                 "tune_2026-11-30_confirmation", "tune_2026-11-30_own-wrapper",
                 "tune_2026-11-30_held-out"):
        td.table(os.path.join(docs, name + ".json"))
        with open(os.path.join(docs, name + ".md"), encoding="utf-8") as f:
            assert capsys.readouterr().out in f.read(), name


def test_the_first_rounds_choice_is_scored_apart(capsys, tmp_path):
    # the trial with confirmation rounds: tune kept L1 in its first rounds and confirmed L0; the
    # job scores both against the same sweep
    job = _job([[95, 114], [100, 120], [110, 132]], [102, 118], chosen=0,
               replayed=[9.0, 10.0, 11.0])
    job["candidates"][1]["label"] = "current"
    plain = td.summarize(job)  # a job without the trial's fields has none in its row
    assert "first_chosen" not in plain and "confirmation" not in plain
    job["first_chosen"] = 1
    job["confirmation"] = {"rounds": 8}
    row = td.summarize(job)
    assert row["good"] and row["regret"] == pytest.approx(0.0)
    assert not row["first_good"] and row["first_regret"] == pytest.approx(1 / 0.95 - 1)
    out = _table(tmp_path, capsys, [row, plain])
    assert "| yes | +5.3 % (no) | yes |" in out and "| yes | same choice (yes) | yes |" in out
    assert ("Within the noise floor of the sweep's best: 2 of 2 jobs; with the first rounds' "
            "choice alone: 1 of 2. Confirmation rounds ran in 1, and switched in 1.") in out
    # without the trial's fields, neither the column nor the second count
    out = _table(tmp_path, capsys, [plain])
    assert "first rounds alone" not in out
    assert "Within the noise floor of the sweep's best: 1 of 1 jobs.\n" in out


def test_the_sweeps_best_as_tunes_rounds_measured_it():
    job = _job([[95], [100], [110]], [101], chosen=1, replayed=[9.0, 10.0, 11.0])
    job["candidates"][1]["label"] = "current"
    row = td.summarize(job)
    assert row["best"] == 0
    assert td.in_tunes_rounds(row) is None  # tune's figures not kept
    row["candidates"][0].update(gain_percent=-2.5, rounds_faster=3)
    assert td.in_tunes_rounds(row) == "-2.5 % (3 won)"
    row["candidates"] = row["candidates"][1:]
    assert td.in_tunes_rounds(row) == "not a candidate"
    row["best"] = 1
    assert td.in_tunes_rounds(row) == "the start"


def test_the_jobs_own_wrapper_is_scored_against_a_fresh_one(capsys, tmp_path):
    job = _job([[95, 114], [100, 120], [110, 132]], [102, 118], chosen=1,
               replayed=[9.0, 10.0, 11.0])
    job["candidates"][1]["label"] = "current"  # L1 is the starting layout: ratio 1.0
    job["own"] = {"step_ns": [[int(106e6)] * 3, [int(126e6)] * 3]}  # 6 and 5 % slower
    row = td.summarize(job)
    assert row["own_ratio"] == pytest.approx((1.06 + 1.05) / 2)
    assert row["own_vs_fresh"] == pytest.approx(0.055)
    # tune kept the settings (chosen = the start): it ended on the own wrapper, 1.055 against
    # the best's 0.95
    assert row["own_regret"] == pytest.approx(1.055 / 0.95 - 1) and not row["own_good"]
    fast = dict(job, own={"step_ns": [[int(93e6)] * 3, [int(111e6)] * 3]})  # 7 and 7.5 % faster
    assert td.summarize(fast)["own_regret"] == pytest.approx(0.0)  # the own wrapper is the best
    switched = dict(job, chosen=0, switched=True)  # tune switched to L0: a fresh wrapper
    assert td.summarize(switched)["own_regret"] == pytest.approx(0.0)
    assert ("The job's own wrapper (the settings tune timed as current) against a fresh wrapper "
            "of the same settings, median over the rounds: +5.5 %. With the job's own wrapper as "
            "what tune kept (and among the layouts), within the noise floor of the best: 0 of 1 "
            "jobs.") in _table(tmp_path, capsys, [row])


def test_the_best_picked_on_other_rounds_loses_its_luck(capsys, tmp_path):
    # L0 is as fast as the chosen L1 but had two lucky rounds (0.90, 0.93): the plain score
    # takes it as the best (median 0.98) and calls the choice a miss against a 1 % noise floor
    job = _job([[90, 93, 103, 108], [100] * 4, [110] * 4], [101, 99, 101, 99], chosen=1,
               replayed=[9.0, 10.0, 11.0])
    job["candidates"][1]["label"] = "current"  # tune kept L1
    row = td.summarize(job)
    assert row["best"] == 0 and row["regret"] == pytest.approx(1 / 0.98 - 1)
    assert row["noise_floor"] == pytest.approx(0.01) and not row["good"]
    # held out: rounds 0 and 1 pick L1 on the other three (L0's median there 1.03), rounds 2
    # and 3 pick L0 (0.93) and find L1 faster in them: median of 1, 1, 100/103, 100/108
    assert row["layouts"][0]["round_ratios"] == pytest.approx([0.90, 0.93, 1.03, 1.08])
    assert row["held_out_regret"] == pytest.approx((1 + 100 / 103) / 2 - 1)
    assert row["held_out_good"]
    # a layout faster in every round stays the best whichever rounds pick it
    fast = td.summarize(dict(job, layouts=_job([[95, 94, 96, 95], [100] * 4, [110] * 4], [],
                                               1, [])["layouts"]))
    assert fast["held_out_regret"] == pytest.approx(100 / 95 - 1)
    assert not fast["held_out_good"]
    assert td.summarize(dict(job, chosen=0))["held_out_regret"] < 0  # L0 lost on held-out rounds
    out = _table(tmp_path, capsys, [row, fast])
    assert "| **no** | -1.5 % (yes) | yes |" in out and "| **no** | +5.3 % (no) | yes |" in out
    assert ("Within the noise floor of the sweep's best: 0 of 2 jobs; with the best picked on "
            "the other rounds: 1 of 2.") in out
    # two rounds are too few to hold one out: no figure, no column
    assert "held_out_regret" not in td.summarize(_job([[95, 114], [100, 120], [110, 132]],
                                                      [102, 118], 1, [9.0, 10.0, 11.0]))

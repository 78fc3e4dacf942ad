"""Unit tests of the GPU kit's comparison code (scripts/gpu_kit/analyze.py) on hand-made inputs
with known answers; the dry run (scripts/gpu-kit dry-run) checks it on the H100's real data."""
import gzip
import importlib.util
import json
import os
import struct

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def load(name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(ROOT, "scripts", "gpu_kit", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


analyze = load("analyze")


def x(cat, name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid,
            "args": args}


def test_layer_times_attributes_kernels_to_the_innermost_layer_and_backward_by_sequence(tmp_path):
    fwd_tid, bwd_tid = 1, 2
    ev = [
        x("user_annotation", "ProfilerStep#1", 0, 1000),
        x("user_annotation", "ddpscope.layer:block", 10, 200, fwd_tid),
        x("user_annotation", "ddpscope.layer:block.fc", 20, 50, fwd_tid),
        # a forward op inside block.fc that creates autograd node 7, and its kernel launch
        x("cpu_op", "aten::addmm", 25, 30, fwd_tid, **{"Sequence number": 7}),
        x("cuda_runtime", "cudaLaunchKernel", 30, 5, fwd_tid, correlation=100),
        # a launch in block but outside block.fc (the block's own residual add)
        x("cuda_runtime", "cudaLaunchKernel", 100, 5, fwd_tid, correlation=101),
        # the backward node of sequence 7 on the autograd thread, with its launch
        x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 400, 60, bwd_tid,
          **{"Sequence number": 7}),
        x("cuda_runtime", "cudaLaunchKernel", 410, 5, bwd_tid, correlation=102),
        # ... and autograd's sum of the gradients two readers gave block.fc's input, in that node
        x("cuda_runtime", "cudaLaunchKernel", 440, 5, bwd_tid, correlation=105),
        # ... and the reduction of the output gradient into the bias's gradient
        x("cuda_runtime", "cudaLaunchKernel", 450, 5, bwd_tid, correlation=106),
        # a launch outside every layer (the optimizer)
        x("cuda_runtime", "cudaLaunchKernel", 900, 5, fwd_tid, correlation=103),
        x("kernel", "gemm", 40, 70, 7, correlation=100),
        x("kernel", "add", 120, 11, 7, correlation=101),
        x("kernel", "gemm_bwd", 420, 130, 7, correlation=102),
        x("kernel", "vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 560, 15,
          7, correlation=105),
        x("kernel", "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float>>", 580, 8,
          7, correlation=106),
        x("kernel", "sgd", 910, 9, 7, correlation=103),
        x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 600, 40, 8, correlation=104),
    ]
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": ev}, f)
    per, totals, steps = analyze.layer_times(str(path))
    assert steps == 1
    assert per == {"block.fc": {"forward": 70.0, "backward": 153.0, "backward_sums": 15.0,
                                "backward_bias": 8.0, "forward_casts": 0.0,
                                "backward_casts": 0.0},
                   "block": {"forward": 11.0, "backward": 0.0, "backward_sums": 0.0,
                             "backward_bias": 0.0, "forward_casts": 0.0, "backward_casts": 0.0}}
    assert totals == {"forward": 81.0, "backward": 153.0, "other": 9.0, "communication": 40.0}


def sim_layer(name, forward_us, backward_us, type_="Linear"):
    """One layer as `simulate --json` lists it."""
    return {"name": name, "type": type_, "kernel_class": "matmul",
            "forward": {"time_ns": forward_us * 1e3}, "backward": {"time_ns": backward_us * 1e3}}


def test_compare_layers_reports_the_per_layer_errors():
    measured = {"a": {"forward": 100.0, "backward": 200.0}, "b": {"forward": 50.0, "backward": 0.0},
                "only-measured": {"forward": 10.0, "backward": 10.0}}
    simulated = [sim_layer("a", 50.0, 300.0), sim_layer("b", 75.0, 1.0)]
    c = analyze.compare_layers(measured, simulated)
    assert c["forward"]["layers"] == 2
    assert c["forward"]["median_abs_error"] == pytest.approx(0.5)  # |-0.5| and |+0.5|
    assert c["forward"]["matched_total_error"] == pytest.approx((125 - 150) / 150, abs=1e-4)
    assert c["backward"]["layers"] == 1  # b has no measured backward
    assert c["backward"]["median_abs_error"] == pytest.approx(0.5)


def test_the_cluster_model_is_compared_without_the_gradient_sums_it_charges_to_adds():
    # fc's backward ran a gradient sum (autograd, in the reader that delivered the second
    # gradient); the cluster's kernel model charges it to the Add: fc is compared on its own
    # kernels there, and as measured against a simulation that times it in the reader (a trace, a
    # kernel benchmark). An embedding keeps its sum: a tied weight's, which no layer charges.
    measured = {"fc": {"forward": 10.0, "backward": 100.0, "backward_sums": 20.0},
                "wte": {"forward": 5.0, "backward": 50.0, "backward_sums": 30.0}}
    emb = dict(sim_layer("wte", 5.0, 50.0, "Embedding"), kernel_class="embedding")
    simulated = [sim_layer("fc", 10.0, 80.0), emb]
    assert analyze.own_kernels(measured, simulated) == {
        "fc": {"forward": 10.0, "backward": 80.0, "backward_sums": 20.0},
        "wte": {"forward": 5.0, "backward": 50.0, "backward_sums": 30.0}}
    own = analyze.compare_layers(measured, simulated, sums_on_adds=True)
    assert own["backward"]["median_abs_error"] == pytest.approx(0.0)
    as_measured = analyze.compare_layers(measured, simulated)
    assert as_measured["backward"]["matched_measured_us"] == pytest.approx(150.0)
    assert as_measured["backward"]["median_abs_error"] == pytest.approx(0.1)  # 0 and 20 %


def test_layer_groups_time_a_layer_with_the_module_that_runs_it():
    # "blk.relu" is called twice (the simulator's second call is "blk.relu:2"), the residual add
    # runs in "blk"'s own range, and dropout (p = 0 in the kit) runs no kernel.
    measured = {"blk": {"forward": 30.0, "backward": 0.0},
                "blk.relu": {"forward": 20.0, "backward": 40.0}}
    simulated = [sim_layer("blk.relu", 9.0, 18.0, "ReLU"), sim_layer("blk.relu:2", 11.0, 22.0, "ReLU"),
                 sim_layer("blk.add", 25.0, 0.0, "Add"), sim_layer("blk.drop", 5.0, 5.0, "Dropout")]
    groups = {(owner, phase): (m, [x["name"] for x in layers])
              for owner, phase, m, layers in analyze.layer_groups(measured, simulated)}
    assert groups == {("blk.relu", "forward"): (20.0, ["blk.relu", "blk.relu:2"]),
                      ("blk.relu", "backward"): (40.0, ["blk.relu", "blk.relu:2"]),
                      ("blk", "forward"): (30.0, ["blk.add"])}
    c = analyze.compare_layers(measured, simulated)
    assert c["forward"]["matched_simulated_us"] == pytest.approx(45.0)  # 9 + 11 + 25, no dropout


def test_cluster_for_tells_pcie_from_sxm_and_names_a_gpu_without_a_cluster():
    assert analyze.cluster_for("NVIDIA H100 80GB HBM3") == ("dgx-h100", None)
    assert analyze.cluster_for("NVIDIA H200") == ("hgx-h200", None)
    assert analyze.cluster_for("NVIDIA A100-SXM4-80GB") == ("dgx-a100", None)
    assert analyze.cluster_for("NVIDIA A100 80GB PCIe") == ("pcie-a100-100gbe", None)
    assert analyze.cluster_for("NVIDIA A100-PCIE-40GB") == ("pcie-a100-100gbe", None)
    assert analyze.cluster_for("NVIDIA L40S") == (
        "dgx-h100", "GPU NVIDIA L40S has no built-in cluster: every prediction below runs on "
        "dgx-h100's H100, another GPU")


def test_gtest_counts_read_plain_and_gzip_xml(tmp_path):
    xml = ('<testsuites><testsuite name="S">'
           '<testcase classname="S" name="ok" result="completed"/>'
           '<testcase classname="S" name="bad"><failure message="x"/></testcase>'
           '<testcase classname="S" name="skip"><skipped/></testcase>'
           '</testsuite></testsuites>')
    (tmp_path / "gtest-a.xml").write_text(xml)
    with gzip.open(tmp_path / "gtest-b.xml.gz", "wt") as f:
        f.write(xml)
    counts = analyze.gtest_counts(str(tmp_path))
    for name in ("a", "b"):
        assert counts[name] == {"tests": 3, "passed": 1, "failed": 1, "skipped": 1,
                                "failures": ["S.bad"]}


def test_compare_expected_names_every_difference():
    report = {"a": 1, "b": {"c": 0.5, "d": "x"}}
    assert analyze.compare_expected(report, {"a": 1, "b": {"c": 0.5000000001}}) == []
    errs = analyze.compare_expected(report, {"a": 2, "b": {"c": 0.6, "e": 1}})
    assert errs == ["/a: 1 != 2", "/b/c: 0.5 != 0.6", "/b/e: missing"]


def test_check_schema_rejects_a_result_without_step_times(tmp_path):
    good = {"schema": "ddpscope.gpu-kit.torch/1", "model": "resnet50", "device": {},
            "dtype": "bf16", "batch": 32, "warmup": 3, "rounds": 4, "steps_per_round": 5,
            "step_ms": {"eager": [1.0, 2.0]}, "median_step_ms": {"eager": 1.5},
            "first_losses": {}, "buckets": {}, "traces": {}, "trace_notes": {}}
    p = tmp_path / "r.json"
    p.write_text(json.dumps(good))
    analyze.check_schema(str(p))
    bad = dict(good, step_ms={"eager": [1.0, 0.0]})
    del bad["batch"]
    p.write_text(json.dumps(bad))
    with pytest.raises(SystemExit) as e:
        analyze.check_schema(str(p))
    assert "no field 'batch'" in str(e.value)
    assert "step_ms.eager holds a value that is not a positive time" in str(e.value)


def test_check_schema_checks_the_unprofiled_host_times(tmp_path):
    good = {"schema": "ddpscope.gpu-kit.torch/1", "model": "resnet50", "device": {},
            "dtype": "bf16", "batch": 32, "warmup": 3, "rounds": 1, "steps_per_round": 2,
            "step_ms": {"eager": [10.0, 12.0]}, "median_step_ms": {"eager": 11.0},
            "host_ms": {"eager": [[3.0, 4.0, 1.0, 8.0], [3.0, 5.0, 1.0, 9.0]]},
            "median_host_ms": {"eager": {"forward": 3.0, "backward": 4.5, "optimizer": 1.0,
                                         "step": 8.5}},
            "first_losses": {}, "buckets": {}, "traces": {}, "trace_notes": {}}
    p = tmp_path / "r.json"
    p.write_text(json.dumps(good))
    analyze.check_schema(str(p))
    for host, why in (([[3.0, 4.0, 1.0, 8.0]], "host_ms.eager has 1 steps, step_ms.eager 2"),
                      ([[3.0, 4.0, 8.0], [3.0, 4.0, 1.0, 8.0]], "not 4 times"),
                      ([[3.0, 4.0, 1.0, 8.0], [3.0, 4.0, 9.0, 16.0]],
                       "the host's 16.0 ms exceeds its step's 12.0 ms")):
        p.write_text(json.dumps(dict(good, host_ms={"eager": host})))
        with pytest.raises(SystemExit) as e:
            analyze.check_schema(str(p))
        assert why in str(e.value)


def test_replay_profile_gives_the_host_lanes_unprofiled_host_work(cli, tmp_path):
    """The H100's profiled gpt2-small trace replayed on its host lane: with host_work, the
    unprofiled host's own work per phase (what the kit's host_ms measures), as replay --json
    reports it; without, the result is what it was (the committed report stays comparable)."""
    trace = os.path.join(ROOT, "tests/data/gpu/h100/run1/gpt2-small-ddp-default-rank0.json.gz")
    plain = analyze.replay_profile(cli.path, trace, "gpt2-small", "dgx-h100", str(tmp_path))
    assert "host_work_ms" not in plain and abs(plain["error"]) < 0.05
    res = analyze.replay_profile(cli.path, trace, "gpt2-small", "dgx-h100", str(tmp_path),
                                 host_work=True)
    work = res["host_work_ms"]
    assert set(work) == {"forward", "backward", "optimizer", "total"}
    assert all(v > 0 for v in work.values())
    assert abs(work["forward"] + work["backward"] + work["optimizer"] - work["total"]) < 1e-3
    # The unprofiled host is a fraction of the profiled step (the profiler's own cost removed).
    assert work["total"] < res["measured_step_ms"]


def test_cross_gpu_carries_the_committed_h100_kernels_to_a_lent_gpu_of_another_kind(cli, tmp_path):
    """A run on an H200 (hgx-h200) gets the committed H100 resnet50 trace's kernels carried to
    the H200 against its own trace's: here the H100 trace stands in for the H200's, so both
    are carried alike (0 %) and come out below the H100's own kernels (its memory-bound ones
    run at 4.8 instead of 3.35 TB/s). On the reference's own GPU there is nothing to carry."""
    job = json.load(open(os.path.join(ROOT, "tests/data/gpu/h100/run1/resnet50.json")))
    trace = os.path.join(ROOT, "tests/data/gpu/h100/run1/resnet50-ddp-default-rank0.json.gz")
    assert analyze.cross_gpu(cli.path, str(tmp_path), "resnet50", job, "dgx-h100", trace) is None
    c = analyze.cross_gpu(cli.path, str(tmp_path), "resnet50", job, "hgx-h200", trace)
    assert c["reference"] == "tests/data/gpu/h100/run1/resnet50-ddp-default-rank0.json.gz"
    assert c["total_error"] == 0.0 and c["forward_error"] == 0.0
    run = str(tmp_path / "h100.json")
    cli.json("import-torch", trace, "--model", "resnet50", "--autocast", "-o", run)
    base = [a for a in analyze.simulate_job_cmd("", "resnet50", job, "dgx-h100")[1:]
            if a != "--json"]
    own = cli.json(*base, "--compute-from", run, "--host-profile", "h100-torch211")
    own_us = {p: sum(analyze.layer_us(x, p) for x in own["layers"]) for p in ("forward", "backward")}
    assert 0.5 * own_us["forward"] < c["carried_forward_us"] < own_us["forward"]
    assert 0.5 * own_us["backward"] < c["carried_backward_us"] < own_us["backward"]
    assert not [f for f in os.listdir(tmp_path) if "cross-gpu" in f]  # its imports are removed


def test_zero_shot_predicts_every_timed_configuration_with_the_builtin_host_profile(cli):
    job = {"model": "llama-small", "batch": 2, "seq_len": 64, "image_size": None,
           "dtype": "bf16", "median_step_ms": {"eager": 10.0, "ddp-cap1": 14.0,
                                               "ddp-cap25": 12.0, "ddp-default": 12.5}}
    z = analyze.zero_shot(cli.path, "llama-small", job, "dgx-h100")
    assert z["held_out"] and z["host_profile"] == "h100-torch211"
    base = ["simulate", "--model", "llama-small", "--cluster", "dgx-h100", "--world-size", "1",
            "--batch", "2", "--seq-len", "64", "--dtype", "bf16", "--autocast",
            "--host-profile", "h100-torch211"]
    default = cli.json(*base)
    cap1 = cli.json(*base, "--bucket-cap-mb", "1")
    c = z["configs"]
    assert c["ddp-default"]["predicted_ms"] == round(default["step_time_ns"] / 1e6, 4)
    assert c["eager"]["predicted_ms"] == round(default["plain_step_ns"] / 1e6, 4)
    assert c["ddp-cap1"]["predicted_ms"] == round(cap1["step_time_ns"] / 1e6, 4)
    assert c["ddp-cap1"]["buckets"] == cap1["num_buckets"] > c["ddp-cap25"]["buckets"]
    assert c["ddp-cap1"]["error"] == round((cap1["step_time_ns"] / 1e6 - 14.0) / 14.0, 4)
    assert z["cap1_over_cap25"]["measured"] == round(14.0 / 12.0 - 1, 4)
    assert z["ddp_overhead_ms"]["measured"] == 2.5
    assert not analyze.zero_shot(cli.path, "resnet50", dict(job, model="resnet50", seq_len=None,
                                                            image_size=64), "dgx-h100")["held_out"]


def test_batch_what_if_replays_the_main_jobs_trace_at_the_variants_batch(cli, tmp_path):
    """A tagged job (resnet50 at batch 64; its measured step made up here: this tests the
    plumbing, the GPU kit's run brings the real one) is set against `replay --batch 64` of the
    main job's profiled trace (the H100's run1, batch 32) on the host lane."""
    import shutil
    run1 = os.path.join(ROOT, "tests", "data", "gpu", "h100", "run1")
    base_job = analyze.load_json(os.path.join(run1, "resnet50.json"))
    shutil.copy(os.path.join(run1, base_job["traces"]["ddp-default"]), tmp_path)
    job = dict(base_job, tag="b64", batch=64, median_step_ms={"ddp-default": 60.0})
    r = analyze.batch_what_if(cli.path, str(tmp_path), base_job, job, "dgx-h100")
    assert r["trace_batch"] == 32 and r["batch"] == 64 and r["measured_ms"] == 60.0
    imported = str(tmp_path / "r.json")
    cli.run("import-torch", os.path.join(run1, base_job["traces"]["ddp-default"]), "--model",
            "resnet50", "--batch-per-rank", "32", "--autocast", "-o", imported)
    lane = cli.json("replay", "--from-trace", imported, "--cluster", "dgx-h100", "--world-size",
                    "1", "--batch", "64", "--image-size", "224")["host_lane"]
    assert r["predicted_ms"] == round(lane["what_if_unprofiled_step_ms"], 4)
    assert r["predicted_ms"] > r["trace_own_unprofiled_ms"]  # twice the images: more GPU time
    assert r["error"] == round((r["predicted_ms"] - 60.0) / 60.0, 4)
    assert sorted(os.listdir(tmp_path)) == sorted(
        [os.path.basename(base_job["traces"]["ddp-default"]), "r.json"])  # its import is gone
    missing = analyze.batch_what_if(cli.path, str(tmp_path / "none"), base_job, job, "dgx-h100")
    assert "no profiled ddp-default trace" in missing["error"]
    # A variant in another layout (the kit's channels-last resnet50) says so beside its figures:
    # the NCHW trace's replay cannot know what NHWC convolutions cost.
    assert "memory_format" not in r
    cl = analyze.batch_what_if(cli.path, str(tmp_path), base_job,
                               dict(job, tag="cl-b64", memory_format="channels_last"), "dgx-h100")
    assert cl["memory_format"] == "channels_last" and cl["predicted_ms"] == r["predicted_ms"]
    md = analyze.markdown({"models": {}, "notes": [], "batch_what_if": {"resnet50-cl-b64": cl}})
    assert "| resnet50-cl-b64 (channels_last) | 32 | 64 |" in md


def test_batch_kernels_sets_the_traces_kernels_module_by_module_against_each_predictor(cli, tmp_path):
    """The variant's trace here is the main job's own (the H100's run1 resnet50, batch 32) said
    to be at batch 64: the measured growth is exactly 1, so the proportional prediction is off by
    exactly +100 % per module and in sum, and each predictor's sum error is its own growth - 1.
    The cluster's prediction is `simulate` at batch 64 itself; the imports and the calibrated
    cluster are removed. A CPU run (no kernels) is an error, not zeros."""
    import shutil
    run1 = os.path.join(ROOT, "tests", "data", "gpu", "h100", "run1")
    base_job = analyze.load_json(os.path.join(run1, "resnet50.json"))
    trace = base_job["traces"]["ddp-default"]
    shutil.copy(os.path.join(run1, trace), tmp_path)
    job = dict(base_job, tag="b64", batch=64)
    r = analyze.batch_kernels(cli.path, str(tmp_path), base_job, job, "dgx-h100")
    assert r["trace_batch"] == 32 and r["batch"] == 64 and "error" not in r, r
    per, _totals, _n = analyze.layer_times(os.path.join(run1, trace))
    sim = cli.json(*[a for a in analyze.simulate_job_cmd("", "resnet50", job, "dgx-h100")[1:]
                     if a != "--json"])
    want = analyze.compare_layers(per, sim["layers"], sums_on_adds=True)
    for phase in ("forward", "backward"):
        p = r[phase]
        assert p["growth"] == 1.0 and p["measured_us"] == p["measured_trace_us"] > 0
        assert p["modules"] == sum(1 for m in per.values() if m[phase] > 0)
        assert p["proportional"] == {"median_abs_error": 1.0, "sum_error": 1.0}
        assert p["cluster"] == {"median_abs_error": want[phase]["median_abs_error"],
                                "sum_error": want[phase]["matched_total_error"]}
        # Scaled to twice the batch by the simulator, a trace's kernels grow, but not past 2x.
        for name in ("trace_scaled", "trace_fit"):
            assert 0 < p[name]["sum_error"] < 1.0, (name, p[name])
    assert os.listdir(tmp_path) == [trace]
    md = analyze.markdown({"batch_kernels": {"resnet50-b64": r}})
    assert "| resnet50-b64 | forward | " in md and "(1.00x) | 100.0 % / +100.0 % |" in md
    missing = analyze.batch_kernels(cli.path, str(tmp_path / "none"), base_job, job, "dgx-h100")
    assert "no profiled ddp-default trace" in missing["error"]


def test_check_params_names_the_first_difference(tmp_path):
    zoo = os.path.join(ROOT, "models", "zoo", "mlp-tiny.json")
    got = {"model": "mlp-tiny", "parameters": [["0.weight", [50, 10]], ["0.bias", [50]],
                                               ["2.weight", [1, 50]], ["2.bias", [1]]]}
    p = tmp_path / "p.json"
    p.write_text(json.dumps(got))
    analyze.check_params(str(p), zoo)
    got["parameters"][2] = ["2.weight", [50, 1]]
    p.write_text(json.dumps(got))
    with pytest.raises(SystemExit) as e:
        analyze.check_params(str(p), zoo)
    assert "parameter 2: torch 2.weight [50, 1], zoo 2.weight [1, 50]" in str(e.value)


def test_read_param_dump_reads_the_runtimes_format(tmp_path):
    torch = pytest.importorskip("torch")
    job = load("torch_job")
    p = tmp_path / "d.bin"
    with open(p, "wb") as f:
        f.write(b"DSPARAM1" + struct.pack("<I", 2))
        for name, values in (("w", [1.5, -2.0, 3.25]), ("batch1.targets", [7.0])):
            f.write(struct.pack("<I", len(name)) + name.encode())
            f.write(struct.pack("<Q", len(values)) + struct.pack(f"<{len(values)}f", *values))
    d = job.read_param_dump(str(p))
    assert list(d) == ["w", "batch1.targets"]
    assert d["w"].tolist() == [1.5, -2.0, 3.25] and d["w"].dtype == torch.float32
    p.write_bytes(b"NOTADUMP")
    with pytest.raises(SystemExit) as e:
        job.read_param_dump(str(p))
    assert "not a ddpscope parameter dump" in str(e.value)


H100 = os.path.join(ROOT, "tests", "data", "gpu", "h100")


def h100(*parts):
    with open(os.path.join(H100, *parts)) as f:
        return json.load(f)


@pytest.mark.parametrize("model", ["resnet50", "gpt2-small", "bert-base"])
def test_h100_imported_traces_carry_the_buckets_ddp_reported(model):
    """import-torch of the real H100 traces (NCCL kernels' message sizes) gives, per iteration,
    the rebuilt bucket sizes PyTorch's DDP reported for that run."""
    import re
    report = h100("run1", "report.json")
    job = h100("run1", model + ".json")
    imported = report["models"][model]["import"]["ddp-default"]
    real = [int(v) for v in re.findall(r"\d+", job["buckets"]["ddp-default"]["rebuilt_bucket_sizes"])]
    assert imported["bucket_bytes"] == real
    assert imported["buckets_consistent"] is True


@pytest.mark.parametrize("run", ["run1", "run2"])
def test_h100_runtime_numerics_equal_pytorchs(run):
    """From the same parameters and batches the runtime's first loss is PyTorch's (fp32: float
    rounding; bf16: 1e-2, the precision of bf16 products) and over the first steps it stays
    within 2.5x PyTorch's own distance to float64, the floor this BatchNorm ResNet's
    conditioning sets (measured: 2.1x for resnet50 fp32, below 1x elsewhere)."""
    for model in ("resnet50", "gpt2-small"):
        for dtype, first_tol in (("fp32", 1e-5), ("bf16", 1e-2)):
            n = h100(run, f"{model}-numerics-{dtype}.json")
            assert n["runtime_vs_torch"][0] <= first_tol, (model, dtype)
            assert max(n["runtime_vs_fp64"]) <= 2.5 * max(n["torch_vs_fp64"]) + 1e-6, (model, dtype)


def test_h100_gpu_tests_pass_after_the_conditioning_fix():
    counts = analyze.gtest_counts(os.path.join(H100, "run3"))
    assert counts["cuda_gpu_test"]["passed"] == 22 and counts["cuda_gpu_test"]["failed"] == 0
    assert counts["runtime_nccl_test"]["passed"] == 6 and counts["runtime_nccl_test"]["failed"] == 0
    before = analyze.gtest_counts(os.path.join(H100, "run1"))["cuda_gpu_test"]
    assert before["failures"] == ["CudaModelTest.ForwardBackwardSgdMatchTheCpuModel"]


def test_the_kits_mobilenet_v2_is_torchvisions():
    """The kit writes its second CNN out in plain torch (no torchvision on the lent machine):
    torchvision's parameters and buffers, name by name and in order, and with torchvision's
    weights the same output."""
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    job = load("torch_job")
    ours, theirs = job.MobileNetV2(), torchvision.models.mobilenet_v2()
    shapes = lambda it: [(n, tuple(t.shape)) for n, t in it]  # noqa: E731
    assert shapes(ours.named_parameters()) == shapes(theirs.named_parameters())
    assert shapes(ours.named_buffers()) == shapes(theirs.named_buffers())
    assert sum(p.numel() for p in ours.parameters()) == 3504872  # torchvision's count
    ours.load_state_dict(theirs.state_dict())
    ours.eval(), theirs.eval()
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(ours(x), theirs(x))

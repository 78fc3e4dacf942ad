"""Every API function against the `ddpscope` CLI on the same inputs: same numbers, same
messages."""

import builtins
import inspect
import json
import os
import pydoc
import re

import pytest

import ddpscope
from conftest import in_python


def test_models_are_the_zoo(cli):
    assert ddpscope.models() == [m["name"] for m in cli.json("model", "list")]


def test_model_zoo_and_shorthand():
    m = ddpscope.Model.zoo("resnet18")
    assert m.name == "resnet18"
    assert m.num_tensors == len(m.param_names) == 62
    assert m.num_params == 11689512  # torchvision's resnet18
    assert m.total_bytes == 4 * m.num_params
    assert sorted(m.grad_ready_order) == list(range(m.num_tensors))
    s = ddpscope.Model.zoo("mlp:in=8,hidden=16,depth=2,out=4")
    assert s.num_params == (8 * 16 + 16) + (16 * 4 + 4)  # depth 2: two Linear layers
    with pytest.raises(ddpscope.Error, match="shorthand"):
        s.to_dict()


def test_model_errors_are_the_clis(cli):
    code, message = cli.error("buckets", "--model", "no-such-model")
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.Model.zoo("no-such-model")
    assert str(e.value) == message
    assert e.value.exit_code == code == 2
    code, message = cli.error("buckets", "--model", "/nonexistent/model.json")
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.Model.load("/nonexistent/model.json")
    assert str(e.value) == message


def test_model_save_load_round_trip(tmp_path, cli):
    path = tmp_path / "resnet18.json"
    ddpscope.Model.zoo("resnet18").save(path)
    loaded = ddpscope.Model.load(path)
    assert loaded.param_names == ddpscope.Model.zoo("resnet18").param_names
    assert ddpscope.buckets(loaded, bucket_cap_mb=10) == cli.json(
        "buckets", "--model", str(path), "--bucket-cap-mb", "10")


@pytest.mark.parametrize("kwargs,flags", [
    ({}, []),
    ({"bucket_cap_mb": 10}, ["--bucket-cap-mb", "10"]),
    ({"bucket_cap_mb": 2.5, "find_unused": True, "torch_version": "1.13"},
     ["--bucket-cap-mb", "2.5", "--find-unused", "--torch-version", "1.13"]),
    ({"bucket_cap_mb": 5, "iteration": 1}, ["--bucket-cap-mb", "5", "--iteration", "1"]),
    ({"bucket_cap_mb_list": [1, 4, 25]}, ["--bucket-cap-mb-list", "1,4,25"]),
])
def test_buckets_equal_the_cli(cli, kwargs, flags):
    assert ddpscope.buckets("resnet50", **kwargs) == cli.json("buckets", "--model", "resnet50",
                                                              *flags)


def test_buckets_errors_are_the_clis(cli):
    for kwargs, flags in [({"bucket_cap_mb": 0}, ["--bucket-cap-mb", "0"]),
                          ({"torch_version": "3.0"}, ["--torch-version", "3.0"]),
                          ({"no_such_setting": 1}, ["--no-such-setting", "1"])]:
        code, message = cli.error("buckets", "--model", "resnet18", *flags)
        with pytest.raises(ddpscope.Error) as e:
            ddpscope.buckets("resnet18", **kwargs)
        assert (str(e.value), e.value.exit_code) == (in_python(message, "buckets"), code)


def test_simulate_equals_the_cli(cli, tmp_path):
    trace = tmp_path / "cli.json"
    expected = cli.json("simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--nodes",
                        "4", "--bucket-cap-mb", "50", "--trace", str(trace))
    r = ddpscope.simulate("gpt2-small", cluster="dgx-a100", nodes=4, bucket_cap_mb=50)
    expected.pop("trace")
    assert r.to_dict() == expected
    assert r.step_time_ms == expected["step_time_ns"] / 1e6
    assert r.exposed_comm_ms == expected["exposed_comm_ns"] / 1e6
    assert r.overlap_percent == expected["overlap_percent"]
    assert r.bucket_bytes == expected["bucket_bytes"]
    # Same inputs, byte-identical trace (docs/design.md §4 "Time, order, determinism").
    mine = tmp_path / "api.json"
    assert r.save_trace(mine) == [str(mine)]
    assert mine.read_bytes() == trace.read_bytes()
    # The Kineto form, one file per rank, byte for byte what --trace-format kineto writes.
    cli.json("simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--nodes", "4",
             "--bucket-cap-mb", "50", "--trace-format", "kineto", "--trace",
             str(tmp_path / "cli-k.json"))
    assert r.save_trace(tmp_path / "api-k.json", format="kineto") == [
        str(tmp_path / "api-k.rank0.json")]
    assert (tmp_path / "api-k.rank0.json").read_text().replace("api-k", "cli-k") == \
        (tmp_path / "cli-k.rank0.json").read_text()
    with pytest.raises(ddpscope.Error, match="format: expected chrome or kineto"):
        r.save_trace(tmp_path / "x.json", format="perfetto")
    # Per-bucket timings: the steady iteration's bucket allreduces, in launch order, with the
    # steady plan's bytes, one after another on the comm stream.
    b = r.buckets
    assert sorted(x["bytes"] for x in b) == sorted(expected["bucket_bytes"])
    assert all(x["end_ns"] - x["start_ns"] == x["duration_ns"] > 0 for x in b)
    assert all(b[i]["end_ns"] <= b[i + 1]["start_ns"] for i in range(len(b) - 1))
    assert {x["iteration"] for x in b} == {expected["iterations"][-1]["index"]}


def test_simulate_with_a_model_object_and_settings(cli):
    model = ddpscope.Model.zoo("resnet50")
    r = ddpscope.simulate(model, cluster="dgx-h100", world_size=16, bucket_cap_mb=10,
                          find_unused=True, batch=64, iterations=5)
    expected = cli.json("simulate", "--model", "resnet50", "--cluster", "dgx-h100",
                        "--world-size", "16", "--bucket-cap-mb", "10", "--find-unused",
                        "--batch", "64", "--iterations", "5")
    assert r.to_dict() == expected


def test_simulate_with_another_gpus_kernel_fit_equals_the_cli(cli):
    r = ddpscope.simulate("resnet50", cluster="dgx-a100", world_size=8, batch=256, dtype="tf32",
                          kernel_fit_from="dgx-h100")
    expected = cli.json("simulate", "--model", "resnet50", "--cluster", "dgx-a100",
                        "--world-size", "8", "--batch", "256", "--dtype", "tf32",
                        "--kernel-fit-from", "dgx-h100")
    assert r.to_dict() == expected
    # every layer by the fit but BatchNorm, left to the A100's roofline at tf32 (cuDNN's kernels)
    assert {x["forward"]["timed_by"] for x in expected["layers"]
            if x["kernel_class"] != "batchnorm"} == {"kernel fit"}
    assert {x["forward"]["timed_by"] for x in expected["layers"]
            if x["kernel_class"] == "batchnorm"} == {"roofline"}
    code, message = cli.error("simulate", "--model", "resnet50", "--cluster", "dgx-a100",
                              "--kernel-fit-from", "dgx-v100")
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.simulate("resnet50", cluster="dgx-a100", kernel_fit_from="dgx-v100")
    assert (str(e.value), e.value.exit_code) == (in_python(message, "simulate"), code)
    assert "kernel_fit_from: cluster dgx-v100's device V100-SXM2-32GB has no kernel fit" in \
        str(e.value)


def test_simulate_errors_are_the_clis(cli):
    code, message = cli.error("simulate", "--model", "resnet18", "--cluster", "dgx-a100",
                              "--nodes", "0")
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.simulate("resnet18", cluster="dgx-a100", nodes=0)
    assert (str(e.value), e.value.exit_code) == (in_python(message, "simulate"), code)
    code, message = cli.error("simulate", "--model", "resnet18", "--cluster", "no-such-cluster")
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.simulate("resnet18", cluster="no-such-cluster")
    assert str(e.value) == in_python(message, "simulate")


def test_sweep_equals_the_cli(cli):
    flags = ["sweep", "--model", "gpt2-small", "--cluster", "dgx-a100", "--nodes", "1,2",
             "--bucket-cap-mb", "5,25,100", "--find-unused", "both"]
    expected = cli.json(*flags)
    kwargs = dict(cluster="dgx-a100", nodes=[1, 2], bucket_cap_mb=[5, 25, 100],
                  find_unused="both")
    rows = ddpscope.sweep("gpt2-small", **kwargs)
    as_list = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
    assert len(as_list) == len(expected["rows"]) == 12
    for mine, theirs in zip(as_list, expected["rows"]):
        for key in ("world_size", "bucket_cap_mb", "find_unused_parameters", "step_time_ns",
                    "exposed_comm_ns", "overlap_percent"):
            assert mine[key] == theirs[key], key
    best = ddpscope.sweep("gpt2-small", best=True, **kwargs)
    best = best.to_dict("records") if hasattr(best, "to_dict") else best
    assert best == expected["best"]


def test_plan_equals_the_cli(cli):
    expected = cli.json("plan", "--model", "gpt2-small", "--cluster", "dgx-a100", "--nodes", "4")
    mine = ddpscope.plan("gpt2-small", cluster="dgx-a100", nodes=4)
    # The same plan; in Python ddp_kwargs is a dict and the CLI's text is ddp_kwargs_text.
    text = expected.pop("ddp_kwargs")
    assert text.startswith("bucket_cap_mb_list=[")
    assert mine.pop("ddp_kwargs_text") == text
    assert mine.pop("ddp_kwargs") == {
        "bucket_cap_mb_list": expected["planned"]["bucket_cap_mb_list"],
        "gradient_as_bucket_view": True}
    assert mine == expected
    old = ddpscope.plan("resnet18", cluster="dgx-a100", nodes=2, torch_version="1.13",
                        bucket_cap_mb=[10, 25])
    expected = cli.json("plan", "--model", "resnet18", "--cluster", "dgx-a100", "--nodes", "2",
                        "--torch-version", "1.13", "--bucket-cap-mb", "10,25")
    assert old.pop("ddp_kwargs_text") == expected.pop("ddp_kwargs")
    assert isinstance(old.pop("ddp_kwargs"), dict)
    assert old == expected
    assert old["planned"] is None


def test_errors_name_the_keyword_and_are_pythons_exceptions():
    # A bad value: a ValueError naming the keyword argument, not the CLI's flag.
    with pytest.raises(ValueError) as e:
        ddpscope.simulate("resnet18", cluster="dgx-a100", bucket_cap_mb=-3)
    assert str(e.value) == "bucket_cap_mb: expected a positive number, got '-3'"
    assert isinstance(e.value, ddpscope.InvalidSetting) and e.value.exit_code == 2
    # An unknown keyword: a TypeError worded as Python words it.
    with pytest.raises(TypeError) as e:
        ddpscope.plan("resnet18", cluster="dgx-a100", bucket_cap=5)
    assert str(e.value) == "plan() got an unexpected keyword argument 'bucket_cap'"
    assert isinstance(e.value, ddpscope.UnknownSetting)
    # Not bad input (a failure of another kind, exit code 1) stays a plain ddpscope.Error.
    assert not issubclass(ddpscope.Error, ValueError)


def test_compute_from_a_gpu_trace_without_host_facts_is_refused_naming_the_keyword(tmp_path):
    # An imported H100 trace whose host facts were dropped: on dgx-h100's per-op host lane its
    # spans would count the profiled host twice, so simulate refuses it as bad input.
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    run = str(tmp_path / "r50.json")
    ddpscope.import_torch(os.path.join(root, "tests/data/gpu/h100/run1/"
                                             "resnet50-ddp-default-rank0.json.gz"),
                          out=run, model="resnet50")
    with open(run) as f:
        trace = json.load(f)
    del trace["otherData"]["host_facts"]
    with open(run, "w") as f:
        json.dump(trace, f)
    with pytest.raises(ValueError) as e:
        ddpscope.simulate("resnet50", cluster="dgx-h100", world_size=1, compute_from=run)
    assert isinstance(e.value, ddpscope.InvalidSetting)
    assert str(e.value).startswith("compute_from " + run + ": cluster dgx-h100 charges the host "
                                   "per op")
    assert "it has no host facts" in str(e.value)


def test_plan_kwargs_construct_a_real_distributed_data_parallel(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    version = "1.13" if torch.__version__.startswith("1.") else "2.15"
    kwargs = ddpscope.plan("resnet18", cluster="dgx-a100", nodes=2,
                           torch_version=version)["ddp_kwargs"]
    assert kwargs and all(isinstance(k, str) for k in kwargs)
    dist.init_process_group("gloo", init_method="file://" + str(tmp_path / "store"), rank=0,
                            world_size=1)
    try:
        ddp = DistributedDataParallel(torch.nn.Linear(4, 2), **kwargs)
        ddp(torch.randn(3, 4)).sum().backward()
    finally:
        dist.destroy_process_group()


def test_plan_errors_are_the_clis(cli):
    for kwargs, flags in [(dict(torch_version="2.0"), ["--torch-version", "2.0"]),
                          (dict(objective="fast"), ["--objective", "fast"])]:
        with pytest.raises(ddpscope.Error) as e:
            ddpscope.plan("resnet18", cluster="dgx-a100", **kwargs)
        code, message = cli.error("plan", "--model", "resnet18", "--cluster", "dgx-a100", *flags)
        assert (str(e.value), e.value.exit_code) == (in_python(message, "plan"), code)


def test_sweep_is_a_dataframe_with_pandas_else_a_list(monkeypatch):
    try:
        import pandas
    except ImportError:
        pandas = None
    rows = ddpscope.sweep("resnet18", cluster="dgx-a100", bucket_cap_mb=[10, 25])
    if pandas is not None:
        assert isinstance(rows, pandas.DataFrame)
        assert list(rows["bucket_cap_mb"]) == [10, 25]
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("no pandas")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    rows = ddpscope.sweep("resnet18", cluster="dgx-a100", bucket_cap_mb=[10, 25])
    assert isinstance(rows, list) and [r["bucket_cap_mb"] for r in rows] == [10, 25]


def test_overlap_equals_the_cli(cli, data_dir, tmp_path):
    run = os.path.join(data_dir, "replay", "mlp-wide-w2.json.gz")
    assert ddpscope.overlap(run) == cli.json("overlap", run)
    sim = tmp_path / "sim.json"
    ddpscope.simulate("resnet18", cluster="dgx-a100", world_size=8).save_trace(sim)
    assert ddpscope.overlap(sim) == cli.json("overlap", str(sim))
    code, message = cli.error("overlap", str(tmp_path / "missing.json"))
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.overlap(tmp_path / "missing.json")
    assert str(e.value) == message


def test_replay_equals_the_cli(cli, data_dir):
    run = os.path.join(data_dir, "replay", "mlp-wide-w2.json.gz")
    assert ddpscope.replay(run) == cli.json("replay", "--from-trace", run)
    assert ddpscope.replay(run, world_size=4, bucket_cap_mb=5) == cli.json(
        "replay", "--from-trace", run, "--world-size", "4", "--bucket-cap-mb", "5")


def test_replay_calibrated_on_the_unprofiled_step_equals_the_cli(cli, data_dir, tmp_path):
    # A GPU trace with host facts: the profiler's cost fitted to the job's unprofiled step.
    trace = os.path.join(data_dir, "gpu", "h100", "run1", "resnet50-ddp-default-rank0.json.gz")
    run = tmp_path / "r50.json"
    ddpscope.import_torch(trace, out=run, model="resnet50", autocast=True)
    mine = ddpscope.replay(run, "resnet50", cluster="dgx-h100", world_size=1, bucket_cap_mb=1,
                           unprofiled_step_ms=35.77)
    assert mine == cli.json("replay", "--from-trace", str(run), "--model", "resnet50",
                            "--cluster", "dgx-h100", "--world-size", "1", "--bucket-cap-mb", "1",
                            "--unprofiled-step-ms", "35.77")
    lane = mine["host_lane"]
    assert lane["profiler_calibrated"] and lane["unprofiled_step_ms_given"] == 35.77
    assert abs(lane["unprofiled_step_ms"] - 35.77) < 0.005 * 35.77


def test_import_torch_equals_the_cli(cli, data_dir, tmp_path):
    traces = [os.path.join(data_dir, "torch", "ddp_gloo_rank%d.json.gz" % r) for r in (0, 1)]
    model_file = os.path.join(data_dir, "torch", "ddp_gloo_model.json")
    expected = cli.json("import-torch", *traces, "-o", str(tmp_path / "cli.json"),
                        "--model", model_file, "--batch-per-rank", "8")
    mine = ddpscope.import_torch(traces, out=tmp_path / "api.json",
                                 model=ddpscope.Model.load(model_file), batch_per_rank=8)
    for d in (expected, mine):
        d.pop("output", None)
        d.pop("model_file", None)
    assert mine == expected
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()


def test_import_torch_without_a_model_reads_the_traces_own(data_dir, tmp_path):
    """The real gloo job's traces carry record_shapes: the import reads the model off them, and
    replay of what it wrote needs no model."""
    traces = [os.path.join(data_dir, "torch", "ddp_gloo_rank%d.json.gz" % r) for r in (0, 1)]
    exported = ddpscope.Model.load(os.path.join(data_dir, "torch", "ddp_gloo_model.json"))
    summary = ddpscope.import_torch(traces, out=tmp_path / "run.json")
    own = summary["model_from_trace"]
    assert own["layers_from"] == "ops"
    assert (own["parameters"], own["bytes"]) == (exported.num_tensors, exported.total_bytes)
    replayed = ddpscope.replay(tmp_path / "run.json")
    assert abs(replayed["replay_error_percent"]) < 10


def test_calibrate_equals_the_cli(cli, data_dir, tmp_path):
    run = os.path.join(data_dir, "replay", "mlp-wide-w2.json.gz")
    expected = cli.json("calibrate", run, "-o", str(tmp_path / "cli.json"), "--name", "fit")
    mine = ddpscope.calibrate(run, out=tmp_path / "api.json", name="fit")
    expected.pop("output")
    mine.pop("output")
    assert mine == expected
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()


def test_cli_passthrough(cli):
    assert ddpscope.cli("model", "list") == cli.run("model", "list").stdout


def test_errors_of_every_library_call_are_the_clis(cli, data_dir, tmp_path):
    """Each API function reaches the library parsers the CLI's flags reach: same message, same
    exit code, for a bad value and for an unknown setting."""
    run = os.path.join(data_dir, "replay", "mlp-wide-w2.json.gz")
    cases = [
        (lambda: ddpscope.simulate("resnet18", cluster="dgx-a100", no_such_setting=1),
         ["simulate", "--model", "resnet18", "--cluster", "dgx-a100", "--no-such-setting", "1"]),
        (lambda: ddpscope.simulate("resnet18", cluster="dgx-a100", jitter=5),
         ["simulate", "--model", "resnet18", "--cluster", "dgx-a100", "--jitter", "5"]),
        (lambda: ddpscope.buckets("resnet18", ready_order=[0, 1], iteration=1),
         ["buckets", "--model", "resnet18", "--ready-order", "0,1", "--iteration", "1"]),
        (lambda: ddpscope.sweep("resnet18", cluster="dgx-a100", find_unused="maybe"),
         ["sweep", "--model", "resnet18", "--cluster", "dgx-a100", "--find-unused", "maybe"]),
        (lambda: ddpscope.sweep("resnet18", cluster="dgx-a100", bucket_cap_mb=[5, -1]),
         ["sweep", "--model", "resnet18", "--cluster", "dgx-a100", "--bucket-cap-mb", "5,-1"]),
        (lambda: ddpscope.sweep("resnet18", cluster="dgx-a100", trace_path="x.json"),
         ["sweep", "--model", "resnet18", "--cluster", "dgx-a100", "--trace-path", "x.json"]),
        (lambda: ddpscope.replay(run, world_size=0),
         ["replay", "--from-trace", run, "--world-size", "0"]),
        (lambda: ddpscope.replay(tmp_path / "missing.json"),
         ["replay", "--from-trace", str(tmp_path / "missing.json")]),
        (lambda: ddpscope.import_torch(tmp_path / "missing.json", out=tmp_path / "o.json"),
         ["import-torch", str(tmp_path / "missing.json"), "-o", str(tmp_path / "o.json")]),
        (lambda: ddpscope.calibrate(run, out=tmp_path / "c.json", base="no-such-cluster"),
         ["calibrate", run, "-o", str(tmp_path / "c.json"), "--base", "no-such-cluster"]),
    ]
    functions = {"import-torch": "import_torch"}
    for call, args in cases:
        code, message = cli.error(*args)
        with pytest.raises(ddpscope.Error) as e:
            call()
        expected = in_python(message, functions.get(args[0], args[0])) if code == 2 else message
        assert (str(e.value), e.value.exit_code) == (expected, code), args


def test_replay_trace_out_equals_the_cli(cli, data_dir, tmp_path):
    run = os.path.join(data_dir, "replay", "mlp-wide-w2.json.gz")
    expected = cli.json("replay", "--from-trace", run, "--bucket-cap-mb", "5", "--trace",
                        str(tmp_path / "cli.json"))
    mine = ddpscope.replay(run, bucket_cap_mb=5, trace=tmp_path / "api.json")
    assert mine == expected
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()


def test_the_extension_binds_the_libraries_not_the_cli():
    # No in-process CLI entry point: every function is a library call (python/CMakeLists.txt
    # fails the configure when the extension links the CLI library).
    from ddpscope import _core
    assert not hasattr(_core, "run_cli")
    assert {"simulate", "buckets", "sweep", "overlap", "replay", "import_torch",
            "calibrate"} <= set(dir(_core))


def test_old_keyword_names_still_work_with_a_deprecation_warning(cli, data_dir, tmp_path):
    """The keywords renamed with the CLI's flags (torch= -> torch_version=, output= -> out=,
    trace_out= -> trace=, cluster_file= -> cluster=) keep working for one release."""
    with pytest.warns(DeprecationWarning, match=r"torch= is deprecated .*use torch_version="):
        old = ddpscope.buckets("resnet50", bucket_cap_mb=5, torch="1.13")
    assert old == cli.json("buckets", "--model", "resnet50", "--bucket-cap-mb", "5",
                           "--torch-version", "1.13")
    with pytest.warns(DeprecationWarning, match=r"torch= is deprecated .*use torch_version="):
        assert ddpscope.plan("resnet18", cluster="dgx-a100", torch="1.13")["planned"] is None
    run = os.path.join(data_dir, "replay", "mlp-wide-w2.json.gz")
    with pytest.warns(DeprecationWarning, match=r"trace_out= is deprecated .*use trace="):
        ddpscope.replay(run, bucket_cap_mb=5, trace_out=tmp_path / "old.json")
    assert (tmp_path / "old.json").stat().st_size > 0
    traces = [os.path.join(data_dir, "torch", "ddp_gloo_rank%d.json.gz" % r) for r in (0, 1)]
    with pytest.warns(DeprecationWarning, match=r"output= is deprecated .*use out="):
        ddpscope.import_torch(traces, output=tmp_path / "imported.json")
    assert (tmp_path / "imported.json").stat().st_size > 0
    with pytest.raises(TypeError, match="not both"):
        ddpscope.buckets("resnet50", torch="1.13", torch_version="2.15")


def test_a_model_file_named_like_a_zoo_model_is_the_file(tmp_path, monkeypatch):
    """--model reads a zoo name before a file; Model.load names its file by absolute path, so a
    file called "resnet18" in the working directory is that file, not the zoo's resnet18."""
    monkeypatch.chdir(tmp_path)
    with open("resnet18", "w", encoding="utf-8") as f:
        json.dump({"name": "two", "parameters": [
            {"name": "a.weight", "shape": [4, 3], "dtype": "float32"},
            {"name": "a.bias", "shape": [4], "dtype": "float32"}]}, f)
    model = ddpscope.Model.load("resnet18")
    assert model.num_tensors == 2
    plan = ddpscope.buckets(model, bucket_cap_mb=25)
    assert sum(len(b["params"]) for b in plan["buckets"]) == 2


# The API's functions, the `ddpscope` command each stands for, and the flags of that command's
# --help that are not keyword arguments: what the CLI prints or writes besides the result the
# function returns (--json, --quiet, --csv, --help), and what the API does elsewhere (simulate's
# --trace/--trace-format: SimResult.save_trace; from-topo's --nodes: the CLI's printed busbw
# check), or not at all (replay's --trace-format, --host-profile-out: the library call takes
# neither). Positional arguments that are not flags are left out of the comparison.
SIGNATURES = [
    ("simulate", ["simulate"], {"json", "quiet", "help", "trace", "trace_format"}, set()),
    ("sweep", ["sweep"], {"json", "quiet", "help", "csv", "trace"}, {"best"}),
    ("plan", ["plan"], {"json", "help"}, set()),
    ("buckets", ["buckets"], {"json", "help", "csv"}, set()),
    ("replay", ["replay"], {"json", "help", "trace_format", "host_profile_out", "from_trace"},
     {"trace_path"}),
    ("import_torch", ["import-torch"], {"json", "quiet", "help"}, {"paths"}),
    ("calibrate", ["calibrate"], {"json", "quiet", "help"}, {"traces"}),
    ("cluster_from_topo", ["cluster", "from-topo"], {"help", "nodes"}, {"topo"}),
    ("cluster_calibrate", ["cluster", "calibrate"], {"json", "help"}, {"cluster_file"}),
]


def _cli_keywords(cli, *command):
    """The flags of `ddpscope COMMAND --help`'s options as keyword names (--bucket-cap-mb ->
    bucket_cap_mb)."""
    r = cli.run(*command, "--help")
    assert r.returncode == 0, r.stderr
    flags = re.findall(r"^  --([a-z0-9][a-z0-9-]*)", r.stdout, re.M)
    assert flags, r.stdout
    return {f.replace("-", "_") for f in flags}


@pytest.mark.parametrize("function,command,cli_only,not_flags", SIGNATURES,
                         ids=[s[0] for s in SIGNATURES])
def test_every_flag_of_the_command_is_a_keyword_argument(cli, function, command, cli_only,
                                                         not_flags):
    """The signature is the CLI's: every flag of the command's --help is a parameter of the
    function (but those it documents above), and every parameter is a flag."""
    parameters = inspect.signature(getattr(ddpscope, function)).parameters
    assert not [p for p in parameters.values() if p.kind is p.VAR_KEYWORD]
    assert set(parameters) - not_flags == _cli_keywords(cli, *command) - cli_only
    if "trace_format" in cli_only and function == "simulate":
        assert "format" in inspect.signature(ddpscope.SimResult.save_trace).parameters


def test_signatures_name_the_settings():
    for function, names in [
            (ddpscope.simulate, {"model", "cluster", "nodes", "world_size", "bucket_cap_mb",
                                 "find_unused", "static_graph", "torch_version", "comm_hook"}),
            (ddpscope.sweep, {"bucket_cap_mb", "nodes", "world_size", "find_unused", "best",
                              "compile"}),
            (ddpscope.plan, {"bucket_cap_mb", "world_size", "find_unused", "objective",
                             "from_trace", "torch_version"}),
            (ddpscope.buckets, {"bucket_cap_mb", "find_unused", "torch_version", "iteration",
                                "ready_order", "bucket_cap_mb_list"})]:
        parameters = inspect.signature(function).parameters
        assert names <= set(parameters), function.__name__
        assert all(p.kind is not p.VAR_KEYWORD for p in parameters.values())
        # No setting is required; those past the first few are keyword-only.
        for name in names - {"model"}:
            assert parameters[name].default is not inspect.Parameter.empty, name
        assert parameters["static_graph"].kind is inspect.Parameter.KEYWORD_ONLY


FUNCTIONS = ["simulate", "sweep", "plan", "buckets", "replay", "import_torch", "calibrate",
             "cluster_from_topo", "cluster_calibrate", "overlap"]


@pytest.mark.parametrize("function", FUNCTIONS)
def test_help_documents_every_parameter(function):
    f = getattr(ddpscope, function)
    text = pydoc.render_doc(f, renderer=pydoc.plaintext)
    for section in ("Args:", "Returns:", "Raises:"):
        assert section in text, section
    args = f.__doc__.split("Args:", 1)[1].split("Returns:", 1)[0]
    documented = re.findall(r"^        ([a-z_]+): ", args, re.M)
    assert documented == list(inspect.signature(f).parameters)


@pytest.mark.parametrize("function,call", [
    ("simulate", lambda **kw: ddpscope.simulate("mlp:in=8,hidden=16,depth=2,out=4",
                                                cluster="dgx-a100", **kw)),
    ("buckets", lambda **kw: ddpscope.buckets("mlp:in=8,hidden=16,depth=2,out=4", **kw)),
])
def test_every_keyword_argument_reaches_a_setting_the_library_takes(function, call):
    """No parameter the core's settings parser does not know: each, given a value, either
    works or is refused as a bad value, never as an unknown setting."""
    for name, p in inspect.signature(getattr(ddpscope, function)).parameters.items():
        if p.kind is not p.KEYWORD_ONLY:
            continue
        value = True if p.annotation == "bool" else "?"
        try:
            call(**{name: value})
        except ddpscope.UnknownSetting as e:
            pytest.fail("%s=%r: %s" % (name, value, e))
        except ddpscope.Error:
            pass


def test_an_unknown_keyword_is_an_unknown_setting_before_the_call():
    """With explicit signatures Python refuses an unknown keyword itself: still an
    UnknownSetting (a TypeError, exit code 2) in Python's words; other mistakes in the call stay
    Python's TypeError."""
    for f in (ddpscope.simulate, ddpscope.sweep, ddpscope.buckets, ddpscope.replay,
              ddpscope.import_torch, ddpscope.calibrate, ddpscope.cluster_from_topo,
              ddpscope.cluster_calibrate):
        with pytest.raises(ddpscope.UnknownSetting) as e:
            f("x", bucket_cap=5)
        assert str(e.value) == "%s() got an unexpected keyword argument 'bucket_cap'" % (
            f.__name__)
        assert isinstance(e.value, TypeError) and e.value.exit_code == 2
    with pytest.raises(TypeError, match=r"simulate\(\) missing 1 required positional"):
        ddpscope.simulate()
    with pytest.raises(TypeError) as e:
        ddpscope.buckets("resnet18", 5, False, None, 3)
    assert not isinstance(e.value, ddpscope.Error)


def test_plan_find_unused_true_is_the_clis_on(cli):
    expected = cli.json("plan", "--model", "resnet18", "--cluster", "dgx-a100", "--find-unused",
                        "on", "--static-graph")
    mine = ddpscope.plan("resnet18", cluster="dgx-a100", find_unused=True, static_graph=True)
    assert mine.pop("ddp_kwargs_text") == expected.pop("ddp_kwargs")
    mine.pop("ddp_kwargs")
    assert mine == expected


def test_old_output_keyword_of_the_cluster_functions(data_dir, tmp_path):
    topo = os.path.join(data_dir, "topo", "dgx1-v100.txt")
    with pytest.warns(DeprecationWarning, match=r"output= is deprecated .*use out="):
        ddpscope.cluster_from_topo(topo, gpu="v100", nic_gbps=100, output=tmp_path / "c.json")
    assert json.loads((tmp_path / "c.json").read_text())["name"] == "dgx1-v100"

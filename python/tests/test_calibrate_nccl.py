"""ddpscope.cluster_calibrate against `ddpscope cluster calibrate --nccl-tests` on the committed
published all_reduce_perf logs (external data: $DDPSCOPE_EXTERNAL_DATA/nccl-tests-logs/,
tests/data/EXTERNAL.md names each source):
the same cluster file, byte for byte, and the CLI's errors as ddpscope.Error."""

import json

import pytest

import ddpscope


@pytest.mark.parametrize("fixture,base,algo", [
    ("konnase-v100x8-1node.txt", "dgx-v100", None),
    ("aws-dlami-p4d-a100-2x8.txt", "dgx-a100", "ring"),
])
def test_same_cluster_file_as_the_cli(cli, external, tmp_path, fixture, base, algo):
    log = external("nccl-tests-logs/" + fixture)
    cli_out = tmp_path / "cli.json"
    flags = ["--nccl-algo", algo] if algo else []
    r = cli.run("cluster", "calibrate", "--nccl-tests", log, "--cluster", base,
                "-o", str(cli_out), *flags)
    assert r.returncode == 0, r.stderr
    py_out = tmp_path / "py.json"
    doc = ddpscope.cluster_calibrate(log, cluster=base, nccl_algo=algo,
                                     out=py_out)
    assert py_out.read_bytes() == cli_out.read_bytes()
    assert doc["cluster_json"] == json.loads(cli_out.read_text())
    assert doc["cluster_json"]["name"] == base + "-calibrated"
    # Every row of the log is checked; the smallest sizes are latency-bound and met.
    assert len(doc["checks"]) > 20
    assert abs(doc["checks"][0]["error_percent"]) <= 25
    # The calibrated file works where a cluster file is accepted.
    r = cli.run("allreduce", "--cluster", str(py_out), "--bytes", "8")
    assert r.returncode == 0, r.stderr
    assert "measured" in r.stdout


def test_several_logs_of_one_cluster(cli, external, tmp_path):
    """A list of logs (one per layout): each log's curve goes into the cluster and each log's rows
    are checked; the CLI takes them comma-separated and writes the same file."""
    one = external("nccl-tests-logs/konnase-v100x8-1node.txt")
    two = external("nccl-tests-logs/aws-dlami-p3dn-v100-2x8.txt")
    py_out = tmp_path / "py.json"
    doc = ddpscope.cluster_calibrate([one, two], cluster="dgx-v100", out=py_out)
    assert [(log["ranks"], log["nodes"]) for log in doc["logs"]] == [(8, 1), (16, 2)]
    assert [len(log["checks"]) for log in doc["logs"]] == [25, 28]
    curves = doc["cluster_json"]["measured_allreduce"]
    assert [(c["ranks"], c["nodes"], len(c["points"])) for c in curves] == [(8, 1, 25), (16, 2, 28)]
    for log in doc["logs"]:
        assert all(abs(c["error_percent"]) < 0.01 for c in log["checks"])
    cli_out = tmp_path / "cli.json"
    r = cli.run("cluster", "calibrate", "--nccl-tests", one + "," + two, "--cluster", "dgx-v100",
                "-o", str(cli_out))
    assert r.returncode == 0, r.stderr
    assert cli_out.read_bytes() == py_out.read_bytes()


def test_errors(cli, tmp_path):
    bad = tmp_path / "ar.txt"
    bad.write_text("#  Rank  0 Group  0 Pid  1 on a device  0 [0x07] NVIDIA H100\n"
                   "#  Rank  1 Group  0 Pid  2 on a device  1 [0x08] NVIDIA H100\n"
                   "   8   2   float   sum   -1   31.0   0.00   0.00   0   30.5   0.00   0.00   0\n"
                   "  16   4   float   sum\n")
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.cluster_calibrate(bad)
    assert "ar.txt:4: expected an nccl-tests row" in str(e.value)
    r = cli.run("cluster", "calibrate", "--nccl-tests", str(bad))
    assert r.returncode != 0
    assert "ar.txt:4: expected an nccl-tests row" in r.stderr
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.cluster_calibrate(bad, cluster="no-such")
    assert 'no built-in cluster named "no-such"' in str(e.value)

"""ddpscope.cluster_from_topo against `ddpscope cluster from-topo` on the committed published
`nvidia-smi topo -m` outputs (tests/data/topo/README.md names each source): the same cluster file,
byte for byte, and the CLI's errors as ddpscope.Error."""

import json
import os

import pytest

import ddpscope
from conftest import in_python

# (fixture, settings as keyword arguments, the same as CLI flags)
CASES = [
    ("dgx1-v100.txt", dict(gpu="v100", nic_gbps=100), ["--gpu", "v100", "--nic-gbps", "100"]),
    ("dgx-a100.txt", dict(gpu="A100-SXM4", nic_gbps=200, cpu_vendor="amd"),
     ["--gpu", "A100-SXM4", "--nic-gbps", "200", "--cpu-vendor", "amd"]),
    ("hgx-h100-8ndr.txt", dict(gpu="h100", nic_gbps=400, nics=["mlx5_ib0", "mlx5_ib1"]),
     ["--gpu", "h100", "--nic-gbps", "400", "--nics", "mlx5_ib0,mlx5_ib1"]),
    ("a100-4gpu-nv4.txt", dict(gpu="A100-SXM4", nics=[]), ["--gpu", "A100-SXM4", "--nics", "none"]),
    ("a100-pcie-2gpu-2socket-amd.txt", dict(gpu="a100-pcie", nic_gbps=100, cpu="amd"),
     ["--gpu", "a100-pcie", "--nic-gbps", "100", "--cpu", "amd"]),
    ("gb200-tray-constructed.txt",
     dict(gpu="gb200", nic_gbps=400, nvlink_hosts=18, cpu_vendor="arm", name="rack"),
     ["--gpu", "gb200", "--nic-gbps", "400", "--nvlink-hosts", "18", "--cpu-vendor", "arm",
      "--name", "rack"]),
]


def topo(data_dir, name):
    return os.path.join(data_dir, "topo", name)


@pytest.mark.parametrize("fixture,kwargs,flags", CASES, ids=[c[0] for c in CASES])
def test_same_cluster_file_as_the_cli(cli, data_dir, tmp_path, fixture, kwargs, flags):
    cli_out = tmp_path / "cli.json"
    r = cli.run("cluster", "from-topo", topo(data_dir, fixture), "-o", str(cli_out), *flags)
    assert r.returncode == 0, r.stderr
    py_out = tmp_path / "py.json"
    cluster = ddpscope.cluster_from_topo(topo(data_dir, fixture), out=py_out, **kwargs)
    assert py_out.read_bytes() == cli_out.read_bytes()
    assert cluster == json.loads(cli_out.read_text())


def test_text_instead_of_a_path(data_dir):
    path = topo(data_dir, "a100-pcie-2gpu-2socket-amd.txt")
    with open(path) as f:
        text = f.read()
    from_text = ddpscope.cluster_from_topo(text, gpu="a100-pcie", nics=[], cpu="intel-srp")
    from_file = ddpscope.cluster_from_topo(path, gpu="a100-pcie", nics="none", cpu="intel-srp",
                                           name="from-topo")
    assert from_text["name"] == "from-topo"
    assert from_text["intra_node"] == {"type": "pcie", "pcie_gen": 4, "inter_cpu_GBps": 22.0}
    assert from_text["cpu_vendor"] == "intel"
    # The description names the file it came from; the rest is the same.
    assert "<topo text>" not in json.dumps(from_file)
    from_text.pop("description")
    from_file.pop("description")
    assert from_text == from_file


def test_the_written_file_simulates_as_the_cli_sees_it(cli, data_dir, tmp_path):
    out = tmp_path / "dgx1.json"
    ddpscope.cluster_from_topo(topo(data_dir, "dgx1-v100.txt"), gpu="v100", nic_gbps=100, out=out)
    py = ddpscope.simulate("resnet50", cluster=str(out), nodes=2)
    want = cli.json("simulate", "--model", "resnet50", "--cluster", str(out), "--nodes", "2",
                    "--quiet")
    assert py.step_time_ms == pytest.approx(want["step_time_ns"] / 1e6, rel=1e-12)


@pytest.mark.parametrize("kwargs,flags", [
    (dict(nic_gbps=100), ["--nic-gbps", "100"]),
    (dict(gpu="k80", nic_gbps=100), ["--gpu", "k80", "--nic-gbps", "100"]),
    (dict(gpu="v100"), ["--gpu", "v100"]),
    (dict(gpu="v100", nic_gbps="fast"), ["--gpu", "v100", "--nic-gbps", "fast"]),
    (dict(gpu="v100", nics="mlx5_0,,mlx5_1", nic_gbps=100),
     ["--gpu", "v100", "--nics", "mlx5_0,,mlx5_1", "--nic-gbps", "100"]),
    (dict(gpu="v100", nic_gbps=100, cpu="epyc"), ["--gpu", "v100", "--nic-gbps", "100", "--cpu",
                                                   "epyc"]),
    (dict(gpu="v100", nic_gbps=100, cpu="arm", cpu_vendor="intel"),
     ["--gpu", "v100", "--nic-gbps", "100", "--cpu", "arm", "--cpu-vendor", "intel"]),
    (dict(gpu="v100", nic_gbps=100, nvlink_hosts=18),
     ["--gpu", "v100", "--nic-gbps", "100", "--nvlink-hosts", "18"]),
    (dict(gpu="v100", nic_gbps=100, bogus=1), ["--gpu", "v100", "--nic-gbps", "100", "--bogus",
                                               "1"]),
], ids=["no-gpu", "unknown-gpu", "no-nic-speed", "bad-nic-speed", "empty-nic-name", "unknown-cpu",
        "cpu-vendor-conflict", "nvlink-hosts-on-a-mesh", "unknown-setting"])
def test_errors_are_the_clis(cli, data_dir, kwargs, flags):
    path = topo(data_dir, "dgx1-v100.txt")
    code, message = cli.error("cluster", "from-topo", path, *flags)
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.cluster_from_topo(path, **kwargs)
    assert str(e.value) == in_python(message, "cluster_from_topo")
    assert e.value.exit_code == code == 2


def test_file_errors_are_the_clis(cli, data_dir, tmp_path):
    code, message = cli.error("cluster", "from-topo", "/no/such/topo.txt", "--gpu", "v100")
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.cluster_from_topo("/no/such/topo.txt", gpu="v100")
    assert str(e.value) == message
    assert e.value.exit_code == code
    bad = tmp_path / "bad-topo.txt"
    bad.write_text("        GPU0    GPU1\nGPU0     X      NV4\nGPU1    NV4      Y\n")
    code, message = cli.error("cluster", "from-topo", str(bad), "--gpu", "v100", "--nics", "none")
    with pytest.raises(ddpscope.Error) as e:
        ddpscope.cluster_from_topo(bad, gpu="v100", nics=[])
    assert str(e.value) == message
    assert "unknown link token 'Y' in row GPU1, column GPU1" in message
    # Text has no file name: messages say <topo text>.
    with pytest.raises(ddpscope.Error, match="^<topo text>:3: unknown link token 'Y'"):
        ddpscope.cluster_from_topo(bad.read_text(), gpu="v100", nics=[])
    with pytest.raises(ddpscope.Error, match="/no/such/dir/x.json: cannot open for writing"):
        ddpscope.cluster_from_topo(topo(data_dir, "dgx1-v100.txt"), gpu="v100", nic_gbps=100,
                                   out="/no/such/dir/x.json")

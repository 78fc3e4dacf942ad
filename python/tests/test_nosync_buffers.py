"""Which forwards broadcast DDP's buffers under no_sync(): the simulator against real PyTorch.
DDP broadcasts in a forward only when the forward before it was synced (require_forward_param_sync,
set by _post_forward), so with 3 of every 4 steps under no_sync() the synced step's own forward
does not broadcast, the one after it does. nosync_buffers_job.py counts it on a real gloo job;
`ddpscope simulate --no-sync-steps 4` must issue the buffer broadcast (and charge its host cost)
in the same steps."""
import json
import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch without gloo", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS, PERIOD = 13, 4


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_the_forwards_that_broadcast_buffers_are_pytorchs(cli):
    r = subprocess.run([sys.executable, os.path.join(HERE, "nosync_buffers_job.py"), str(STEPS),
                        str(PERIOD), _free_port()], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    real = json.loads(r.stdout.strip().splitlines()[-1])["broadcast_steps"]
    assert real == [1, 5, 9, 13]  # what the rule above says, on this PyTorch

    sim = cli.json("simulate", "--model", "resnet18", "--cluster", "dgx-a100", "--world-size",
                   "1", "--no-sync-steps", str(PERIOD), "--iterations", str(STEPS), "--quiet")
    its = sim["iterations"]
    assert [it["index"] for it in its] == list(range(1, STEPS + 1))
    # The buffer broadcasts are the first step's collectives (no rebuild, no bucket before it).
    buffers = set(its[0]["collectives"])
    assert buffers and all(c.startswith("broadcast:") for c in buffers)
    simulated = [it["index"] for it in its if buffers & set(it["collectives"])]
    assert simulated == real


def test_the_broadcast_host_cost_is_paid_in_those_forwards_only(cli):
    """On dgx-h100 (host profile h100-torch211: buffer_copy_us per buffer) the no_sync steps'
    DDP host time differs only by the buffer broadcast: paid in steps 1, 5, 9 and 13 (the
    forwards that broadcast, as above), in full, and in no other."""
    sim = cli.json("simulate", "--model", "resnet18", "--cluster", "dgx-h100", "--world-size",
                   "1", "--no-sync-steps", str(PERIOD), "--iterations", str(STEPS), "--quiet")
    terms, host = sim["ddp_overheads"], sim["ddp_host_costs"]
    assert host["buffers"] > 0 and terms["buffer_copy_us"] > 0  # step 13 broadcast
    broadcast_ns = (terms["buffer_sync_us"] * host["broadcasts"] +
                    terms["buffer_copy_us"] * host["buffers"]) * 1000
    quiet = [it for it in sim["iterations"] if not it["synced"]]
    base = min(it["ddp_host_ns"] for it in quiet)
    extra = {it["index"]: it["ddp_host_ns"] - base for it in quiet}
    assert [i for i, e in extra.items() if e > 0] == [1, 5, 9, 13]
    for e in extra.values():
        assert e == 0 or abs(e - broadcast_ns) <= 1  # ns rounding

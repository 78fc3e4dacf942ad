#!/usr/bin/env python3
"""A real DDP job on gloo (CPU) for the recorder's tests and its overhead benchmark.

    recorder_job.py OUT_DIR [--world 2] [--iterations 6] [--mode check|bench] [--repeats N]

check: every rank trains the same small model twice from the same initial weights and data —
once plain, once inside ddpscope.torch.record (trace at OUT_DIR/run.json) — and rank 0 writes
OUT_DIR/result.json: whether the parameters are bitwise identical, DDP's own logging data
(_get_ddp_logging_data: construction and rebuilt bucket sizes) and the torch version.

bench: alternates plain and recorded training runs (A B A B ...), `--repeats` pairs of
`--iterations` steps each, and rank 0 writes each run's per-step wall and CPU times (ns) to
OUT_DIR/bench.json.
"""

import argparse
import json
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

import ddpscope.torch

BATCH = 16
IN = 256


class Residual(nn.Module):
    """x + act(lin(x)): the add runs between two child calls, so the exporter makes it a layer
    of its own ("2.add") that no module hook of the recorder times (as in every ResNet and
    transformer)."""

    def __init__(self, width, act=nn.ReLU):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.act = act()

    def forward(self, x):
        return x + self.act(self.lin(x))


def make_model():
    """Several layers and sizes, so a small cap gives several buckets, and a residual add."""
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(IN, 512), nn.ReLU(), Residual(512),
                         nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))


def batches(rank, iterations):
    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(BATCH, IN, generator=g), torch.randint(0, 10, (BATCH,), generator=g))
            for _ in range(iterations)]


def train(ddp, optimizer, data, step_times=None, cpu_times=None):
    """`step_times`: wall ns per step; `cpu_times`: this process's CPU ns per step (all its
    threads: less sensitive to a loaded host than wall time)."""
    loss_fn = nn.CrossEntropyLoss()
    for x, y in data:
        t0 = time.perf_counter_ns()
        c0 = time.process_time_ns()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()
        optimizer.step()
        if step_times is not None:
            step_times.append(time.perf_counter_ns() - t0)
            cpu_times.append(time.process_time_ns() - c0)


def new_job(cap_mb):
    model = make_model()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_mb)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    return ddp, optimizer


def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    # Loopback: a CI container's hostname need not resolve to a reachable interface.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    torch.set_num_threads(1)
    data = batches(rank, args.iterations)
    cap_mb = 0.5
    if args.mode == "check":
        plain, opt = new_job(cap_mb)
        train(plain, opt, data)
        recorded, opt = new_job(cap_mb)
        with ddpscope.torch.record(recorded, path=os.path.join(args.out, "run.json"),
                                   optimizer=opt):
            train(recorded, opt, data)
        same = all(torch.equal(a, b) for a, b in zip(plain.parameters(), recorded.parameters()))
        moved = any(not torch.equal(a, b) for a, b in zip(make_model().parameters(),
                                                           recorded.parameters()))
        logging = recorded._get_ddp_logging_data()
        if rank == 0:
            with open(os.path.join(args.out, "result.json"), "w") as f:
                json.dump({"parameters_identical": same, "parameters_trained": moved,
                           "torch": torch.__version__, "world_size": args.world,
                           "iterations": args.iterations,
                           "bucket_sizes": logging.get("bucket_sizes"),
                           "rebuilt_bucket_sizes": logging.get("rebuilt_bucket_sizes"),
                           "rebuilt_per_bucket_param_indices":
                               logging.get("rebuilt_per_bucket_param_indices")}, f, indent=1)
    else:
        runs = []
        for k in range(args.repeats):
            for mode in ("plain", "recorded"):
                ddp, opt = new_job(cap_mb)
                train(ddp, opt, data[:2])  # warm-up (and DDP's bucket rebuild)
                times, cpu = [], []
                dist.barrier()
                if mode == "plain":
                    train(ddp, opt, data, times, cpu)
                else:
                    with ddpscope.torch.record(ddp, path=os.path.join(args.out, "bench.trace.json"),
                                               optimizer=opt):
                        train(ddp, opt, data, times, cpu)
                runs.append({"mode": mode, "repeat": k, "step_ns": times, "cpu_ns": cpu})
        if rank == 0:
            with open(os.path.join(args.out, "bench.json"), "w") as f:
                json.dump({"torch": torch.__version__, "world_size": args.world,
                           "iterations": args.iterations, "runs": runs}, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--mode", choices=["check", "bench"], default="check")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--port", type=int, default=0, help="rendezvous port (default: a free one)")
    args = ap.parse_args()
    if args.port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            args.port = s.getsockname()[1]
    mp.spawn(worker, args=(args,), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch DDP (gloo, CPU) step time for the models ddpscope's runtime benchmarks, to compare
with `ddpscope run` / runtime_mpi_bench on the same machine and the same BLAS.

Models (same shapes as ddpscope's zoo):
  mlp-wide  8 x Linear(1024, 1024) with ReLU between them (MSE regression)
  resnet18  torchvision-style ResNet-18 (BasicBlock [2, 2, 2, 2], 1000 classes), square images
            of --image-size pixels (cross-entropy); written out here, no torchvision needed

Fairness: one thread per rank (OMP_NUM_THREADS=1, torch.set_num_threads(1)); Debian's
python3-torch links libblas.so.3, which points at OpenBLAS like ddpscope; convolutions go
through oneDNN unless --no-mkldnn (then im2col + BLAS, like ddpscope). SGD(lr=0.01,
momentum=0.9), default DDP settings (bucket_cap_mb=25, find_unused_parameters=False).

  python3 scripts/bench_pytorch_ddp.py --model mlp-wide --nproc 2 --batch 64
  python3 scripts/bench_pytorch_ddp.py --model resnet18 --nproc 2 --batch 32 --image-size 32
  python3 scripts/bench_pytorch_ddp.py --model mlp-wide --nproc 1 --batch 64 --compare-local

Prints one JSON object: median_step_ms (DDP), and with --compare-local (world size 1 only)
local_median_step_ms and ddp_overhead_percent.
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402


# The models are the ones `ddpscope validate --torch` trains (one definition for both scripts).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sim", "validate"))
from torch_ddp_job import ResNet18, mlp_wide  # noqa: E402


def make(model_name, per_rank_batch, image_size):
    torch.manual_seed(0)
    if model_name == "mlp-wide":
        model = mlp_wide()
        x = torch.randn(per_rank_batch, 1024)
        y = torch.randn(per_rank_batch, 1024)
        loss_fn = nn.MSELoss()
    else:
        model = ResNet18()
        x = torch.randn(per_rank_batch, 3, image_size, image_size)
        y = torch.randint(0, 1000, (per_rank_batch,))
        loss_fn = nn.CrossEntropyLoss()
    return model, x, y, loss_fn


def time_steps(model, x, y, loss_fn, iters, warmup, barrier=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    times = []
    for i in range(warmup + iters):
        if barrier:
            barrier()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def worker(rank, args, queue):
    torch.set_num_threads(1)
    torch.backends.mkldnn.enabled = args.mkldnn
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=args.nproc)
    model, x, y, loss_fn = make(args.model, args.batch // args.nproc, args.image_size)
    result = {}
    if args.compare_local and args.nproc == 1:
        result["local_median_step_ms"] = time_steps(model, x, y, loss_fn, args.iters, args.warmup)
        model, x, y, loss_fn = make(args.model, args.batch, args.image_size)
    ddp = nn.parallel.DistributedDataParallel(model)
    step = time_steps(ddp, x, y, loss_fn, args.iters, args.warmup)
    steps = [None] * args.nproc
    dist.all_gather_object(steps, step)
    if rank == 0:
        result["median_step_ms"] = max(steps)  # the slowest rank sets the pace
        result["per_rank_median_step_ms"] = steps
        if "local_median_step_ms" in result:
            result["ddp_overhead_percent"] = 100.0 * (step / result["local_median_step_ms"] - 1)
        queue.put(result)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["mlp-wide", "resnet18"], default="mlp-wide")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="GLOBAL batch (per rank: batch / nproc)")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--no-mkldnn", dest="mkldnn", action="store_false",
                   help="convolutions via im2col + BLAS (like ddpscope) instead of oneDNN")
    p.add_argument("--compare-local", action="store_true",
                   help="with --nproc 1: also time plain local training; report DDP overhead")
    args = p.parse_args()
    if args.batch % args.nproc:
        sys.exit(f"--batch {args.batch} is not divisible by --nproc {args.nproc}")
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(args, queue), nprocs=args.nproc, join=True)
    result = queue.get()
    result.update(model=args.model, world_size=args.nproc, global_batch=args.batch,
                  image_size=args.image_size if args.model == "resnet18" else None,
                  mkldnn=args.mkldnn, torch=torch.__version__, threads_per_rank=1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

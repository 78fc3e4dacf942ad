#!/usr/bin/env python3
"""One real PyTorch DDP training run for `ddpscope validate --python PYTHON`.

Trains one configuration of the validation grid with real torch.nn.parallel.DistributedDataParallel
(gloo, CPU, one process per rank, one thread per rank), profiles every iteration with
torch.profiler (Kineto; record_shapes=True so the collectives carry their message sizes) and
writes, for --out PREFIX:

  PREFIX-rank<R>.json   the profiler's trace of rank R (prof.export_chrome_trace)
  PREFIX-job.json       what DDP itself reports, from rank 0: torch version, world size, the
                        settings, the bucket sizes (ddp._get_ddp_logging_data(): bucket_sizes of
                        the construction plan, rebuilt_bucket_sizes after the rebuild, bytes) and
                        each rank's per-iteration wall times (perf_counter, ms)

Models: the shapes of ddpscope's zoo, written out here (no torchvision needed), with the zoo's
parameter order and forward order so `ddpscope import-torch --model` names the layers:
  mlp-wide   8 x Linear(1024, 1024) with ReLU(inplace) between them, MSE loss
  resnet18   torchvision's ResNet-18 (BasicBlock [2, 2, 2, 2], 1000 classes; downsample after bn2
             as torchvision does), square images of --image-size pixels, cross-entropy

Synthetic data (fixed seed), SGD(lr=0.01, momentum=0.9), zero_grad(set_to_none=True).
bucket_cap_mb is passed only when --bucket-cap-mb is given (an explicit cap changes the first
bucket in current PyTorch, docs/spec/ddp-semantics.md Appendix B; the grid leaves cap 25 unset).

This file is embedded in the ddpscope binary (sim/validate/CMakeLists.txt) and written next to the
run's traces; it can be run by hand too:
  python3 sim/validate/torch_ddp_job.py --model mlp-wide --world 2 \
      --batch-per-rank 16 --warmup 2 --iterations 10 --out mlp-w2
Exit codes: 0 done; 3 torch is missing or too old (no Kineto export); 2 bad arguments.
"""
import argparse
import json
import os
import sys
import tempfile
import time
import warnings

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
except ImportError as e:  # the caller turns exit 3 into a clear error
    print(f"torch_ddp_job: cannot import torch: {e}", file=sys.stderr)
    sys.exit(3)


def mlp_wide():
    layers = []
    for i in range(8):
        layers.append(nn.Linear(1024, 1024))
        if i < 7:
            layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """torchvision's ResNet: a 7x7 stem, four stages of `block` (widths 64..512, the first
    block of stages 2-4 strided), average pool, fc. `block(cin, width, stride)` has
    `block.expansion` output channels per unit of width. Also the GPU kit's resnet50
    (scripts/gpu_kit/torch_job.py) with its bottleneck block."""

    def __init__(self, block, blocks, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
            layers = []
            for b in range(count):
                layers.append(block(cin, width, 2 if i > 0 and b == 0 else 1))
                cin = width * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*layers))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def ResNet18(classes=1000):  # noqa: N802 (a constructor, named as torchvision's class)
    return ResNet(BasicBlock, (2, 2, 2, 2), classes)


def make(args):
    torch.manual_seed(0)
    b = args.batch_per_rank
    if args.model == "mlp-wide":
        return mlp_wide(), torch.randn(b, 1024), torch.randn(b, 1024), nn.MSELoss()
    s = args.image_size
    return (ResNet18(), torch.randn(b, 3, s, s), torch.randint(0, 1000, (b,)),
            nn.CrossEntropyLoss())


def buffer_bytes(model):
    """Bytes of the module's buffers per dtype: what DDP's buffer sync broadcasts, one coalesced
    broadcast per dtype (each far under its 250 MiB group limit)."""
    out = {}
    for b in model.buffers():
        key = str(b.dtype).replace("torch.", "")
        out[key] = out.get(key, 0) + b.numel() * b.element_size()
    return out


def worker(rank, args, init_file):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=args.world)
    model, x, y, loss_fn = make(args)
    kwargs = {"find_unused_parameters": args.find_unused}
    if args.bucket_cap_mb is not None:
        kwargs["bucket_cap_mb"] = args.bucket_cap_mb
    ddp = nn.parallel.DistributedDataParallel(model, **kwargs)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    steps_ms = []
    dist.barrier()
    total = args.warmup + args.iterations
    # A schedule makes prof.step() record the ProfilerStep#N ranges (0 .. total-1); every
    # iteration is recorded (the importer leaves out the warm-up and the pre-rebuild ones).
    with warnings.catch_warnings():  # "won't be using warmup": every iteration is wanted
        warnings.simplefilter("ignore")
        schedule = torch.profiler.schedule(wait=0, warmup=0, active=total, repeat=1)
    trace = f"{args.out}-rank{rank}.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=not args.default_profiler, schedule=schedule,
                                on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        for _ in range(total):
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss_fn(ddp(x), y).backward()
            opt.step()
            steps_ms.append((time.perf_counter() - start) * 1e3)
            prof.step()
    all_steps = [None] * args.world
    dist.all_gather_object(all_steps, steps_ms)
    if rank == 0:
        logging = ddp._get_ddp_logging_data()
        job = {
            "torch": torch.__version__,
            "backend": "gloo",
            "world_size": args.world,
            "model": args.model,
            "batch_per_rank": args.batch_per_rank,
            "image_size": args.image_size if args.model == "resnet18" else None,
            "bucket_cap_mb": args.bucket_cap_mb,
            "find_unused_parameters": args.find_unused,
            "warmup": args.warmup,
            "iterations": args.iterations,
            "threads_per_rank": torch.get_num_threads(),
            "record_shapes": not args.default_profiler,
            "parameter_tensors": len(list(model.parameters())),
            "buffer_bytes_by_dtype": buffer_bytes(model),
            "bucket_sizes": str(logging.get("bucket_sizes", "")),
            "rebuilt_bucket_sizes": str(logging.get("rebuilt_bucket_sizes", "")),
            "step_ms_per_rank": all_steps,
        }
        with open(f"{args.out}-job.json", "w") as f:
            json.dump(job, f, indent=2)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["mlp-wide", "resnet18"])
    p.add_argument("--world", type=int)
    p.add_argument("--batch-per-rank", type=int)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--bucket-cap-mb", type=float, default=None)
    p.add_argument("--find-unused", action="store_true")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--out", help="prefix of the files written")
    p.add_argument("--default-profiler", action="store_true",
                   help="profile with torch.profiler's default settings (no record_shapes: the "
                        "collectives carry no sizes), as most users do")
    p.add_argument("--check", action="store_true",
                   help="print the torch version and whether Kineto is built in, then exit")
    args = p.parse_args()
    kineto = torch.autograd.kineto_available() if hasattr(torch.autograd, "kineto_available") \
        else False
    if args.check or not kineto:
        print(json.dumps({"torch": torch.__version__, "kineto": bool(kineto)}))
        if not kineto:
            print(f"torch_ddp_job: torch {torch.__version__} has no Kineto profiler "
                  "(torch.autograd.kineto_available() is False): its traces cannot be imported",
                  file=sys.stderr)
            sys.exit(3)
        return
    for name in ("model", "world", "batch_per_rank", "out"):
        if getattr(args, name) is None:
            p.error(f"--{name.replace('_', '-')} is required")
    if args.world < 1 or args.batch_per_rank < 1:
        p.error("--world and --batch-per-rank must be positive")
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "rendezvous")
        mp.start_processes(worker, args=(args, init_file), nprocs=args.world, join=True,
                           start_method="fork")


if __name__ == "__main__":
    main()

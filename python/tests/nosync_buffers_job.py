"""A real DDP job (gloo, one rank, CPU) with BatchNorm buffers under no_sync() for 3 of every 4
steps (steps 4, 8, 12 synced, as `ddpscope simulate --no-sync-steps 4` numbers them): prints, as
JSON, the steps whose forward broadcast the module's buffers (DDP's _sync_buffers)."""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    steps, period = int(sys.argv[1]), int(sys.argv[2])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", sys.argv[3])
    dist.init_process_group("gloo", rank=0, world_size=1)
    ddp = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)))
    if not hasattr(ddp, "_sync_buffers"):
        sys.exit("this PyTorch's DDP has no _sync_buffers to count")
    broadcast, step = [], [0]
    sync = ddp._sync_buffers

    def counted(*args, **kwargs):
        broadcast.append(step[0])
        return sync(*args, **kwargs)

    ddp._sync_buffers = counted
    for i in range(1, steps + 1):
        step[0] = i
        x = torch.randn(4, 8)
        if i % period:
            with ddp.no_sync():
                ddp(x).sum().backward()
        else:
            ddp(x).sum().backward()
    dist.destroy_process_group()
    print(json.dumps({"torch": torch.__version__, "broadcast_steps": broadcast}))


if __name__ == "__main__":
    main()

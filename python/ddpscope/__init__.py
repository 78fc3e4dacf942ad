"""ddpscope from Python: PyTorch DDP's bucket plans, a DDP simulator and trace tools.

    import ddpscope
    model = ddpscope.Model.zoo("gpt2-small")          # or Model.from_torch(module, example)
    r = ddpscope.simulate(model, cluster="dgx-a100", nodes=4, bucket_cap_mb=50)
    print(r.step_time_ms, r.exposed_comm_ms, r.overlap_percent)
    rows = ddpscope.sweep(model, cluster="dgx-a100", nodes=4, bucket_cap_mb=[5, 25, 50, 100])
    kwargs = ddpscope.plan(model, cluster="dgx-a100", nodes=4)["ddp_kwargs"]   # a dict
    # DistributedDataParallel(module, **kwargs)

    with ddpscope.torch.record(ddp_model, path="run.json"):   # a live DDP job, every rank
        train()
    ddp_model = ddpscope.torch.tune(ddp_model, train_step).model   # measured in the job itself

Settings are the ``ddpscope`` CLI's flags as keyword arguments (``bucket_cap_mb=50`` is
``--bucket-cap-mb 50``); errors raise :class:`ddpscope.Error` with the CLI's message, bad input
as :class:`ddpscope.InvalidSetting` (a ``ValueError``) or :class:`ddpscope.UnknownSetting` (a
``TypeError``) naming the keyword argument.
"""

from ._api import (Error, InvalidSetting, Model, SimResult, UnknownSetting, buckets, calibrate, cli,
                   cluster_calibrate, cluster_from_topo, import_torch, models, overlap, plan,
                   replay, simulate, sweep)

__version__ = "0.1.0"

__all__ = ["Error", "InvalidSetting", "Model", "SimResult", "UnknownSetting", "buckets", "calibrate", "cli", "cluster_calibrate",
           "cluster_from_topo", "import_torch", "models", "overlap", "plan", "replay", "simulate", "sweep", "torch",
           "export"]


def __getattr__(name):
    # ddpscope.torch (the live recorder) imports torch: only when asked for.
    # ddpscope.export (the exporter) likewise.
    if name in ("torch", "export"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'ddpscope' has no attribute %r" % name)

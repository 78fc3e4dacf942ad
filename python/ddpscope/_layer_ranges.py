"""Names each module's forward in a PyTorch profiler trace, for ``ddpscope import-torch``.

    from torch.profiler import profile
    with ddpscope.torch.layer_ranges(ddp_model), profile(record_shapes=True) as prof:
        for _ in range(steps):
            train_step()
            prof.step()

Inside the ``with``, every module's forward runs in a ``record_function`` range named
``ddpscope.layer:<module path>`` (the path ``named_modules()`` gives, of the module DDP wraps
when given the DDP model). ``import-torch`` then names a trace's layers by those ranges: a
layer's forward is what ran inside its range, its backward the autograd nodes of those ops,
which needs no rule per op type (without the ranges, the import matches ops to layers by their
kind, which an op or a backward node it does not know can stop). A module called more than once
in a step gets one range per call (the import names them ``<path>``, ``<path>:2``, ...).

This file imports nothing but torch, so that a script outside the package (the GPU kit's job) can
load it by its path.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Dict, Iterator, List, Tuple

import torch

PREFIX = "ddpscope.layer:"


def _unwrapped(model: Any) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"layer_ranges: expected a torch.nn.Module, got {type(model).__name__}")
    # DistributedDataParallel and DataParallel keep the user's model as .module; its paths are
    # the model's own (no "module." in front), as the model given to --model names its layers.
    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    return model.module if isinstance(model, wrappers) else model


def _always_call() -> Dict[str, bool]:
    # torch >= 2.1: the forward hook runs even when the forward raises, closing the range.
    params = inspect.signature(torch.nn.Module.register_forward_hook).parameters
    return {"always_call": True} if "always_call" in params else {}


@contextlib.contextmanager
def layer_ranges(model: Any) -> Iterator[None]:
    """Every submodule's forward of ``model`` in a ``ddpscope.layer:<path>`` profiler range while
    the ``with`` lasts (forward hooks, removed on leaving it)."""
    root = _unwrapped(model)
    opened: List[Tuple[int, Any]] = []  # (id of the module, its range), in the order opened
    handles = []
    hook_kwargs = _always_call()

    def enter(label: str):
        def pre(module: torch.nn.Module, inputs: Any) -> None:
            rf = torch.autograd.profiler.record_function(label)
            rf.__enter__()
            opened.append((id(module), rf))

        return pre

    def leave(module: torch.nn.Module, inputs: Any, output: Any) -> None:
        # The module's innermost open range (the last opened: forwards nest).
        for i in range(len(opened) - 1, -1, -1):
            if opened[i][0] == id(module):
                opened.pop(i)[1].__exit__(None, None, None)
                return

    try:
        for path, module in root.named_modules():
            if not path:
                continue
            handles.append(module.register_forward_pre_hook(enter(PREFIX + path)))
            handles.append(module.register_forward_hook(leave, **hook_kwargs))
        yield
    finally:
        for handle in handles:
            handle.remove()
        # Ranges a forward left open (it raised on a torch without always_call): closed here,
        # innermost first, so that the profiler's stack stays balanced.
        while opened:
            opened.pop()[1].__exit__(None, None, None)

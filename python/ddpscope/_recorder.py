"""The live DDP recorder behind ``with ddpscope.torch.record(ddp_model, path="run.json"):``.

Around a user's training loop, on every rank, it records

- each gradient's ready time: a hook on every parameter's AccumulateGrad node, the event DDP's
  reducer reacts to (registered after DDP's own, so it fires once DDP has taken the gradient);
- each bucket's allreduce start and end: a DDP communication hook that runs the default
  allreduce itself (scale by 1/world_size, as the built-in path does when it copies a gradient
  into its bucket, then allreduce-sum; the numbers the job computes do not change). Start = when
  DDP hands the bucket over; end = when the allreduce's future completes (on CUDA, CUDA events
  around the collective on the current stream, converted to the host clock at the end);
- the forward pass (DDP's forward), each leaf layer's forward (named as the exporter names
  layers, so a trace and ``Model.from_torch`` of the same module agree), each layer's backward
  (from its gradients' ready times), the backward window (from the gradient reaching the DDP
  output to the last gradient), the optimizer step when ``optimizer=`` is given, and the
  iteration boundaries (one iteration per DDP forward).

At the end of the block every rank sends its spans to rank 0 (``gather_object``, on a gloo group
when the job's backend is not gloo) and rank 0 writes one ddpscope trace — lanes compute /
comm / ddp / iterations as ``ddpscope run`` writes them, metadata with the run's DDP settings —
that ``ddpscope replay``, ``calibrate``, ``overlap`` and the GUI open.

Limits: DDP takes one communication hook, so a model with its own hook cannot be recorded, and
the hook stays registered after the block (it keeps running the plain allreduce, recording
nothing). Host clocks of different machines are aligned at the start with one barrier (the
wall clock of each host, NTP-synchronized).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Dict, Iterator, List, Optional

import torch
import torch.distributed as dist

from . import _core
from .export import _leaf_layers

__all__ = ["record", "Recorder"]


def _now() -> int:
    return time.perf_counter_ns()


class Recorder:
    """What one rank records; :func:`record` makes one and writes the trace at the end."""

    def __init__(self, ddp_model: Any, path: str, optimizer: Any = None,
                 model_name: Optional[str] = None, warmup: int = 0):
        if not isinstance(ddp_model, torch.nn.parallel.DistributedDataParallel):
            raise TypeError("ddpscope.torch.record: expected a DistributedDataParallel model, got "
                            "%s" % type(ddp_model).__name__)
        self.ddp = ddp_model
        self.path = os.fspath(path)
        self.optimizer = optimizer
        self.model_name = model_name
        self.warmup = warmup
        self.group = ddp_model.process_group
        self.rank = dist.get_rank()
        self.world = dist.get_world_size(self.group)
        self.cuda = any(p.is_cuda for p in ddp_model.parameters())
        self.active = False
        self.lock = threading.Lock()
        # Recorded per iteration (index 1-based).
        self.iteration = 0
        self.iter_start: Dict[int, int] = {}
        self.forward: Dict[int, List[int]] = {}        # [start, end]
        self.backward_start: Dict[int, int] = {}
        self.ready: List[tuple] = []                   # (iteration, param index, t)
        self.layer_forward: List[tuple] = []           # (iteration, name, start, end)
        self.optimizer_spans: List[tuple] = []         # (iteration, start, end)
        self.comm: List[Dict[str, Any]] = []           # one per bucket allreduce
        self.batch: Optional[int] = None
        self.handles: List[Any] = []
        self.nodes: List[Any] = []
        module = ddp_model.module
        self.param_index = {id(p): i for i, p in enumerate(module.parameters())}
        self.param_names = [n for n, _ in module.named_parameters()]
        self.param_bytes = [p.numel() * p.element_size() for p in module.parameters()]
        self.param_owner: Dict[int, str] = {}  # parameter index -> layer name (first owner)
        self.layers = _leaf_layers(module)
        self._layer_calls: Dict[str, int] = {}
        self._layer_open: Dict[int, int] = {}
        self.cuda_events: List[tuple] = []  # (comm entry, start event, end event)
        self.cuda_anchor: Optional[tuple] = None  # (event, host time)

    # ---- hooks ----
    def _forward_pre(self, module: Any, inputs: Any) -> None:
        if not self.active:
            return
        t = _now()
        self.iteration += 1
        self.iter_start[self.iteration] = t
        self.forward[self.iteration] = [t, t]
        self._layer_calls = {}
        if self.batch is None:
            first = next((x for x in _flatten(inputs) if isinstance(x, torch.Tensor)), None)
            if first is not None and first.dim() > 0:
                self.batch = int(first.shape[0])

    def _forward_post(self, module: Any, inputs: Any, output: Any) -> None:
        if not self.active or self.iteration not in self.forward:
            return
        self.forward[self.iteration][1] = _now()
        it = self.iteration
        for t in _flatten(output):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(lambda grad, it=it: self._backward_begin(it))

    def _backward_begin(self, it: int) -> None:
        if self.active:
            self.backward_start.setdefault(it, _now())

    def _grad_ready(self, index: int) -> None:
        if self.active and self.iteration > 0:
            self.ready.append((self.iteration, index, _now()))

    def _layer_pre(self, base: str) -> Any:
        def hook(module: Any, inputs: Any) -> None:
            if self.active:
                self._layer_open[id(module)] = _now()
        return hook

    def _layer_post(self, base: str) -> Any:
        def hook(module: Any, inputs: Any, output: Any) -> None:
            start = self._layer_open.pop(id(module), None)
            if not self.active or start is None:
                return
            n = self._layer_calls.get(base, 0) + 1
            self._layer_calls[base] = n
            name = base if n == 1 else "%s:%d" % (base, n)
            self.layer_forward.append((self.iteration, name, start, _now()))
        return hook

    # No annotations: DDP checks them (bucket: dist.GradBucket, returns a Future).
    def _comm_hook(self, state, bucket):  # type: ignore[no-untyped-def]
        buffer = bucket.buffer()
        # DDP's built-in path multiplies each gradient by 1/world_size while copying it into
        # the bucket; with a hook the copy is plain and the hook scales. Same operation, same
        # result (a division would round differently for world sizes that are not powers of 2).
        buffer.mul_(1.0 / self.world)
        entry = None
        if self.active:
            entry = {"iteration": self.iteration, "bucket": bucket.index(),
                     "bytes": buffer.numel() * buffer.element_size(), "start": _now(), "end": None}
            if self.cuda:
                start_event = torch.cuda.Event(enable_timing=True)
                start_event.record()
                entry["events"] = [start_event, None]
            with self.lock:
                self.comm.append(entry)
        fut = dist.all_reduce(buffer, group=self.group, async_op=True).get_future()

        def done(f: Any) -> Any:
            if entry is not None:
                entry["end"] = _now()
                if self.cuda:
                    end_event = torch.cuda.Event(enable_timing=True)
                    end_event.record()
                    entry["events"][1] = end_event
            return f.value()[0]

        return fut.then(done)

    def _optimizer_pre(self, *unused: Any) -> None:
        if self.active:
            self._opt_start = _now()

    def _optimizer_post(self, *unused: Any) -> None:
        if self.active and getattr(self, "_opt_start", None) is not None:
            self.optimizer_spans.append((self.iteration, self._opt_start, _now()))
            self._opt_start = None

    # ---- install / remove ----
    def install(self) -> None:
        try:
            self.ddp.register_comm_hook(None, self._comm_hook)
        except RuntimeError as e:
            raise RuntimeError("ddpscope.torch.record: cannot register its communication hook "
                               "(DDP takes one; does this model have its own?): %s" % e)
        self.handles.append(self.ddp.register_forward_pre_hook(self._forward_pre))
        self.handles.append(self.ddp.register_forward_hook(self._forward_post))
        module = self.ddp.module
        for i, p in enumerate(module.parameters()):
            if not p.requires_grad:
                continue
            node = p.expand_as(p).grad_fn.next_functions[0][0]
            self.nodes.append(node)
            self.handles.append(node.register_hook(lambda *unused, i=i: self._grad_ready(i)))
        for path, m, _kind in self.layers:
            base = path or type(m).__name__.lower()
            for p in m.parameters():
                idx = self.param_index.get(id(p))
                if idx is not None:
                    self.param_owner.setdefault(idx, base)
            self.handles.append(m.register_forward_pre_hook(self._layer_pre(base)))
            self.handles.append(m.register_forward_hook(self._layer_post(base)))
        if self.optimizer is not None:
            if hasattr(self.optimizer, "register_step_pre_hook"):
                self.handles.append(self.optimizer.register_step_pre_hook(self._optimizer_pre))
                self.handles.append(self.optimizer.register_step_post_hook(self._optimizer_post))
            else:  # torch < 2.0: wrap step
                original = self.optimizer.step

                def step(*args: Any, **kwargs: Any) -> Any:
                    self._optimizer_pre()
                    try:
                        return original(*args, **kwargs)
                    finally:
                        self._optimizer_post()

                self.optimizer.step = step
                self._restore_step = original
        if self.cuda:
            torch.cuda.synchronize()
            anchor = torch.cuda.Event(enable_timing=True)
            anchor.record()
            torch.cuda.synchronize()
            self.cuda_anchor = (anchor, _now())

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []
        self.nodes = []
        if hasattr(self, "_restore_step"):
            self.optimizer.step = self._restore_step
            del self._restore_step

    # ---- the trace ----
    def rank_track(self, offset_ns: int) -> Dict[str, Any]:
        """This rank's lanes (times shifted by offset_ns) as write_trace takes them."""
        if self.cuda:
            torch.cuda.synchronize()
            anchor, anchor_host = self.cuda_anchor
            for entry in self.comm:
                start_event, end_event = entry.pop("events", (None, None))
                if start_event is not None and end_event is not None:
                    entry["start"] = anchor_host + int(anchor.elapsed_time(start_event) * 1e6)
                    entry["end"] = anchor_host + int(anchor.elapsed_time(end_event) * 1e6)
        iterations = sorted(self.iter_start)
        ends: Dict[int, int] = {}
        spans_end: Dict[int, int] = {}

        def note_end(it: int, t: int) -> None:
            spans_end[it] = max(spans_end.get(it, 0), t)

        compute: List[tuple] = []
        comm: List[tuple] = []
        ddp: List[tuple] = []
        for it, name, start, end in self.layer_forward:
            compute.append((name, "forward", start, end - start, {"iteration": it}))
            note_end(it, end)
        # Backward per layer: a layer is done when its last gradient is ready; its span runs
        # from the previous layer's end (the first: the backward start).
        by_iter: Dict[int, Dict[str, int]] = {}
        for it, index, t in self.ready:
            layer = self.param_owner.get(index)
            note_end(it, t)
            ddp.append(("grad_ready", "other", t, 0,
                        {"iteration": it, "param": index, "name": self.param_names[index],
                         "bytes": self.param_bytes[index]}))
            if layer is not None:
                d = by_iter.setdefault(it, {})
                d[layer] = max(d.get(layer, 0), t)
        for it, done in by_iter.items():
            previous = self.backward_start.get(it, min(done.values()))
            for t, layer in sorted((t, l) for l, t in done.items()):
                compute.append((layer + " (backward)", "backward", previous, max(0, t - previous),
                                {"iteration": it}))
                previous = t
        for it, start, end in self.optimizer_spans:
            compute.append(("optimizer.step", "optimizer", start, end - start, {"iteration": it}))
            note_end(it, end)
        for e in self.comm:
            if e["end"] is None:
                continue
            comm.append(("allreduce", "allreduce", e["start"], e["end"] - e["start"],
                         {"bucket": e["bucket"], "bytes": e["bytes"],
                          "iteration": e["iteration"]}))
            note_end(e["iteration"], e["end"])
        for it in iterations:
            fs, fe = self.forward[it]
            ddp.append(("forward", "forward", fs, fe - fs, {"iteration": it}))
            bs = self.backward_start.get(it)
            last_ready = max((t for i, _, t in self.ready if i == it), default=None)
            if bs is not None and last_ready is not None:
                ddp.append(("backward", "backward", bs, last_ready - bs, {"iteration": it}))
        for k, it in enumerate(iterations):
            if k + 1 < len(iterations):
                ends[it] = self.iter_start[iterations[k + 1]]
            else:
                ends[it] = max(spans_end.get(it, 0), self.forward[it][1])
        shift = lambda spans: [(n, c, s + offset_ns, d, a) for n, c, s, d, a in spans]
        return {
            "rank": self.rank,
            "lanes": [
                {"name": "compute", "kind": "compute", "spans": shift(compute)},
                {"name": "comm", "kind": "comm", "spans": shift(comm)},
                {"name": "ddp", "kind": "host", "spans": shift(ddp)},
            ],
            "iterations": [(it, self.iter_start[it] + offset_ns, ends[it] - self.iter_start[it])
                           for it in iterations],
        }

    def metadata(self) -> Dict[str, Any]:
        ddp = self.ddp
        cap_bytes = getattr(ddp, "bucket_bytes_cap", 25 * 1024 * 1024)
        meta: Dict[str, Any] = {
            "world_size": self.world,
            "backend": str(dist.get_backend(self.group)),
            "device": "cuda" if self.cuda else "cpu",
            "recorder": "ddpscope.torch.record",
            "torch": torch.__version__,
            "iterations": len(self.iter_start),
            "warmup": self.warmup,
            "bucket_cap_mb": cap_bytes / (1024.0 * 1024.0),
            "find_unused_parameters": bool(getattr(ddp, "find_unused_parameters", False)),
            "static_graph": bool(getattr(ddp, "static_graph", False)),
            "gradient_as_bucket_view": bool(getattr(ddp, "gradient_as_bucket_view", False)),
            "semantics": _semantics(),
        }
        if hasattr(ddp, "bucket_bytes_cap_default"):
            meta["bucket_cap_set_by_user"] = not ddp.bucket_bytes_cap_default
        if self.model_name:
            meta["model"] = self.model_name
        if self.batch is not None:
            meta["batch_per_rank"] = self.batch
        return meta


def _semantics() -> str:
    """The ddpscope semantics profile of this PyTorch (ddp/ddp_config.h): 1.13 up to 1.13.x,
    2.15 from 2.0 on."""
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    return "2.15" if major >= 2 else "1.13"


def _flatten(x: Any) -> Iterator[Any]:
    if isinstance(x, (list, tuple)):
        for v in x:
            yield from _flatten(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _flatten(v)
    else:
        yield x


def _clock_offset(group: Any) -> int:
    """perf_counter ns -> a shared time base: this host's wall clock at the same instant, taken
    right after a barrier (ranks on one host share it exactly; across hosts NTP aligns them)."""
    dist.barrier(group=group)
    return time.time_ns() - _now()


@contextlib.contextmanager
def record(ddp_model: Any, path: str = "run.json", optimizer: Any = None,
           model: Optional[str] = None, warmup: int = 0) -> Iterator[Recorder]:
    """Records the DDP job inside the ``with`` block and writes one ddpscope trace at ``path``
    (rank 0 writes it; every rank must enter and leave the block).

    ``optimizer``: also record ``optimizer.step()``. ``model``: the model's zoo name or
    shorthand for the trace's metadata (``replay`` then needs no ``model=``). ``warmup``: how
    many leading iterations replay/calibrate leave out (they also skip DDP's rebuild)."""
    rec = Recorder(ddp_model, path, optimizer=optimizer, model_name=model, warmup=warmup)
    gather_group = rec.group
    if str(dist.get_backend(rec.group)) != "gloo":
        gather_group = dist.new_group(backend="gloo")
    rec.install()
    offset = _clock_offset(gather_group)
    rec.active = True
    try:
        yield rec
    finally:
        rec.active = False
        rec.remove()
        track = rec.rank_track(offset)
        tracks: Optional[List[Any]] = [None] * rec.world if rec.rank == 0 else None
        dist.gather_object(track, tracks, dst=0, group=gather_group)
        if rec.rank == 0:
            origin = min((s[2] for t in tracks for lane in t["lanes"] for s in lane["spans"]),
                         default=0)
            origin = min([origin] + [i[1] for t in tracks for i in t["iterations"]])
            for t in tracks:
                for lane in t["lanes"]:
                    lane["spans"] = [(n, c, s - origin, d, a) for n, c, s, d, a in lane["spans"]]
                t["iterations"] = [(i, s - origin, d) for i, s, d in t["iterations"]]
            _core.write_trace(rec.path, "ddpscope.torch.record", rec.metadata(), tracks)
        dist.barrier(group=gather_group)

"""Tune DDP inside the user's own job: ``ddpscope.torch.tune(ddp_model, train_step)``.

The simulator proposes, the job measures, and the winner is kept:

1. **Record.** A few of the job's steps run on a recording copy of its DDP wrapper (the same
   module and settings, :func:`ddpscope.torch.record`), so the user's own wrapper never carries
   the recorder's communication hook.
2. **Propose.** Rank 0 exports the module (:meth:`ddpscope.Model.from_torch`, on a copy) and plans
   the recorded run (``ddpscope plan --from-trace``: the measured compute, the collectives
   calibrated on the run's own cost): the current settings and the few layouts predicted fastest
   (uniform caps, the planned ``bucket_cap_mb_list`` where this torch has it,
   ``gradient_as_bucket_view``, ``static_graph`` where the recorded steps show a static graph),
   and PyTorch's default layout whenever the job runs another. ``candidates=`` replaces the
   proposal with the user's own list.
3. **Measure in the job.** Each candidate is a new DDP around the same module (the optimizer,
   parameters and data stay as they are); every step is a real training step. Each wrapper is
   warmed up (DDP's first iteration and bucket rebuild), then the candidates run in interleaved
   rounds of equal blocks, the order rotated each round, the current settings twice per round
   (the second block, the *control*, measures the noise). A block's first step is not timed. A
   step's time is the slowest rank's (an elementwise maximum over the ranks at the end).
4. **Decide.** Per round, each candidate's median step over the current settings' median is
   one paired ratio. A candidate is eligible when it was faster in enough rounds for a one-sided
   exact sign test to reject "not faster" at ``alpha`` and its median gain exceeds both the noise
   floor (the median |control/current - 1| over the rounds) and ``min_gain``. The eligible
   candidate with the largest median gain wins; with none, the current settings stay. Rank 0
   decides and broadcasts the decision, so every rank continues with the same settings.

The result holds the DDP model to continue with and a JSON report (written by rank 0) with
predicted and measured step times per candidate, the decision, its test and confidence, the
steps and seconds spent, and the DDP call to paste next time.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import statistics
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

import torch
import torch.distributed as dist
import torch.nn as nn

from . import _api
from ._recorder import record

__all__ = ["tune", "TuneError", "TuneResult", "REPORT_FORMAT"]

REPORT_FORMAT = "ddpscope-tune-report"
REPORT_VERSION = 1
_TUNED = ("bucket_cap_mb", "bucket_cap_mb_list", "gradient_as_bucket_view", "static_graph")
_FALLBACK_CAPS = (None, 5.0, 100.0)  # without a prediction: the default and a small, a large cap


class TuneError(RuntimeError):
    """The job cannot be tuned safely; the message names the reason. The user's DDP model is
    left as it was."""


class TuneResult:
    """What :func:`tune` returns: ``model`` (the DDP to continue with: the user's own object
    when the current settings stay), ``report`` (the JSON report as a dict), ``switched``,
    ``ddp_kwargs`` (the chosen candidate's tuned keyword arguments) and ``paste`` (the
    ``DistributedDataParallel(...)`` call for the script)."""

    def __init__(self, model: Any, report: Dict[str, Any]):
        self.model = model
        self.report = report
        chosen = report["decision"]["chosen"]
        self.switched = bool(report["decision"]["switched"])
        self.ddp_kwargs = dict(report["candidates"][chosen]["ddp_kwargs"])
        self.paste = report["decision"]["paste"]

    def __repr__(self) -> str:
        d = self.report["decision"]
        return "TuneResult(%s: %s)" % ("switched" if self.switched else "kept", d["reason"])


# ---- the job's DDP settings ----

def _has_list() -> bool:
    import inspect
    return "bucket_cap_mb_list" in inspect.signature(nn.parallel.DistributedDataParallel).parameters


def _torch_version() -> tuple:
    return tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


def _base_kwargs(ddp: Any) -> Dict[str, Any]:
    """The keyword arguments that rebuild `ddp` around its module, tuned ones included."""
    kw: Dict[str, Any] = {
        "device_ids": getattr(ddp, "device_ids", None),
        "output_device": getattr(ddp, "output_device", None),
        "dim": getattr(ddp, "dim", 0),
        "process_group": ddp.process_group,
        "find_unused_parameters": bool(getattr(ddp, "find_unused_parameters", False)),
        "gradient_as_bucket_view": bool(getattr(ddp, "gradient_as_bucket_view", False)),
        "static_graph": bool(getattr(ddp, "static_graph", False)),
    }
    # Buffers: current torch keeps forward_sync_buffers (broadcast_buffers is deprecated there);
    # a job that syncs none keeps broadcast_buffers=False, which also skips the sync at
    # construction (rank-local buffers stay rank-local in every candidate).
    sync = getattr(ddp, "forward_sync_buffers", getattr(ddp, "broadcast_buffers", True))
    if not sync:
        kw["broadcast_buffers"] = False
    if getattr(ddp, "bucket_bytes_cap_default", False) or (
            not hasattr(ddp, "bucket_bytes_cap_default") and ddp.bucket_bytes_cap == 25 << 20):
        kw["bucket_cap_mb"] = None  # left out (torch 1.13 cannot tell 25 from left out: alike)
    else:  # the MiB the user wrote when it maps to the same bytes (0.05, not 0.0499992)
        mb = ddp.bucket_bytes_cap / float(1 << 20)
        short = float("%.4g" % mb)
        kw["bucket_cap_mb"] = short if int(short * (1 << 20)) == ddp.bucket_bytes_cap else mb
    config = getattr(ddp, "_bucket_config", None)
    caps = getattr(config, "per_bucket_bytes_caps", ()) if config is not None else ()
    if caps:
        kw["bucket_cap_mb_list"] = [int(c // (1 << 20)) for c in caps]
    for name in ("mixed_precision", "skip_all_reduce_unused_params", "batched_grad_copy",
                 "lazy_bucket_allocation"):
        value = getattr(ddp, name, None)
        if value:
            kw[name] = value
    return kw


def _comm_hook(ddp: Any) -> Optional[tuple]:
    """(hook, state) of a registered communication hook, None without one; raises TuneError
    for a hook whose state cannot be carried over."""
    hooks = getattr(ddp, "_comm_hooks", None)
    if hooks:
        hook, state = hooks[-1]
        if state is not None:
            raise TuneError(
                "ddpscope.torch.tune: the model's communication hook %s has state (%s): a new "
                "DDP would start that state afresh (error feedback, step counters), so it cannot "
                "be re-created per candidate" % (getattr(hook, "__name__", hook),
                                                 type(state).__name__))
        return hook, state
    try:
        name = ddp._get_ddp_logging_data().get("comm_hook")
    except Exception:  # noqa: BLE001 - logging data is best effort
        name = None
    if name:
        raise TuneError("ddpscope.torch.tune: the model has a communication hook (%s) that this "
                        "torch does not expose for re-registration; tune it without the hook"
                        % name)
    return None


def _check_tunable(ddp_model: Any) -> Any:
    """The DDP wrapper inside `ddp_model`, or TuneError naming why it cannot be tuned."""
    ddp = ddp_model
    if hasattr(ddp_model, "_orig_mod") or type(ddp_model).__name__ == "OptimizedModule":
        raise TuneError("ddpscope.torch.tune: a compiled model (torch.compile): re-wrapping it in "
                        "a new DDP per candidate would recompile it each time; tune the eager "
                        "model, then compile the result")
    if not isinstance(ddp, nn.parallel.DistributedDataParallel):
        raise TuneError("ddpscope.torch.tune: expected a DistributedDataParallel model, got %s"
                        % type(ddp_model).__name__)
    if hasattr(ddp.module, "_orig_mod") or type(ddp.module).__name__ == "OptimizedModule":
        raise TuneError("ddpscope.torch.tune: the wrapped module is compiled (torch.compile): "
                        "re-wrapping it in a new DDP per candidate would recompile it each time; "
                        "tune the eager module, then compile the result")
    if not dist.is_initialized():
        raise TuneError("ddpscope.torch.tune: torch.distributed is not initialized")
    return ddp


def _param_signature(module: nn.Module) -> tuple:
    return tuple((id(p), tuple(p.shape), p.requires_grad) for p in module.parameters())


def _kwargs_text(kwargs: Dict[str, Any]) -> str:
    parts = []
    if kwargs.get("bucket_cap_mb_list"):
        parts.append("bucket_cap_mb_list=%s" % list(kwargs["bucket_cap_mb_list"]))
    elif kwargs.get("bucket_cap_mb") is not None:
        parts.append("bucket_cap_mb=%s" % _number(kwargs["bucket_cap_mb"]))
    if kwargs.get("static_graph"):
        parts.append("static_graph=True")
    if kwargs.get("gradient_as_bucket_view"):
        parts.append("gradient_as_bucket_view=True")
    return ", ".join(parts)


def _number(x: float) -> str:
    return ("%.6g" % x) if x != int(x) else str(int(x))


# ---- steps and their times ----

class _Runner:
    """Runs training steps on a wrapper, timing each (wall clock on CPU, CUDA events on GPU),
    and checks that the parameters stay the same tensors."""

    def __init__(self, module: nn.Module, train_step: Callable[[Any], Any], cuda: bool):
        self.module = module
        self.train_step = train_step
        self.cuda = cuda
        self.signature = _param_signature(module)

    def run(self, model: Any, n: int, timed: bool) -> List[int]:
        events = []
        times: List[int] = []
        for _ in range(n):
            if self.cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                self.train_step(model)
                end.record()
                events.append((start, end))
            else:
                t0 = time.perf_counter_ns()
                self.train_step(model)
                times.append(time.perf_counter_ns() - t0)
            if _param_signature(self.module) != self.signature:
                raise TuneError("ddpscope.torch.tune: the module's parameters changed during a "
                                "step (added, removed, replaced or reshaped): a DDP wrapper "
                                "built before cannot reduce them; tune a job whose parameters "
                                "stay the same")
        if self.cuda:
            torch.cuda.synchronize()
            times = [int(s.elapsed_time(e) * 1e6) for s, e in events]
        return times if timed else []


def _bucket_count(ddp: Any) -> Optional[int]:
    """How many buckets DDP itself reports (its logging data, after the rebuild)."""
    try:
        data = ddp._get_ddp_logging_data()
    except Exception:  # noqa: BLE001 - logging data is best effort
        return None
    sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes")
    return len(str(sizes).split(",")) if sizes else None


# ---- the proposal ----

def _candidate(label: str, kwargs: Dict[str, Any], predicted_ns: Optional[int], current: bool,
               num_buckets: Optional[int] = None) -> Dict[str, Any]:
    tuned = {k: kwargs.get(k) for k in _TUNED if k in kwargs}
    return {"label": label, "current": current, "ddp_kwargs": tuned, "kwargs": _kwargs_text(tuned),
            "predicted_step_ms": None if predicted_ns is None else predicted_ns / 1e6,
            "predicted_buckets": num_buckets}


def _propose(base: Dict[str, Any], trace: str, module: nn.Module, example: Any,
             max_candidates: int, static_ok: bool, cluster: Optional[str],
             record_steps: int, second_trace: Optional[str] = None,
             second_kwargs: Optional[Dict[str, Any]] = None) -> tuple:
    """(candidates, note) on rank 0: the recorded run planned as ``ddpscope plan --from-trace``;
    with `second_trace`, on cpu-mpi calibrated on both recordings (``ddpscope calibrate``)."""
    from .export import ExportError

    try:
        model = _api.Model.from_torch(copy.deepcopy(module), example, name=type(module).__name__)
    except (ExportError, RuntimeError, TypeError) as e:
        return None, "not predicted: the module could not be exported (%s)" % e
    where = None
    if second_trace is not None:
        both = os.path.join(os.path.dirname(trace), "both-recordings.json")
        try:
            _api.calibrate([trace, second_trace], out=both, model=model)
            cluster = both
            where = ("cpu-mpi's model calibrated on the run's own collectives and on a second "
                     "recording at %s: the first one's buckets of >= 64 KiB had one size"
                     % (_kwargs_text({"bucket_cap_mb": second_kwargs["bucket_cap_mb"]})
                        or "DDP's defaults"))
        except Exception as e:  # noqa: BLE001 - the run's own calibration stays; the note says so
            where = ("cpu-mpi's model calibrated on the run's own collectives; the second "
                     "recording could not be calibrated with it (%s)" % e)
    try:  # cluster None: cpu-mpi's model calibrated on the recorded run (plan --from-trace's rule)
        plan = _api.plan(model, cluster=cluster, from_trace=trace)
    except Exception as e:  # noqa: BLE001 - the planner's refusal becomes the report's note
        return None, "not predicted: ddpscope plan refused the recorded run (%s)" % e
    out = []
    has_list = _has_list()
    for c in plan["candidates"]:
        kw = dict(c["ddp_kwargs"])
        if kw.get("bucket_cap_mb_list") and not has_list:
            continue
        if kw.get("static_graph") and not base["static_graph"] and not static_ok:
            continue
        if c["current"]:
            kw = {k: base.get(k) for k in _TUNED if k in base}
        else:  # what the plan leaves out is DDP's default, not the job's setting
            kw.setdefault("bucket_cap_mb", None)
            kw.setdefault("bucket_cap_mb_list", None)
        out.append(_candidate(c["label"], kw, c["predicted_step_ns"], bool(c["current"]),
                              c["num_buckets"]))
    if not any(c["current"] for c in out):
        out.insert(0, _candidate("current", base, None, True))
    current = [c for c in out if c["current"]][:1]
    others = [c for c in out if not c["current"]]
    # PyTorch's default layout stays a candidate past max_candidates (plan keeps it too): when
    # the prediction cannot tell layouts apart, the layout most jobs run must still be measured.
    default = [c for c in others if c["label"] == "default"]
    others = others[:max_candidates]
    if default and default[0] not in others:
        others.append(default[0])
    if where is None:
        where = ("cpu-mpi's model calibrated on the run's own collectives"
                 if str(plan["cluster"]).startswith("calibrated:")
                 else "cluster " + plan["cluster"])
    return current + others, ("predicted by ddpscope plan --from-trace on the %d recorded steps "
                              "(%s)" % (record_steps, where))


def _fallback(base: Dict[str, Any], max_candidates: int) -> List[Dict[str, Any]]:
    out = [_candidate("current", base, None, True)]
    for cap in _FALLBACK_CAPS:
        if len(out) > max_candidates:
            break
        if cap == base.get("bucket_cap_mb") and not base.get("bucket_cap_mb_list"):
            continue
        kw = dict(base, bucket_cap_mb=cap, bucket_cap_mb_list=None)
        out.append(_candidate("default" if cap is None else "bucket_cap_mb=%s" % _number(cap),
                              kw, None, False))
    return out


def _user_candidates(base: Dict[str, Any], given: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out = [_candidate("current", base, None, True)]
    for i, c in enumerate(given):
        if not isinstance(c, dict) or not c:
            raise TuneError("ddpscope.torch.tune: candidates[%d]: expected a dict of DDP keyword "
                            "arguments (%s), got %r" % (i, ", ".join(_TUNED), c))
        unknown = sorted(set(c) - set(_TUNED))
        if unknown:
            raise TuneError("ddpscope.torch.tune: candidates[%d]: %s cannot be tuned (only %s)"
                            % (i, ", ".join(unknown), ", ".join(_TUNED)))
        if c.get("bucket_cap_mb_list") and not _has_list():
            raise TuneError("ddpscope.torch.tune: candidates[%d]: bucket_cap_mb_list needs a "
                            "torch whose DistributedDataParallel takes it (this is %s)"
                            % (i, torch.__version__))
        kw = dict(base)
        kw.update(c)
        if c.get("bucket_cap_mb") is not None and "bucket_cap_mb_list" not in c:
            kw["bucket_cap_mb_list"] = None
        out.append(_candidate(_kwargs_text(kw) or "default", kw, None, False))
    return out


# ---- the decision ----

def _sign_test_p(wins: int, n: int) -> float:
    """P(X >= wins) for X ~ Binomial(n, 1/2): the one-sided exact sign test's p-value."""
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / float(2 ** n)


def _decide(candidates: List[Dict[str, Any]], per_round: List[List[float]], control: List[float],
            alpha: float, min_gain: float) -> Dict[str, Any]:
    """per_round[c][r]: candidate c's median step in round r (ns); control[r]: the current
    settings' second block. Fills each candidate's measured figures; returns the decision."""
    rounds = len(control)
    current = per_round[0]
    noise = statistics.median(abs(control[r] / current[r] - 1.0) for r in range(rounds))
    needed = next((w for w in range(rounds + 1) if _sign_test_p(w, rounds) <= alpha), None)
    best, best_gain = 0, 0.0
    for i, c in enumerate(candidates):
        ratios = [per_round[i][r] / current[r] for r in range(rounds)]
        wins = sum(1 for x in ratios if x < 1.0)
        gain = 1.0 - statistics.median(ratios)
        p = _sign_test_p(wins, rounds)
        c["measured_step_ms"] = statistics.median(per_round[i]) / 1e6
        c["round_step_ms"] = [x / 1e6 for x in per_round[i]]
        c["ratio_to_current"] = ratios
        c["median_ratio"] = statistics.median(ratios)
        c["gain_percent"] = 100.0 * gain
        c["rounds_faster"] = wins
        c["p_value"] = 1.0 if c["current"] else p
        c["eligible"] = (not c["current"] and p <= alpha and gain > noise and gain > min_gain)
        if c["eligible"] and gain > best_gain:
            best, best_gain = i, gain
    for i, c in enumerate(candidates):
        c["chosen"] = i == best
    chosen = candidates[best]
    if best != 0:
        reason = ("%s was faster than the current settings in %d of %d rounds (one-sided sign "
                  "test p = %.4f <= %g) by a median %.1f %%, above the noise floor of %.1f %%"
                  % (chosen["label"], chosen["rounds_faster"], rounds, chosen["p_value"], alpha,
                     100.0 * best_gain, 100.0 * noise))
        confidence = 1.0 - chosen["p_value"]
    else:
        runner_up = max(candidates[1:], key=lambda c: c["gain_percent"], default=None)
        reason = "kept the current settings: "
        if runner_up is None:
            reason += "nothing else to try"
        else:
            gain = runner_up["gain_percent"]
            test = ("the sign test at alpha %g needs %d of %d" % (alpha, needed, rounds)
                    if needed is not None else
                    "the sign test at alpha %g cannot reject with %d rounds" % (alpha, rounds))
            reason += ("no candidate beat them in enough rounds (%s) by more than the noise "
                       "floor of %.1f %%%s; the best, %s, was "
                       "faster in %d of %d rounds and %s by a median %.1f %%"
                       % (test, 100.0 * noise,
                          " and min_gain %.1f %%" % (100.0 * min_gain) if min_gain > 0 else "",
                          runner_up["label"], runner_up["rounds_faster"], rounds,
                          "faster" if gain >= 0 else "slower", abs(gain)))
        confidence = None
    return {"switched": best != 0, "chosen": best, "reason": reason,
            "test": "one-sided exact sign test on paired per-round ratios (candidate median "
                    "step / current median step, same round)",
            "alpha": alpha, "rounds": rounds, "rounds_needed": needed, "min_gain": min_gain,
            "noise_floor_percent": 100.0 * noise,
            "noise_floor": "median over rounds of |control / current - 1|: the current settings "
                           "timed twice per round",
            "confidence": confidence}


# ---- the steps of the call ----

def _check_arguments(train_step: Any, counts: Sequence[tuple], alpha: float) -> None:
    """Raises TuneError naming the first argument out of range: ``train_step`` not callable, a
    count ``(name, value, least)`` not an integer >= least, ``alpha`` outside (0, 1)."""
    if not callable(train_step):
        raise TuneError("ddpscope.torch.tune: train_step: expected a function of the DDP model "
                        "that runs one training step, got %s" % type(train_step).__name__)
    for name, value, least in counts:
        if not isinstance(value, int) or value < least:
            raise TuneError("ddpscope.torch.tune: %s: expected an integer >= %d, got %r"
                            % (name, least, value))
    if not 0 < alpha < 1:
        raise TuneError("ddpscope.torch.tune: alpha: expected 0 < alpha < 1, got %r" % (alpha,))


class _Job:
    """The job being tuned: its DDP wrapper and module, the settings that rebuild the wrapper,
    its communication hook, its process groups (a gloo group for tune's own messages) and the
    runner of its training steps."""

    def __init__(self, ddp: Any, train_step: Callable[[Any], Any]):
        self.ddp = ddp
        self.hook = _comm_hook(ddp)
        self.module = ddp.module
        self.base = _base_kwargs(ddp)
        self.cuda = any(p.is_cuda for p in self.module.parameters())
        self.group = ddp.process_group
        self.rank = dist.get_rank()
        self.world = dist.get_world_size(self.group)
        self.gloo = (self.group if str(dist.get_backend(self.group)) == "gloo"
                     else dist.new_group(backend="gloo"))
        self.runner = _Runner(self.module, train_step, self.cuda)

    def wrap(self, kwargs: Dict[str, Any]) -> Any:
        """A new DDP around the job's module with `kwargs` (None values left out) and the
        job's communication hook."""
        kw = {k: v for k, v in kwargs.items() if v is not None}
        if not kw.get("bucket_cap_mb_list"):
            kw.pop("bucket_cap_mb_list", None)
        with warnings.catch_warnings():  # broadcast_buffers=False's deprecation (see above)
            warnings.simplefilter("ignore", FutureWarning)
            w = nn.parallel.DistributedDataParallel(self.module, **kw)
        if self.hook is not None:
            w.register_comm_hook(self.hook[1], self.hook[0])
        return w


class _Recording(NamedTuple):
    """The recorded steps: the trace (in a temporary folder), the example input to export the
    model with (None when the forward took no tensor), whether the recorded forwards used the
    same parameters, and the recorder (it holds its wrapper until tune returns)."""
    tmp: str
    trace: str
    example: Any
    static_ok: bool
    recorder: Any


def _record(job: _Job, optimizer: Any, record_steps: int, example_inputs: Any,
            kwargs: Optional[Dict[str, Any]] = None) -> _Recording:
    """Runs 2 + record_steps steps on a recording copy of the job's wrapper (with `kwargs`
    instead of the job's settings when given; the recorder's hook stays on what it recorded),
    the first 2 unrecorded."""
    captured: List[Any] = [example_inputs]
    recorder_ddp = job.wrap(kwargs if kwargs is not None else job.base)

    def capture(mod: Any, inputs: Any) -> None:
        if captured[0] is None:
            first = next((x for x in inputs if isinstance(x, torch.Tensor)), None)
            if first is not None:
                captured[0] = first.detach().clone()

    handle = recorder_ddp.register_forward_pre_hook(capture)
    tmp = tempfile.mkdtemp(prefix="ddpscope-tune-")
    trace = os.path.join(tmp, "record.json")
    job.runner.run(recorder_ddp, 2, timed=False)
    with record(recorder_ddp, path=trace, optimizer=optimizer, warmup=0) as rec:
        job.runner.run(recorder_ddp, record_steps, timed=False)
    handle.remove()
    del recorder_ddp
    # static_graph only when every recorded forward used the same parameters (the
    # recorder's gradient-ready times, per iteration).
    used: Dict[int, set] = {}
    for it, index, _t in rec.ready:
        used.setdefault(it, set()).add(index)
    static_ok = len({frozenset(u) for u in used.values()}) == 1
    return _Recording(tmp, trace, captured[0], static_ok, rec)


# Messages from this size up are bucket allreduces whose fixed cost per call and bandwidth the
# calibration separates by their sizes (64 KiB: the core's kAlphaBetaBaseMinBytes).
_LARGE_MESSAGE = _api._core.ALPHA_BETA_BASE_MIN_BYTES


def _second_layout(base: Dict[str, Any], recording: _Recording) -> Optional[Dict[str, Any]]:
    """The settings of a second recording when the first one's bucket allreduces of >= 64 KiB
    all had one size: alone, its calibration cannot tell a call's fixed cost from its bandwidth
    and extrapolates every other bucket size through zero (on real gloo traces a what-if 27 %
    off, docs/validation.md "What-ifs across caps"). DDP's default cap, or cap 1 when the job
    already runs at 25 MiB or more. None when the sizes were several (or none)."""
    sizes = {e["bytes"] for e in recording.recorder.comm if e["bytes"] >= _LARGE_MESSAGE}
    if len(sizes) != 1:
        return None
    caps = base.get("bucket_cap_mb_list") or [base.get("bucket_cap_mb") or 25]
    second = dict(base)
    second["bucket_cap_mb_list"] = None
    second["bucket_cap_mb"] = 1 if max(caps) >= 25 else None
    return second


def _shared_proposal(job: _Job, recording: _Recording, max_candidates: int,
                     cluster: Optional[str], record_steps: int,
                     second: Optional[_Recording] = None,
                     second_kwargs: Optional[Dict[str, Any]] = None) -> tuple:
    """(candidates, note) on every rank: rank 0 plans the recording (the fallback caps when it
    cannot) and broadcasts its proposal; the recordings' folders are removed. With `second` (a
    recording at `second_kwargs`), the communication is calibrated on both."""
    note = None
    proposal = None
    if job.rank == 0:
        if recording.example is None:
            proposal, note = None, "not predicted: the forward took no tensor to export with"
        else:
            proposal, note = _propose(job.base, recording.trace, job.module, recording.example,
                                      max_candidates, recording.static_ok, cluster, record_steps,
                                      second.trace if second else None, second_kwargs)
        if proposal is None:
            proposal = _fallback(job.base, max_candidates)
            note += "; measuring the default and caps 5 and 100 instead"
    shared = [proposal, note]
    dist.broadcast_object_list(shared, src=0, group=job.gloo)
    proposal, note = shared
    for r in (recording, second):
        if r is not None:
            shutil.rmtree(r.tmp, ignore_errors=True)
    return proposal, note


def _candidate_wrappers(job: _Job, proposal: List[Dict[str, Any]]) -> List[Any]:
    """One wrapper per candidate, in order; the current settings are the user's own object."""
    wrappers = []
    for c in proposal:
        if c["current"]:
            wrappers.append(job.ddp)
        else:
            kw = dict(job.base)
            kw.update(c["ddp_kwargs"])
            try:
                wrappers.append(job.wrap(kw))
            except (TypeError, ValueError, RuntimeError, AssertionError) as e:
                raise TuneError("ddpscope.torch.tune: DistributedDataParallel(%s) failed: %s"
                                % (c["kwargs"] or "defaults", e)) from e
    return wrappers


def _measure_rounds(runner: _Runner, wrappers: List[Any], rounds: int,
                    steps_per_block: int) -> List[List[List[int]]]:
    """Interleaved rounds of one block per wrapper plus the control (the current settings,
    wrappers[0], again), the order rotated each round. Returns times[slot][round]: this rank's
    timed steps of that block (its first step untimed); slot len(wrappers) is the control."""
    n = len(wrappers)
    order = list(range(n)) + [0]
    slots = list(range(n + 1))
    times: List[List[List[int]]] = [[[] for _ in range(rounds)] for _ in range(n + 1)]
    for r in range(rounds):
        k = r % len(slots)
        for slot in slots[k:] + slots[:k]:
            t = runner.run(wrappers[order[slot]], steps_per_block, timed=True)
            times[slot][r] = t[1:]
    return times


def _take_slowest_rank(times: List[List[List[int]]], rounds: int, gloo: Any) -> None:
    """Replaces each step's time in `times` by the slowest rank's (an elementwise maximum)."""
    flat = torch.tensor([x for slot in times for rt in slot for x in rt], dtype=torch.float64)
    dist.all_reduce(flat, op=dist.ReduceOp.MAX, group=gloo)
    it = iter(flat.tolist())
    for slot in times:
        for r in range(rounds):
            slot[r] = [next(it) for _ in slot[r]]


def _decide_rounds(proposal: List[Dict[str, Any]], times: List[List[List[float]]], rounds: int,
              alpha: float, min_gain: float) -> Dict[str, Any]:
    """The decision on the measured rounds (see :func:`_decide`), with the DDP call to paste
    and the control's median step."""
    n = len(proposal)
    per_round = [[statistics.median(times[i][r]) for r in range(rounds)] for i in range(n)]
    control = [statistics.median(times[n][r]) for r in range(rounds)]
    decision = _decide(proposal, per_round, control, alpha, min_gain)
    chosen = proposal[decision["chosen"]]
    kwargs = chosen["kwargs"]
    decision["paste"] = "DistributedDataParallel(model%s)" % (", " + kwargs if kwargs else "")
    decision["control_step_ms"] = statistics.median(control) / 1e6
    return decision


def _report_doc(job: _Job, settings: Dict[str, Any], note: Optional[str],
                proposal: List[Dict[str, Any]], decision: Dict[str, Any], steps: Dict[str, int],
                t_start: float) -> Dict[str, Any]:
    """The JSON report; adds the total to `steps`."""
    steps["total"] = sum(steps.values())
    return {"format": REPORT_FORMAT, "version": REPORT_VERSION, "torch": torch.__version__,
            "world_size": job.world, "backend": str(dist.get_backend(job.group)),
            "device": "cuda" if job.cuda else "cpu",
            "timing": "CUDA events on the current stream" if job.cuda else "wall clock",
            "model": type(job.module).__name__, "settings": settings,
            "prediction": note, "candidates": proposal, "decision": decision,
            "steps": steps, "seconds": time.perf_counter() - t_start}


def _write_report(doc: Dict[str, Any], path: Any) -> None:
    """Writes the report to `path` as indented JSON."""
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


# ---- the call ----

def tune(ddp_model: Any, train_step: Callable[[Any], Any], *, optimizer: Any = None,
         candidates: Optional[Sequence[Dict[str, Any]]] = None, max_candidates: int = 3,
         rounds: int = 8, steps_per_block: int = 4, warmup_steps: int = 2,
         record_steps: int = 6, alpha: float = 0.05, min_gain: float = 0.0,
         report: Optional[str] = "ddpscope-tune.json", cluster: Optional[str] = None,
         example_inputs: Any = None) -> TuneResult:
    """Finds the fastest DDP layout for this job by measuring it, and continues with it.

    ``train_step(model)`` runs one full training step (its own batch, forward, backward,
    optimizer step; ``model.no_sync()`` for accumulation is fine) on the DDP model it is given:
    tune calls it on each candidate wrapper, so it must not capture ``ddp_model`` itself. Every
    rank calls ``tune`` with the same arguments. Returns a :class:`TuneResult`; continue training
    with ``result.model``.

    ``candidates``: the DDP keyword arguments to try instead of the proposal (dicts of
    ``bucket_cap_mb``, ``bucket_cap_mb_list``, ``gradient_as_bucket_view``, ``static_graph``);
    ``max_candidates``: how many proposed layouts besides the current settings (PyTorch's
    default layout comes on top when the job runs another and it is not among them). ``rounds`` x
    (candidates + 2) blocks of ``steps_per_block`` steps are measured after ``warmup_steps`` per
    wrapper and ``record_steps`` (after 2 warm-up steps) for the proposal, twice when the first
    recording's bucket allreduces of >= 64 KiB had one size (a second layout then separates an
    allreduce's fixed cost from its bandwidth; without ``cluster`` only). ``alpha``: the sign
    test's level; ``min_gain``: the smallest median gain (a fraction) worth switching for.
    ``report``: where rank 0 writes the JSON report (None: not written). ``cluster``: a
    built-in cluster or cluster file for the prediction instead of the run's own calibration.
    ``example_inputs``: one batch for exporting the model (default: the first tensor the
    recorded forward took). Raises :class:`TuneError` naming why a job cannot be tuned."""
    t_start = time.perf_counter()
    ddp = _check_tunable(ddp_model)
    counts = (("rounds", rounds, 1), ("steps_per_block", steps_per_block, 2),
              ("warmup_steps", warmup_steps, 0), ("record_steps", record_steps, 1),
              ("max_candidates", max_candidates, 0))
    _check_arguments(train_step, counts, alpha)
    job = _Job(ddp, train_step)

    # 1. Record and propose (or take the caller's candidates).
    steps: Dict[str, int] = {}
    if candidates is None:
        recording = _record(job, optimizer, record_steps, example_inputs)
        steps["record"] = 2 + record_steps
        # Every rank sees the same bucket sizes, so all take the same decision here.
        second_kwargs = _second_layout(job.base, recording) if cluster is None else None
        second = None
        if second_kwargs is not None:
            second = _record(job, optimizer, record_steps, recording.example, second_kwargs)
            steps["record"] += 2 + record_steps
        proposal, note = _shared_proposal(job, recording, max_candidates, cluster, record_steps,
                                          second, second_kwargs)
    else:
        proposal = _user_candidates(job.base, candidates)
        note = "given by the caller (not predicted)"
        steps["record"] = 0

    # 2. One wrapper per candidate, each warmed up (DDP's first iteration and bucket rebuild).
    wrappers = _candidate_wrappers(job, proposal)
    for w in wrappers:
        job.runner.run(w, warmup_steps, timed=False)
    steps["warmup"] = warmup_steps * len(wrappers)

    # 3. Interleaved rounds; then each step's time is the slowest rank's.
    times = _measure_rounds(job.runner, wrappers, rounds, steps_per_block)
    steps["measured"] = rounds * (len(proposal) + 1) * steps_per_block
    for c, w in zip(proposal, wrappers):  # DDP logs its rebuilt buckets a forward after the rebuild
        c["buckets"] = _bucket_count(w)
    _take_slowest_rank(times, rounds, job.gloo)

    # 4. Rank 0 decides; every rank takes its decision.
    doc = None
    if job.rank == 0:
        decision = _decide_rounds(proposal, times, rounds, alpha, min_gain)
        settings = {"rounds": rounds, "steps_per_block": steps_per_block,
                    "untimed_steps_per_block": 1, "warmup_steps": warmup_steps,
                    "record_steps": record_steps, "max_candidates": max_candidates}
        doc = _report_doc(job, settings, note, proposal, decision, steps, t_start)
    shared = [doc]
    dist.broadcast_object_list(shared, src=0, group=job.gloo)
    doc = shared[0]
    if job.rank == 0 and report is not None:
        _write_report(doc, report)
    chosen_model = wrappers[doc["decision"]["chosen"]]
    wrappers.clear()  # the other wrappers (and their buckets) go with their last reference
    if job.gloo is not job.group:
        dist.destroy_process_group(job.gloo)
    return TuneResult(chosen_model, doc)

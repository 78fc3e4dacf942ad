"""The ddpscope Python API: models, bucket plans, simulation, sweeps, traces.

Every setting is a keyword argument named like the CLI flag it stands for, with dashes as
underscores (``bucket_cap_mb=50`` is ``--bucket-cap-mb 50``; ``find_unused=True`` is
``--find-unused``; a list is a comma list). They reach the same settings parsers in the C++
libraries that the CLI's flags reach, so a setting means, defaults and fails exactly as on the
command line, and every error is a :class:`ddpscope.Error` carrying the message the ``ddpscope``
command prints, in Python's words: a bad value is an :class:`InvalidSetting` (also a
``ValueError``) naming the keyword argument (``bucket_cap_mb: expected a positive number, got
'-3'``), an unknown keyword an :class:`UnknownSetting` (also a ``TypeError``). Each function
names the settings it takes in its signature and its docstring (``help(ddpscope.simulate)``):
those of its ``ddpscope <command> --help``.
"""

from __future__ import annotations

import ast
import collections.abc
import functools
import inspect
import json
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import textwrap
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from . import _core

Error = _core.Error


class InvalidSetting(Error, ValueError):
    """A keyword argument's value (or a file it names) that ddpscope refused: the message names
    the keyword (``bucket_cap_mb``) where the CLI names the flag (``--bucket-cap-mb``); exit_code
    is the CLI's (2)."""


class UnknownSetting(Error, TypeError):
    """A keyword argument the function does not take (the CLI's "unknown flag")."""


_FLAG = re.compile(r"--([a-z0-9][a-z0-9-]*)")
_UNKNOWN_FLAG = re.compile(r"^unknown flag --([a-z0-9][a-z0-9-]*)")


def _python_error(error: Error, function: str) -> Error:
    """The core's bad-input error (exit code 2) in Python's terms: keywords for flags, and the
    exception classes Python's conventions expect. Other errors pass unchanged."""
    if getattr(error, "exit_code", 1) != 2:
        return error
    message = str(error)
    unknown = _UNKNOWN_FLAG.match(message)
    if unknown:
        return UnknownSetting("%s() got an unexpected keyword argument '%s'"
                              % (function, unknown.group(1).replace("-", "_")), 2)
    keyworded = _FLAG.sub(lambda m: m.group(0) if m.group(1) == "help"
                          else m.group(1).replace("-", "_"), message)
    return InvalidSetting(keyworded, 2)


# The Args: entries several functions share, one text each; _python_errors completes every
# public function's docstring with them (_complete_args), in the order of its signature.
_SHARED_ARGS: Dict[str, str] = {
    'all_ranks': (
        'True: simulate every rank (jitter, stragglers) instead of one.'),
    'autocast': (
        "True: the forward runs under torch.autocast (bf16/fp16 AMP): a Linear's weight "
        "gradient is ready before its bias, which moves the rebuilt buckets' "
        "boundaries; with dtype bf16/fp16 the memory-bound layers move the bytes of "
        "autocast's dtypes (fp32 norms and residuals) and each matrix product and "
        "convolution adds autocast's casts (fp32 weights and inputs)."),
    'batch': (
        "samples per rank per step (CLI default: the model's)."),
    'batched_grad_copy': (
        'True: batched_grad_copy=True, one batched copy and one divide per bucket '
        'instead of per-gradient copies (2.15).'),
    'bucket_cap_mb': (
        'bucket_cap_mb in MiB (CLI default 25; giving it counts as set by the user).'),
    'bucket_cap_mb_list': (
        "per-bucket caps in whole MiB (2.15's bucket_cap_mb_list; overrides "
        'bucket_cap_mb, effective cap = max).'),
    'cluster': (
        'a built-in cluster (``ddpscope cluster list``) or a cluster JSON file '
        '(sim/cost/clusters/FORMAT.md).'),
    'comm_hook': (
        'the communication hook: "fp16", "bf16", "powersgd:R", "allreduce" or "none" '
        '(the CLI default).'),
    'compile': (
        'how a torch.compile\'d model meets DDP: "none" (eager; the CLI default), '
        '"ddp-optimizer" (forward split at bucket boundaries; hooks fire between '
        'sub-graphs), "whole-graph" (optimize_ddp=False: every allreduce after the '
        'backward) or "compiled-autograd" (python reducer; Inductor buckets the '
        'allreduces).'),
    'compile_graph_overhead': (
        'the host time of one compiled (sub-)graph, forward + backward call, in us (CLI '
        'default 116, measured).'),
    'compute_from': (
        "a run's trace whose measured per-layer compute replaces the roofline."),
    'kernel_bench': (
        "a GPU's single-layer benchmark (kernel-bench.json of the GPU kit's kernels step; "
        "a path or a list of them) that times the layers it covers (bf16 autocast); with a "
        "measured run carried to bf16 from another precision, its BatchNorm layers only."),
    'kernel_fit_from': (
        "a built-in cluster or cluster file whose device carries a kernel fit (dgx-h100, "
        "hgx-h200, or one calibrate wrote): its layer times carried to this cluster's GPU and "
        "dtype through the two GPUs' specs (tensor-core dtypes only)."),
    'contention': (
        "the compute slowdown while a collective runs (CLI default: the cluster's)."),
    'dtype': (
        'the compute dtype: "fp32", "tf32", "bf16" or "fp16" (CLI default: the cluster '
        "device's: bf16 where it has bf16, fp16 on V100, fp32 on CPUs; fp32 with "
        'measured compute).'),
    'find_unused': (
        'True: find_unused_parameters=True.'),
    'first_bucket_mb': (
        "the first bucket's cap in MiB (CLI default 1 = 1,048,576 B)."),
    'gradient_as_bucket_view': (
        'True: gradient_as_bucket_view=True (gradients are views of the buckets: no '
        'copies).'),
    'host_profile': (
        'what the host pays per op and DDP per event: a built-in host profile '
        '(``ddpscope host-profile list``) or a profile JSON file (CLI default: the '
        "cluster's)."),
    'image_size': (
        "the image side in pixels for vision models (CLI default: the model's)."),
    'iterations': (
        'iterations to simulate (CLI default: enough for the steady state).'),
    'jitter': (
        'per-rank, per-iteration compute jitter in % (with all_ranks; CLI default 0).'),
    'lazy_bucket_allocation': (
        'True: lazy_bucket_allocation=True; memory only, the simulated timing does not '
        'change (2.15).'),
    'mixed_precision': (
        'DDP\'s mixed_precision as "P" or "P:R": param_dtype P, reduce_dtype R (fp16, '
        'bf16, fp32; R defaults to P); buckets are reduced in R (2.15).'),
    'model': (
        'a :class:`Model`, a zoo name (see :func:`models`), a shorthand '
        '("gpt2:layers=L,embd=E,heads=H,vocab=V,seq=T", '
        '"mlp:in=I,hidden=H,depth=D,out=O") or a model JSON file.'),
    'no_broadcast_buffers': (
        'True: broadcast_buffers=False (no buffer broadcast before each forward).'),
    'no_forward_sync_buffers': (
        'True: forward_sync_buffers=False, no buffer broadcast before each forward; '
        'construction still syncs them (2.15).'),
    'no_sync_steps': (
        'gradient accumulation: K-1 no_sync() steps, then one synced (CLI default 1).'),
    'nodes': (
        'the number of nodes (CLI default 1; gb200-nvl72: 72-GPU racks).'),
    'seed': (
        'the seed for jitter (CLI default 1).'),
    'seq_len': (
        "tokens per sample for transformers (CLI default: the model's)."),
    'skip_all_reduce_unused_params': (
        'True: skip_all_reduce_unused_params=True, no allreduce for buckets whose '
        'parameters are all unused (2.15).'),
    'static_graph': (
        'True: static_graph=True.'),
    'stragglers': (
        'ranks slower by PCT %: "R:PCT" items, a list or a comma list (with all_ranks; '
        'CLI default none).'),
    'strategy': (
        '"ddp" (the CLI default) or "dp" (nn.DataParallel, one node).'),
    'sync_batchnorm': (
        'True: SyncBatchNorm, a blocking allreduce per BatchNorm layer.'),
    'torch_version': (
        'the PyTorch DDP behaviour to follow: "2.15" (also "current"; the CLI default), '
        '"1.13" or "1.5".'),
    'world_size': (
        'the number of ranks, a multiple of the GPUs per node (CLI default: one '
        "node's); instead of nodes."),
}


def _complete_args(function: Any) -> None:
    """Rewrites `function`'s docstring so that its "Args:" section lists every parameter of its
    signature, in order: the function's own entry where its docstring has one, else the shared
    one (_SHARED_ARGS). A parameter documented in neither is an error when the module loads."""
    lines = (function.__doc__ or "").split("\n")
    heads = [i for i, line in enumerate(lines) if line.strip() in ("Args:", "Returns:", "Raises:")]
    if not heads:
        raise AssertionError("%s: no Args/Returns/Raises section" % function.__name__)
    indent = lines[heads[0]][:len(lines[heads[0]]) - len(lines[heads[0]].lstrip())]
    own: Dict[str, List[str]] = {}
    start = end = heads[0]
    if lines[start].strip() == "Args:":
        end = start + 1
        name = ""
        while end < len(lines) and lines[end].strip():
            match = re.match(r"\s*(\w+): ", lines[end])
            if match and len(lines[end]) - len(lines[end].lstrip()) == len(indent) + 4:
                name = match.group(1)
                own[name] = []
            own[name].append(lines[end])
            end += 1
    else:
        lines[start:start] = [""]  # the Args section goes before Returns, a blank line between
    section = [indent + "Args:"]
    for parameter in inspect.signature(function).parameters:
        if parameter in own:
            section.extend(own[parameter])
        elif parameter in _SHARED_ARGS:
            section.extend(textwrap.wrap(parameter + ": " + _SHARED_ARGS[parameter], width=96,
                                         initial_indent=indent + " " * 4,
                                         subsequent_indent=indent + " " * 8,
                                         break_on_hyphens=False, break_long_words=False))
        else:
            raise AssertionError("%s: parameter %s is documented nowhere"
                                 % (function.__name__, parameter))
    lines[start:end] = section
    function.__doc__ = "\n".join(lines)


def _python_errors(function: Any = None, *, renamed: Sequence[str] = ()) -> Any:
    """Raises the core's bad-input errors of `function` as _python_error makes them, and a
    keyword argument `function` does not take as an UnknownSetting worded as Python words it
    ("f() got an unexpected keyword argument 'x'"). ``renamed``: the old keyword names (keys of
    _RENAMED) `function` still takes for one release: each is moved to its new name with a
    DeprecationWarning before the call. Use as ``@_python_errors`` or
    ``@_python_errors(renamed=(...))``."""
    if function is None:
        return functools.partial(_python_errors, renamed=renamed)
    _complete_args(function)
    parameters = inspect.signature(function).parameters.values()
    keywords = None if any(p.kind is p.VAR_KEYWORD for p in parameters) else {
        p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        olds = [old for old in renamed if old in kwargs]
        if olds:
            _take_renamed(kwargs, *olds)
        # Python would raise a plain TypeError; it checks this before any missing argument.
        unknown = [key for key in kwargs if keywords is not None and key not in keywords]
        if unknown:
            raise UnknownSetting("%s() got an unexpected keyword argument '%s'"
                                 % (function.__name__, unknown[0]), 2)
        try:
            return function(*args, **kwargs)
        except (InvalidSetting, UnknownSetting):
            raise
        except Error as e:
            raise _python_error(e, function.__name__) from None
    return wrapper


PathLike = Union[str, "os.PathLike[str]"]

# Keyword names follow the CLI's flags (bucket_cap_mb is --bucket-cap-mb). Old names from before
# the one grammar still work for one release, with a DeprecationWarning naming the new one: each
# function lists the ones it takes in its @_python_errors(renamed=...) (they are not in its
# signature).
_RENAMED = {"torch": "torch_version", "semantics": "torch_version", "model_file": "model",
            "cluster_file": "cluster", "output": "out", "trace_out": "trace", "base_file": "base"}
# The old names of the settings the simulation functions share.
_RENAMED_SIM = ("torch", "semantics", "model_file", "cluster_file")


def _renamed(old: str, new: str) -> None:
    warnings.warn("ddpscope: %s= is deprecated and goes in the next release; use %s=" % (old, new),
                  DeprecationWarning, stacklevel=4)


def _take_renamed(kwargs: Dict[str, Any], *olds: str) -> None:
    """Moves each old keyword in ``kwargs`` to its new name (warning); both given is an error."""
    for old in olds:
        if old in kwargs:
            new = _RENAMED[old]
            value = kwargs.pop(old)
            if kwargs.get(new) is not None and value is not None:
                raise TypeError("give %s= or its old name %s=, not both" % (new, old))
            _renamed(old, new)
            if value is not None:
                kwargs[new] = value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# Settings on their way to the C++ core: {flag name without "--": text}, True for a switch that
# is on. The API's functions pass them to the core's settings parsers in-process (_core_settings:
# a switch as ""), not through the CLI; _argv writes them as CLI flags (Model.cli_flags), for
# cli() or a command line.
Settings = Dict[str, Union[str, bool]]


def _settings(values: Dict[str, Any], *skip: str) -> Settings:
    """Keyword arguments (a function's ``locals()``) -> settings, but those named in ``skip``:
    True is a switch, False/None leave the setting out, a list, tuple or other iterable becomes
    a comma list."""
    out: Settings = {}
    for key, value in values.items():
        if key in skip or value is None or value is False:
            continue
        name = key.replace("_", "-")
        if value is True:
            out[name] = True
        elif isinstance(value, collections.abc.Iterable) \
                and not isinstance(value, (str, bytes, os.PathLike)):
            out[name] = ",".join(_text(v) for v in value)
        else:
            out[name] = _text(value)
    return out


def _core_settings(*parts: Settings) -> Dict[str, str]:
    """Settings as the core's SettingValues takes them (a switch: "")."""
    out: Dict[str, str] = {}
    for part in parts:
        for name, value in part.items():
            out[name] = "" if value is True else value
    return out


def _argv(*parts: Settings) -> List[str]:
    """Settings as CLI flags."""
    out: List[str] = []
    for part in parts:
        for name, value in part.items():
            out += ["--" + name] if value is True else ["--" + name, value]
    return out


def _cli_message(command: str, stderr: str) -> str:
    """The message of "ddpscope COMMAND: error: MESSAGE" (the CLI's error line)."""
    prefix = "ddpscope %s: error: " % command
    lines = [l for l in stderr.splitlines() if l.strip()]
    for line in lines:
        if line.startswith(prefix):
            return line[len(prefix):]
    return lines[-1] if lines else "ddpscope %s failed" % command


def _cluster_settings(cluster: Optional[PathLike]) -> Settings:
    if cluster is None:
        return {}
    return {"cluster": os.fspath(cluster)}


class Model:
    """A model as ddpscope sees it: parameters in ``model.parameters()`` order, layers in
    execution order with FLOPs and bytes, the gradient-ready order (models/FORMAT.md).

    Make one with :meth:`zoo`, :meth:`load` or :meth:`from_torch`; pass it (or a zoo name or
    shorthand string) wherever a ``model`` is taken."""

    def __init__(self, info: Dict[str, Any], settings: Settings, json_text: Optional[str]):
        self._info = info
        self._settings = settings  # how the core names it: {"model": NAME or PATH}
        self._json_text = json_text  # the JSON it came from (None: a shorthand)
        self._tempdir: Optional[tempfile.TemporaryDirectory] = None

    @classmethod
    def zoo(cls, name: str) -> Model:
        """A zoo model or a shorthand, as ``--model NAME`` names it.

        Args:
            name: a zoo model ("resnet50", see :func:`models`) or a shorthand
                ("gpt2:layers=2,embd=64,heads=4,vocab=512,seq=32",
                "mlp:in=I,hidden=H,depth=D,out=O").

        Returns:
            Model: the model.

        Raises:
            Error: no such model, or a malformed shorthand (the CLI's message).
        """
        info = _core.resolve_model(name)
        return cls(info, {"model": name}, _core.zoo_json(name) or None)

    @classmethod
    def load(cls, path: PathLike) -> Model:
        """A model JSON file, as ``--model FILE`` reads it.

        Args:
            path: the model JSON (models/FORMAT.md); a parameter list suffices.

        Returns:
            Model: the model, named by the file's absolute path (a file named like a zoo model
            is the file).

        Raises:
            Error: the file cannot be read or is not a model (the CLI's message).
        """
        path = os.fspath(path)
        info = _core.load_model_file(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        # An absolute path: --model reads a zoo name before a file, and this is a file.
        return cls(info, {"model": os.path.abspath(path)}, text)

    @classmethod
    def from_json(cls, spec: Union[str, Dict[str, Any]], origin: str = "<model json>") -> Model:
        """A model from its JSON document, as :meth:`save` writes it.

        Args:
            spec: the document, as text or as a dict (models/FORMAT.md).
            origin: the name its error messages give it.

        Returns:
            Model: the model (written to a temporary file when a command needs a file).

        Raises:
            Error: the document is not a model.
        """
        text = spec if isinstance(spec, str) else json.dumps(spec)
        info = _core.parse_model_json(text, origin)
        return cls(info, {}, text)

    @classmethod
    def from_torch(cls, module: Any, example_inputs: Any, name: Optional[str] = None,
                   measure: bool = False, repeat: int = 5) -> Model:
        """Exports any ``torch.nn.Module`` in-process.

        One forward and one backward of ``example_inputs`` record the layers in execution
        order, the parameters in ``module.parameters()`` order, the real gradient-ready order,
        FLOPs and bytes. Modules of the types the zoo knows are costed by the zoo's rules; any
        other module, and the ops a module's own forward runs between its children (residual
        adds, attention, rotary embeddings), by the aten ops it dispatches (FLOPs as
        ``torch.utils.flop_counter.FlopCounterMode`` counts them).

        Args:
            module: the ``torch.nn.Module``.
            example_inputs: a tensor, batch first.
            name: the model's name (default: the module's class name).
            measure: True: also measure per-layer forward/backward times.
            repeat: runs per measured time (their median).

        Returns:
            Model: the exported model.

        Raises:
            ddpscope.export.ExportError: ``example_inputs`` is not a tensor.
        """
        from . import export

        spec = export.export_model(module, example_inputs, name or type(module).__name__,
                                   measure=measure, repeat=repeat)
        return cls.from_json(spec, origin="Model.from_torch(%s)" % type(module).__name__)

    # ---- what it holds ----
    @property
    def name(self) -> str:
        return self._info["name"]

    @property
    def num_params(self) -> int:
        """Number of scalar parameters."""
        return self._info["num_params"]

    @property
    def num_tensors(self) -> int:
        """Number of parameter tensors (DDP buckets these)."""
        return self._info["num_tensors"]

    @property
    def total_bytes(self) -> int:
        """Bytes of all parameters (= of all gradients)."""
        return self._info["total_bytes"]

    @property
    def param_names(self) -> List[str]:
        return list(self._info["param_names"])

    @property
    def layer_names(self) -> List[str]:
        return list(self._info["layer_names"])

    @property
    def grad_ready_order(self) -> List[int]:
        """Parameter indices in the order autograd makes their gradients ready."""
        return list(self._info["grad_ready_order"])

    def to_dict(self) -> Dict[str, Any]:
        """The model JSON document (models/FORMAT.md)."""
        if self._json_text is None:
            raise Error("model '%s' is a shorthand: it has no JSON form (use its name)"
                        % self.name, 2)
        return json.loads(self._json_text)

    def save(self, path: PathLike) -> None:
        """Writes the model JSON (models/FORMAT.md), for the CLI's ``--model FILE`` (``ddpscope
        simulate --model FILE ...``).

        Args:
            path: the file to write.

        Raises:
            Error: the model is a shorthand, which has no JSON form.
        """
        doc = self.to_dict()
        with open(os.fspath(path), "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")

    def settings(self) -> Dict[str, str]:
        """The settings that name this model ({"model": NAME or PATH}; a model
        from JSON is written to a temporary file, kept while the Model lives)."""
        if not self._settings:
            self._tempdir = tempfile.TemporaryDirectory(prefix="ddpscope-model-")
            path = os.path.join(self._tempdir.name, "model.json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(self._json_text or "")
            self._settings = {"model": path}
        return dict(self._settings)

    def cli_flags(self) -> List[str]:
        """The CLI flags that name this model (["--model", NAME or PATH])."""
        return _argv(self.settings())

    def __repr__(self) -> str:
        return "Model(%r: %d tensors, %d parameters, %d layers)" % (
            self.name, self.num_tensors, self.num_params, len(self.layer_names))


ModelLike = Union[Model, str]


def _model_settings(model: Optional[ModelLike]) -> Settings:
    if model is None:
        return {}
    if isinstance(model, Model):
        return model.settings()
    if isinstance(model, (str, os.PathLike)):
        return {"model": os.fspath(model)}
    raise TypeError("model: expected a ddpscope.Model or a name, got %s" % type(model).__name__)


def models() -> List[str]:
    """Names of the zoo models."""
    return list(_core.zoo_names())


@_python_errors(renamed=("torch", "semantics", "model_file"))
def buckets(model: ModelLike, bucket_cap_mb: Optional[float] = None, find_unused: bool = False,
            torch_version: Optional[str] = None, *,
            first_bucket_mb: Optional[float] = None,
            static_graph: bool = False,
            bucket_cap_mb_list: Optional[Sequence[int]] = None,
            autocast: bool = False,
            iteration: Union[int, str, None] = None,
            ready_order: Optional[Sequence[int]] = None,
            ready_order_file: Optional[PathLike] = None) -> Dict[str, Any]:
    """DDP's exact bucket plan for a model, as ``ddpscope buckets --json`` prints it.

    Each keyword argument is the ``ddpscope buckets`` flag of the same name (dashes as
    underscores); None (False for a switch) leaves the CLI's default.

    Args:
        model: a :class:`Model`, a zoo name (see :func:`models`), a shorthand
            ("gpt2:layers=L,embd=E,heads=H,vocab=V,seq=T", "mlp:in=I,hidden=H,depth=D,out=O")
            or a model JSON file.
        iteration: 1 (the construction plan, used in iteration 1) or "steady" (after any
            rebuild; the CLI default).
        ready_order: the gradient-ready order for the rebuild, as parameter indices (CLI
            default: the model's own).
        ready_order_file: the ready order from a file: a JSON array, {"grad_ready_order": [...]}
            or plain text.

    Returns:
        dict: the ``--json`` document: the buckets in reduction (allreduce launch) order, each
        with its parameter indices (into ``model.parameters()``) in flat-buffer order, its bytes
        and its size limit.

    Raises:
        InvalidSetting: a value ddpscope refuses (also a ``ValueError``); the message names the
            keyword argument where the CLI names its flag.
        UnknownSetting: a keyword argument this function does not take (also a ``TypeError``).
        Error: any other failure, with the message the ``ddpscope`` command prints.
    """
    values = locals()
    return _core.buckets(_core_settings(_model_settings(model), _settings(values, "model")))


class SimResult:
    """One simulation (``ddpscope simulate``): steady-state step time, exposed communication,
    overlap, the collectives with their timings, and the trace."""

    def __init__(self, sim: Any):
        self._sim = sim
        self._summary = sim.summary()

    @property
    def step_time_ms(self) -> float:
        """Steady-state step time (ms)."""
        return self._summary["step_time_ns"] / 1e6

    @property
    def exposed_comm_ms(self) -> float:
        """Communication not hidden behind compute, per step (ms)."""
        return self._summary["exposed_comm_ns"] / 1e6

    @property
    def comm_ms(self) -> float:
        return self._summary["comm_ns"] / 1e6

    @property
    def overlap_percent(self) -> float:
        """|compute ∩ comm| / |comm| in % (HTA's definition), steady state."""
        return self._summary["overlap_percent"]

    @property
    def num_buckets(self) -> int:
        return self._summary["num_buckets"]

    @property
    def bucket_bytes(self) -> List[int]:
        return list(self._summary["bucket_bytes"])

    def collectives(self) -> List[Dict[str, Any]]:
        """Every collective of rank 0 in every simulated iteration: name, category, start_ns,
        end_ns, duration_ns, and bucket, bytes, iteration where the simulator records them."""
        return self._sim.collectives()

    @property
    def buckets(self) -> List[Dict[str, Any]]:
        """The bucket allreduces of the last simulated (steady) iteration, in launch order:
        bucket index, bytes, start_ns, end_ns, duration_ns (timeline time)."""
        rows = [c for c in self.collectives() if c.get("category") == "allreduce"
                and "bucket" in c]
        if not rows:
            return []
        last = max(c.get("iteration", 0) for c in rows)
        return [c for c in rows if c.get("iteration", 0) == last]

    def to_dict(self) -> Dict[str, Any]:
        """The summary ``ddpscope simulate --json`` prints (times in ns)."""
        return json.loads(json.dumps(self._summary))

    def save_trace(self, path: PathLike, format: str = "chrome") -> List[str]:
        """Writes the trace, as ``ddpscope simulate --trace PATH --trace-format FORMAT``.

        Args:
            path: the file (.json; .json.gz compresses).
            format: "chrome": one Chrome/Perfetto file (pid = rank; compute, comm and host
                lanes); "kineto": one PyTorch profiler trace per rank (``run.json`` ->
                ``run.rank0.json``, ...), which HTA's ``TraceAnalysis(trace_dir=...)`` reads.

        Returns:
            list: the files written.

        Raises:
            Error: an unknown format, or a file that cannot be written.
        """
        return list(self._sim.save_trace(os.fspath(path), format))

    def __repr__(self) -> str:
        return "SimResult(%s on %s x%d: step %.3f ms, exposed comm %.3f ms, overlap %.1f %%)" % (
            self._summary["model"], self._summary["cluster"], self._summary["world_size"],
            self.step_time_ms, self.exposed_comm_ms, self.overlap_percent)


@_python_errors(renamed=_RENAMED_SIM)
def simulate(model: ModelLike, cluster: Optional[PathLike] = "dgx-h100",
             nodes: Optional[int] = None, *,
             host_profile: Optional[PathLike] = None,
             compute_from: Optional[PathLike] = None,
             kernel_bench: Union[PathLike, Sequence[PathLike], None] = None,
             kernel_fit_from: Optional[PathLike] = None,
             world_size: Optional[int] = None,
             bucket_cap_mb: Optional[float] = None,
             first_bucket_mb: Optional[float] = None,
             find_unused: bool = False,
             static_graph: bool = False,
             gradient_as_bucket_view: bool = False,
             no_sync_steps: Optional[int] = None,
             comm_hook: Optional[str] = None,
             no_broadcast_buffers: bool = False,
             torch_version: Optional[str] = None,
             bucket_cap_mb_list: Optional[Sequence[int]] = None,
             batched_grad_copy: bool = False,
             skip_all_reduce_unused_params: bool = False,
             no_forward_sync_buffers: bool = False,
             lazy_bucket_allocation: bool = False,
             mixed_precision: Optional[str] = None,
             autocast: bool = False,
             batch: Optional[int] = None,
             seq_len: Optional[int] = None,
             image_size: Optional[int] = None,
             dtype: Optional[str] = None,
             iterations: Optional[int] = None,
             sync_batchnorm: bool = False,
             contention: Optional[float] = None,
             strategy: Optional[str] = None,
             compile: Optional[str] = None,
             compile_graph_overhead: Optional[float] = None,
             all_ranks: bool = False,
             jitter: Optional[float] = None,
             seed: Optional[int] = None,
             stragglers: Union[str, Sequence[str], None] = None) -> SimResult:
    """Simulates DDP training of a model on a cluster, as ``ddpscope simulate`` does.

    Each keyword argument is the ``ddpscope simulate`` flag of the same name (dashes as
    underscores: ``bucket_cap_mb=50`` is ``--bucket-cap-mb 50``, ``find_unused=True`` is
    ``--find-unused``, a list is a comma list); None (False for a switch) leaves the CLI's
    default. The trace (``--trace``, ``--trace-format``) is :meth:`SimResult.save_trace`.

    Returns:
        SimResult: the steady-state step time, exposed communication and overlap, the
        collectives with their timings (``to_dict()`` is the ``--json`` summary), and the trace.

    Raises:
        InvalidSetting: a value ddpscope refuses (also a ``ValueError``); the message names the
            keyword argument where the CLI names its flag.
        UnknownSetting: a keyword argument this function does not take (also a ``TypeError``).
        Error: any other failure, with the message the ``ddpscope`` command prints.
    """
    values = locals()
    return SimResult(_core.simulate(_core_settings(
        _model_settings(model), _cluster_settings(cluster), _settings(values, "model", "cluster"))))


def _rows(rows: List[Dict[str, Any]]) -> Any:
    try:
        import pandas
    except ImportError:
        return rows
    return pandas.DataFrame(rows)


@_python_errors(renamed=_RENAMED_SIM)
def sweep(model: ModelLike, cluster: Optional[PathLike] = "dgx-h100",
          bucket_cap_mb: Union[float, Sequence[float], None] = None,
          nodes: Union[int, Sequence[int], None] = None,
          find_unused: Union[bool, str, None] = None, best: bool = False, *,
          host_profile: Optional[PathLike] = None,
          compute_from: Optional[PathLike] = None,
          kernel_bench: Union[PathLike, Sequence[PathLike], None] = None,
          kernel_fit_from: Optional[PathLike] = None,
          world_size: Union[int, Sequence[int], None] = None,
          first_bucket_mb: Optional[float] = None,
          static_graph: bool = False,
          gradient_as_bucket_view: bool = False,
          no_sync_steps: Optional[int] = None,
          comm_hook: Optional[str] = None,
          no_broadcast_buffers: bool = False,
          torch_version: Optional[str] = None,
          batched_grad_copy: bool = False,
          skip_all_reduce_unused_params: bool = False,
          no_forward_sync_buffers: bool = False,
          lazy_bucket_allocation: bool = False,
          mixed_precision: Optional[str] = None,
          autocast: bool = False,
          batch: Optional[int] = None,
          seq_len: Optional[int] = None,
          image_size: Optional[int] = None,
          dtype: Optional[str] = None,
          iterations: Optional[int] = None,
          sync_batchnorm: bool = False,
          contention: Optional[float] = None,
          strategy: Optional[str] = None,
          compile: Union[str, Sequence[str], None] = None,
          compile_graph_overhead: Optional[float] = None,
          all_ranks: bool = False,
          jitter: Optional[float] = None,
          seed: Optional[int] = None,
          stragglers: Union[str, Sequence[str], None] = None) -> Any:
    """One simulation per (layout, find_unused, compile mode, bucket cap), as ``ddpscope sweep``.

    Each keyword argument is the ``ddpscope sweep`` flag of the same name (dashes as
    underscores; a list is a comma list); None (False for a switch) leaves the CLI's default.
    ``bucket_cap_mb``, ``nodes``, ``world_size``, ``find_unused`` and ``compile`` are the swept
    axes; the other settings are as for :func:`simulate`.

    Args:
        bucket_cap_mb: bucket caps in MiB to sweep, a number or a list (CLI default
            1,2,5,10,25,50,100,200).
        nodes: node counts to sweep, a number or a list (CLI default 1; gb200-nvl72: 72-GPU
            racks).
        find_unused: find_unused_parameters: True, False or "both" (also "on", "off"; CLI
            default off).
        best: True: return the best cap per (layout, find_unused, compile mode) with its gain
            over the default instead of the rows.
        world_size: world sizes to sweep (multiples of the GPUs per node; CLI default: those of
            nodes); instead of nodes.
        compile: how a torch.compile'd model meets DDP: "none" (eager; the CLI default),
            "ddp-optimizer" (forward split at bucket boundaries; hooks fire between sub-graphs),
            "whole-graph" (optimize_ddp=False: every allreduce after the backward) or
            "compiled-autograd" (python reducer; Inductor buckets the allreduces); a list sweeps
            the modes.

    Returns:
        One row per swept point (the :func:`simulate` summary keys, without its iterations): a
        pandas DataFrame when pandas is installed, a list of dicts otherwise; with
        ``best=True`` the best cap per (layout, find_unused, compile mode) and its gain over
        the default instead.

    Raises:
        InvalidSetting: a value ddpscope refuses (also a ``ValueError``); the message names the
            keyword argument where the CLI names its flag.
        UnknownSetting: a keyword argument this function does not take (also a ``TypeError``).
        Error: any other failure, with the message the ``ddpscope`` command prints.
    """
    values = locals()
    axes = _settings(values, "model", "cluster", "best", "find_unused")
    if find_unused is not None:
        axes["find-unused"] = _text(find_unused)
    out = _core.sweep(_core_settings(_model_settings(model), _cluster_settings(cluster), axes))
    return _rows(out["best"] if best else out["rows"])


@_python_errors(renamed=_RENAMED_SIM)
def plan(model: Optional[ModelLike], cluster: Optional[PathLike] = "dgx-h100",
         nodes: Optional[int] = None, torch_version: Optional[str] = None,
         objective: Optional[str] = None, *,
         from_trace: Optional[PathLike] = None,
         host_profile: Optional[PathLike] = None,
         compute_from: Optional[PathLike] = None,
         kernel_bench: Union[PathLike, Sequence[PathLike], None] = None,
         kernel_fit_from: Optional[PathLike] = None,
         world_size: Optional[int] = None,
         bucket_cap_mb: Union[float, Sequence[float], None] = None,
         first_bucket_mb: Optional[float] = None,
         find_unused: Union[bool, str, None] = None,
         static_graph: bool = False,
         gradient_as_bucket_view: bool = False,
         no_sync_steps: Optional[int] = None,
         comm_hook: Optional[str] = None,
         no_broadcast_buffers: bool = False,
         batched_grad_copy: bool = False,
         skip_all_reduce_unused_params: bool = False,
         no_forward_sync_buffers: bool = False,
         lazy_bucket_allocation: bool = False,
         mixed_precision: Optional[str] = None,
         autocast: bool = False,
         batch: Optional[int] = None,
         seq_len: Optional[int] = None,
         image_size: Optional[int] = None,
         dtype: Optional[str] = None,
         iterations: Optional[int] = None,
         sync_batchnorm: bool = False,
         contention: Optional[float] = None,
         strategy: Optional[str] = None,
         compile: Optional[str] = None,
         compile_graph_overhead: Optional[float] = None,
         all_ranks: bool = False,
         jitter: Optional[float] = None,
         seed: Optional[int] = None,
         stragglers: Union[str, Sequence[str], None] = None) -> Dict[str, Any]:
    """The best bucket layout for a model on a cluster, as ``ddpscope plan --json``.

    Each keyword argument is the ``ddpscope plan`` flag of the same name (dashes as
    underscores; a list is a comma list); None (False for a switch) leaves the CLI's default.

    Args:
        model: a :class:`Model`, a zoo name (see :func:`models`), a shorthand
            ("gpt2:layers=L,embd=E,heads=H,vocab=V,seq=T", "mlp:in=I,hidden=H,depth=D,out=O") or
            a model JSON file; None with from_trace, which names it.
        torch_version: the PyTorch version to plan for: "2.15" (the CLI default) or "1.13".
        objective: what to minimise: "step" (the steady step time; the CLI default) or "exposed"
            (exposed communication).
        from_trace: plan a recorded run: its model, measured compute, world size and DDP
            settings (a ``ddpscope run`` trace or an :func:`import_torch`'ed PyTorch profiler
            trace).
        bucket_cap_mb: the uniform caps to compare in MiB, a number or a list (CLI default
            1,2,5,10,25,50,100,200).
        find_unused: find_unused_parameters: True or False (also "on", "off"; CLI default off;
            True needs static_graph to plan).
        compile: "none" only: eager DDP (plan refuses other modes).

    Returns:
        dict: ``default`` and ``best_uniform`` (full simulations), ``planned`` (the per-bucket
        layout with its ``bucket_cap_mb_list``, per-bucket launch/end times and gains; None for
        ``torch_version="1.13"``, which has no list), ``flags`` (each helpful DDP flag
        simulated with and without), ``ddp_kwargs``, the keyword arguments for
        ``DistributedDataParallel(model, **plan(...)["ddp_kwargs"])`` as a dict, and
        ``ddp_kwargs_text``, the same as text to print or paste.

    Raises:
        InvalidSetting: a value ddpscope refuses (also a ``ValueError``); the message names the
            keyword argument where the CLI names its flag.
        UnknownSetting: a keyword argument this function does not take (also a ``TypeError``).
        Error: any other failure, with the message the ``ddpscope`` command prints.
    """
    values = locals()
    settings = _settings(values, "model", "cluster", "find_unused")
    if find_unused is not None:
        settings["find-unused"] = _text(find_unused)
    out = _core.plan(_core_settings(_model_settings(model), _cluster_settings(cluster), settings))
    out["ddp_kwargs_text"] = out["ddp_kwargs"]
    out["ddp_kwargs"] = _kwargs_dict(out["ddp_kwargs"])
    return out


def _kwargs_dict(text: str) -> Dict[str, Any]:
    """``"bucket_cap_mb_list=[44, 1], gradient_as_bucket_view=True"`` -> its dict (Python
    literals only)."""
    if not text.strip():
        return {}
    call = ast.parse("f(%s)" % text, mode="eval").body
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords}


@_python_errors
def overlap(trace_path: PathLike) -> Dict[str, Any]:
    """Overlap of communication with computation in a trace, as ``ddpscope overlap --json``.

    Args:
        trace_path: a ddpscope trace or a PyTorch profiler (Kineto) trace, plain or .gz.

    Returns:
        dict: per rank and per iteration, the overlap with Holistic Trace Analysis'
        definition (100 x |compute ∩ comm| / |comm|) and the exposed communication, times in ns.

    Raises:
        Error: the trace cannot be read, with the message the ``ddpscope`` command prints.
    """
    return _core.overlap(os.fspath(trace_path))


@_python_errors(renamed=_RENAMED_SIM + ("trace_out",))
def replay(trace_path: PathLike, model: Optional[ModelLike] = None,
           cluster: Optional[PathLike] = None, *,
           nodes: Optional[int] = None,
           trace: Optional[PathLike] = None,
           unprofiled_step_ms: Optional[float] = None,
           host_profile: Optional[PathLike] = None,
           world_size: Optional[int] = None,
           bucket_cap_mb: Optional[float] = None,
           first_bucket_mb: Optional[float] = None,
           find_unused: bool = False,
           static_graph: bool = False,
           gradient_as_bucket_view: bool = False,
           no_sync_steps: Optional[int] = None,
           comm_hook: Optional[str] = None,
           no_broadcast_buffers: bool = False,
           torch_version: Optional[str] = None,
           bucket_cap_mb_list: Optional[Sequence[int]] = None,
           batched_grad_copy: bool = False,
           skip_all_reduce_unused_params: bool = False,
           no_forward_sync_buffers: bool = False,
           lazy_bucket_allocation: bool = False,
           mixed_precision: Optional[str] = None,
           autocast: bool = False,
           batch: Optional[int] = None,
           seq_len: Optional[int] = None,
           image_size: Optional[int] = None,
           dtype: Optional[str] = None,
           kernel_bench: Union[PathLike, Sequence[PathLike], None] = None,
           iterations: Optional[int] = None,
           sync_batchnorm: bool = False,
           contention: Optional[float] = None,
           strategy: Optional[str] = None,
           compile: Optional[str] = None,
           compile_graph_overhead: Optional[float] = None,
           all_ranks: bool = False,
           jitter: Optional[float] = None,
           seed: Optional[int] = None,
           stragglers: Union[str, Sequence[str], None] = None) -> Dict[str, Any]:
    """Re-simulates a measured run with its measured per-layer times, as ``ddpscope replay
    --json``.

    Each keyword argument is the ``ddpscope replay`` flag of the same name (dashes as
    underscores; a list is a comma list); None (False for a switch) leaves the CLI's default.
    The settings given are the what-if: the same run with them changed (``world_size=8``,
    ``bucket_cap_mb=5``, ...).

    Args:
        trace_path: the measured run: a ``ddpscope run`` trace, or any trace with the same lanes
            (an :func:`import_torch`'ed profiler trace); plain or .gz (``--from-trace``).
        model: a :class:`Model`, a zoo name (see :func:`models`), a shorthand
            ("gpt2:layers=L,embd=E,heads=H,vocab=V,seq=T", "mlp:in=I,hidden=H,depth=D,out=O") or
            a model JSON file (CLI default: the one the trace names).
        cluster: where communication comes from: a built-in cluster or a cluster JSON file (CLI
            default: cpu-mpi calibrated on the run's own collectives).
        trace: write the what-if's simulated trace here (Chrome/Perfetto JSON).
        unprofiled_step_ms: the job's step measured without the profiler (a median, at the
            trace's settings): the host lane fits the profiler's own cost per event on this
            trace to meet it (a GPU trace with host facts only).

    Returns:
        dict: the ``--json`` document: the measured step time, the replay at the run's own
        settings and, with settings given, the what-if.

    Raises:
        InvalidSetting: a value ddpscope refuses (also a ``ValueError``); the message names the
            keyword argument where the CLI names its flag.
        UnknownSetting: a keyword argument this function does not take (also a ``TypeError``).
        Error: any other failure, with the message the ``ddpscope`` command prints.
    """
    values = locals()
    return _core.replay(_core_settings({"from-trace": os.fspath(trace_path)},
                                       _model_settings(model), _cluster_settings(cluster),
                                       _settings(values, "trace_path", "model", "cluster",
                                                 "trace")),
                        os.fspath(trace) if trace else "")


@_python_errors(renamed=("torch", "semantics", "model_file", "output"))
def import_torch(paths: Union[PathLike, Iterable[PathLike]], out: Optional[PathLike] = None,
                 model: Optional[ModelLike] = None, *,
                 allow_missing_ranks: bool = False,
                 batch_per_rank: Optional[int] = None,
                 bucket_cap_mb: Optional[float] = None,
                 first_bucket_mb: Optional[float] = None,
                 find_unused: bool = False,
                 static_graph: bool = False,
                 gradient_as_bucket_view: bool = False,
                 no_sync_steps: Optional[int] = None,
                 comm_hook: Optional[str] = None,
                 no_broadcast_buffers: bool = False,
                 torch_version: Optional[str] = None,
                 bucket_cap_mb_list: Optional[Sequence[int]] = None,
                 batched_grad_copy: bool = False,
                 skip_all_reduce_unused_params: bool = False,
                 no_forward_sync_buffers: bool = False,
                 lazy_bucket_allocation: bool = False,
                 mixed_precision: Optional[str] = None,
                 autocast: bool = False) -> Dict[str, Any]:
    """Imports the PyTorch profiler (Kineto) traces of a DDP job, one per rank, into a ddpscope
    trace, as ``ddpscope import-torch --json``.

    Each keyword argument is the ``ddpscope import-torch`` flag of the same name (dashes as
    underscores; a list is a comma list); None (False for a switch) leaves the CLI's default.
    The DDP settings (``bucket_cap_mb``, ...) and ``batch_per_rank`` record what the profiler
    does not: pass the job's.

    Args:
        paths: the per-rank profiler traces (plain or .gz), one path or several, any order.
        out: where to write the imported trace (required; ``-o``).
        model: a :class:`Model`, a zoo name (see :func:`models`), a shorthand
            ("gpt2:layers=L,embd=E,heads=H,vocab=V,seq=T", "mlp:in=I,hidden=H,depth=D,out=O") or
            a model JSON file: names the compute spans by its layers (replay and calibrate need
            it) and gives a trace without message sizes its bucket plan's bytes. None: a trace
            profiled with ``record_shapes=True`` gives its own model (its parameters from the
            backward's gradient accumulation), kept in the output so that replay and calibrate
            need none; the result's ``"model_from_trace"`` says what was read (None when the
            trace holds no model, and a note says why).
        allow_missing_ranks: True: import a subset of the job's ranks instead of failing.
        batch_per_rank: record the job's per-rank batch size in the trace.

    Returns:
        dict: the ``--json`` summary: the ranks, iterations, the gradient buckets of each
        iteration, the median step time, communication, exposed communication and overlap.

    Raises:
        InvalidSetting: a value ddpscope refuses (also a ``ValueError``); the message names the
            keyword argument where the CLI names its flag.
        UnknownSetting: a keyword argument this function does not take (also a ``TypeError``).
        Error: any other failure, with the message the ``ddpscope`` command prints.
        TypeError: ``out`` is missing.
    """
    values = locals()
    if out is None:
        raise TypeError("import_torch: out= (the trace to write) is required")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return _core.import_torch([os.fspath(p) for p in paths], _core_settings(
        {"out": os.fspath(out)}, _model_settings(model),
        _settings(values, "paths", "out", "model")))


@_python_errors(renamed=("model_file", "output", "base_file"))
def calibrate(traces: Union[PathLike, Iterable[PathLike]], out: PathLike,
              model: Optional[ModelLike] = None, *,
              base: Optional[PathLike] = None,
              name: Optional[str] = None,
              image_size: Optional[int] = None,
              seq_len: Optional[int] = None) -> Dict[str, Any]:
    """Fits a cluster's cost-model constants to measured runs and writes the cluster JSON, as
    ``ddpscope calibrate --json``.

    Each keyword argument is the ``ddpscope calibrate`` flag of the same name; None leaves the
    CLI's default.

    Args:
        traces: the measured runs' traces (``ddpscope run`` traces, or any with the same lanes),
            one path or several, plain or .gz.
        out: the cluster JSON to write (``-o``).
        model: the runs' model (a :class:`Model`, a zoo name, a shorthand or a model JSON file)
            when their metadata does not name it.
        base: the built-in cluster or cluster JSON file to start from (CLI default cpu-mpi).
        name: the calibrated cluster's name (CLI default: the output file's stem).
        image_size: the runs' image side when the traces do not record it.
        seq_len: the runs' tokens per sample when the traces do not record it.

    Returns:
        dict: the ``--json`` document: the runs, the fit (alpha-beta, contention, compute scale,
        DDP's host costs) and its quality, and the file written.

    Raises:
        InvalidSetting: a value ddpscope refuses (also a ``ValueError``); the message names the
            keyword argument where the CLI names its flag.
        UnknownSetting: a keyword argument this function does not take (also a ``TypeError``).
        Error: any other failure, with the message the ``ddpscope`` command prints.
    """
    values = locals()
    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    return _core.calibrate([os.fspath(t) for t in traces], _core_settings(
        {"out": os.fspath(out)}, _model_settings(model),
        _settings(values, "traces", "out", "model")))


def _write_text(out: PathLike, text: str) -> None:
    """Writes a cluster file byte for byte as the CLI's ``-o`` does."""
    try:
        with open(os.fspath(out), "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as e:
        raise Error("%s: cannot open for writing: %s" % (os.fspath(out), e.strerror), 2)


@_python_errors(renamed=("output",))
def cluster_from_topo(topo: PathLike, gpu: Optional[str] = None,
                      out: Optional[PathLike] = None, *,
                      nic_gbps: Optional[float] = None,
                      nics: Union[str, Sequence[str], None] = None,
                      nvlink_hosts: Optional[int] = None,
                      cpu: Optional[str] = None,
                      cpu_vendor: Optional[str] = None,
                      fabric: Optional[str] = None,
                      name: Optional[str] = None) -> Dict[str, Any]:
    """A cluster description from the output of ``nvidia-smi topo -m``, as ``ddpscope cluster
    from-topo`` builds it.

    Each keyword argument is the ``ddpscope cluster from-topo`` flag of the same name (dashes
    as underscores); None leaves the CLI's default.

    Args:
        topo: the file with that output, or the text itself (any string with a line break).
        gpu: the GPU (required; ``topo -m`` does not print it): a built-in device name or a
            unique part of one ("h100", "v100").
        out: also write the cluster JSON here, byte for byte what ``-o`` writes, so that
            ``simulate(model, cluster=out)`` uses it.
        nic_gbps: the NIC port speed in Gb/s (required when NICs are used): 100 EDR/100GbE,
            200 HDR, 400 NDR.
        nics: the NICs to use, by legend name or column label ("mlx5_0", "NIC0"), a list or a
            comma list; ``[]`` or "none": no network (CLI default: each GPU's closest NICs).
        nvlink_hosts: the hosts one NVLink domain spans, of which ``topo`` shows one (CLI
            default 1; a GB200 NVL72 rack: 18).
        cpu: the CPU, for NCCL's inter-CPU link speed: "intel" (= "intel-skl", the CLI
            default), "amd", "arm", or for Intel the model ("intel-bdw", "intel-skl",
            "intel-srp", "intel-erp").
        cpu_vendor: "intel" (the CLI default), "amd" or "arm": NCCL's net overhead and LL caps
            (``cpu`` implies it).
        fabric: "ib" (the CLI default), "roce", "ethernet" or "tcp" (informational).
        name: the cluster's name (CLI default: the topology file's stem).

    Returns:
        dict: the cluster file (sim/cost/clusters/FORMAT.md).

    Raises:
        InvalidSetting: a value ddpscope refuses (also a ``ValueError``); the message names the
            keyword argument where the CLI names its flag.
        UnknownSetting: a keyword argument this function does not take (also a ``TypeError``).
        Error: any other failure (a topology it cannot read, ``out`` not writable), with the
            message the ``ddpscope`` command prints.
    """
    values = locals()
    if nics is not None and not isinstance(nics, str) and len(nics) == 0:
        values["nics"] = "none"
    is_text = isinstance(topo, str) and "\n" in topo
    text = _core.cluster_from_topo(topo if is_text else os.fspath(topo), is_text,
                                   _core_settings(_settings(values, "topo", "out")))
    if out is not None:
        _write_text(out, text)
    return json.loads(text)


@_python_errors(renamed=("output",))
def cluster_calibrate(nccl_tests: Union[PathLike, Sequence[PathLike]],
                      cluster: PathLike = "dgx-h100",
                      cluster_file: Optional[PathLike] = None, ranks: Optional[int] = None,
                      nodes: Optional[int] = None, nccl_algo: Optional[str] = None,
                      name: Optional[str] = None, out: Optional[PathLike] = None
                      ) -> Dict[str, Any]:
    """Calibrates a cluster's allreduce times on nccl-tests' ``all_reduce_perf`` output, as
    ``ddpscope cluster calibrate --nccl-tests LOG[,LOG...] --json``.

    Each log's measured curve goes into the cluster; the model's latency and bandwidth are
    fitted underneath, for other layouts. Each keyword argument is the ``ddpscope cluster
    calibrate`` flag of the same name; None leaves the CLI's default.

    Args:
        nccl_tests: one ``all_reduce_perf`` log, or a list of several of one cluster (other
            world sizes or nodes, one per layout), fitted together.
        cluster: the built-in cluster or cluster file to start from (a string that names a
            built-in is the built-in; ``os.path.abspath`` a file named like one).
        cluster_file: deprecated (a DeprecationWarning): a cluster file, even one named like a
            built-in; use ``cluster``.
        ranks: the GPUs in the run, for a log without ``# Rank`` lines.
        nodes: the nodes of the run, for a log without ``# Rank`` lines (CLI default 1).
        nccl_algo: the NCCL_ALGO the run forced (ring, tree, nvls, nvls_tree); the written
            cluster lets the tuner pick.
        name: the new cluster's name (CLI default: BASE-calibrated).
        out: also write the calibrated cluster file here, byte for byte what ``-o`` writes.

    Returns:
        dict: the ``--json`` document (``latency``, ``bandwidth_scale``, ``logs`` with each
        log's ``checks`` and ``notes``, ``checks`` of every row) with the calibrated cluster as a
        dict under ``cluster_json``.

    Raises:
        InvalidSetting: a value ddpscope refuses (also a ``ValueError``); the message names the
            keyword argument where the CLI names its flag.
        UnknownSetting: a keyword argument this function does not take (also a ``TypeError``).
        Error: any other failure (a malformed row names its line), with the message the
            ``ddpscope`` command prints.
    """
    if cluster_file is not None:
        _renamed("cluster_file", "cluster")
        cluster = os.path.abspath(os.fspath(cluster_file))  # a file, even named like a built-in
    base = dict(cluster=os.fspath(cluster))
    logs = [nccl_tests] if isinstance(nccl_tests, (str, bytes, os.PathLike)) else list(nccl_tests)
    doc = _core.cluster_calibrate_nccl_tests(_core_settings(_settings(dict(
        nccl_tests=",".join(os.fspath(log) for log in logs), ranks=ranks, nodes=nodes, nccl_algo=nccl_algo,
        name=name, **base))))
    text = doc.pop("cluster_json_text")
    if out is not None:
        _write_text(out, text)
    doc["cluster_json"] = json.loads(text)
    return doc


def _cli_executable() -> str:
    """The `ddpscope` command-line tool: $DDPSCOPE_CLI, else the one built next to this package
    (<build>/bin/ddpscope), else the console script `pip install` put in this interpreter's
    scripts folder, else the one on PATH."""
    if os.environ.get("DDPSCOPE_CLI"):
        return os.environ["DDPSCOPE_CLI"]
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(os.path.dirname(os.path.dirname(here)), "bin", "ddpscope"),
                  os.path.join(sysconfig.get_path("scripts"), "ddpscope")]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("ddpscope")
    if found is None:
        raise Error("the ddpscope command-line tool was not found (set DDPSCOPE_CLI, or "
                    "`pip install .` to install it as a console script)", 1)
    return found


def cli(*args: str) -> str:
    """Runs the ``ddpscope`` command-line tool with ``ARGS...`` and returns its standard output;
    raises Error with the CLI's message when it fails. (The rest of this API calls the C++
    libraries directly; this runs the tool itself.)"""
    proc = subprocess.run([_cli_executable()] + [str(a) for a in args], capture_output=True)
    if proc.returncode != 0:
        command = args[0] if args else ""
        raise Error(_cli_message(command, proc.stderr.decode("utf-8", "replace")),
                    proc.returncode)
    return proc.stdout.decode("utf-8")

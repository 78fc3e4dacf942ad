"""The ddpscope Python API: models, bucket plans, simulation, sweeps, traces.

Every setting is a keyword argument named like the CLI flag it stands for, with dashes as
underscores (``bucket_cap_mb=50`` is ``--bucket-cap-mb 50``; ``find_unused=True`` is
``--find-unused``; a list is a comma list). They reach the same settings parsers in the C++
libraries that the CLI's flags reach, so a setting means, defaults and fails exactly as on the
command line, and every error is a :class:`ddpscope.Error` carrying the message the ``ddpscope``
command prints, in Python's words: a bad value is an :class:`InvalidSetting` (also a
``ValueError``) naming the keyword argument (``bucket_cap_mb: expected a positive number, got
'-3'``), an unknown keyword an :class:`UnknownSetting` (also a ``TypeError``). See ``ddpscope
<command> --help`` for the full list of settings.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
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


def _python_errors(function):
    """Raises the core's bad-input errors of `function` as _python_error makes them."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except (InvalidSetting, UnknownSetting):
            raise
        except Error as e:
            raise _python_error(e, function.__name__) from None
    return wrapper

PathLike = Union[str, "os.PathLike[str]"]

# Keyword names follow the CLI's flags (bucket_cap_mb is --bucket-cap-mb). Old names from before
# the one grammar still work for one release, with a DeprecationWarning naming the new one.
_RENAMED = {"torch": "torch_version", "semantics": "torch_version", "model_file": "model",
            "cluster_file": "cluster", "output": "out", "trace_out": "trace"}


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


def _settings(kwargs: Dict[str, Any]) -> Settings:
    """Keyword arguments -> settings: True is a switch, False/None leave the setting out, a list
    or tuple becomes a comma list."""
    out: Settings = {}
    kwargs = dict(kwargs)
    _take_renamed(kwargs, *[k for k in _RENAMED if k in kwargs])
    for key, value in kwargs.items():
        if value is None or value is False:
            continue
        name = key.replace("_", "-")
        if value is True:
            out[name] = True
        elif isinstance(value, (list, tuple)):
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
    def zoo(cls, name: str) -> "Model":
        """A zoo model ("resnet50", see :func:`models`) or a shorthand
        ("gpt2:layers=2,embd=64,heads=4,vocab=512,seq=32", "mlp:in=I,hidden=H,depth=D,out=O")."""
        info = _core.resolve_model(name)
        return cls(info, {"model": name}, _core.zoo_json(name) or None)

    @classmethod
    def load(cls, path: PathLike) -> "Model":
        """A model JSON file (models/FORMAT.md); a parameter list suffices."""
        path = os.fspath(path)
        info = _core.load_model_file(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        # An absolute path: --model reads a zoo name before a file, and this is a file.
        return cls(info, {"model": os.path.abspath(path)}, text)

    @classmethod
    def from_json(cls, spec: Union[str, Dict[str, Any]], origin: str = "<model json>") -> "Model":
        """A model from its JSON document (text or dict), as :meth:`save` writes it."""
        text = spec if isinstance(spec, str) else json.dumps(spec)
        info = _core.parse_model_json(text, origin)
        return cls(info, {}, text)

    @classmethod
    def from_torch(cls, module: Any, example_inputs: Any, name: Optional[str] = None,
                   measure: bool = False, repeat: int = 5) -> "Model":
        """Exports any ``torch.nn.Module`` in-process: one forward and one backward of
        ``example_inputs`` (a tensor, batch first) record the layers in execution order, the
        parameters in ``module.parameters()`` order, the real gradient-ready order, FLOPs and
        bytes. Modules of the types the zoo knows are costed by the zoo's rules; any other
        module, and the ops a module's own forward runs between its children (residual adds,
        attention, rotary embeddings), by the aten ops it dispatches (FLOPs as
        ``torch.utils.flop_counter.FlopCounterMode`` counts them). ``measure=True`` also
        measures per-layer forward/backward times (median of ``repeat`` runs). Raises
        :class:`ddpscope.export.ExportError` when ``example_inputs`` is not a tensor."""
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
        simulate --model FILE ...``)."""
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


@_python_errors
def buckets(model: ModelLike, bucket_cap_mb: Optional[float] = None, find_unused: bool = False,
            torch_version: Optional[str] = None, **settings: Any) -> Dict[str, Any]:
    """DDP's exact bucket plan for ``model`` (``ddpscope buckets --json``): buckets in reduction
    order, each with its parameter indices (flat-buffer order), bytes and size limit.

    ``torch_version``: the PyTorch semantics ("2.15", "1.13", "1.5"; default 2.15). Other settings:
    ``first_bucket_mb``, ``static_graph``, ``bucket_cap_mb_list``, ``iteration`` ("1" or
    "steady"), ``ready_order`` (a list of parameter indices)..."""
    return _core.buckets(_core_settings(_model_settings(model), _settings(dict(
        bucket_cap_mb=bucket_cap_mb, find_unused=find_unused, torch_version=torch_version,
        **settings))))


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
        """Writes the trace and returns the files written: ``format="chrome"`` one
        Chrome/Perfetto file (pid = rank; compute, comm and host lanes), ``"kineto"`` one
        PyTorch profiler trace per rank (``run.json`` -> ``run.rank0.json``, ...), which HTA's
        ``TraceAnalysis(trace_dir=...)`` reads (``--trace-format kineto``)."""
        return list(self._sim.save_trace(os.fspath(path), format))

    def __repr__(self) -> str:
        return "SimResult(%s on %s x%d: step %.3f ms, exposed comm %.3f ms, overlap %.1f %%)" % (
            self._summary["model"], self._summary["cluster"], self._summary["world_size"],
            self.step_time_ms, self.exposed_comm_ms, self.overlap_percent)


@_python_errors
def simulate(model: ModelLike, cluster: Optional[PathLike] = "dgx-h100",
             nodes: Optional[int] = None, **settings: Any) -> SimResult:
    """Simulates DDP training of ``model`` on ``cluster`` (a built-in name or a cluster JSON
    file) with ``nodes`` nodes (or ``world_size=W``); settings as ``ddpscope simulate`` takes
    them: ``bucket_cap_mb``, ``find_unused``, ``static_graph``, ``no_sync_steps``,
    ``comm_hook``, ``torch_version``, ``batch``, ``seq_len``, ``dtype``, ``iterations``,
    ``all_ranks``, ``jitter``, ``seed``, ``compile``, ``compute_from``..."""
    return SimResult(_core.simulate(_core_settings(
        _model_settings(model), _cluster_settings(cluster), _settings(dict(nodes=nodes, **settings)))))


def _rows(rows: List[Dict[str, Any]]) -> Any:
    try:
        import pandas
    except ImportError:
        return rows
    return pandas.DataFrame(rows)


@_python_errors
def sweep(model: ModelLike, cluster: Optional[PathLike] = "dgx-h100",
          bucket_cap_mb: Optional[Sequence[float]] = None,
          nodes: Union[int, Sequence[int], None] = None,
          find_unused: Union[bool, str, None] = None, best: bool = False,
          **settings: Any) -> Any:
    """One simulation per (layout, find_unused, compile mode, bucket cap) (``ddpscope sweep``).

    Returns one row per swept point (the ``simulate`` summary keys, without its iterations):
    a pandas DataFrame when pandas is installed, a list of dicts otherwise. ``best=True``
    returns the best cap per (layout, find_unused, compile mode) with its gain over the
    default instead. ``find_unused``: True, False or "both"."""
    if isinstance(nodes, int):
        nodes = [nodes]
    axes = _settings(dict(
        bucket_cap_mb=list(bucket_cap_mb) if bucket_cap_mb is not None else None, nodes=nodes,
        **settings))
    if find_unused is not None:
        axes["find-unused"] = _text(find_unused)
    out = _core.sweep(_core_settings(_model_settings(model), _cluster_settings(cluster), axes))
    return _rows(out["best"] if best else out["rows"])


@_python_errors
def plan(model: ModelLike, cluster: Optional[PathLike] = "dgx-h100",
         nodes: Optional[int] = None, torch_version: Optional[str] = None,
         objective: Optional[str] = None, **settings: Any) -> Dict[str, Any]:
    """The best bucket layout for a model on a cluster (``ddpscope plan --json``).

    Returns a dict: ``default`` and ``best_uniform`` (full simulations), ``planned`` (the
    per-bucket layout with its ``bucket_cap_mb_list``, per-bucket launch/end times and gains;
    None for ``torch_version="1.13"``, which has no list), ``flags`` (each helpful DDP flag simulated with
    and without), ``ddp_kwargs``, the keyword arguments for
    ``DistributedDataParallel(model, **plan(...)["ddp_kwargs"])`` as a dict, and
    ``ddp_kwargs_text``, the same as text to print or paste. ``torch_version``: "2.15" (default) or "1.13";
    ``objective``: "step" (default) or "exposed"; ``bucket_cap_mb``: the uniform caps to
    compare; other settings as for :func:`simulate`."""
    values = _settings(dict(nodes=nodes, objective=objective, torch_version=torch_version,
                            **settings))
    out = _core.plan(_core_settings(_model_settings(model), _cluster_settings(cluster), values))
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
    """Overlap of communication with computation in a trace (``ddpscope overlap --json``): per
    rank and per iteration, HTA's definition."""
    return _core.overlap(os.fspath(trace_path))


@_python_errors
def replay(trace_path: PathLike, model: Optional[ModelLike] = None,
           cluster: Optional[PathLike] = None, **what_if: Any) -> Dict[str, Any]:
    """Re-simulates a measured run with its measured per-layer times (``ddpscope replay
    --json``): the measured step time, the replay at the run's own settings, and with any
    ``what_if`` settings given (``world_size=8``, ``bucket_cap_mb=5``, ...) the what-if;
    ``trace=PATH`` also writes the what-if's simulated trace."""
    _take_renamed(what_if, "trace_out")
    trace_out = what_if.pop("trace", None)
    return _core.replay(_core_settings({"from-trace": os.fspath(trace_path)},
                                       _model_settings(model), _cluster_settings(cluster),
                                       _settings(what_if)),
                        os.fspath(trace_out) if trace_out else "")


@_python_errors
def import_torch(paths: Union[PathLike, Iterable[PathLike]], out: Optional[PathLike] = None,
                 model: Optional[ModelLike] = None, **settings: Any) -> Dict[str, Any]:
    """Imports the PyTorch profiler (Kineto) traces of a DDP job, one per rank, into a ddpscope
    trace at ``out`` (``ddpscope import-torch --json``). ``model`` names the compute spans by
    its layers (replay and calibrate need it); DDP settings (``bucket_cap_mb``, ...) and
    ``batch_per_rank`` record what the profiler does not."""
    settings = dict(settings, out=out)
    _take_renamed(settings, "output")
    out = settings.pop("out")
    if out is None:
        raise TypeError("import_torch: out= (the trace to write) is required")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return _core.import_torch([os.fspath(p) for p in paths], _core_settings(
        {"out": os.fspath(out)}, _model_settings(model), _settings(settings)))


@_python_errors
def calibrate(traces: Union[PathLike, Iterable[PathLike]], out: PathLike,
              model: Optional[ModelLike] = None, **settings: Any) -> Dict[str, Any]:
    """Fits a cluster's cost-model constants to measured runs and writes the cluster JSON to
    ``out`` (``ddpscope calibrate --json``); ``base="cpu-mpi"``, ``name=...`` as the CLI."""
    if isinstance(traces, (str, os.PathLike)):
        traces = [traces]
    return _core.calibrate([os.fspath(t) for t in traces], _core_settings(
        {"out": os.fspath(out)}, _model_settings(model), _settings(settings)))


def _write_text(out: PathLike, text: str) -> None:
    """Writes a cluster file byte for byte as the CLI's ``-o`` does."""
    try:
        with open(os.fspath(out), "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as e:
        raise Error("%s: cannot open for writing: %s" % (os.fspath(out), e.strerror), 2)


@_python_errors
def cluster_from_topo(topo: PathLike, gpu: Optional[str] = None,
                      out: Optional[PathLike] = None, **settings: Any) -> Dict[str, Any]:
    """A cluster description from the output of ``nvidia-smi topo -m``, as ``ddpscope cluster
    from-topo`` builds it: ``topo`` is that output's file path, or the text itself (any string
    with a line break). Settings as the command's flags: ``gpu`` (required: a built-in device or
    a unique part of one, "h100"), ``nic_gbps``, ``nics`` (names; ``[]`` or "none": no
    network), ``nvlink_hosts``, ``cpu`` ("intel-srp", "amd", ...), ``cpu_vendor``, ``fabric``,
    ``name``. Returns the cluster file as a dict; ``out`` also writes it there, byte for byte
    what ``-o`` writes, so that ``simulate(model, cluster=out)`` uses it. Errors raise
    :class:`Error` with the CLI's message."""
    if settings.get("nics") is not None and not isinstance(settings["nics"], str) \
            and len(settings["nics"]) == 0:
        settings["nics"] = "none"
    is_text = isinstance(topo, str) and "\n" in topo
    text = _core.cluster_from_topo(topo if is_text else os.fspath(topo), is_text,
                                   _core_settings(_settings(dict(gpu=gpu, **settings))))
    if out is not None:
        _write_text(out, text)
    return json.loads(text)


@_python_errors
def cluster_calibrate(nccl_tests: Union[PathLike, Sequence[PathLike]],
                      cluster: PathLike = "dgx-h100",
                      cluster_file: Optional[PathLike] = None, ranks: Optional[int] = None,
                      nodes: Optional[int] = None, nccl_algo: Optional[str] = None,
                      name: Optional[str] = None, out: Optional[PathLike] = None
                      ) -> Dict[str, Any]:
    """``ddpscope cluster calibrate --nccl-tests LOG[,LOG...]``: calibrates ``cluster`` (a
    built-in or a cluster file) on one ``all_reduce_perf`` log or several of one cluster (a list:
    other world sizes or nodes, one per layout): each log's measured curve goes into the cluster,
    the model's latency and bandwidth are fitted underneath. Returns the ``--json`` document
    (``latency``, ``bandwidth_scale``, ``logs`` with each log's ``checks`` and ``notes``,
    ``checks`` of every row) with the calibrated cluster as a dict under ``cluster_json``; ``out``
    also writes that cluster file, byte for byte what ``-o`` writes. ``ranks``/``nodes`` for a
    log without ``# Rank`` lines, ``nccl_algo`` the NCCL_ALGO the run forced. Errors raise
    :class:`Error` with the CLI's message (a malformed row names its line)."""
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

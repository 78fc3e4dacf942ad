#!/usr/bin/env python3
"""Real DDP jobs on gloo (CPU) for ddpscope.torch.tune's tests and measurements.

    tune_job.py OUT_DIR --case CASE [--world 2] [--model NAME] [--steps N] [...]

Cases (rank 0 writes OUT_DIR/result.json):
  poor      a deep, thin MLP (hundreds of small gradient tensors) started with
            bucket_cap_mb=0.0001: one bucket, one gloo allreduce per tensor. The planner
            proposes; tune must move to a layout with far fewer buckets.
  nothing   the same model at DDP's defaults, against given candidates that are far worse
            (bucket_cap_mb=0.0001): tune must keep its settings. Also a one-tensor model with
            the proposal: nothing else to try.
  equal     a model with a BatchNorm (buffers), an unused branch (find_unused_parameters=True)
            and 2-micro-batch gradient accumulation (no_sync): N steps untuned, and the same N
            steps with tune in the middle (its steps count), from the same weights and data;
            the parameters and buffers after both, compared bitwise.
  refuse    each refusal: a compiled model, a stateful communication hook, parameters that
            change between steps, a model that is not DDP, bad arguments.
  measure   (the measurements of docs/tuning.md) --model mlp-wide|resnet18|gpt2-small: tune from
            DDP's defaults (or --start-cap), then --steps steps with what tune chose, interleaved
            with the same steps untuned (A B A B, --repeats pairs), rank 0 writes every step time.
  sweep     (docs/tuning.md's decision quality) --model as for measure, or mobilenet-v3-small:
            tune from DDP's defaults (or --start-cap), then an exhaustive measured sweep in the
            same job: caps 0.05 to 100, the planned list and every proposed candidate, in
            --repeats interleaved rounds of --steps-step blocks, DDP's default twice per round.
Every case records, per rank, the chosen wrapper's DDP settings and bucket sizes, so the test
can check that all ranks continue with the same ones.
"""

import argparse
import copy
import json
import os
import socket
import time
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

import ddpscope
import ddpscope.torch
from ddpscope.tune import _bucket_count
from recorder_job import Residual


class Deep(nn.Module):
    """`depth` residual Linear(width, width) blocks: 2·depth small gradient tensors."""

    def __init__(self, depth=150, width=128):
        super().__init__()
        torch.manual_seed(7)
        self.layers = nn.Sequential(*[Residual(width, nn.Tanh) for _ in range(depth)])

    def forward(self, x):
        return self.layers(x)


class WithUnused(nn.Module):
    """A BatchNorm (running-stat buffers) and a branch never used (find_unused_parameters)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(11)
        self.a = nn.Linear(64, 128)
        self.bn = nn.BatchNorm1d(128)
        self.b = nn.Linear(128, 128)
        self.c = nn.Linear(128, 10)
        self.unused = nn.Linear(128, 128)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.bn(self.a(x))))))


class Batches:
    """Deterministic batches by global step index, per rank: the tuned and untuned runs see the
    same data in the same order."""

    def __init__(self, rank, shape, classes, seed=100, tokens=0):
        self.rank, self.shape, self.classes, self.seed = rank, shape, classes, seed
        self.tokens = tokens  # > 0: inputs are token ids below it
        self.step = 0

    def next(self):
        g = torch.Generator().manual_seed(self.seed + 1000 * self.rank + self.step)
        self.step += 1
        x = (torch.randint(0, self.tokens, self.shape, generator=g) if self.tokens
             else torch.randn(*self.shape, generator=g))
        y = torch.randint(0, self.classes, (self.shape[0],), generator=g)
        return x, y


def make_step(optimizer, data, loss_fn=None, micro=1):
    loss_fn = loss_fn or nn.MSELoss()

    def step(model):
        optimizer.zero_grad(set_to_none=True)
        for m in range(micro):
            x, y = data.next()
            out = model(x)
            target = y if isinstance(loss_fn, nn.CrossEntropyLoss) else torch.zeros_like(out)
            if m + 1 < micro:
                with model.no_sync():
                    loss_fn(out, target).backward()
            else:
                loss_fn(out, target).backward()
        optimizer.step()
    return step


def ddp_state(model):
    """What a rank continues with: the tuned settings and DDP's own bucket sizes."""
    logging = model._get_ddp_logging_data()
    return {"bucket_bytes_cap": int(model.bucket_bytes_cap),
            "gradient_as_bucket_view": bool(model.gradient_as_bucket_view),
            "static_graph": bool(getattr(model, "static_graph", False)),
            "bucket_sizes": logging.get("rebuilt_bucket_sizes") or logging.get("bucket_sizes")}


def gather(state):
    states = [None] * dist.get_world_size()
    dist.all_gather_object(states, state)
    return states


def case_poor(rank, args):
    model = Deep()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0001)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = Batches(rank, (8, 128), 10)
    step = make_step(opt, data)
    result = ddpscope.torch.tune(ddp, step, optimizer=opt, rounds=6, steps_per_block=3,
                                 report=os.path.join(args.out, "report.json"))
    return {"switched": result.switched, "same_object": result.model is ddp,
            "ranks": gather(ddp_state(result.model)), "paste": result.paste,
            "initial_buckets": len(ddp._get_ddp_logging_data()["rebuilt_bucket_sizes"].split(","))}


def case_nothing(rank, args):
    ddp = nn.parallel.DistributedDataParallel(Deep())
    opt = torch.optim.SGD(ddp.module.parameters(), lr=0.01)
    step = make_step(opt, Batches(rank, (8, 128), 10))
    worse = ddpscope.torch.tune(ddp, step, candidates=[{"bucket_cap_mb": 0.0001}], rounds=6,
                                steps_per_block=3, report=os.path.join(args.out, "report.json"))
    one = nn.parallel.DistributedDataParallel(nn.Linear(256, 256))
    opt1 = torch.optim.SGD(one.module.parameters(), lr=0.01)
    single = ddpscope.torch.tune(one, make_step(opt1, Batches(rank, (8, 256), 10)), rounds=2,
                                 steps_per_block=2, report=os.path.join(args.out, "single.json"))
    return {"switched": worse.switched, "same_object": worse.model is ddp,
            "ranks": gather(ddp_state(worse.model)),
            "single_switched": single.switched, "single_same_object": single.model is one,
            "single_candidates": len(single.report["candidates"]),
            "single_reason": single.report["decision"]["reason"]}


def _equal_job(rank, tuned):
    model = WithUnused()
    ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True,
                                              bucket_cap_mb=0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = Batches(rank, (16, 64), 10)
    step = make_step(opt, data, nn.CrossEntropyLoss(), micro=2)
    total = 0
    if tuned:
        result = ddpscope.torch.tune(ddp, step, optimizer=opt, rounds=2, steps_per_block=2,
                                     warmup_steps=1, record_steps=2, report=None,
                                     candidates=[{"bucket_cap_mb": 25},
                                                 {"bucket_cap_mb": 25,
                                                  "gradient_as_bucket_view": True}])
        total = result.report["steps"]["total"] if rank == 0 else None
        total = gather(total)[0]
        ddp = result.model
    steps_done = total
    for _ in range(40 - steps_done):
        step(ddp)
    return model, total


def case_equal(rank, args):
    plain, _ = _equal_job(rank, tuned=False)
    tuned, spent = _equal_job(rank, tuned=True)
    same = [name for (name, a), (_, b) in zip(plain.state_dict().items(),
                                              tuned.state_dict().items()) if not torch.equal(a, b)]
    diffs = [float((a.float() - b.float()).abs().max()) for a, b in
             zip(plain.state_dict().values(), tuned.state_dict().values())]
    moved = not torch.equal(WithUnused().a.weight, plain.a.weight)
    return {"differing": gather(same), "max_abs_diff": max(diffs), "trained": moved,
            "tuning_steps": spent, "unused_grad_none": tuned.unused.weight.grad is None}


def case_refuse(rank, args):
    out = {}

    def refusal(name, fn):
        try:
            fn()
            out[name] = None
        except ddpscope.torch.TuneError as e:
            out[name] = str(e)

    model = Deep(depth=4)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = make_step(opt, Batches(rank, (8, 128), 10))
    if hasattr(torch, "compile") and int(torch.__version__.split(".")[0]) >= 2:
        compiled = torch.compile(ddp)
    else:  # torch 1.13 has no torch.compile: what it returns, an OptimizedModule with _orig_mod
        compiled = type("OptimizedModule", (nn.Module,), {})()
        compiled._orig_mod = ddp
    refusal("compiled", lambda: ddpscope.torch.tune(compiled, step))
    refusal("not_ddp", lambda: ddpscope.torch.tune(model, step))
    refusal("rounds", lambda: ddpscope.torch.tune(ddp, step, rounds=0))
    refusal("candidate_key", lambda: ddpscope.torch.tune(ddp, step, candidates=[{"lr": 1}]))

    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    hooked = nn.parallel.DistributedDataParallel(Deep(depth=4))
    state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                   start_powerSGD_iter=2)
    hooked.register_comm_hook(state, powersgd.powerSGD_hook)
    refusal("stateful_hook", lambda: ddpscope.torch.tune(hooked, step))

    growing = Deep(depth=4)
    gddp = nn.parallel.DistributedDataParallel(growing)
    gopt = torch.optim.SGD(growing.parameters(), lr=0.01)
    inner = make_step(gopt, Batches(rank, (8, 128), 10))
    calls = [0]

    def grows(m):
        inner(m)
        calls[0] += 1
        if calls[0] == 3:
            growing.extra = nn.Parameter(torch.zeros(4))

    refusal("parameters_change", lambda: ddpscope.torch.tune(
        gddp, grows, candidates=[{"bucket_cap_mb": 1}], rounds=2, steps_per_block=2, report=None))
    return out


class TunedJob(NamedTuple):
    module: nn.Module
    start: dict  # the job's DDP keyword arguments before tuning
    ddp: nn.parallel.DistributedDataParallel
    opt: torch.optim.Optimizer
    step: object
    result: object  # ddpscope.torch.TuneResult
    tune_seconds: float
    shape: tuple
    classes: int


def tuned_job(rank, args):
    """--model's job at DDP's defaults (or --start-cap), tuned with tune's defaults."""
    torch.set_num_threads(1)
    module, shape, classes, loss = build(args.model)
    start = {} if args.start_cap is None else {"bucket_cap_mb": args.start_cap}
    ddp = nn.parallel.DistributedDataParallel(module, **start)
    opt = torch.optim.SGD(module.parameters(), lr=1e-3)
    data = Batches(rank, shape, classes, tokens=classes if args.model == "gpt2-small" else 0)
    step = make_step(opt, data, loss)
    t0 = time.perf_counter()
    result = ddpscope.torch.tune(ddp, step, optimizer=opt,
                                 report=os.path.join(args.out, "report.json"))
    return TunedJob(module, start, ddp, opt, step, result, time.perf_counter() - t0, shape,
                    classes)


def case_measure(rank, args):
    """Tune from DDP's defaults, then A B A B: `steps` tuned steps against `steps` untuned."""
    job = tuned_job(rank, args)
    ddp, step, result, tune_seconds = job.ddp, job.step, job.result, job.tune_seconds
    runs = []
    for k in range(args.repeats):
        # A B, B A, A B, ...: neither setting always runs first in its pair.
        for mode in (("default", "tuned") if k % 2 == 0 else ("tuned", "default")):
            model = ddp if mode == "default" else result.model
            for _ in range(2):
                step(model)
            times = []
            for _ in range(args.steps):
                dist.barrier()
                t = time.perf_counter_ns()
                step(model)
                times.append(time.perf_counter_ns() - t)
            t = torch.tensor(times, dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            runs.append({"mode": mode, "repeat": k, "step_ns": t.tolist()})
    return {"model": args.model, "tune_seconds": tune_seconds, "switched": result.switched,
            "paste": result.paste, "runs": runs, "ranks": gather(ddp_state(result.model))}


SWEEP_CAPS = (0.05, 1, 2, 5, 10, 25, 100)


def _layout_key(kw):
    """The layout DDP builds from tuned keyword arguments: cap 25 is DDP's default."""
    cap = kw.get("bucket_cap_mb")
    lst = kw.get("bucket_cap_mb_list") or None
    return (None if lst else float(25 if cap is None else cap), tuple(lst) if lst else None,
            bool(kw.get("gradient_as_bucket_view")), bool(kw.get("static_graph")))


def case_sweep(rank, args):
    """Tune from DDP's defaults (or --start-cap), then measure every layout of an exhaustive
    sweep in the same job (caps SWEEP_CAPS, the planned list and every candidate tune
    proposed): --repeats rounds, the order rotated each round, one block of --steps steps per
    layout (its first step untimed), DDP's default twice (the control: the noise floor) and the
    job's own wrapper, which tune timed as the current settings."""
    job = tuned_job(rank, args)
    module, step, result, tune_seconds = job.module, job.step, job.result, job.tune_seconds
    layouts = [("bucket_cap_mb=%g" % c, {"bucket_cap_mb": c}) for c in SWEEP_CAPS]
    trace, model = _sweep_recording(rank, args, module, job.start, step, job.opt, job.shape,
                                    job.classes)
    planned = [None]
    if rank == 0:
        planned[0] = ddpscope.plan(model, cluster=None, from_trace=trace)["planned"]
    dist.broadcast_object_list(planned, src=0)
    if planned[0] is not None:
        layouts.append(("planned list (sweep)",
                        {"bucket_cap_mb_list": planned[0]["bucket_cap_mb_list"]}))
    keys = [_layout_key(kw) for _, kw in layouts]
    for c in result.report["candidates"]:
        kw = {k: v for k, v in c["ddp_kwargs"].items() if v is not None}
        if _layout_key(kw) not in keys:
            layouts.append((c["label"], kw))
            keys.append(_layout_key(kw))
    chosen = keys.index(_layout_key(result.ddp_kwargs))
    # every layout replayed from the same recording: the prediction's order over the sweep
    replayed = [None] * len(layouts)
    if rank == 0:
        for i, (_, kw) in enumerate(layouts):
            replayed[i] = ddpscope.replay(trace, model, **kw)["what_if"]["step_time_ns"] / 1e6
    wrappers = [nn.parallel.DistributedDataParallel(module, **kw) for _, kw in layouts]
    # the job's own wrapper (its starting settings), which tune timed as the current settings,
    # timed once more here beside the fresh wrapper of the same settings
    own = len(wrappers)
    wrappers.append(job.ddp)
    for w in wrappers:
        for _ in range(2):
            step(w)
    control = keys.index(_layout_key({}))
    slots = list(range(len(wrappers))) + [control]  # the default twice: the control
    times = [[None] * args.repeats for _ in slots]
    for r in range(args.repeats):
        order = slots[r % len(slots):] + slots[:r % len(slots)]
        for pos, slot in enumerate(order):
            # which of the two default blocks this is: the first met in this round's order
            j = len(wrappers) if slot == control and order.index(slot) != pos else slot
            w = wrappers[slot]
            step(w)
            block = []
            for _ in range(args.steps - 1):
                dist.barrier()
                t = time.perf_counter_ns()
                step(w)
                block.append(time.perf_counter_ns() - t)
            times[j][r] = block
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # each step: the slowest rank's
    times = t.tolist()
    return {"model": args.model, "start_cap": args.start_cap, "tune_seconds": tune_seconds,
            "switched": result.switched, "paste": result.paste, "chosen": chosen,
            "tune_steps": result.report["steps"],
            "layouts": [{"label": label, "ddp_kwargs": kw, "buckets": _bucket_count(w),
                         "step_ns": times[i]}
                        for i, ((label, kw), w) in enumerate(zip(layouts, wrappers))],
            "control": {"of": control, "step_ns": times[len(wrappers)]},
            "own": {"step_ns": times[own]},
            "candidates": [{"label": c["label"], "predicted_step_ms": c["predicted_step_ms"],
                            "measured_step_ms": c["measured_step_ms"], "current": c["current"],
                            "gain_percent": c["gain_percent"], "rounds_faster": c["rounds_faster"],
                            "layout": keys.index(_layout_key(c["ddp_kwargs"]))}
                           for c in result.report["candidates"]],
            "noise_floor_percent": result.report["decision"]["noise_floor_percent"],
            "replayed_step_ms": replayed}


def _sweep_recording(rank, args, module, start, step, opt, shape, classes):
    """(trace, exported model on rank 0) of 6 steps at the job's starting layout, as tune
    records them: what the sweep's layouts are predicted from."""
    ddp = nn.parallel.DistributedDataParallel(module, **start)
    for _ in range(2):
        step(ddp)
    trace = os.path.join(args.out, "record.json")
    with ddpscope.torch.record(ddp, path=trace, optimizer=opt):
        for _ in range(6):
            step(ddp)
    model = None
    if rank == 0:
        x, _ = Batches(rank, shape, classes, seed=999,
                       tokens=classes if args.model == "gpt2-small" else 0).next()
        model = ddpscope.Model.from_torch(copy.deepcopy(module), x, name=args.model)
    return trace, model


def build(name):
    """(module, input shape, classes, loss) of the measured models: mlp-wide and resnet18 as the
    validation grid runs them (sim/validate/torch_ddp_job.py: 8 x Linear(1024, 1024), batch 16;
    ResNet-18 on 64-pixel images, batch 8), and a small GPT-2 (transformers' GPT2Model, 4 layers,
    256 wide, 64 tokens, a 4,096-token vocabulary and head; batch 8)."""
    torch.manual_seed(0)
    if name == "mlp-wide":
        layers = []
        for i in range(8):
            layers += [nn.Linear(1024, 1024)] + ([nn.ReLU(inplace=True)] if i < 7 else [])
        return nn.Sequential(*layers), (16, 1024), 1024, nn.MSELoss()
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(), (8, 3, 64, 64), 1000, nn.CrossEntropyLoss()
    if name == "gpt2-small":
        from transformers import GPT2Config, GPT2Model

        class Lm(nn.Module):
            def __init__(self):
                super().__init__()
                cfg = GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=4096, n_positions=64)
                self.body = GPT2Model(cfg)
                self.head = nn.Linear(256, 4096, bias=False)

            def forward(self, x):
                return self.head(self.body(input_ids=x).last_hidden_state).mean(dim=1)

        return Lm(), (8, 64), 4096, nn.CrossEntropyLoss()
    if name == "mobilenet-v3-small":  # a model the tests never used: 142 small gradients
        import torchvision
        return (torchvision.models.mobilenet_v3_small(), (8, 3, 96, 96), 1000,
                nn.CrossEntropyLoss())
    raise SystemExit("unknown model %r" % name)


CASES = {"poor": case_poor, "nothing": case_nothing, "equal": case_equal, "refuse": case_refuse,
         "measure": case_measure, "sweep": case_sweep}


def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    if args.case not in ("measure", "sweep"):
        torch.set_num_threads(1)
    result = CASES[args.case](rank, args)
    if rank == 0:
        result["torch"] = torch.__version__
        result["world_size"] = args.world
        with open(os.path.join(args.out, "result.json"), "w") as f:
            json.dump(result, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--case", required=True, choices=sorted(CASES))
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--model", default="mlp-wide")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--start-cap", type=float, default=None,
                   help="measure: the job's bucket_cap_mb before tuning (default: left out)")
    args = p.parse_args()
    args.port = free_port()
    os.makedirs(args.out, exist_ok=True)
    mp.spawn(worker, args=(args,), nprocs=args.world)

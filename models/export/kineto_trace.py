#!/usr/bin/env python3
"""Writes torch.profiler results as a Kineto-schema Chrome trace, for PyTorch builds without
Kineto (such as Debian's python3-torch 1.13.1, built with USE_KINETO=0).

There, torch.profiler falls back to the legacy autograd profiler, whose
prof.export_chrome_trace() writes a bare event array with pid "CPU functions" and empty args:
no distributedInfo (which rank?), no shapes (how many bytes per collective?), so
`ddpscope import-torch` rejects it. This module writes the same profiler events (names,
threads, start / duration in µs, input shapes when record_shapes=True, sequence numbers,
record scope) in the schema Kineto's output_json.cpp uses: schemaVersion, distributedInfo
(from torch.distributed when it is initialized), cat cpu_op / user_annotation, args
"Input Dims", "Sequence number", "External id". Nothing is added that the profiler did not
record; the legacy profiler records no dtypes, so there is no "Input type" (the importer then
assumes float32 and says so).

    import kineto_trace
    with torch.profiler.profile(schedule=..., record_shapes=True) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()
    kineto_trace.export(prof, "rank%d.json.gz" % dist.get_rank())

Use a schedule with wait >= 1 on such builds: with wait=0 the legacy profiler records no
ProfilerStep#N range (observed with 1.13.1), and export() refuses a profile without one.
With a Kineto-enabled PyTorch, use prof.export_chrome_trace() instead (it writes this schema
itself).
"""

import gzip
import json
import os

USER_SCOPE = 7  # at::RecordScope::USER_SCOPE: record_function ranges (Kineto: user_annotation)


def trace_dict(events, rank=None, world_size=None, backend=None, note=None):
    """The events (prof.events()) as a Kineto-schema trace object."""
    import torch
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        rank = dist.get_rank() if rank is None else rank
        world_size = dist.get_world_size() if world_size is None else world_size
        backend = str(dist.get_backend()) if backend is None else backend
    pid = os.getpid()
    threads = sorted({ev.thread for ev in events})
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": "python"}},
           {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "CPU"}}]
    for tid in threads:
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": "thread %d" % tid}})
    for ev in sorted(events, key=lambda e: (e.time_range.start, -e.time_range.elapsed_us())):
        if ev.trace_name is None:
            continue
        args = {"External id": ev.id}
        if ev.input_shapes:
            args["Input Dims"] = ev.input_shapes
        if ev.sequence_nr is not None and ev.sequence_nr >= 0:
            args["Sequence number"] = ev.sequence_nr
            args["Fwd thread id"] = ev.fwd_thread
        out.append({"ph": "X", "cat": "user_annotation" if ev.scope == USER_SCOPE else "cpu_op",
                    "name": ev.trace_name, "pid": pid, "tid": ev.thread,
                    "ts": ev.time_range.start, "dur": ev.time_range.elapsed_us(), "args": args})
    trace = {"schemaVersion": 1, "deviceProperties": []}
    if rank is not None and world_size is not None:
        trace["distributedInfo"] = {
            "backend": backend or "", "rank": int(rank), "world_size": int(world_size),
            "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": int(world_size),
                           "ranks": list(range(int(world_size)))}]}
    trace["displayTimeUnit"] = "ms"
    trace["traceName"] = "rank%s" % rank if rank is not None else "trace"
    trace["ddpscopeNote"] = note or (
        "torch %s legacy profiler events written in Kineto's schema by "
        "models/export/kineto_trace.py" % torch.__version__)
    trace["traceEvents"] = out
    return trace


def export(prof, path, rank=None, world_size=None, backend=None):
    """Writes prof.events() to `path` (gzip when it ends in .gz)."""
    events = prof.events()
    if not any((ev.trace_name or "").startswith("ProfilerStep#") for ev in events):
        raise ValueError("%s: the profile has no ProfilerStep#N range: call prof.step() after "
                         "every iteration and use torch.profiler.schedule(wait=1 or more, ...)"
                         % path)
    trace = trace_dict(events, rank=rank, world_size=world_size, backend=backend)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt") as f:
        json.dump(trace, f, separators=(",", ":"))

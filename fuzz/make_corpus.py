#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target (fuzz/CMakeLists.txt) from the repository's test
data, in each target's input format (see the header comment of fuzz/<target>_fuzzer.cpp).

Usage: make_corpus.py --out DIR [target ...]   (default: every target) -> DIR/<target>/<seed>

Seeds are small on purpose (libFuzzer's speed falls with input size): the profiler traces of
tests/data are cut to one or two ProfilerStep windows of the events the importer looks at. The
big files stay where they are; nothing here is committed output. Other projects' traces and
logs (HTA's NCCL traces, the published all_reduce_perf logs) come from the external data folder
(tests/external_data.py) when it is there; without it those seeds are left out, with a note.
"""
import argparse
import gzip
import json
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
sys.path.insert(0, str(ROOT / "tests"))
import external_data  # noqa: E402  (tests/external_data.py)
MAX_SEED_BYTES = 8 * 1024
PUBLISHED_LOGS = ("konnase-v100x8-1node.txt", "aws-dlami-p3dn-v100-2x8.txt",
                  "aws-dlami-p4d-a100-2x8.txt", "gcp-a3mega-h100-2x8.txt")


def read_text(path):
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def small_files(paths):
    return [p for p in paths if p.stat().st_size <= MAX_SEED_BYTES]


# ---- Kineto traces, cut down -----------------------------------------------------------------
KEEP_NAMES = ("ProfilerStep", "DistributedDataParallel", "aten::linear", "aten::relu",
              "aten::conv2d", "evaluate_function: AddmmBackward0",
              "evaluate_function: ReluBackward0", "evaluate_function: ConvolutionBackward0",
              "gloo:", "nccl:", "c10d::", "ncclDevKernel", "ncclKernel", "AccumulateGrad",
              "ddpscope.layer:", "aten::batch_norm", "aten::add", "AddmmBackward0",
              "ConvolutionBackward0", "cudaLaunchKernel", "aten::dropout", "MulBackward0",
              "MmBackward0")
KEEP_ARGS = ("Collective name", "In msg nelems", "Out msg nelems", "dtype", "Input Dims",
             "Input type", "Group size", "Process Group Name", "Sequence number", "correlation")


def cut_kineto(path, steps, per_step):
    doc = json.loads(read_text(path))
    events = doc["traceEvents"]
    windows = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events
                     if str(e.get("name", "")).startswith("ProfilerStep#"))[:steps]
    kept = [e for e in events if e.get("ph") == "M" or e.get("cat") == "Trace"]
    for start, end in windows:
        inside = [e for e in events
                  if e.get("ph") == "X" and start <= e.get("ts", -1) <= end
                  and any(k in str(e.get("name", "")) for k in KEEP_NAMES)]
        for e in inside[:per_step]:
            e = dict(e)
            args = {k: v for k, v in e.get("args", {}).items() if k in KEEP_ARGS}
            e.pop("args", None)
            if args:
                e["args"] = args
            kept.append(e)
    doc["traceEvents"] = kept
    if "deviceProperties" in doc:  # the GPU the import names (two entries are enough)
        doc["deviceProperties"] = doc["deviceProperties"][:2]
    return json.dumps(doc, separators=(",", ":")).encode()


def kineto_ranks():
    """(name, [rank texts]) per job of tests/data."""
    jobs = []
    for prefix in ("torch-2.15/ddp_gloo_default", "torch-2.15/ddp_gloo_shapes", "torch/ddp_gloo"):
        ranks = [cut_kineto(DATA / f"{prefix}_rank{r}.json.gz", 1, 24) for r in (0, 1)]
        jobs.append((prefix.replace("/", "_"), ranks))
    # Real CPU traces: a job's modules in ddpscope.layer: ranges (ops named by them), the same
    # job without (a bias-free head's MmBackward0), dropouts (MulBackward0, none at p = 0), and a
    # GPT-2 style block without ranges (layers of a type the match by kind has no op for).
    for name, path in (("torch215_layer_ranges", "torch-2.15/layer-ranges/block-rank0.json.gz"),
                       ("torch215_no_ranges", "torch-2.15/layer-ranges/block-noranges-rank0.json.gz"),
                       ("torch215_dropout", "torch-2.15/dropout/mlp-dropout-rank0.json.gz"),
                       ("torch215_by_kind",
                        "torch-2.15/layer-ranges/gpt2block-noranges-rank0.json.gz")):
        jobs.append((name, [cut_kineto(DATA / path, 1, 400)]))
    # A GPU kit trace (record_shapes, module ranges): the model the import reads off it.
    jobs.append(("h100_resnet50", [cut_kineto(DATA / "gpu/h100/run1/resnet50-ddp-default-rank0.json.gz",
                                              1, 160)]))
    for name in ("resnet_2gpu_rank0", "sampled_128gpu_rank0", "trace_diff_8gpu_rank3"):
        path = external_path(f"hta/{name}.json.gz")
        if path:
            jobs.append((f"hta_{name}", [cut_kineto(path, 1, 20)]))
    return jobs


def external_path(relative):
    """An external data file as a Path, or None (with a note on stderr)."""
    path = external_data.path(relative)
    if not path:
        print("make_corpus.py: seed left out: " + external_data.missing_message(relative),
              file=sys.stderr)
    return pathlib.Path(path) if path else None


# ---- per target --------------------------------------------------------------------------------
def model_json():
    files = small_files(sorted((DATA / "models").glob("*.json")) +
                        [DATA / "torch-2.15" / "ddp_gloo_model.json",
                         DATA / "torch" / "ddp_gloo_model.json"] +
                        sorted((ROOT / "models" / "zoo").glob("*.json")))
    return {p.stem: p.read_bytes() for p in files}


def cluster_json():
    return {p.stem: p.read_bytes() for p in sorted((ROOT / "sim/cost/clusters").glob("*.json"))}


def nccl_tests_log():
    logs = [external_path("nccl-tests-logs/" + name) for name in PUBLISHED_LOGS]
    return {p.stem: p.read_bytes() for p in small_files([p for p in logs if p])}


def chrome_traces():
    seeds = {}
    for p in sorted((DATA / "traces").glob("*.json*")) + sorted(
            (DATA / "traces" / "malformed").glob("*.json")):
        seeds[p.name.split(".")[0]] = read_text(p)
    for name, ranks in kineto_ranks():
        seeds[name] = ranks[0]
    return {k: v for k, v in seeds.items() if len(v) <= MAX_SEED_BYTES}


def chrome_trace_gzip():
    seeds = {}
    for name, text in chrome_traces().items():
        if len(text) > 16 * 1024:
            continue
        for mode, knob in ((0, 0), (1, 200), (2, 128), (3, 77), (4, 0)):
            seeds[f"{name}-{mode}"] = bytes([mode, knob]) + text
    return seeds


def kineto_import():
    seeds = {}
    sep = b"\n@@RANK@@\n"
    # An AMD trace in ROCm's names (RCCL's generic kernels, HIP launches), written by hand.
    rccl = (DATA / "traces" / "kineto_rccl_hip_small.json").read_bytes()
    seeds["rccl_hip-one"] = b"\x01" + rccl
    seeds["rccl_hip-layers"] = b"\x03" + rccl  # GPU kernels to layers through the host ops
    for name, ranks in kineto_ranks():
        seeds[f"{name}-one"] = b"\x01" + ranks[0]
        seeds[f"{name}-own-model"] = b"\x09" + sep.join(ranks)  # the model read off the trace
        if len(ranks) > 1:
            for bits in (0, 2, 4, 6):
                seeds[f"{name}-all-{bits}"] = bytes([bits]) + sep.join(ranks)
    return seeds


def zoo_param_count(name):
    return len(json.loads((ROOT / "models" / "zoo" / f"{name}.json").read_text())["parameters"])


def ready_order():
    seeds = {}
    for index, count in enumerate((zoo_param_count("mlp-tiny"), zoo_param_count("resnet18"), 3)):
        order = list(range(count))[::-1]
        seeds[f"m{index}-array"] = bytes([index]) + json.dumps(order).encode()
        seeds[f"m{index}-object"] = bytes([index | 8]) + json.dumps(
            {"grad_ready_order": order}).encode()
        seeds[f"m{index}-text"] = bytes([index | 4]) + ",".join(map(str, order)).encode()
        seeds[f"m{index}-lines"] = bytes([index]) + "\n".join(map(str, order[1:] + order[:1])).encode()
    for p in (DATA / "torch-2.15" / "ddp_gloo_model.json",):
        doc = json.loads(p.read_text())
        orders = [layer["grad_ready_order"] for layer in doc.get("layers", [])
                  if "grad_ready_order" in layer]
        if orders:
            seeds["model-layer-orders"] = b"\x02" + json.dumps(orders).encode()
    return seeds


def cli_args():
    lines = {
        "simulate": (0, "--model mlp-tiny --cluster dgx-h100 --nodes 2 --bucket-cap-mb 25 --json"),
        "simulate-flags": (0, "--model=mlp:in=16,hidden=64,depth=3,out=4 --cluster=dgx-a100 --world-size 16 --find-unused "
                              "--static-graph --gradient-as-bucket-view --batch 32 --dtype bf16 "
                              "--compile default --iterations 4 --contention 0.2 --strategy ddp"),
        "simulate-shorthand": (0, "--model gpt2:layers=2,embd=64,heads=4,vocab=512,seq=32 "
                                  "--cluster cpu-mpi --sync-batchnorm --all-ranks"),
        "simulate-help": (0, "--help"),
        "sweep": (1, "--model mlp-wide --cluster dgx-h100 --nodes 1,2,4 --bucket-cap-mb 1,25,100 "
                     "--find-unused both --compile none,default"),
        "sweep-world": (1, "--model mlp-tiny --cluster cpu-mpi --world-size 2,4 --json --quiet"),
        "buckets": (2, "--model resnet18 --bucket-cap-mb 5 --iteration steady --ready-order 3,2,1,0"),
        "buckets-first": (2, "--model mlp:in=8,hidden=32,depth=2,out=2,batch=4 --first-bucket-mb 1 --iteration 1 "
                             "--json"),
        "simulate-size": (0, "--model vgg16 --cluster dgx-v100 --size 25MiB a.json b.json"),
    }
    return {k: bytes([c]) + b"\0".join(a.encode() for a in args.split(" "))
            for k, (c, args) in lines.items()}


TARGETS = {
    "model_json": model_json,
    "cluster_json": cluster_json,
    "chrome_trace": chrome_traces,
    "chrome_trace_gzip": chrome_trace_gzip,
    "kineto_import": kineto_import,
    "ready_order": ready_order,
    "cli_args": cli_args,
    "nccl_tests_log": nccl_tests_log,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("targets", nargs="*", default=list(TARGETS))
    args = parser.parse_args()
    for target in args.targets:
        if target not in TARGETS:
            parser.error(f"unknown target '{target}' (known: {', '.join(TARGETS)})")
        out = args.out / target
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        seeds = TARGETS[target]()
        for name, data in seeds.items():
            (out / name).write_bytes(data)
        print(f"{target}: {len(seeds)} seeds, {sum(map(len, seeds.values()))} bytes -> {out}")


if __name__ == "__main__":
    main()

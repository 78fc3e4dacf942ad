#!/usr/bin/env python3
"""Records real PyTorch 2.15 DDP bucket plans and collective sequences (buckets.json here).

Runs real torch.nn.parallel.DistributedDataParallel jobs: 2 ranks (torch.multiprocessing),
gloo, CPU, one thread per rank, and for each model x case records, from rank 0:

  - the bucket plan in force at construction (iteration 1) and after each of the first three
    iterations, read from the C++ Reducer itself (reducer._get_zeros_like_grad_buckets():
    bucket index = launch order, its parameters in flat-buffer order mapped back to indices in
    list(model.parameters()), buffer numel and dtype → bytes);
  - the gradient-ready order of iteration 1 (post-accumulate-grad hooks, the same event the
    Reducer's autograd hook follows);
  - per iteration, every collective in issue order from the profiler (record_shapes=True):
    gloo:all_reduce / gloo:broadcast with numel and dtype (Kineto's per-event shapes/dtypes),
    which gives bucket launch order and bytes, the used-map allreduce (int32[P]), the rebuild's
    two broadcasts and the buffer broadcasts;
  - per iteration, counts of the reducer's copy kernels: aten::_foreach_copy_, aten::div_ and
    the per-gradient aten::mul/mul_out copies (batched_grad_copy).

Cases: bucket_cap_mb None / 1 / 25, bucket_cap_mb_list [1, 4, 25] / [25] / [10, 2],
find_unused_parameters False / True, skip_all_reduce_unused_params on a model with an unused
layer, batched_grad_copy, forward_sync_buffers / broadcast_buffers, mixed_precision
(attempted: reported if it cannot run on CPU).

Usage: python tests/data/torch-2.15/gen_buckets.py [--models a,b] [--out F]
Needs torch 2.15 (PyPI), torchvision, transformers (architectures only: no weights are
downloaded, models are built from their configs). Output: tests/data/torch-2.15/buckets.json.
"""

import argparse
import json
import os
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CASES = [
    # name, DDP kwargs (json-able; mixed precision spelled as dtype names)
    ("default", {}),
    ("default_fu", {"find_unused_parameters": True}),
    ("cap1", {"bucket_cap_mb": 1}),
    ("cap1_fu", {"bucket_cap_mb": 1, "find_unused_parameters": True}),
    ("cap25", {"bucket_cap_mb": 25}),
    ("cap25_fu", {"bucket_cap_mb": 25, "find_unused_parameters": True}),
    ("list_1_4_25", {"bucket_cap_mb_list": [1, 4, 25]}),
    ("list_1_4_25_fu", {"bucket_cap_mb_list": [1, 4, 25], "find_unused_parameters": True}),
    ("list_25", {"bucket_cap_mb_list": [25]}),
    ("list_10_2", {"bucket_cap_mb_list": [10, 2]}),
    ("batched_copy", {"batched_grad_copy": True}),
]
UNUSED_CASES = [
    ("unused_fu", {"find_unused_parameters": True}),
    ("unused_fu_cap1", {"find_unused_parameters": True, "bucket_cap_mb": 1}),
    ("unused_skip", {"find_unused_parameters": True, "skip_all_reduce_unused_params": True}),
    ("unused_skip_cap1", {"find_unused_parameters": True, "bucket_cap_mb": 1,
                          "skip_all_reduce_unused_params": True}),
    ("unused_skip_cap1_batched", {"find_unused_parameters": True, "bucket_cap_mb": 1,
                                  "skip_all_reduce_unused_params": True,
                                  "batched_grad_copy": True}),
]
BUFFER_CASES = [
    ("buffers_default", {}),
    ("forward_sync_buffers_false", {"forward_sync_buffers": False}),
    ("broadcast_buffers_false", {"broadcast_buffers": False}),
    ("mp_fp16", {"mixed_precision": {"param_dtype": "float16", "reduce_dtype": "float16"}}),
    ("mp_bf16_reduce_fp32", {"mixed_precision": {"param_dtype": "bfloat16",
                                                 "reduce_dtype": "float32"}}),
]

# The forward under torch.autocast (CPU, bfloat16): not a DDP argument, but it changes autograd's
# gradient-ready order and with it the rebuilt buckets. "autocast" is taken out of the DDP
# arguments and wraps the forward instead.
AUTOCAST_CASES = [
    ("autocast_bf16", {"autocast": True}),
    ("autocast_bf16_cap1", {"autocast": True, "bucket_cap_mb": 1}),
]
AUTOCAST_MODELS = ("mlp-wide", "resnet50", "gpt2-small", "bert-base", "llama-small")

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int64": 8}


class UnusedMlp(nn.Module):
    """fc1, fc2 (1 MiB weights, no bias), `unused` (never called), fc3."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(512, 512, bias=False)
        self.fc2 = nn.Linear(512, 512, bias=False)
        self.unused = nn.Linear(512, 512)
        self.fc3 = nn.Linear(512, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def build_model(name):
    torch.manual_seed(0)
    if name == "mlp-tiny":
        return nn.Sequential(nn.Linear(10, 50), nn.ReLU(), nn.Linear(50, 1)), lambda: torch.randn(2, 10)
    if name == "mlp-wide":
        layers = []
        for i in range(8):
            layers.append(nn.Linear(1024, 1024))
            if i < 7:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers), lambda: torch.randn(2, 1024)
    if name == "mlp-unused":
        return UnusedMlp(), lambda: torch.randn(2, 512)
    if name in ("resnet18", "resnet50", "vgg16", "mobilenet_v2"):
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
        return model, lambda: torch.randn(2, 3, 32, 32)
    if name == "gpt2-small":
        from transformers import GPT2Config, GPT2Model

        model = GPT2Model(GPT2Config())
        return model, lambda: torch.randint(0, 50257, (2, 8))
    if name == "bert-base":
        from transformers import BertConfig, BertModel

        model = BertModel(BertConfig())
        return model, lambda: torch.randint(0, 30522, (2, 8))
    if name == "llama-small":  # the zoo's Llama-style decoder (models/zoo/gen_zoo.py)
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                             num_hidden_layers=8, num_attention_heads=12, num_key_value_heads=12,
                             rms_norm_eps=1e-6, tie_word_embeddings=False)
        return LlamaForCausalLM(config), lambda: torch.randint(0, 32000, (2, 8))
    raise ValueError(name)


def loss_of(out):
    if isinstance(out, torch.Tensor):
        return out.float().sum()
    if getattr(out, "logits", None) is not None:
        return out.logits.float().sum()
    if hasattr(out, "last_hidden_state"):
        total = out.last_hidden_state.float().sum()
        if getattr(out, "pooler_output", None) is not None:
            total = total + out.pooler_output.float().sum()
        return total
    raise TypeError(type(out))


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def plan_of(ddp, index_of):
    buckets = []
    for b in ddp.reducer._get_zeros_like_grad_buckets():
        buf = b.buffer()
        buckets.append({
            "index": b.index(),
            "params": [index_of[p.data_ptr()] for p in b.parameters()],
            "numel": buf.numel(),
            "dtype": dtype_name(buf.dtype),
            "bytes": buf.numel() * buf.element_size(),
        })
    buckets.sort(key=lambda x: x["index"])
    return buckets


def collectives_of(prof):
    """gloo collectives in start order with numel and dtype; copy-kernel counts."""
    comms = []
    counts = {}
    for e in prof.profiler.kineto_results.events():
        name = e.name()
        if name in ("aten::_foreach_copy_", "aten::div_", "aten::mul", "aten::mul_",
                    "aten::mul_out", "aten::zero_", "aten::copy_"):
            counts[name] = counts.get(name, 0) + 1
        if not name.startswith("gloo:"):
            continue
        shapes = e.shapes()
        dtypes = e.dtypes()
        numel = 1
        for d in (shapes[0] if shapes else []):
            numel *= d
        dtype = dtypes[0] if dtypes else ""
        comms.append((e.start_ns(), {"op": name[len("gloo:"):], "numel": numel,
                                     "dtype": dtype.replace("c10::", "").lower()}))
    comms.sort(key=lambda x: x[0])
    out = [c for _, c in comms]
    for c in out:
        # Kineto spells dtypes "float", "int", "c10::Half", "c10::BFloat16", "long int".
        c["dtype"] = {"float": "float32", "int": "int32", "half": "float16",
                      "bfloat16": "bfloat16", "long int": "int64", "double": "float64"}.get(
                          c["dtype"], c["dtype"])
        c["bytes"] = c["numel"] * DTYPE_BYTES.get(c["dtype"], 0) if c["dtype"] in DTYPE_BYTES else None
    return out, counts


def make_kwargs(kwargs):
    kw = dict(kwargs)
    kw.pop("autocast", None)
    if "mixed_precision" in kw:
        from torch.nn.parallel.distributed import _MixedPrecision

        mpc = kw["mixed_precision"]
        kw["mixed_precision"] = _MixedPrecision(
            param_dtype=getattr(torch, mpc["param_dtype"]),
            reduce_dtype=getattr(torch, mpc["reduce_dtype"]))
    return kw


def run_case(model_name, kwargs, iterations):
    model, make_input = build_model(model_name)
    params = list(model.parameters())
    index_of = {p.data_ptr(): i for i, p in enumerate(params)}
    ddp = DDP(model, **make_kwargs(kwargs))
    record = {"plans": [plan_of(ddp, index_of)], "collectives": [], "copy_counts": []}
    ready = []
    handles = [p.register_post_accumulate_grad_hook(lambda p, i=i: ready.append(i))
               for i, p in enumerate(params)]
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(1 + dist.get_rank())
    autocast = kwargs.get("autocast", False)
    for it in range(iterations):
        ready.clear()
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                out = ddp(make_input())
            loss_of(out).backward()
        comms, counts = collectives_of(prof)
        record["collectives"].append(comms)
        record["copy_counts"].append(counts)
        record["plans"].append(plan_of(ddp, index_of))
        if it == 0:
            record["grad_ready_order"] = list(ready)
        for p in params:
            p.grad = None
    for h in handles:
        h.remove()
    return record


def baseline_counts(model_name, iterations):
    """The copy-kernel counts of the same model's forward + backward without DDP (its own
    aten::mul / aten::div_, e.g. dropout or attention scaling), to subtract from a case's."""
    model, make_input = build_model(model_name)
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(1 + dist.get_rank())
    out = []
    for _ in range(iterations):
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            loss_of(model(make_input())).backward()
        out.append(collectives_of(prof)[1])
        for p in model.parameters():
            p.grad = None
    return out


def describe_model(model_name):
    model, _ = build_model(model_name)
    params = [{"index": i, "name": n, "shape": list(p.shape), "numel": p.numel(),
               "dtype": dtype_name(p.dtype)}
              for i, (n, p) in enumerate(model.named_parameters())]
    buffers = [{"name": n, "shape": list(b.shape), "dtype": dtype_name(b.dtype)}
               for n, b in model.named_buffers()]
    return {"params": params, "num_tensors": len(params), "buffers": buffers,
            "total_bytes": sum(p.numel() * p.element_size() for p in model.parameters())}


def worker(rank, world, init_file, models, out_file, only_cases=None):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    result = {}
    for model_name in models:
        cases = CASES
        if model_name == "mlp-unused":
            cases = UNUSED_CASES
        if model_name in ("resnet18",):
            cases = CASES + BUFFER_CASES
        if model_name == "mlp-tiny":
            cases = CASES + BUFFER_CASES[3:]
        if model_name in AUTOCAST_MODELS:
            cases = cases + AUTOCAST_CASES
        if only_cases:
            cases = [c for c in cases if c[0] in only_cases]
        entry = describe_model(model_name)
        entry["baseline_copy_counts"] = baseline_counts(model_name, 3)
        entry["cases"] = {}
        for case_name, kwargs in cases:
            try:
                rec = run_case(model_name, kwargs, 3)
                rec["kwargs"] = kwargs
            except Exception as err:  # an argument that cannot run here: say so, keep going
                rec = {"kwargs": kwargs, "error": "%s: %s" % (type(err).__name__, err)}
                traceback.print_exc()
            dist.barrier()
            entry["cases"][case_name] = rec
            if rank == 0:
                print(model_name, case_name, "error" if "error" in rec else
                      [len(p) for p in rec["plans"]], flush=True)
        result[model_name] = entry
    if rank == 0:
        with open(out_file, "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


def dumps_compact(data):
    """Top-level keys one per line, each model's (and each case's) record compact on one line:
    diffable per case, a fraction of the indented size."""
    lines = []
    for key in sorted(data):
        if key != "models":
            lines.append(" %s: %s" % (json.dumps(key), json.dumps(data[key], sort_keys=True)))
    models = []
    for name in sorted(data["models"]):
        entry = data["models"][name]
        fields = []
        for key in sorted(entry):
            if key == "cases":
                cases = ",\n".join("    %s: %s" % (json.dumps(c), json.dumps(
                    entry["cases"][c], sort_keys=True, separators=(",", ":")))
                    for c in sorted(entry["cases"]))
                fields.append('   "cases": {\n%s\n   }' % cases)
            else:
                fields.append("   %s: %s" % (json.dumps(key), json.dumps(
                    entry[key], sort_keys=True, separators=(",", ":"))))
        models.append("  %s: {\n%s\n  }" % (json.dumps(name), ",\n".join(fields)))
    lines.append(' "models": {\n%s\n }' % ",\n".join(models))
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp-tiny,mlp-wide,mlp-unused,resnet18,resnet50,"
                        "mobilenet_v2,vgg16,gpt2-small,bert-base,llama-small")
    parser.add_argument("--out", default=os.path.join(here, "buckets.json"))
    parser.add_argument("--cases", help="only these cases (comma-separated names)")
    parser.add_argument("--merge", action="store_true",
                        help="add the cases run to the existing --out file instead of replacing "
                             "it (its versions must be this torch's)")
    args = parser.parse_args()
    models = args.models.split(",")
    only = set(args.cases.split(",")) if args.cases else None
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.json")
        mp.spawn(worker, args=(2, os.path.join(tmp, "rendezvous"), models, raw, only), nprocs=2)
        with open(raw) as f:
            result = json.load(f)
    old = None
    if args.merge:
        with open(args.out) as f:
            old = json.load(f)
        if old["torch_version"] != torch.__version__:
            raise SystemExit(f"--merge: {args.out} is from torch {old['torch_version']}, this is "
                             f"{torch.__version__}")
        for name, entry in result.items():
            if name in old["models"]:
                old["models"][name]["cases"].update(entry["cases"])
            else:
                old["models"][name] = entry
        result = old["models"]
    import platform

    versions = {"torch": torch.__version__}
    for mod in ("torchvision", "transformers"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            pass
    data = {
        "torch_version": torch.__version__,
        "versions": versions,
        "python": platform.python_version(),
        "setup": "2 ranks, gloo, CPU, torch.set_num_threads(1), 3 iterations per case",
        "first_bucket_bytes": dist._DEFAULT_FIRST_BUCKET_BYTES,
        "index_space": "indices into list(model.parameters())",
        "plans": "plans[0] = at construction (used by iteration 1); plans[k] = after iteration k "
                 "(the rebuild happens at the start of forward 2, so plans[2] is the first "
                 "rebuilt plan). Bucket index = launch order; params in flat-buffer order.",
        "collectives": "per iteration, gloo collectives in start order (numel, dtype, bytes)",
        "copy_counts": "per iteration, profiler op counts of the copy kernels (the model's own "
                       "are in baseline_copy_counts: the same forward + backward without DDP)",
        "collective_order_note": "gloo runs up to two collectives at once on its worker "
                                 "threads, so the start order of the (at most 2 in flight) "
                                 "buffer broadcasts of one forward can differ from issue order",
        "generated_by": "tests/data/torch-2.15/gen_buckets.py",
        "models": result,
    }
    if old is not None:  # the file's versions stay; the merged cases say which ones they ran on
        data["versions"] = old["versions"]
        data["merged"] = old.get("merged", []) + [
            {"models": models, "cases": sorted(only) if only else "all", "versions": versions}]
    with open(args.out, "w") as f:
        f.write(dumps_compact(data))
    print("wrote", args.out)


if __name__ == "__main__":
    main()

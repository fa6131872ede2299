#!/usr/bin/python3
"""Benchmark: Flotilla's engine against PyTorch's Python eager loop on the same
model, batch, data shape and thread count, in one run on this machine; and the
cost of measuring (step records on against off). Prints ratios, asserts nothing.

Rows: the small CNN, ResNet-18, MobileNetV2, the small ViT, a small
Transformer encoder (4 layers, hidden 256, 128 tokens) and a RoBERTa-base-shaped
encoder (a few steps). The Transformers are BLAS-bound on the CPU: the BLAS
library in use (whatever Debian's libblas.so.3 alternative points at) is
printed, as both sides found it.

--device cuda runs both on the GPU (batches and steps of the GPU table below,
the first --warmup steps untimed on both sides); --precision fp32 bf16 times
each precision (the engine's `precision:`, PyTorch's torch.autocast) and adds
the engine's bf16 against its own fp32. --json writes every row for a table.

    /usr/bin/python3 tests/bench/engine_vs_pytorch.py --build build
    /usr/bin/python3 tests/bench/engine_vs_pytorch.py --rows transformer --repeats 1
    python3 tests/bench/engine_vs_pytorch.py --device cuda --precision fp32 bf16 \\
        --rows small_cnn resnet18 mobilenet_v2 vit --repeats 1 --no-measurement-cost
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


SMALL_TRANSFORMER = {"vocab": 1000, "hidden": 256, "layers": 4, "heads": 4, "ffn": 1024,
                     "max_positions": 130}
ROBERTA_BASE = {"vocab": 50265, "hidden": 768, "layers": 12, "heads": 12, "ffn": 3072,
                "max_positions": 514}
CNNS = {"small_cnn", "resnet18", "mobilenet_v2"}

# row name, model, per-sample shape, (batch, steps) on the CPU, (batch, steps)
# on a GPU, transformer section (None: an image model)
CASES = [
    ("small_cnn", "small_cnn", [1, 28, 28], (64, 60), (64, 300), None),
    ("resnet18", "resnet18", [3, 32, 32], (32, 10), (128, 150), None),
    # Compute-bound: the seeds' 224x224 images (the CIFAR-variant network, so
    # ~49x the 32x32 row's work a sample), where tensor cores decide a step.
    ("resnet18_224", "resnet18", [3, 224, 224], (2, 2), (64, 30), None),
    ("mobilenet_v2", "mobilenet_v2", [3, 32, 32], (16, 5), (128, 100), None),
    ("vit", "vit", [3, 32, 32], (32, 10), (128, 200), None),
    ("transformer", "transformer_encoder", [128], (16, 5), (32, 100), SMALL_TRANSFORMER),
    ("roberta_base", "transformer_encoder", [16], (4, 3), (16, 30), ROBERTA_BASE),
]
DEFAULT_ROWS = ["small_cnn", "resnet18", "transformer", "roberta_base"]


def engine_run(binary, workdir, model, shape, batch, steps, threads, measure, transformer=None,
               blas=None, device="cpu", precision="fp32", warmup=0, channels_last=False):
    config = {
        "name": f"bench-{model}", "model": model, "dataset": "synthetic",
        "synthetic": {"shape": shape, "classes": 10,
                      "train_samples": batch * steps, "test_samples": batch},
        "batch_size": batch, "epochs": 1,
        "optimizer": {"name": "sgd", "lr": 0.01, "momentum": 0.9},
        "threads": threads, "seed": 0, "device": device, "precision": precision,
    }
    if channels_last and model in CNNS:
        config["channels_last"] = True
    if transformer:
        config["transformer"] = transformer
        config["synthetic"].update(vocab=transformer["vocab"], classes=2)
    cfg = os.path.join(workdir, "bench.json")
    rec = os.path.join(workdir, "records.jsonl")
    with open(cfg, "w") as f:
        json.dump(config, f)
    if os.path.exists(rec):
        os.remove(rec)
    cmd = [binary, "--config", cfg, "--records", rec, "--quiet"] + ([] if measure else ["--no-measure"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    with open(rec) as f:
        records = [json.loads(line) for line in f]
    epoch = next(r for r in records if r["type"] == "epoch")
    if blas is not None:
        start = next(r for r in records if r["type"] == "start")
        blas["engine"] = f'{start.get("blas", "?")}, {start.get("blas_threads", "?")} threads'
    if warmup > 0 and measure:
        # The steps after the warm-up, as the peer times them: each step
        # record's samples/s is over its wall time from its start to the
        # next one's, so these wall times tile the timed stretch.
        timed = [r for r in records if r["type"] == "step" and r["step"] > warmup]
        if timed:
            samples = sum(r["samples"] for r in timed)
            wall_s = sum(r["samples"] / r["samples_per_s"] for r in timed)
            return samples / wall_s, cpu_s
    # Training steps only, first step included, as the peer; and the CPU time of
    # the whole process, which other load on the machine disturbs far less.
    return epoch["samples_per_s"], cpu_s


def peer_run(model, shape, batch, steps, threads, transformer=None, blas=None, device="cpu",
             precisions=("fp32",), warmup=0, channels_last=False):
    """PyTorch's samples/s for each precision, from one process."""
    command = [sys.executable, os.path.join(HERE, "peer_train.py"), "--model", model,
               "--shape", *map(str, shape), "--batch-size", str(batch), "--steps", str(steps),
               "--threads", str(threads), "--device", device, "--warmup", str(warmup),
               "--precision", *precisions]
    if channels_last and model in CNNS:
        command.append("--channels-last")
    if transformer:
        command += ["--transformer", json.dumps(transformer), "--classes", "2"]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=HERE)
    results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if blas is not None:
        blas["pytorch"] = f'{results[0]["blas"]}, {threads} threads'
    return {r["precision"]: r["samples_per_s"] for r in results}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--binary", help="flotilla-train to run (default: BUILD/bin/flotilla-train)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only-measurement-cost", action="store_true")
    p.add_argument("--rows", nargs="+", choices=[c[0] for c in CASES], default=DEFAULT_ROWS,
                   help="which rows to run (default: " + " ".join(DEFAULT_ROWS) + ")")
    p.add_argument("--no-measurement-cost", action="store_true")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16", "fp16"],
                   help="precisions timed on each row (default: fp32)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed steps at the start of every run on both sides "
                        "(default: 0 on the CPU, 20 on a GPU)")
    p.add_argument("--batch", type=int, help="every row's batch instead of its table's")
    p.add_argument("--steps", type=int, help="every row's steps instead of its table's")
    p.add_argument("--channels-last", action="store_true", help="CNN rows in NHWC on both sides")
    p.add_argument("--json", help="write the rows to this file (one JSON list)")
    a = p.parse_args()
    binary = a.binary or os.path.join(a.build, "bin", "flotilla-train")
    warmup = a.warmup if a.warmup is not None else (20 if a.device == "cuda" else 0)
    cases = [c for c in CASES if c[0] in a.rows]
    print(f"device={a.device}, threads={a.threads}, repeats={a.repeats} (best of each), "
          f"warm-up {warmup} steps, synthetic data, SGD momentum 0.9"
          + (", channels_last CNNs" if a.channels_last else ""))
    blas = {}
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for row, model, shape, cpu_size, gpu_size, transformer in ([] if a.only_measurement_cost else cases):
            batch, steps = gpu_size if a.device == "cuda" else cpu_size
            batch, steps = a.batch or batch, a.steps or steps
            eng = {x: [] for x in a.precision}
            peer = {x: [] for x in a.precision}
            for _ in range(a.repeats):  # interleaved, so drift hits both alike
                for x in a.precision:
                    eng[x].append(engine_run(binary, workdir, model, shape, batch, steps, a.threads,
                                             True, transformer, blas, a.device, x, warmup,
                                             a.channels_last)[0])
                for x, rate in peer_run(model, shape, batch, steps, a.threads, transformer, blas,
                                        a.device, a.precision, warmup, a.channels_last).items():
                    peer[x].append(rate)
            if not rows:
                print(f"BLAS: engine {blas.get('engine')}; pytorch {blas.get('pytorch')}")
                print(f"{'model':<13} {'shape':>12} {'batch':>5} {'steps':>5} {'prec':>5} "
                      f"{'engine/s':>10} {'pytorch/s':>10} {'ratio':>7} {'vs fp32':>8}")
            dims = "x".join(map(str, shape))
            for x in a.precision:
                e, q = max(eng[x]), max(peer[x])
                versus = e / max(eng["fp32"]) if "fp32" in eng and x != "fp32" else None
                rows.append({"row": row, "model": model, "shape": shape, "batch": batch,
                             "steps": steps, "precision": x, "device": a.device,
                             "engine_per_s": e, "pytorch_per_s": q, "engine_over_pytorch": e / q,
                             "engine_over_its_fp32": versus, "warmup": warmup,
                             "channels_last": bool(a.channels_last and model in CNNS)})
                print(f"{row:<13} {dims:>12} {batch:>5} {steps:>5} {x:>5} {e:>10.2f} {q:>10.2f} "
                      f"{e / q:>6.3f}x " + (f"{versus:>7.3f}x" if versus else f"{'':>8}"))
                sys.stdout.flush()
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
        if a.no_measurement_cost:
            return

        # Measuring cost: step timing and records on versus off, small CNN. Wall
        # throughput on a shared 2-core machine varies by several percent run to
        # run; the CPU seconds each run costs are the steadier figure.
        on, off = [], []
        for _ in range(max(7, a.repeats)):
            on.append(engine_run(binary, workdir, "small_cnn", [1, 28, 28], 64, 100, a.threads, True))
            off.append(engine_run(binary, workdir, "small_cnn", [1, 28, 28], 64, 100, a.threads, False))
        median = statistics.median
        wall = median(r[0] for r in on) / median(r[0] for r in off)
        cpu = median(r[1] for r in on) / median(r[1] for r in off)
        print(f"measurement cost (small_cnn, 100 steps, median of {len(on)} interleaved runs):")
        print(f"  throughput on {median(r[0] for r in on):.1f}/s, off {median(r[0] for r in off):.1f}/s, "
              f"on/off = {wall:.4f}")
        print(f"  CPU seconds on {median(r[1] for r in on):.2f}, off {median(r[1] for r in off):.2f}, "
              f"on/off = {cpu:.4f} ({(cpu - 1) * 100:+.2f}% cost)")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Benchmark: Flotilla's engine against PyTorch's Python eager loop on the same
model, batch, data shape and thread count, in one run on this machine; and the
cost of measuring (step records on against off). Prints ratios, asserts nothing.

Rows: the small CNN, ResNet-18, a small Transformer encoder (4 layers, hidden
256, 128 tokens) and a RoBERTa-base-shaped encoder (a few steps). The
Transformers are BLAS-bound: the BLAS library in use (whatever Debian's
libblas.so.3 alternative points at) is printed, as both sides found it.

    /usr/bin/python3 tests/bench/engine_vs_pytorch.py --build build
    /usr/bin/python3 tests/bench/engine_vs_pytorch.py --rows transformer --repeats 1
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

# row name, model, per-sample shape, batch, steps, transformer section (None: an image model)
CASES = [
    ("small_cnn", "small_cnn", [1, 28, 28], 64, 60, None),
    ("resnet18", "resnet18", [3, 32, 32], 32, 10, None),
    ("transformer", "transformer_encoder", [128], 16, 5, SMALL_TRANSFORMER),
    ("roberta_base", "transformer_encoder", [16], 4, 3, ROBERTA_BASE),
]


def engine_run(binary, workdir, model, shape, batch, steps, threads, measure, transformer=None,
               blas=None):
    config = {
        "name": f"bench-{model}", "model": model, "dataset": "synthetic",
        "synthetic": {"shape": shape, "classes": 10,
                      "train_samples": batch * steps, "test_samples": batch},
        "batch_size": batch, "epochs": 1,
        "optimizer": {"name": "sgd", "lr": 0.01, "momentum": 0.9},
        "threads": threads, "seed": 0,
    }
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
    # Training steps only, first step included, as the peer; and the CPU time of
    # the whole process, which other load on the machine disturbs far less.
    return epoch["samples_per_s"], cpu_s


def peer_run(model, shape, batch, steps, threads, transformer=None, blas=None):
    command = [sys.executable, os.path.join(HERE, "peer_train.py"), "--model", model,
               "--shape", *map(str, shape), "--batch-size", str(batch), "--steps", str(steps),
               "--threads", str(threads)]
    if transformer:
        command += ["--transformer", json.dumps(transformer), "--classes", "2"]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=HERE)
    result = json.loads(out.stdout)
    if blas is not None:
        blas["pytorch"] = f'{result["blas"]}, {threads} threads'
    return result["samples_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only-measurement-cost", action="store_true")
    p.add_argument("--rows", nargs="+", choices=[c[0] for c in CASES],
                   default=[c[0] for c in CASES], help="which rows to run (default: all)")
    p.add_argument("--no-measurement-cost", action="store_true")
    a = p.parse_args()
    binary = os.path.join(a.build, "bin", "flotilla-train")
    cases = [c for c in CASES if c[0] in a.rows]
    print(f"threads={a.threads}, repeats={a.repeats} (best of each), synthetic data, SGD momentum 0.9")
    blas = {}
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for row, model, shape, batch, steps, transformer in ([] if a.only_measurement_cost else cases):
            eng, peer = [], []
            for _ in range(a.repeats):  # interleaved, so drift hits both alike
                eng.append(engine_run(binary, workdir, model, shape, batch, steps, a.threads, True,
                                      transformer, blas)[0])
                peer.append(peer_run(model, shape, batch, steps, a.threads, transformer, blas))
            e, q = max(eng), max(peer)
            if not rows:
                print(f"BLAS: engine {blas.get('engine')}; pytorch {blas.get('pytorch')}")
                print(f"{'model':<13} {'shape':>12} {'batch':>5} {'steps':>5} {'engine/s':>10} "
                      f"{'pytorch/s':>10} {'ratio':>7}")
            rows.append(row)
            dims = "x".join(map(str, shape))
            print(f"{row:<13} {dims:>12} {batch:>5} {steps:>5} {e:>10.2f} {q:>10.2f} {e / q:>6.3f}x")
            sys.stdout.flush()
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

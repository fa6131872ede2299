#!/usr/bin/python3
"""Benchmark: how long `flotilla-train --plan` takes, as the window's plan
preview runs it on every edit: the whole process (start, LibTorch's loading,
model built without random initialisation, a sample through the blocks up to
the last boundary, JSON out) and the plan's own `elapsed_ms`, per model and
layout, beside the cost of merely starting the program (`--help`). Prints
figures, asserts nothing.

    /usr/bin/python3 tests/bench/plan_bench.py --build build
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

ROBERTA = {"vocab": 50265, "hidden": 768, "layers": 12, "heads": 12, "ffn": 3072,
           "max_positions": 514}

# row, config
CASES = [
    ("resnet18 single", {"model": "resnet18", "dataset": "cifar10"}),
    ("resnet18 2 stages", {"model": "resnet18", "dataset": "cifar10", "strategy": "pipeline",
                           "ranks_per_node": 2, "balance": [5, 5], "chunks": 4,
                           "compression": {"method": "sort_quant", "bits": 6, "split_bits": 2}}),
    ("resnet18 2 st. estimate", {"model": "resnet18", "dataset": "cifar10", "strategy": "pipeline",
                                 "ranks_per_node": 2, "chunks": 4}),
    ("mobilenet_v2 single", {"model": "mobilenet_v2", "dataset": "cifar10"}),
    ("mobilenet_v2 2 stages", {"model": "mobilenet_v2", "dataset": "cifar10",
                               "strategy": "pipeline", "ranks_per_node": 2,
                               "balance": [10, 10], "chunks": 4}),
    ("roberta_base ddp x4", {"model": "transformer_encoder", "transformer": ROBERTA,
                             "dataset": "synthetic",
                             "synthetic": {"shape": [128], "vocab": 50265, "classes": 2},
                             "strategy": "ddp", "ranks_per_node": 4}),
    ("roberta_base 4 stages", {"model": "transformer_encoder", "transformer": ROBERTA,
                               "dataset": "synthetic",
                               "synthetic": {"shape": [128], "vocab": 50265, "classes": 2},
                               "strategy": "pipeline", "ranks_per_node": 4,
                               "balance": [4, 3, 3, 4], "chunks": 4}),
]


def timed(command):
    start = time.perf_counter()
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, out.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    binary = os.path.join(a.build, "bin", "flotilla-train")
    start_only = statistics.median(timed([binary, "--help"])[0] for _ in range(a.repeats))
    print(f"median of {a.repeats} runs each; starting flotilla-train alone (--help): "
          f"{start_only * 1000:.0f} ms")
    print(f"{'plan':<24} {'parameters':>11} {'process ms':>11} {'plan ms':>8} {'balance':>16}")
    with tempfile.TemporaryDirectory() as workdir:
        for row, config in CASES:
            path = os.path.join(workdir, "plan.json")
            with open(path, "w") as f:
                json.dump(dict(config, name="plan-bench"), f)
            runs = [timed([binary, "--plan", "--config", path]) for _ in range(a.repeats)]
            plan = json.loads(runs[-1][1])
            wall = statistics.median(r[0] for r in runs) * 1000
            inner = statistics.median(json.loads(r[1])["elapsed_ms"] for r in runs)
            balance = plan["balance"]
            cut = "/".join(map(str, balance["blocks_per_stage"]))
            print(f"{row:<24} {plan['parameters']:>11} {wall:>11.0f} {inner:>8.0f} "
                  f"{cut + ' ' + balance['source'][:4]:>16}")


if __name__ == "__main__":
    main()

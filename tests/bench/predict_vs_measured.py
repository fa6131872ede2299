#!/usr/bin/env python3
"""Predicted against measured step time on the 3-host namespace cluster.

Issue 27's table: a fixed set of configs (DDP on 1/2/3 nodes at two batch
sizes, GPipe and 1F1B over 2 and 3 stages with 2/4/8 chunks, Pipe+DDP, one
with sort_quant at the boundary, one freezing) is first planned with
`flotilla plan --predict` (block times measured on this machine, the links
from `flotilla nodes bench` of the same nodes), then run; the measured step is
the run's steady throughput (after warm-up) turned back into a step; the
peak memory predicted for the fullest rank is set against the largest
rank's measured peak (compare's peak_mem_mib). Prints one table and the
median and worst absolute errors, and keeps each plan as NAME.plan.json in
the cluster folder. Measures, asserts nothing.

    sudo tests/bench/predict_vs_measured.py [--steps N] [--only LABEL,...] [--keep DIR]

Needs root (tests/cluster/cluster.sh makes the hosts) and a built tree.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
FLOTILLA = os.path.join(ROOT, "build", "bin", "flotilla")
CLUSTER = os.path.join(ROOT, "tests", "cluster", "cluster.sh")

BASE = {
    "model": "small_cnn",
    "dataset": "fashion_mnist",
    "epochs": 1,
    "device": "cpu",
    "threads": 1,
    "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
}

# label, nodes, config on top of BASE
CONFIGS = [
    ("ddp 1 node b32", 1, {"strategy": "ddp", "batch_size": 32}),
    ("ddp 1 node b128", 1, {"strategy": "ddp", "batch_size": 128}),
    ("ddp 2 nodes b32", 2, {"strategy": "ddp", "batch_size": 32}),
    ("ddp 2 nodes b128", 2, {"strategy": "ddp", "batch_size": 128}),
    ("ddp 3 nodes b32", 3, {"strategy": "ddp", "batch_size": 32}),
    ("ddp 3 nodes b128", 3, {"strategy": "ddp", "batch_size": 128}),
    ("gpipe 2 stages 2 chunks", 2, {"strategy": "pipeline", "batch_size": 64, "chunks": 2}),
    ("gpipe 2 stages 4 chunks", 2, {"strategy": "pipeline", "batch_size": 64, "chunks": 4}),
    ("gpipe 3 stages 8 chunks", 3, {"strategy": "pipeline", "batch_size": 64, "chunks": 8}),
    ("1f1b 2 stages 4 chunks", 2,
     {"strategy": "pipeline", "schedule": "1f1b", "batch_size": 64, "chunks": 4}),
    ("1f1b 3 stages 4 chunks", 3,
     {"strategy": "pipeline", "schedule": "1f1b", "batch_size": 64, "chunks": 4}),
    ("gpipe 2 stages sort_quant 8 bits", 2,
     {"strategy": "pipeline", "batch_size": 64, "chunks": 4,
      "compression": {"method": "sort_quant", "bits": 6, "split_bits": 2}}),
    ("pipe+ddp 2 stages x 2 replicas", 2,
     {"strategy": "pipeline_ddp", "ranks_per_node": 2, "replicas": 2, "batch_size": 64,
      "chunks": 4}),
    ("ddp 2 nodes 2 blocks frozen", 2,
     {"strategy": "ddp", "batch_size": 64,
      "freeze": {"method": "fixed", "schedule": [{"at_step": 0, "blocks": 2}]}}),
]


def flotilla(db, known_hosts, *args, check=True):
    cmd = [FLOTILLA, "--db", db, "--known-hosts", known_hosts, *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if check and done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40, help="steps each run trains")
    parser.add_argument("--only", default="", help="comma-separated labels")
    parser.add_argument("--dir", default="", help="the cluster's folder (default: a new one)")
    parser.add_argument("--keep", default="",
                        help="a folder to copy the runs' database and the plans into before "
                             "the cluster (and its folder) goes")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root: tests/cluster/cluster.sh makes the hosts")
    work = args.dir or tempfile.mkdtemp(prefix="flotilla-predict-")
    subprocess.run(["bash", CLUSTER, "up", "3", "--dir", work], check=True,
                   stdout=subprocess.DEVNULL)
    try:
        run_all(work, args)
    finally:
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for name in os.listdir(work):
                # The database with its write-ahead log, which holds the
                # newest records until SQLite folds it in.
                if name.startswith("runs.db") or name.endswith(".plan.json"):
                    shutil.copy(os.path.join(work, name), args.keep)
        subprocess.run(["bash", CLUSTER, "down", "--dir", work], stdout=subprocess.DEVNULL)


def run_all(work, args):
    cluster = json.load(open(os.path.join(work, "cluster.json")))
    db = os.path.join(work, "runs.db")
    known_hosts = os.path.join(work, "known_hosts")
    with open(known_hosts, "w") as out:
        for host in cluster["hosts"]:
            kind, key = open(host["host_key_pub"]).read().split()[:2]
            out.write(f"{host['address']} {kind} {key}\n")
    names = []
    for host in cluster["hosts"]:
        flotilla(db, known_hosts, "nodes", "add", host["name"], "--host", host["address"],
                 "--user", host["user"], "--key", cluster["key_file"], "--remote-dir",
                 host["remote_dir"])
        names.append(host["name"])
    # The links of each node set a config runs on, with its ranks per node.
    for count, per_node in ((2, 1), (3, 1), (2, 2)):
        flotilla(db, known_hosts, "nodes", "bench", *names[:count], "--ranks-per-node",
                 str(per_node), "--max-bytes", "16777216")
    only = [s for s in args.only.split(",") if s]
    rows = []
    for label, count, extra in CONFIGS:
        if only and label not in only:
            continue
        config = dict(BASE, name=label.replace(" ", "-").replace("+", "p"), max_steps=args.steps,
                      nodes=names[:count], **extra)
        config.setdefault("ranks_per_node", 1)
        path = os.path.join(work, config["name"] + ".json")
        json.dump(config, open(path, "w"))
        # The blocks and the core sharing timed again just before the run:
        # this machine's speed drifts by a quarter within minutes, and a
        # profile kept from earlier would count the drift as the model's error.
        plan_text = flotilla(db, known_hosts, "plan", path, "--predict", "--remeasure",
                             "--json").stdout
        open(os.path.join(work, config["name"] + ".plan.json"), "w").write(plan_text)
        plan = json.loads(plan_text)
        predicted = plan["prediction"]
        run = flotilla(db, known_hosts, "run", path, check=False)
        run_id = next((line.split()[1].rstrip(":") for line in run.stdout.splitlines()
                       if line.startswith("run ")), None)
        predicted_mib = predicted.get("peak_memory_bytes", 0) / 1048576
        if run.returncode != 0 or not run_id:
            rows.append((label, predicted["step_ms"], None, None, predicted_mib, None, None))
            continue
        shown = json.loads(flotilla(db, known_hosts, "show", run_id, "--format", "json").stdout)
        throughput = shown["summary"]["samples_per_s"]
        measured = predicted["samples_per_step"] / throughput * 1000
        error = (predicted["step_ms"] - measured) / measured
        compared = flotilla(db, known_hosts, "compare", run_id, "--columns", "run,peak_mem_mib",
                            "--format", "json").stdout
        values = json.loads(compared[compared.index("{"):])["rows"][0]["values"]
        measured_mib = values.get("peak_mem_mib")
        memory_error = ((predicted_mib - measured_mib) / measured_mib
                        if isinstance(measured_mib, (int, float)) and measured_mib > 0 else None)
        rows.append((label, predicted["step_ms"], measured, error, predicted_mib, measured_mib,
                     memory_error))
        print(f"{label}: predicted {predicted['step_ms']:.1f} ms, measured {measured:.1f} ms "
              f"({100 * error:+.1f} %); peak memory predicted {predicted_mib:.0f} MiB, measured "
              + (f"{measured_mib:.0f} MiB ({100 * memory_error:+.1f} %)" if memory_error is not None
                 else "none"), flush=True)

    print()
    print("| config | predicted step (ms) | measured step (ms) | error "
          "| predicted peak (MiB) | measured peak (MiB) | error |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, predicted, measured, error, predicted_mib, measured_mib, memory_error in rows:
        step = (f"{measured:.1f} | {100 * error:+.1f} %" if measured else "– | run failed")
        memory = (f"{measured_mib:.0f} | {100 * memory_error:+.1f} %" if memory_error is not None
                  else "– | –")
        print(f"| {label} | {predicted:.1f} | {step} | {predicted_mib:.0f} | {memory} |")
    for name, column in (("step", 3), ("peak memory", 6)):
        errors = [abs(row[column]) for row in rows if row[column] is not None]
        if errors:
            print(f"\n{name}: median |error| {100 * statistics.median(errors):.1f} %, "
                  f"worst {100 * max(errors):.1f} % over {len(errors)} configs")


if __name__ == "__main__":
    main()

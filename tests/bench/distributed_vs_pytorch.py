#!/usr/bin/python3
"""Benchmark: Flotilla's engine against PyTorch's own Python equivalents, two
ranks over Gloo on this machine, 1 thread per rank, in one run. Prints ratios
(engine / python: above 1 the engine is faster), asserts nothing.

  DDP:   engine `strategy: ddp` against torch.nn.parallel.DistributedDataParallel
         (peer_ddp.py), same model, per-rank batch, 25 MiB buckets, SGD momentum 0.9.
  GPipe: engine `strategy: pipeline, schedule: gpipe`, 2 stages, 4 chunks, fixed
         balance, against the same schedule written with torch.distributed
         (peer_pipeline.py); the engine's 1F1B beside it.

Throughput is samples/s over the steps after a warm-up of 2, from the lead
rank's (rank 0's) step times on both sides; engine and Python runs alternate and
the best of --repeats of each counts. Also printed: the engine's bytes sent and
exposed comm_ms per step of each rank, and for pipelines the measured
efficiency sum(busy) / (stages x step) beside GPipe's bound 1 - (p-1)/(m+p-1).
Ends with build/bin/codec_bench's output where it was built.

    /usr/bin/python3 tests/bench/distributed_vs_pytorch.py --build build
    /usr/bin/python3 tests/bench/distributed_vs_pytorch.py --quick   # smoke run
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WARMUP = 2  # leading steps left out of every timing, engine and Python alike
WORLD = 2
THREADS = 1
CHUNKS = 4

# model, per-sample shape, batch (per rank for DDP, the replica batch for the
# pipeline), pipeline balance, default steps (~4 minutes in all on 2 cores).
CASES = [
    ("small_cnn", [1, 28, 28], 64, [2, 2], 30),
    ("resnet18", [3, 32, 32], 32, [5, 5], 8),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(commands, workdir, label, timeout=600):
    """Starts one process per rank with torchrun's variables; returns each
    rank's stdout. Any rank failing ends the others."""
    port = free_port()
    procs, logs = [], []
    for rank, cmd in enumerate(commands):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(len(commands)),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        out = open(os.path.join(workdir, f"rank{rank}.out"), "w+")
        err = open(os.path.join(workdir, f"rank{rank}.err"), "w+")
        logs.append((out, err))
        procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=err, cwd=HERE))
    deadline = time.monotonic() + timeout
    failed = None
    try:
        pending = list(enumerate(procs))
        while pending and failed is None:
            for rank, proc in list(pending):
                code = proc.poll()
                if code is None:
                    continue
                pending.remove((rank, proc))
                if code != 0:
                    failed = f"rank {rank} exited with {code}"
            if time.monotonic() > deadline:
                failed = f"timed out after {timeout} s"
            time.sleep(0.05)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    outputs = []
    for rank, (out, err) in enumerate(logs):
        out.seek(0)
        err.seek(0)
        outputs.append(out.read())
        if failed:
            tail = err.read()[-2000:]
            if tail:
                failed += f"\n--- rank {rank} stderr:\n{tail}"
        out.close()
        err.close()
    if failed:
        raise RuntimeError(f"{label}: {failed}")
    return outputs


def timed_steps(records):
    return [r for r in records if r["type"] == "step" and r["step"] > WARMUP]


def engine_run(binary, workdir, model, shape, batch, steps, strategy, schedule=None, balance=None):
    pipelined = strategy == "pipeline"
    replicas = 1 if pipelined else WORLD
    config = {
        "name": f"bench-{strategy}-{model}", "model": model, "dataset": "synthetic",
        "synthetic": {"shape": shape, "classes": 10,
                      "train_samples": batch * replicas * steps, "test_samples": batch},
        "strategy": strategy, "ranks_per_node": WORLD, "batch_size": batch,
        "epochs": 1, "max_steps": steps,
        "optimizer": {"name": "sgd", "lr": 0.01, "momentum": 0.9},
        "threads": THREADS, "seed": 0,
    }
    if pipelined:
        config.update(schedule=schedule, chunks=CHUNKS, balance=balance)
    cfg = os.path.join(workdir, "bench.json")
    with open(cfg, "w") as f:
        json.dump(config, f)
    recs = [os.path.join(workdir, f"records{rank}.jsonl") for rank in range(WORLD)]
    for rec in recs:
        if os.path.exists(rec):
            os.remove(rec)
    run_ranks([[binary, "--config", cfg, "--records", rec, "--quiet"] for rec in recs], workdir,
              f"engine {strategy} {schedule or ''} {model}")
    ranks = []
    for rec in recs:
        with open(rec) as f:
            ranks.append([json.loads(line) for line in f])
    for rank, records in enumerate(ranks):
        end = next(r for r in records if r["type"] == "end")
        if end["outcome"] != "finished":
            raise RuntimeError(f"engine rank {rank}: {end['outcome']}: {end.get('message')}")
    lead = timed_steps(ranks[0])
    per_rank = [timed_steps(records) for records in ranks]
    result = {
        "samples_per_s": sum(r["samples"] for r in lead) / (sum(r["step_ms"] for r in lead) / 1e3),
        "start": next(r for r in ranks[0] if r["type"] == "start"),
        "bytes_sent": [mean(r["bytes_sent"] for r in steps_) for steps_ in per_rank],
        "comm_ms": [mean(r["comm_ms"] for r in steps_) for steps_ in per_rank],
        "step_ms": [mean(r["step_ms"] for r in steps_) for steps_ in per_rank],
        "records": ranks,
    }
    if pipelined:
        result["efficiency"] = efficiency([[r["busy_ms"] for r in s] for s in per_rank],
                                          [r["step_ms"] for r in lead])
        result["busy_ms"] = [mean(r["busy_ms"] for r in s) for s in per_rank]
    return result


def peer_run(script, workdir, model, shape, batch, steps, extra=()):
    cmd = [sys.executable, os.path.join(HERE, script), "--model", model,
           "--shape", *map(str, shape), "--batch-size", str(batch), "--steps", str(steps),
           "--warmup", str(WARMUP), "--threads", str(THREADS), *extra]
    outs = run_ranks([cmd] * WORLD, workdir, f"python {script} {model}")
    ranks = [json.loads(out.strip().splitlines()[-1]) for out in outs]
    result = dict(ranks[0], ranks=ranks)  # rank 0 leads, as on the engine's side
    if "busy_ms" in ranks[0]:
        result["efficiency"] = efficiency([r["busy_ms"][WARMUP:] for r in ranks],
                                          ranks[0]["step_ms"][WARMUP:])
        result["mean_busy_ms"] = [mean(r["busy_ms"][WARMUP:]) for r in ranks]
    return result


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def efficiency(busy_per_stage, lead_step_ms):
    """sum over stages of busy / (stages x step), over the timed steps."""
    return sum(sum(b) for b in busy_per_stage) / (len(busy_per_stage) * sum(lead_step_ms))


def gpipe_bound(stages, chunks):
    return 1 - (stages - 1) / (chunks + stages - 1)


def best(runs):
    return max(runs, key=lambda r: r["samples_per_s"])


def megabytes(values):
    return " ".join(f"r{rank} {v / 1e6:.3f} MB" for rank, v in enumerate(values))


def milliseconds(values):
    return " ".join(f"r{rank} {v:.1f}" for rank, v in enumerate(values))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build folder; a relative one is looked for here, then at the repo root")
    p.add_argument("--steps", type=int,
                   help=f"steps per run, {WARMUP} of them warm-up (default: "
                        + ", ".join(f"{c[0]} {c[4]}" for c in CASES) + ")")
    p.add_argument("--repeats", type=int, help="runs of each side; the best counts (default 3, --quick 1)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: small CNN only, 6 steps, 1 repeat; codec_bench with --repeats 1")
    a = p.parse_args()
    build = a.build
    if not os.path.isdir(build) and not os.path.isabs(build):
        build = os.path.join(ROOT, build)
    build = os.path.abspath(build)  # the ranks run in this folder
    binary = os.path.join(build, "bin", "flotilla-train")
    if not os.access(binary, os.X_OK):
        sys.exit(f"{binary}: not found; build flotilla-train first")
    cases = CASES[:1] if a.quick else CASES
    repeats = a.repeats if a.repeats is not None else (1 if a.quick else 3)
    if a.steps is not None and a.steps <= WARMUP:
        sys.exit(f"--steps must exceed the {WARMUP} warm-up steps")

    def steps_of(default_steps):
        return a.steps if a.steps is not None else (6 if a.quick else default_steps)

    started = time.monotonic()
    notes = []
    print(f"{WORLD} ranks on one machine, Gloo over loopback, {THREADS} thread per rank, synthetic "
          f"data (pool of 256), SGD momentum 0.9; throughput over steps > {WARMUP} of rank 0, "
          f"best of {repeats} interleaved runs; ratio = engine / python")
    sys.stdout.flush()
    with tempfile.TemporaryDirectory() as workdir:
        # --- DDP ---------------------------------------------------------------
        print(f"\nDDP ({WORLD} ranks, 25 MiB buckets; PyTorch: DistributedDataParallel, "
              f"broadcast_buffers=False as the engine)")
        print(f"{'model':<10} {'batch/rank':>10} {'steps':>5} {'engine/s':>10} {'pytorch/s':>10} {'ratio':>7}")
        ddp_details = []
        for model, shape, batch, _, default_steps in cases:
            steps = steps_of(default_steps)
            eng, peer = [], []
            for _ in range(repeats):  # interleaved, so drift hits both alike
                eng.append(engine_run(binary, workdir, model, shape, batch, steps, "ddp"))
                peer.append(peer_run("peer_ddp.py", workdir, model, shape, batch, steps))
            e, q = best(eng), best(peer)
            print(f"{model:<10} {batch:>10} {steps:>5} {e['samples_per_s']:>10.1f} "
                  f"{q['samples_per_s']:>10.1f} {e['samples_per_s'] / q['samples_per_s']:>6.3f}x")
            sys.stdout.flush()
            params = e["start"]["parameters"]
            ddp_details.append(
                f"  {model}: engine bytes_sent/step {megabytes(e['bytes_sent'])} "
                f"(4 x {params} parameters = {4 * params / 1e6:.3f} MB); comm_ms/step "
                f"{milliseconds(e['comm_ms'])}; step_ms engine {e['step_ms'][0]:.1f}, "
                f"python {mean(q['step_ms'][WARMUP:]):.1f}")
            if params != q["parameters"]:
                notes.append(f"DDP {model}: engine has {params} parameters, python {q['parameters']}")
        print("\n".join(ddp_details))

        # --- GPipe (and the engine's 1F1B) ---------------------------------------
        bound = gpipe_bound(WORLD, CHUNKS)
        print(f"\nPipeline ({WORLD} stages, {CHUNKS} chunks; PyTorch: the same GPipe schedule with "
              f"dist.isend/recv, peer_pipeline.py); GPipe bound 1-(p-1)/(m+p-1) = {bound:.3f}")
        print(f"{'model':<10} {'batch':>5} {'balance':>8} {'steps':>5} {'gpipe/s':>9} {'pytorch/s':>10} "
              f"{'ratio':>7} {'1f1b/s':>8} {'1f1b/gpipe':>10} {'eff eng':>8} {'eff py':>7} {'bound':>6}")
        pipe_details = []
        for model, shape, batch, balance, default_steps in cases:
            steps = steps_of(default_steps)
            gpipe, onef, peer = [], [], []
            extra = ["--chunks", str(CHUNKS), "--balance", *map(str, balance)]
            for _ in range(repeats):
                gpipe.append(engine_run(binary, workdir, model, shape, batch, steps, "pipeline",
                                        "gpipe", balance))
                peer.append(peer_run("peer_pipeline.py", workdir, model, shape, batch, steps, extra))
                onef.append(engine_run(binary, workdir, model, shape, batch, steps, "pipeline",
                                       "1f1b", balance))
            g, q, o = best(gpipe), best(peer), best(onef)
            bal = "[" + ",".join(map(str, balance)) + "]"
            print(f"{model:<10} {batch:>5} {bal:>8} {steps:>5} {g['samples_per_s']:>9.1f} "
                  f"{q['samples_per_s']:>10.1f} {g['samples_per_s'] / q['samples_per_s']:>6.3f}x "
                  f"{o['samples_per_s']:>8.1f} {o['samples_per_s'] / g['samples_per_s']:>9.3f}x "
                  f"{g['efficiency']:>8.3f} {q['efficiency']:>7.3f} {bound:>6.3f}")
            sys.stdout.flush()
            for name, run in (("gpipe", g), ("1f1b", o)):
                pipe_details.append(
                    f"  {model} engine {name}: bytes_sent/step {megabytes(run['bytes_sent'])}; "
                    f"comm_ms/step {milliseconds(run['comm_ms'])}; busy_ms/step "
                    f"{milliseconds(run['busy_ms'])}; step_ms {milliseconds(run['step_ms'])}; "
                    f"efficiency {run['efficiency']:.3f}")
            pipe_details.append(
                f"  {model} python gpipe: busy_ms/step {milliseconds(q['mean_busy_ms'])}; step_ms "
                f"{milliseconds(mean(r['step_ms'][WARMUP:]) for r in q['ranks'])}; "
                f"efficiency {q['efficiency']:.3f}")
            # The Python twin must cut the same blocks as the engine.
            start = g["start"]
            if start["block_parameters"] != q["block_parameters"]:
                notes.append(f"pipeline {model}: engine blocks {start['block_parameters']} differ "
                             f"from python's {q['block_parameters']}")
            if start.get("balance") != balance:
                notes.append(f"pipeline {model}: engine used balance {start.get('balance')}, "
                             f"asked {balance}")
        print("\n".join(pipe_details))
        if not notes:
            print("  (engine and python blocks, balance and parameter counts match)")
        for note in notes:
            print(f"  NOTE: {note}")

    # --- codec throughput ---------------------------------------------------------
    codec = os.path.join(build, "bin", "codec_bench")
    print()
    if os.access(codec, os.X_OK):
        cmd = [codec] + (["--repeats", "1"] if a.quick else [])
        print(f"codec_bench ({' '.join(cmd[1:]) or 'defaults'}):")
        sys.stdout.flush()
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        print(out.stdout.rstrip())
        if out.returncode != 0:
            print(f"codec_bench exited with {out.returncode}: {out.stderr.strip()[-2000:]}")
    else:
        print(f"codec_bench: not found at {codec} (built with the tests)")
    print(f"\ntook {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()

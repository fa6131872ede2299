"""One stage of a GPipe pipeline written with torch.distributed (gloo) on
synthetic data: the peer that the engine's `strategy: pipeline, schedule:
gpipe` is measured against, the same schedule done in Python. Started once per
stage with torchrun's variables (RANK = stage, WORLD_SIZE = stages,
MASTER_ADDR, MASTER_PORT); each stage prints one JSON line.

As the engine does (engine/src/pipeline/pipeline.cpp): every rank builds the
whole model from the same seed and keeps its blocks (peer_models.blocks, cut by
`--balance`); the batch is cut into `--chunks` micro-batches with tensor_split;
every forward runs, then every backward in reverse order; activations go
forward and gradients back with dist.isend / dist.recv under their own tags;
each micro-batch's mean loss is weighted by its share of the batch, so the
summed gradients are the batch's; one SGD step per batch."""
import argparse
import json
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import peer_models

ACTIVATION_TAG, GRADIENT_TAG = 0, 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--shape", type=int, nargs=3, default=[3, 32, 32])
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, required=True, help="the whole batch, cut into chunks")
    p.add_argument("--chunks", type=int, required=True)
    p.add_argument("--balance", type=int, nargs="+", required=True, help="blocks per stage")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, default=2, help="leading steps left out of the timing")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    stage, stages = dist.get_rank(), dist.get_world_size()
    first, last = stage == 0, stage == stages - 1
    torch.manual_seed(0)
    whole = peer_models.blocks(peer_models.build(a.model, a.shape, a.classes))
    block_parameters = [sum(t.numel() for t in b.parameters()) for b in whole]
    if len(a.balance) != stages or sum(a.balance) != len(whole) or min(a.balance) < 1:
        raise SystemExit(f"balance {a.balance}: needs {stages} entries of at least 1 summing to "
                         f"the {len(whole)} blocks of {a.model}")
    offsets = [sum(a.balance[:s]) for s in range(stages + 1)]
    # The per-sample shape that crosses each boundary, found as the engine does.
    boundary = []
    with torch.no_grad():
        whole.eval()
        x = torch.zeros(2, *a.shape)  # draws nothing from the seeded generator
        for s in range(stages - 1):
            x = whole[offsets[s]:offsets[s + 1]](x)
            boundary.append(list(x.shape[1:]))
    blocks = whole[offsets[stage]:offsets[stage + 1]]
    blocks.train()
    opt = torch.optim.SGD(blocks.parameters(), lr=a.lr, momentum=0.9)
    pool = torch.randn(256, *a.shape)
    labels = torch.randint(a.classes, (a.batch_size * a.steps,))

    m = min(a.chunks, a.batch_size)
    # tensor_split's sizes, computed alike on every stage.
    sizes = [a.batch_size // m + (1 if i < a.batch_size % m else 0) for i in range(m)]
    step_ms, busy_ms, losses = [], [], []
    for step in range(a.steps):
        # Timed as the engine's step_ms: from taking the batch to the optimizer's end.
        start = time.perf_counter()
        idx = torch.arange(step * a.batch_size, (step + 1) * a.batch_size)
        xs = pool[idx % 256].tensor_split(m) if first else None
        ys = labels[idx].tensor_split(m) if last else None
        inputs, outputs, sends = [None] * m, [None] * m, []
        busy = 0.0
        for i in range(m):  # every forward
            if first:
                x = xs[i]
            else:
                x = torch.empty(sizes[i], *boundary[stage - 1])
                dist.recv(x, src=stage - 1, tag=ACTIVATION_TAG)
                x.requires_grad_(True)
            t = time.perf_counter()
            out = blocks(x)
            if last:
                out = F.cross_entropy(out, ys[i]) * (sizes[i] / a.batch_size)
            busy += time.perf_counter() - t
            if not last:
                sent = out.detach()
                sends.append((dist.isend(sent, dst=stage + 1, tag=ACTIVATION_TAG), sent))
            inputs[i], outputs[i] = x, out
        loss = sum(o.detach() for o in outputs) if last else None
        for i in reversed(range(m)):  # then every backward, in reverse
            if last:
                t = time.perf_counter()
                outputs[i].backward()
            else:
                grad = torch.empty(sizes[i], *boundary[stage])
                dist.recv(grad, src=stage + 1, tag=GRADIENT_TAG)
                t = time.perf_counter()
                outputs[i].backward(grad)
            busy += time.perf_counter() - t
            if not first:
                sent = inputs[i].grad
                sends.append((dist.isend(sent, dst=stage - 1, tag=GRADIENT_TAG), sent))
            inputs[i] = outputs[i] = None
        for work, _ in sends:
            work.wait()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_ms.append((time.perf_counter() - start) * 1e3)
        busy_ms.append(busy * 1e3)
        # As the engine, the loss is read after the step's timing.
        losses.append(loss.item() if last else None)
    timed = step_ms[a.warmup:]
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps({"rank": stage, "stage": stage, "stages": stages, "chunks": m,
                      "balance": a.balance, "block_parameters": block_parameters,
                      "boundary_shapes": boundary,
                      "samples_per_s": a.batch_size * len(timed) / (sum(timed) / 1e3),
                      "step_ms": step_ms, "busy_ms": busy_ms, "loss": losses if last else None,
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()

"""One rank of PyTorch's own DistributedDataParallel over torch.distributed
(gloo) on synthetic data: the peer that the engine's `strategy: ddp` is
measured against. Started once per rank with torchrun's variables (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT); each rank prints one JSON line."""
import argparse
import json
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import peer_models


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--shape", type=int, nargs=3, default=[3, 32, 32])
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, required=True, help="per rank")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, default=2, help="leading steps left out of the timing")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    # The engine broadcasts parameters and buffers once, at the start, as DDP's
    # constructor does; it does not broadcast buffers every forward, so neither
    # does this peer (same work per step; ResNet-18's BN buffers only).
    model = DistributedDataParallel(peer_models.build(a.model, a.shape, a.classes),
                                    bucket_cap_mb=a.bucket_cap_mb, broadcast_buffers=False)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    # The engine's synthetic data: a pool of 256 distinct samples; each rank
    # reads its own shard of the global batch.
    pool = torch.randn(256, *a.shape)
    labels = torch.randint(a.classes, (a.batch_size * world * a.steps,))
    model.train()
    step_ms = []
    for step in range(a.steps):
        # Timed as the engine's step_ms: from asking for the batch to the
        # optimizer's end (backward ends when the last bucket is reduced).
        start = time.perf_counter()
        first = (step * world + rank) * a.batch_size
        idx = torch.arange(first, first + a.batch_size)
        x, y = pool[idx % 256], labels[idx]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step_ms.append((time.perf_counter() - start) * 1e3)
    timed = step_ms[a.warmup:]
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps({"rank": rank, "world_size": world,
                      "samples_per_s": a.batch_size * world * len(timed) / (sum(timed) / 1e3),
                      "step_ms": step_ms, "loss": loss.item(),
                      "parameters": sum(t.numel() for t in model.parameters()),
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()

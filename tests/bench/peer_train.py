"""PyTorch's Python eager training loop on synthetic data: the peer that the
engine's throughput is measured against. Prints one JSON line."""
import argparse
import json
import time

import torch
import torch.nn.functional as F

import peer_models


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--shape", type=int, nargs=3, default=[3, 32, 32])
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = peer_models.build(a.model, a.shape, a.classes)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    # The same pool of 256 distinct samples the engine's synthetic data set uses.
    pool = torch.randn(256, *a.shape)
    labels = torch.randint(a.classes, (a.batch_size * a.steps,))
    model.train()
    start = time.perf_counter()
    for step in range(a.steps):
        idx = torch.arange(step * a.batch_size, (step + 1) * a.batch_size)
        x, y = pool[idx % 256], labels[idx]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - start
    print(json.dumps({"samples_per_s": a.batch_size * a.steps / elapsed, "elapsed_s": elapsed,
                      "parameters": sum(t.numel() for t in model.parameters()),
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()

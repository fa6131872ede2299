"""PyTorch's Python eager training loop on synthetic data: the peer that the
engine's throughput is measured against. Prints one JSON line."""
import argparse
import ctypes
import json
import time

import torch
import torch.nn.functional as F

import peer_models


def blas_in_use(threads):
    """Which BLAS this process calls (libblas.so.3 came with torch), its pool
    set to `threads` as the engine sets its own: torch.set_num_threads sizes
    only LibTorch's intra-op pool."""
    process = ctypes.CDLL(None)
    try:
        process.openblas_set_num_threads(threads)
        process.openblas_get_config.restype = ctypes.c_char_p
        return "OpenBLAS " + process.openblas_get_config().decode()
    except AttributeError:
        pass
    try:
        process.bli_thread_set_num_threads(ctypes.c_int64(threads))
        process.bli_info_get_version_str.restype = ctypes.c_char_p
        return "BLIS " + process.bli_info_get_version_str().decode()
    except AttributeError:
        return "reference BLAS (single-threaded)"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--shape", type=int, nargs="+", default=[3, 32, 32],
                   help="[channels, height, width], or [length] of token ids with --transformer")
    p.add_argument("--transformer", type=json.loads, default=None,
                   help="the engine config's transformer section as JSON (vocab, hidden, ...)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    blas = blas_in_use(a.threads)
    torch.manual_seed(0)
    model = peer_models.build(a.model, a.shape, a.classes, a.transformer)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    # The same pool of 256 distinct samples the engine's synthetic data set uses.
    if a.transformer:
        pool = torch.randint(a.transformer["vocab"], (256, *a.shape))
    else:
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
                      "threads": torch.get_num_threads(), "blas": blas,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()

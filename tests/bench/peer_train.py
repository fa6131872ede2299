"""PyTorch's Python eager training loop on synthetic data: the peer that the
engine's throughput is measured against, on the CPU or a GPU, in fp32 or
under torch.autocast (bf16, fp16). Prints one JSON line per precision."""
import argparse
import contextlib
import ctypes
import json
import time

import torch
import torch.nn.functional as F

import peer_models

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


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


def train(a, precision):
    """One timed run: samples/s over the steps after the first `warmup`."""
    device = torch.device(a.device)
    torch.manual_seed(0)
    model = peer_models.build(a.model, a.shape, a.classes, a.transformer).to(device)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    # The same pool of 256 distinct samples the engine's synthetic data set
    # uses, kept on the host: each batch is copied to the device, as the
    # engine's loader does.
    if a.transformer:
        pool = torch.randint(a.transformer["vocab"], (256, *a.shape))
    else:
        pool = torch.randn(256, *a.shape)
    labels = torch.randint(a.classes, (a.batch_size * a.steps,))
    autocast = (torch.autocast(device.type, dtype=DTYPES[precision]) if precision != "fp32"
                else contextlib.nullcontext())
    model.train()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    sync()
    start = timed_from = time.perf_counter()
    for step in range(a.steps):
        if step == a.warmup:
            sync()
            timed_from = time.perf_counter()
        idx = torch.arange(step * a.batch_size, (step + 1) * a.batch_size)
        x, y = pool[idx % 256].to(device, non_blocking=True), labels[idx].to(device, non_blocking=True)
        if a.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        with autocast:
            logits = model(x)
        # The loss in float32, as the engine computes it.
        loss = F.cross_entropy(logits.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    sync()
    end = time.perf_counter()
    timed_steps = a.steps - min(a.warmup, a.steps)
    return {"precision": precision, "device": a.device,
            "samples_per_s": a.batch_size * timed_steps / (end - timed_from),
            "elapsed_s": end - start, "timed_steps": timed_steps,
            "parameters": sum(t.numel() for t in model.parameters()),
            "threads": torch.get_num_threads(), "torch": torch.__version__}


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
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--precision", nargs="+", default=["fp32"], choices=sorted(DTYPES),
                   help="one timed run each, in this process; one JSON line each")
    p.add_argument("--warmup", type=int, default=0,
                   help="steps before the timed ones (0: every step is timed, the first included)")
    p.add_argument("--channels-last", action="store_true", help="NHWC weights and images")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    blas = blas_in_use(a.threads)
    for precision in a.precision:
        result = train(a, precision)
        result["blas"] = blas
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

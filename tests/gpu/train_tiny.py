#!/usr/bin/env python3
"""A small, unmodified PyTorch training run for the real-GPU check of libchameleon.so.

Nothing here knows about Chameleon: run_gpu_check.sh runs it with and without
LD_PRELOAD=libchameleon.so under each PyTorch allocator mode and compares the output.
Deterministic: fixed seeds, deterministic algorithms, no dropout, CPU-generated data.
Prints one `step <i> loss <float.hex()>` line per step (exact bits), a `checksum` of the final
parameters, `steps_per_s` (steps after the warm-up) and `peak_bytes`.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10, help="steps excluded from timing")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()

    if not torch.cuda.is_available():
        print("error: CUDA is not available", file=sys.stderr)
        return 2
    if "CUBLAS_WORKSPACE_CONFIG" not in os.environ:
        print("error: set CUBLAS_WORKSPACE_CONFIG=:4096:8 for deterministic cuBLAS", file=sys.stderr)
        return 2
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)

    device = torch.device("cuda")
    layer = nn.TransformerEncoderLayer(args.dim, nhead=4, dim_feedforward=4 * args.dim,
                                       dropout=0.0, batch_first=True)
    embed = nn.Embedding(args.vocab, args.dim)
    encoder = nn.TransformerEncoder(layer, args.layers, enable_nested_tensor=False)
    head = nn.Linear(args.dim, args.vocab)
    model = nn.ModuleDict({"embed": embed, "encoder": encoder, "head": head}).to(device)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=False)
    loss_fn = nn.CrossEntropyLoss()
    data = torch.Generator().manual_seed(args.seed + 1)

    start = None
    for step in range(args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=data)
        x = tokens[:, :-1].to(device)
        y = tokens[:, 1:].to(device)
        logits = model["head"](model["encoder"](model["embed"](x)))
        loss = loss_fn(logits.reshape(-1, args.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item().hex()}", flush=True)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start if start is not None else float("nan")
    flat = torch.cat([p.detach().double().flatten() for p in params])
    print(f"checksum {flat.sum().item().hex()} {flat.abs().sum().item().hex()}")
    timed = args.steps - args.warmup
    print(f"steps_per_s {timed / elapsed:.4f}" if timed > 0 else "steps_per_s nan")
    print(f"peak_bytes {torch.cuda.max_memory_allocated()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

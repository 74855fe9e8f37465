# PyTorch 1.13 DDP (gloo, CPU) peer of `train` for scripts/bench/trainer_vs_pytorch.sh: the same
# MLP (Linear-ReLU-...-Linear), cross-entropy, SGD with momentum, per-rank batch, DistributedSampler
# and steps, reading the same shard files (numpy memmap of the ddp-shards format). Batches are
# gathered by index slicing (no per-sample DataLoader overhead), as `train` does.
# Prints one JSON line from rank 0: {"samples_per_s": ..., "loss": ..., "steps": ..., "world_size": ...}
# timed from step WARMUP to the end.
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from ddp_shards import load_shards, mlp  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--hidden", default="512,512")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=20)
    a = p.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y, classes = load_shards(a.data)
    widths = [x.shape[1]] + [int(h) for h in a.hidden.split(",") if h] + [classes]
    model = DDP(mlp(widths))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    sampler = DistributedSampler(range(len(x)), num_replicas=world, rank=rank, seed=0)
    step, epoch, start, loss = 0, 0, None, None
    while step < a.steps:
        sampler.set_epoch(epoch)
        ids = torch.tensor(list(iter(sampler)))
        for i in range(0, len(ids), a.batch_size):
            if step == a.warmup:
                start = time.perf_counter()
            b = ids[i:i + a.batch_size]
            loss = loss_fn(model(x[b]), y[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step >= a.steps:
                break
        epoch += 1
    elapsed = time.perf_counter() - start
    if rank == 0:
        sps = (a.steps - a.warmup) * a.batch_size * world / elapsed
        print(json.dumps({"samples_per_s": sps, "loss": float(loss), "steps": a.steps,
                          "world_size": world}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

# PyTorch 2.x DDP (nccl, CUDA) peer of `train` for scripts/gpu_check.sh: the same MLP
# (Linear-ReLU-...-Linear), cross-entropy, SGD with momentum 0.9, per-rank batch, DistributedSampler
# and steps, reading the same ddp-shards files (numpy memmap), the whole dataset on the GPU.
# For each mode in --modes (fp32, bf16 = torch.autocast bf16) it trains a fresh model and rank 0
# prints one JSON line: {"mode", "samples_per_s", "loss", "steps", "world_size"}, timed from step
# WARMUP to the end (after torch.cuda.synchronize()).
# usage: torchrun --standalone --nproc_per_node=N gpu_torch_ddp.py --data DIR [--hidden 1024,1024]
#        [--batch-size 1024] [--steps 500] [--warmup 20] [--lr 0.05] [--modes fp32,bf16]
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler

from ddp_shards import load_shards, mlp  # beside this script (repo scripts/ or the bundle)


def load(data_dir, device):
    x, y, classes = load_shards(data_dir)
    return x.to(device), y.to(device), classes


def build(widths, device):
    return DDP(mlp(widths).to(device), device_ids=[device.index])


def train(a, mode, x, y, widths, device, rank, world):
    model = build(widths, device)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    sampler = DistributedSampler(range(len(x)), num_replicas=world, rank=rank, seed=0)
    step, epoch, start, loss = 0, 0, None, None
    while step < a.steps:
        sampler.set_epoch(epoch)
        ids = torch.tensor(list(iter(sampler)), device=device)
        for i in range(0, len(ids), a.batch_size):
            if step == a.warmup:
                torch.cuda.synchronize()
                start = time.perf_counter()
            b = ids[i:i + a.batch_size]
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(mode == "bf16")):
                loss = loss_fn(model(x[b]), y[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step >= a.steps:
                break
        epoch += 1
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if rank == 0:
        sps = (a.steps - a.warmup) * a.batch_size * world / elapsed
        print(json.dumps({"mode": mode, "samples_per_s": sps, "loss": float(loss),
                          "steps": a.steps, "world_size": world}), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--hidden", default="1024,1024")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--modes", default="fp32")
    a = p.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    dist.init_process_group("nccl", device_id=device)
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y, classes = load(a.data, device)
    widths = [x.shape[1]] + [int(h) for h in a.hidden.split(",") if h] + [classes]
    for mode in a.modes.split(","):
        train(a, mode, x, y, widths, device, rank, world)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

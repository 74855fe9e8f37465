# PyTorch 1.13 DDP (gloo, CPU) peer of `train` for scripts/bench/recovery.sh: the recipe torchrun
# users follow for fault tolerance. Rank 0 checkpoints every N steps (torch.save to a temp file,
# then rename); on every start each rank resumes from the checkpoint if there is one, so a
# restarted job redoes the steps since the last checkpoint. The same MLP (Linear-ReLU-...-Linear),
# data (ddp-shards via numpy memmap), per-rank batch and DistributedSampler as `train`.
#
# Rank 0 appends one JSON line per completed step to --progress:
#   {"step": N, "time": <unix s>, "generation": TORCHELASTIC_RESTART_COUNT, "world_size": W}
# written before that step's checkpoint (as `train` orders its metrics and checkpoints).
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


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--hidden", default="512,512")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--max-steps", type=int, default=0, help="0: no limit")
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--progress", required=True)
    return p.parse_args()


def save(path, model, opt, step):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
    os.replace(tmp, path)


def main():
    a = parse()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y, classes = load_shards(a.data)
    widths = [x.shape[1]] + [int(h) for h in a.hidden.split(",") if h] + [classes]
    net = mlp(widths)
    opt = torch.optim.AdamW(net.parameters(), lr=a.lr)
    ckpt = os.path.join(a.checkpoint_dir, "checkpoint.pt")
    step = 0
    if os.path.exists(ckpt):  # every rank reads the same file: all start from the same state
        state = torch.load(ckpt)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
    model = DDP(net)
    loss_fn = torch.nn.CrossEntropyLoss()
    sampler = DistributedSampler(range(len(x)), num_replicas=world, rank=rank, seed=0)
    per_epoch = (len(sampler) + a.batch_size - 1) // a.batch_size
    progress = open(a.progress, "a") if rank == 0 else None
    generation = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    epoch, skip = divmod(step, per_epoch)
    while a.max_steps == 0 or step < a.max_steps:
        sampler.set_epoch(epoch)
        ids = torch.tensor(list(iter(sampler)))
        for i in range(skip * a.batch_size, len(ids), a.batch_size):
            b = ids[i:i + a.batch_size]
            loss = loss_fn(model(x[b]), y[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if progress:
                progress.write(json.dumps({"step": step, "time": time.time(), "generation": generation,
                                           "world_size": world}) + "\n")
                progress.flush()
                if step % a.checkpoint_every == 0:
                    save(ckpt, model, opt, step)
            if a.max_steps and step >= a.max_steps:
                break
        epoch, skip = epoch + 1, 0
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

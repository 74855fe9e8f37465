# The PyTorch 1.13 DDP (gloo, CPU) script of scripts/bench/recovery.sh, the same under every
# launcher: torchrun, ddprun's full restart (--restart-scope=all) and ddprun in place
# (--restart-scope=failed). It uses ddprun.torch (worker_runtime/python), which under torchrun or
# without a quorum board is plain torch.distributed, and keeps the recipe torchrun users follow for
# fault tolerance: rank 0 checkpoints every N steps (torch.save to a temp file, then rename); on every
# start each rank resumes from the checkpoint if there is one, so a restarted job redoes the steps
# since the last checkpoint. In place, a failed rank is replaced and takes the state from a peer
# (the checkpoint plays no part). The same MLP (Linear-ReLU-...-Linear), data (ddp-shards via numpy
# memmap) and per-rank batch as `train`; ddprun.torch's DistributedSampler (torch's order).
#
# Rank 0 appends one JSON line per committed step to --progress:
#   {"step": N, "time": <unix s>, "generation": TORCHELASTIC_RESTART_COUNT, "world_size": W}
# written before that step's checkpoint (as `train` orders its metrics and checkpoints). A step is
# committed once g.steps() moves past it (in place, a step whose collectives failed is not: it
# comes again), so each line is written as the next step begins.
import argparse
import itertools
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from ddp_shards import load_shards, mlp  # noqa: E402


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--hidden", default="512,512")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--max-steps", type=int, default=1 << 40)
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--progress", required=True)
    return p.parse_args()


def save(path, net, opt, sampler, step):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "sampler": sampler.state_dict(),
                "step": step}, tmp)
    os.replace(tmp, path)


def main():
    a = parse()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    # Everything that does not depend on the rank comes before init_process_group: a ddprun
    # standby process does it ahead of a failure, then waits there for a rank.
    x, y, classes = load_shards(a.data)
    widths = [x.shape[1]] + [int(h) for h in a.hidden.split(",") if h] + [classes]
    net = mlp(widths)
    opt = torch.optim.AdamW(net.parameters(), lr=a.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    ckpt = os.path.join(a.checkpoint_dir, "checkpoint.pt")
    state = torch.load(ckpt) if os.path.exists(ckpt) else None  # every rank reads the same file
    if state:
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])

    import ddprun.torch
    g = ddprun.torch.init_process_group("gloo")
    sampler = ddprun.torch.DistributedSampler(range(len(x)), seed=0, group=g)
    if state:
        sampler.load_state_dict(state["sampler"])
        g.step = state["step"]
    model = g.ddp(net)
    g.state(model=net, optimizer=opt)
    progress = open(a.progress, "a") if g.rank == 0 else None
    generation = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    reported = g.step

    def report():  # the steps committed since the last call (rank 0)
        nonlocal reported
        if progress and g.step > reported:
            reported = g.step
            progress.write(json.dumps({"step": reported, "time": time.time(),
                                       "generation": generation, "world_size": g.world_size}) + "\n")
            progress.flush()
            if reported % a.checkpoint_every == 0:
                save(ckpt, net, opt, sampler, reported)

    batches = iter(sampler)
    for _ in g.steps(a.max_steps):
        report()
        b = list(itertools.islice(batches, a.batch_size))
        if not b:  # the epoch is over
            sampler.set_epoch(sampler.epoch + 1)
            batches = iter(sampler)
            b = list(itertools.islice(batches, a.batch_size))
        b = torch.tensor(b)
        loss = loss_fn(model(x[b]), y[b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    report()


if __name__ == "__main__":
    main()

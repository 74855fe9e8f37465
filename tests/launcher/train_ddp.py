# A PyTorch DDP training script in the shape of seed 001's train_ddp.py, on CPU with Gloo:
# DistributedSampler (set_epoch), gradient accumulation with no_sync(), rank-0 checkpoint (atomic),
# resume from the checkpoint after a restart. Run by tests/launcher/torch_ddp_test.sh via ddprun,
# and by the README's usage examples.
#
#   train_ddp.py [OUT_DIR] [--epochs N] [--crash-rank R --crash-attempt A --crash-epoch E]
#
# OUT_DIR (checkpoint.pt, result.json) defaults to $TMPDIR/train_ddp_<TORCHELASTIC_RUN_ID>: the
# same folder for every rank and every restart of one job.
import argparse
import contextlib
import json
import os
import tempfile

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


@record
def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--crash-rank", type=int, default=-1)
    parser.add_argument("--crash-attempt", type=int, default=0)
    parser.add_argument("--crash-epoch", type=int, default=1)
    args = parser.parse_args()

    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if args.out is None:
        args.out = os.path.join(tempfile.gettempdir(),
                                "train_ddp_" + os.environ.get("TORCHELASTIC_RUN_ID", "none"))
    os.makedirs(args.out, exist_ok=True)
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    g = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(1024, 32, generator=g), torch.randint(0, 4, (1024,), generator=g))
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    accum_steps = 4

    ckpt = os.path.join(args.out, "checkpoint.pt")
    start_epoch = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1

    loss = torch.tensor(float("nan"))  # stays so when the checkpoint says every epoch is done
    for epoch in range(start_epoch, args.epochs):
        if rank == args.crash_rank and attempt == args.crash_attempt and epoch == args.crash_epoch:
            raise RuntimeError(f"injected crash on rank {rank} at epoch {epoch}, attempt {attempt}")
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            sync = (step + 1) % accum_steps == 0 or step + 1 == len(loader)
            with contextlib.nullcontext() if sync else model.no_sync():
                loss = loss_fn(model(x), y) / accum_steps
                loss.backward()
            if sync:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        if rank == 0:
            tmp = ckpt + ".tmp"
            torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": epoch}, tmp)
            os.replace(tmp, ckpt)
        dist.barrier()

    # Every rank must hold the same parameters after DDP.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    consistent = all(torch.equal(gathered[0], t) for t in gathered)
    if rank == 0:
        with open(os.path.join(args.out, "result.json"), "w") as f:
            json.dump({"world": world, "attempt": attempt, "start_epoch": start_epoch,
                       "consistent": consistent, "loss": float(loss)}, f)
        print("checkpoint and result.json in %s" % args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

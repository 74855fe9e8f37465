"""A torchrun DDP script using ddprun.torch, for torch_in_place_test.py (CPU, Gloo).

  torch_in_place_worker.py --out DIR [--steps N] [--samples N] [--batch B] [--mode MODE] [--wide W]

An MLP trained with AdamW and a StepLR on synthetic data through ddprun.torch's
DistributedSampler and a DataLoader. Each process appends, unbuffered (a SIGKILL loses nothing
written), to DIR/steps.<pid>.log one line per step body it enters:

  <generation> <quorum> <step> <epoch> <world> <rank> <pid> <index,index,...>

and at the end writes DIR/final.<rank>: "pid P step S params CRC32 optim CRC32". The CRCs cover
the parameters' and the optimizer state's bytes, so two runs with the same CRCs ended with the same
bits. Without a ddprun quorum board (torchrun, --restart-scope=all) `quorum` is -1.

MODE (bad input): train (default); nothing (registers nothing); no_state_dict (registers an object
without state_dict); steps_twice; nccl (a backend this CPU box cannot build); plain (no ddprun.torch:
torch.distributed and DDP by hand, as under torchrun).

Faults the test arms through the environment (never in a run it compares against):
  TIP_CRASH_MARKER=path  a replacement (DDP_STATE_FROM_PEER=1) exits 7 before init_process_group,
                         once (it creates `path`)
  TIP_DONOR_ARM=path     while `path` exists, the next donor to send its state claims it (renames
                         it away), appends its pid to DIR/donor.log after sending the header to its
                         first receiver and waits there (the test SIGKILLs it mid-transfer)

Each process also appends "<pid> build|built|close <generation.quorum>" to DIR/trace.log when it
starts and ends building a quorum's process group and when it drops one (how the test sees a rank
let go of a collective), and dumps its threads' stacks on SIGUSR1.
"""
import argparse
import faulthandler
import os
import signal
import sys
import time
import zlib

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--steps", type=int, default=200)
p.add_argument("--samples", type=int, default=2048)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--mode", default="train")
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--wide", type=int, default=0)
a = p.parse_args()

faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's view of a hang

if os.environ.get("DDP_STATE_FROM_PEER") == "1" and os.environ.get("TIP_CRASH_MARKER"):
    marker = os.environ["TIP_CRASH_MARKER"]
    if not os.path.exists(marker):
        open(marker, "w").close()
        sys.stderr.write("torch_in_place_worker: crashing at start (TIP_CRASH_MARKER)\n")
        sys.exit(7)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
# BatchNorm: a forward changes its running statistics, which a failed step must put back.
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU(),
                          torch.nn.Linear(64, 4))
if a.wide:
    # A W x W layer more: gradients of megabytes, whose messages a kill cuts in the middle. No
    # BatchNorm: after a recovery whose donor is not rank 0, rank 0 holds the donor's running
    # statistics (each rank's are its own last batch's), which a short job does not forget.
    net = torch.nn.Sequential(torch.nn.Linear(32, a.wide), torch.nn.ReLU(),
                              torch.nn.Linear(a.wide, a.wide), torch.nn.ReLU(),
                              torch.nn.Linear(a.wide, 4))
opt = torch.optim.AdamW(net.parameters(), lr=2e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, 40, 0.5)
gen = torch.Generator()
gen.manual_seed(1)
X = torch.randn(a.samples, 32, generator=gen)
Y = torch.randint(0, 4, (a.samples,), generator=gen)
loss_fn = torch.nn.CrossEntropyLoss()
log_fd = os.open(os.path.join(a.out, "steps.%d.log" % os.getpid()),
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def crcs(module, optimizer):
    params = zlib.crc32(b"".join(t.detach().numpy().tobytes()  # parameters and buffers
                                 for t in module.state_dict().values()))
    optim = zlib.crc32(b"".join(v.numpy().tobytes() for s in optimizer.state_dict()["state"].values()
                                for v in s.values() if torch.is_tensor(v)))
    return params, optim


def finish(rank, step):
    # Each rank's BatchNorm statistics are its own last batch's (DDP broadcasts rank 0's at the
    # start of a forward): take rank 0's, deterministic with and without faults.
    for buf in net.buffers():
        dist.broadcast(buf, 0)
    params, optim = crcs(net, opt)
    with open(os.path.join(a.out, "final.%d" % rank), "w") as f:
        f.write("pid %d step %d params %08x optim %08x\n" % (os.getpid(), step, params, optim))
    print("rank %d pid %d done step %d params %08x optim %08x" % (rank, os.getpid(), step, params,
                                                                  optim), flush=True)


def plain():
    """torchrun's way, no ddprun.torch: a kill restarts every worker (from step 0, no checkpoint)."""
    dist.init_process_group("gloo")
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data.distributed import DistributedSampler
    model = DistributedDataParallel(net)
    sampler = DistributedSampler(range(a.samples), seed=0)
    loader = torch.utils.data.DataLoader(sampler.dataset, batch_size=a.batch, sampler=sampler)
    it, epoch, rank, world = None, 0, dist.get_rank(), dist.get_world_size()
    for step in range(1, a.steps + 1):
        try:
            b = next(it)
        except (StopIteration, TypeError):
            epoch += it is not None
            sampler.set_epoch(epoch)
            it = iter(loader)
            b = next(it)
        os.write(log_fd, b"%d -1 %d %d %d %d %d %s\n" % (
            int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")), step, epoch, world, rank,
            os.getpid(), ",".join(map(str, b.tolist())).encode()))
        loss = loss_fn(model(X[b]), Y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if a.sleep:
            time.sleep(a.sleep)
    finish(rank, a.steps)


def instrument():
    """The test's probes into ddprun.torch (armed by environment variables only)."""
    from ddprun.torch import _group, _state
    build, close = _group.Group._build, _group.Group._close_group

    def trace(event, qid):
        with open(os.path.join(a.out, "trace.log"), "a") as f:
            f.write("%d %s %s\n" % (os.getpid(), event, "%d.%d" % qid if qid else "-"))

    def traced_build(self, rec, *args, **kwargs):
        trace("build", rec.id)
        build(self, rec, *args, **kwargs)
        trace("built", rec.id)

    def traced_close(self):
        trace("close", self._phase_id)
        return close(self)
    _group.Group._build, _group.Group._close_group = traced_build, traced_close
    arm = os.environ.get("TIP_DONOR_ARM")
    if arm:
        send = dist.send

        def paused_send(tensor, dst, *args, **kwargs):
            result = send(tensor, dst, *args, **kwargs)
            # The donor sends the header (sizes and skeleton), then the state: stop between the two.
            claimed = "%s.%d" % (arm, os.getpid())
            if tensor.dtype == torch.uint8 and tensor.numel() == _state.HEADER_BYTES:
                try:
                    os.rename(arm, claimed)
                except OSError:
                    return result
                with open(os.path.join(a.out, "donor.log"), "a") as f:
                    f.write("%d\n" % os.getpid())
                deadline = time.monotonic() + 120  # the test kills it long before
                while time.monotonic() < deadline:
                    time.sleep(0.05)
            return result
        dist.send = paused_send


def main():
    if a.mode == "plain":
        return plain()
    import ddprun.torch
    instrument()
    g = ddprun.torch.init_process_group("nccl" if a.mode == "nccl" else "gloo")
    if a.mode == "nothing":  # a sampler given the group registers itself: not this one
        sampler = ddprun.torch.DistributedSampler(range(a.samples), g.world_size, g.rank, seed=0)
    else:
        sampler = ddprun.torch.DistributedSampler(range(a.samples), seed=0, group=g)
    loader = torch.utils.data.DataLoader(sampler.dataset, batch_size=a.batch, sampler=sampler)
    model = g.ddp(net, find_unused_parameters=True) if a.mode == "find_unused" else g.ddp(net)
    if a.mode == "no_state_dict":
        g.state(model=net, optimizer=opt, counter=object())
    elif a.mode not in ("nothing", "sampler_only"):  # sampler_only: the sampler registered itself
        g.state(model=net, optimizer=opt, scheduler=sched)
    if a.mode == "steps_twice":
        g.steps(a.steps)
    batches = None
    for step in g.steps(a.steps):
        if batches is None:  # after g.steps() refused a script that registered nothing
            batches = g.batches(loader)
        b = next(batches)
        q = g.quorum or (int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")), -1)
        os.write(log_fd, b"%d %d %d %d %d %d %d %s\n" % (
            q[0], q[1], step, sampler.epoch, g.world_size, g.rank, os.getpid(),
            ",".join(map(str, b.tolist())).encode()))
        loss = loss_fn(model(X[b]), Y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if a.sleep:
            time.sleep(a.sleep)
    finish(g.rank, g.step)


main()

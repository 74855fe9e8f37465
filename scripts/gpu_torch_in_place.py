"""A PyTorch DDP script on ddprun.torch, for gpu_check.sh's in-place rows (docs/python.md).

  gpu_torch_in_place.py --out DIR [--backend gloo|nccl] [--steps N] [--timeout S]

An MLP trained with AdamW on synthetic data; each rank takes the batch of its rank and step (the
world size does not change in the check, so no sampler is needed). gloo runs on the CPU, nccl on
the GPU of the local rank. Each process appends, unbuffered (a SIGKILL loses nothing written), one
line per step body it enters to DIR/steps.<pid>.log:

  <step> <rank> <world> <pid>

and at the end writes DIR/final.<rank>: "pid P step S params CRC32 optim CRC32" (CRC32 of the
parameters' and the optimizer state's bytes: two runs with equal CRCs ended with the same bits)."""
import argparse
import datetime
import os
import zlib

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
p.add_argument("--steps", type=int, default=400)
p.add_argument("--timeout", type=float, default=120.0, help="the process group's timeout, s")
a = p.parse_args()

import torch  # noqa: E402

import ddprun.torch  # noqa: E402

FEATURES, CLASSES, SAMPLES, BATCH = 32, 4, 4096, 32

# Everything that does not depend on the rank comes before init (a standby does it ahead of time).
torch.manual_seed(0)
torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Linear(64, CLASSES))
gen = torch.Generator()
gen.manual_seed(1)
X = torch.randn(SAMPLES, FEATURES, generator=gen)
Y = torch.randint(0, CLASSES, (SAMPLES,), generator=gen)

g = ddprun.torch.init_process_group(a.backend, timeout=datetime.timedelta(seconds=a.timeout))
device = torch.device("cuda", g.local_rank) if a.backend == "nccl" else torch.device("cpu")
net.to(device)  # the same Parameter objects: the optimizer below sees the device's tensors
X, Y = X.to(device), Y.to(device)
opt = torch.optim.AdamW(net.parameters(), lr=2e-3)
loss_fn = torch.nn.CrossEntropyLoss()
model = g.ddp(net)
g.state(model=net, optimizer=opt)
log_fd = os.open(os.path.join(a.out, "steps.%d.log" % os.getpid()),
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

for step in g.steps(a.steps):
    os.write(log_fd, b"%d %d %d %d\n" % (step, g.rank, g.world_size, os.getpid()))
    first = ((step - 1) * g.world_size + g.rank) * BATCH
    idx = torch.arange(first, first + BATCH, device=device) % SAMPLES
    loss = loss_fn(model(X[idx]), Y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()

params = zlib.crc32(b"".join(t.detach().cpu().numpy().tobytes() for t in net.parameters()))
optim = zlib.crc32(b"".join(v.cpu().numpy().tobytes() for s in opt.state_dict()["state"].values()
                            for v in s.values() if torch.is_tensor(v)))
with open(os.path.join(a.out, "final.%d" % g.rank), "w") as f:
    f.write("pid %d step %d params %08x optim %08x\n" % (os.getpid(), g.step, params, optim))

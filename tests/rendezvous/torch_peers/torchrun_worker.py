"""Worker started by torchrun in torch_torchrun_test.py: a gloo all_reduce over the world."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=90))
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
assert t.item() == world * (world + 1) / 2, t.item()
print("WORKER RANK %d WORLD %d SUM %d RESTART %s" % (rank, world, int(t.item()),
                                                     os.environ.get("TORCHELASTIC_RESTART_COUNT")),
      flush=True)
dist.destroy_process_group()

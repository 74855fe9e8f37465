# Prints torch 1.13 DistributedSampler index lists, one JSON line per case read from argv:
#   n,world,rank,seed,epoch,drop_last,shuffle  (drop_last/shuffle as 0/1)
import json
import sys

import torch
from torch.utils.data import DistributedSampler


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


for case in sys.argv[1:]:
    n, world, rank, seed, epoch, drop_last, shuffle = (int(v) for v in case.split(","))
    s = DistributedSampler(Sized(n), num_replicas=world, rank=rank, shuffle=bool(shuffle),
                           seed=seed, drop_last=bool(drop_last))
    s.set_epoch(epoch)
    print(json.dumps(list(iter(s))))

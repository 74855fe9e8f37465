"""DistributedSampler: torch.utils.data.DistributedSampler's order, resharded in place.

Without a group it is torch's sampler (same constructor, same indices, set_epoch). Given the group
(`group=g`, or registered with g.state(sampler=...)), its rank and world size are the current
quorum's, and it keeps its position: how many samples of the epoch the committed steps consumed
across all ranks. After a recovery the next index it hands out comes from that position, split over
the new world, so no sample of the epoch is skipped or repeated when the world size changes, and a
redone step gets the same batch again when it does not.

Global position p of an epoch goes to rank p % world, as in torch's sampler; a step in which each
rank drew b indices consumes b * world positions. The tail of an epoch is padded (or dropped, with
drop_last) per torch's rule, over what is left of the epoch.

Through g.batches(loader) a step consumes the samples of the batch it was handed; a loader iterated
by the script itself consumes the indices it drew, so it must draw exactly one step's batch per step
(num_workers=0: worker processes draw ahead), and after a recovery the script must take a new
iterator of the loader (g.batches() does both).

Thread safety: the training thread only."""
import math

import torch
from torch.utils.data import Sampler


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False, group=None):
        self.dataset = dataset
        self._size = len(dataset)
        self._fixed = (num_replicas, rank)
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self._consumed = 0  # positions of this epoch consumed by committed steps, all ranks
        self._drawn = 0     # indices this rank handed out since the last commit
        self._delivered = 0  # of those, the ones in batches g.batches() handed to the step
        self._counted_by = None  # the g.batches() that counts what a step consumed, if any
        self._order = None  # (epoch, permutation)
        self._group = None
        if group is not None:
            group._adopt_sampler(self)

    # The world it splits over: the group's current quorum, else torch's defaults.
    def _world(self):
        if self._group is not None:
            return self._group.world_size, self._group.rank
        replicas, rank = self._fixed
        if replicas is None or rank is None:
            import torch.distributed as dist
            if not dist.is_available() or not dist.is_initialized():
                raise RuntimeError("DistributedSampler: no group given and torch.distributed is not "
                                   "initialized (pass num_replicas and rank)")
            replicas = dist.get_world_size() if replicas is None else replicas
            rank = dist.get_rank() if rank is None else rank
        if not 0 <= rank < replicas:
            raise ValueError("DistributedSampler: rank %d outside [0, %d)" % (rank, replicas))
        return replicas, rank

    def _permutation(self):
        if self._order is None or self._order[0] != self.epoch:
            if self.shuffle:
                g = torch.Generator()
                g.manual_seed(self.seed + self.epoch)
                perm = torch.randperm(self._size, generator=g).tolist()
            else:
                perm = list(range(self._size))
            self._order = (self.epoch, perm)
        return self._order[1]

    def _remaining(self, world):
        """How many positions from _consumed on the epoch still has, padded or cut to the world."""
        left = max(0, self._size - self._consumed)
        if self.drop_last:
            return (left // world) * world
        return math.ceil(left / world) * world if left else 0

    def __iter__(self):
        self._drawn = 0
        while True:
            world, rank = self._world()
            offset = rank + self._drawn * world
            if offset >= self._remaining(world):
                return
            perm = self._permutation()
            left = self._size - self._consumed
            # Counted before the yield: a step that draws its batch and commits has drawn all of it
            # (the generator stays suspended at its last yield until the next step).
            self._drawn += 1
            yield perm[self._consumed + offset % left] if offset >= left else perm[self._consumed + offset]

    def __len__(self):
        world, _ = self._world()
        return self._remaining(world) // world

    def set_epoch(self, epoch):
        """Starts epoch `epoch` from its beginning (as torch's; call it before iterating)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self._consumed = 0
            self._drawn = self._delivered = 0

    # The group's hooks: a committed step consumed what this rank drew times the world; a failed
    # step consumed nothing (its batch comes again).
    def _rank_left(self):
        """Indices this rank has left in the epoch from the committed position, less those of the
        batches handed out since."""
        world, _ = self._world()
        return self._remaining(world) // world - self._delivered

    def _ddprun_commit(self, world):
        used = self._delivered if self._counted_by is not None else self._drawn
        self._consumed = min(self._size, self._consumed + used * world)
        # What a loader drew ahead of the batches handed out stays drawn, past the new position.
        self._drawn = max(0, self._drawn - used)
        self._delivered = 0

    def _ddprun_rewind(self):
        self._drawn = self._delivered = 0

    def state_dict(self):
        return {"epoch": self.epoch, "consumed": self._consumed, "seed": self.seed}

    def load_state_dict(self, state):
        self.epoch = int(state["epoch"])
        self._consumed = int(state["consumed"])
        self.seed = int(state["seed"])
        self._drawn = self._delivered = 0

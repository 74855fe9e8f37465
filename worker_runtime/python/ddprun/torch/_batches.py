"""Batches: what g.batches(loader) returns, the loader's batches step after step, across epochs and
recoveries (docs/python.md, "The data").

next() gives the next batch of the loader, whose sampler must be ddprun.torch.DistributedSampler
with group=g. When an epoch's batches run out it starts the next epoch (sampler.set_epoch(epoch +
1)) and goes on. After a recovery it leaves the loader's iterator it had (its batches may be the
failed step's, drawn ahead by worker processes, or of another world) and takes a new one at the
position the committed steps reached: a redone step gets its batch again, also an epoch's short
last batch, and no sample of the epoch is skipped or repeated when the world changed. It counts the
samples of the batches it handed out (not the indices the loader drew ahead), so a DataLoader with
worker processes keeps the position exact too.

Thread safety: the training thread."""
from ._errors import UsageError
from ._sampler import DistributedSampler


class Batches:
    def __init__(self, group, loader):
        sampler = getattr(loader, "sampler", None)
        if not isinstance(sampler, DistributedSampler):
            raise UsageError("g.batches(loader): the loader's sampler must be "
                             "ddprun.torch.DistributedSampler(dataset, ..., group=g), not %s"
                             % type(sampler).__name__)
        if sampler._group is not group and group.in_place:
            raise UsageError("g.batches(loader): the loader's DistributedSampler was made without "
                             "group=g")
        self._group, self._loader, self._sampler = group, loader, sampler
        self._batch_size = getattr(loader, "batch_size", None)
        self._it = None
        sampler._counted_by = self if self._batch_size else None
        group._on_rewind.append(self._rewind)

    def __iter__(self):
        return self

    def __next__(self):
        for _ in range(2):  # an epoch whose batches the committed steps used up: the next one
            if self._it is None:
                self._it = iter(self._loader)
            try:
                batch = next(self._it)
            except StopIteration:
                self._it = None
                self._sampler.set_epoch(self._sampler.epoch + 1)
                continue
            if self._batch_size:
                self._sampler._delivered += min(self._batch_size, self._sampler._rank_left())
            return batch
        raise UsageError("g.batches(loader): the loader gives no batch (an empty data set?)")

    def _rewind(self):
        self._it = None

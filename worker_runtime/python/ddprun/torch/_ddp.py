"""ElasticDDP: what g.ddp(module) returns, a DistributedDataParallel of the module that the group
builds again after each recovery, for the new process group.

Its collectives never raise into the loop body because a peer died: gradient buckets are reduced by
a communication hook that turns a failed allreduce into a failed step (the bucket keeps this rank's
own gradient, later buckets are not reduced at all, and the registered optimizer's step() does
nothing), and a forward whose collectives (bucket rebuild, buffer broadcast) fail runs the module
without DDP. Every other attribute is the current DDP's (module, parameters(), no_sync(), ...).

Thread safety: the training thread; the hook runs on autograd's threads and only sets the group's
failure (one assignment)."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def _bucket_buffer(bucket):
    buffer = getattr(bucket, "buffer", None)  # torch >= 1.10; get_tensor() before
    return buffer() if callable(buffer) else bucket.get_tensor()


def _done(tensor):
    fut = torch.futures.Future()
    fut.set_result(tensor)
    return fut


class ElasticDDP:
    def __init__(self, group, module, ddp_kwargs):
        for refused in ("process_group",):
            if refused in ddp_kwargs:
                raise ValueError("ddprun: g.ddp(..., %s=...): the group chooses it (the current "
                                 "quorum's)" % refused)
        self.__dict__.update(_group=group, _module=module, _kwargs=dict(ddp_kwargs), _ddp=None)

    # DDP is made once the state is agreed (g.steps() and every recovery), so that its first
    # broadcast from rank 0 carries the agreed parameters, not a replacement's fresh ones.
    def _rebuild(self):
        self._drop()
        ddp = DistributedDataParallel(self._module, **self._kwargs)
        ddp.register_comm_hook(self._group, _allreduce_or_fail)
        self.__dict__["_ddp"] = ddp

    def _drop(self):
        old = self.__dict__["_ddp"]
        self.__dict__["_ddp"] = None
        if old is not None:
            remove = getattr(old.reducer, "_remove_autograd_hooks", None)
            if callable(remove):
                remove()
            del old

    def __call__(self, *args, **kwargs):
        group = self._group
        ddp = self._ddp
        if ddp is None or group._failed is not None:
            return self._module(*args, **kwargs)
        try:
            return ddp(*args, **kwargs)
        except RuntimeError as e:
            if not dist.is_initialized():
                raise
            group._fail_step("DDP forward: %s" % (str(e).strip().splitlines() or ["?"])[0])
            return self._module(*args, **kwargs)

    def register_comm_hook(self, *args, **kwargs):
        raise RuntimeError("ddprun: g.ddp() reduces gradients with its own hook (a failed allreduce "
                           "fails the step instead of raising); a second hook is not supported")

    @property
    def module(self):
        return self._module

    def __getattr__(self, name):
        ddp = self.__dict__["_ddp"]
        return getattr(ddp if ddp is not None else self.__dict__["_module"], name)

    def __setattr__(self, name, value):
        setattr(self._ddp if self._ddp is not None else self._module, name, value)


def _allreduce_or_fail(group, bucket):
    buf = _bucket_buffer(bucket)
    if group._failed is not None:
        return _done(buf)
    world = group.world_size
    try:
        fut = dist.all_reduce(buf, async_op=True).get_future()
    except RuntimeError as e:
        group._fail_step("gradient allreduce: %s" % (str(e).strip().splitlines() or ["?"])[0])
        return _done(buf)

    def average(f):
        try:
            return f.value()[0].div_(world)
        except RuntimeError as e:
            group._fail_step("gradient allreduce: %s" % (str(e).strip().splitlines() or ["?"])[0])
            return buf
    return fut.then(average)

"""ElasticDDP: what g.ddp(module) returns, a DistributedDataParallel of the module that the group
builds again after each recovery, for the new process group.

Its collectives never raise into the loop body because a peer died: gradients are reduced by a
communication hook that turns a failed allreduce into a failed step (the buckets keep this rank's
own gradients and the registered optimizer's step() does nothing), and a forward whose collectives
(bucket rebuild, buffer broadcast) fail runs the module without DDP. The buffer broadcast goes
through the group's wait, which gives it up once its quorum is superseded. Every other attribute
is the current DDP's (module, parameters(), no_sync(), ...).

Thread safety: the training thread; the hook runs on autograd's threads and only sets the group's
failure (one assignment)."""
import contextlib
import inspect

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ._errors import UsageError


_HAS_INIT_SYNC = "init_sync" in inspect.signature(DistributedDataParallel.__init__).parameters


# What DDP's constructor does across the ranks when it has no init_sync (torch 1.x): a check that
# every rank's parameters have the same shapes, and a broadcast of rank 0's parameters and buffers.
_INIT_SYNC_STEPS = ("_verify_param_shape_across_processes", "_sync_module_states")


@contextlib.contextmanager
def _without_init_sync():
    """DDP's constructor without its collectives, as init_sync=False is on torch 2.x, for a module
    whose every tensor the group's agreement made equal on every rank (the ranks whose digest
    differed loaded the donor's state, and load_state_dict checked its shapes): two collectives
    fewer on a recovery's path, one of them a broadcast of the whole model. Where torch has
    init_sync or names these steps otherwise, DDP is built as it is. The training thread only."""
    from torch.nn.parallel import distributed as ddp_module
    found = {name: getattr(ddp_module, name) for name in _INIT_SYNC_STEPS
             if not _HAS_INIT_SYNC and callable(getattr(ddp_module, name, None))}
    if len(found) != len(_INIT_SYNC_STEPS):
        yield
        return
    for name in found:
        setattr(ddp_module, name, lambda *args, **kwargs: None)
    try:
        yield
    finally:
        for name, fn in found.items():
            setattr(ddp_module, name, fn)


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
                raise UsageError("g.ddp(..., %s=...): the group chooses it (the current "
                                 "quorum's)" % refused)
        if ddp_kwargs.get("find_unused_parameters"):
            # torch reduces its map of the parameters a step used outside the comm hook: a peer's
            # death would raise into loss.backward() and cost every rank its process.
            raise UsageError("g.ddp(..., find_unused_parameters=True) does not recover in place "
                             "(DDP reduces its used-parameter map outside the group's hook); "
                             "make every parameter take part in the loss, or run with "
                             "--restart-scope=all")
        self.__dict__.update(_group=group, _module=module, _kwargs=dict(ddp_kwargs), _ddp=None)

    # DDP is made once the state is agreed (g.steps() and every recovery): where DDP still
    # broadcasts from rank 0 (a module the agreement does not cover), it sends agreed parameters.
    def _rebuild(self):
        self._drop()
        kwargs = dict(self._kwargs)
        # The agreement made every rank's registered state equal: DDP's own check and broadcast
        # from rank 0 would only repeat it, unless the module holds tensors no registered module
        # holds (a replacement's fresh ones: rank 0's broadcast is all that makes them equal).
        agreed = self._group._holds_agreed(self._module)
        if _HAS_INIT_SYNC and agreed:
            kwargs.setdefault("init_sync", False)
        with _without_init_sync() if agreed else contextlib.nullcontext():
            ddp = DistributedDataParallel(self._module, **kwargs)
        ddp.register_comm_hook(_HookState(self._group, self._module), _reduce_in_parameter_order)
        if callable(getattr(ddp, "_distributed_broadcast_coalesced", None)):
            # The buffers DDP broadcasts from rank 0 before a forward (broadcast_buffers,
            # BatchNorm's statistics): through the group, which gives a broadcast up once its
            # quorum is superseded. DDP's own waits in C++ for as long as Gloo does, and torch
            # 1.13's Gloo never wakes a receive whose message a killed peer cut in the middle (a
            # survivor held every rank's next quorum for good). DDP still decides when; the bits
            # are rank 0's.
            group = self._group
            ddp._distributed_broadcast_coalesced = (
                lambda tensors, buffer_size, authoritative_rank=0:
                group._broadcast(list(tensors), authoritative_rank))
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
        raise UsageError("g.ddp() reduces gradients with its own hook (a failed allreduce "
                         "fails the step instead of raising); a second hook is not supported")

    @property
    def module(self):
        return self._module

    def __getattr__(self, name):
        ddp = self.__dict__["_ddp"]
        return getattr(ddp if ddp is not None else self.__dict__["_module"], name)

    def __setattr__(self, name, value):
        setattr(self._ddp if self._ddp is not None else self._module, name, value)


class _HookState:
    """One DDP's gradients, gathered bucket by bucket until the last one of the step."""

    def __init__(self, group, module):
        self.group = group
        self.index = {id(p): i for i, p in enumerate(module.parameters())}
        self.pending = []  # (future, bucket buffer, [(parameter index, view of the buffer)])


def _reduce_in_parameter_order(state, bucket):
    """DDP's comm hook. Reduces every gradient of the step at once, when the last bucket is ready,
    in the module's parameter order: the sum's order of operations then does not depend on how DDP
    cut the gradients into buckets (a new DDP after a recovery starts with another cut than the one
    DDP rebuilt after its first step, and Gloo's ring sums an element in an order that depends on
    its offset), so a redone step is bit-identical to the same step without the fault. A failed
    allreduce fails the step (the buckets keep this rank's gradients) instead of raising."""
    group = state.group
    buf = _bucket_buffer(bucket)
    fut = torch.futures.Future()
    params = bucket.parameters()
    views = buf.split([p.numel() for p in params]) if params else []
    state.pending.append((fut, buf, [(state.index[id(p)], v) for p, v in zip(params, views)]))
    if not bucket.is_last():
        return fut
    pending, state.pending = state.pending, []
    if group._failed is None:
        pieces = sorted((i, v) for _, _, entries in pending for i, v in entries)
        try:
            flat = torch.cat([v.reshape(-1) for _, v in pieces]) if len(pieces) > 1 else pieces[0][1].clone()
            group._wait(dist.all_reduce(flat, async_op=True))
            flat.div_(group.world_size)
            for (_, v), part in zip(pieces, flat.split([v.numel() for _, v in pieces])):
                v.copy_(part.view_as(v))
        except RuntimeError as e:
            group._fail_step("gradient allreduce: %s" % (str(e).strip().splitlines() or ["?"])[0])
    for f, b, _ in pending:
        f.set_result(b)
    return fut

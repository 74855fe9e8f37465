"""ddprun.torch: torchrun DDP scripts that keep running when a peer fails (docs/python.md).

    import ddprun.torch
    g = ddprun.torch.init_process_group("gloo")   # or "nccl"; a standby waits here for its rank
    model = g.ddp(net, **ddp_kwargs)              # a DDP that is rebuilt after each recovery
    g.state(model=net, optimizer=opt, scheduler=sched)
    for step in g.steps(total_steps):             # the loop body stays the script's own
        ...

Under torchrun (or ddprun without --restart-scope=failed) every call is plain torch.distributed."""
from ._group import Group
from ._errors import UsageError
from ._sampler import DistributedSampler

__all__ = ["init_process_group", "Group", "DistributedSampler", "UsageError"]


def init_process_group(backend="gloo", timeout=None):
    """Joins the job's process group and returns the Group. Under ddprun a standby process (the
    script started ahead of a failure, DDP_STANDBY) blocks here until its agent hands it a failed
    worker's rank: do the work that does not depend on the rank (import torch, build the model,
    optimizer and data) before this call. `timeout` (a datetime.timedelta, torch's default 30 min)
    bounds the process group's operations and a recovery's wait for a new quorum."""
    from .. import _standby
    import torch.distributed as dist
    if dist.is_initialized():
        raise UsageError("init_process_group: torch.distributed is initialized already; "
                         "call ddprun.torch.init_process_group instead of torch's")
    try:
        _standby.await_assignment()
    except _standby.StandbyError as e:
        raise UsageError("%s" % e)
    group = Group(backend, timeout)
    group._start()
    return group

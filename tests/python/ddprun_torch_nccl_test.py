"""ddprun.torch's NCCL code paths with the backend faked, on a machine without CUDA (issue 32, item 7),
with Debian's /usr/bin/python3 and torch 1.13. Each case fails when the feature it names is gone.

  ddprun_torch_nccl_test.py [backend|abort|device]

backend  _check_backend refuses nccl without a CUDA device with one line ("ddprun: ...", a
         SystemExit), and an unknown backend; with CUDA faked, nccl runs on the GPU of the local
         rank (modulo the devices seen), gloo and gloo+nccl mixes on the CPU
abort    _abort feature-detects torch's abort of an NCCL group: distributed_c10d's
         _abort_process_group (torch >= 2.2) first; else the CUDA backend's abort() (pg._get_backend),
         else the group's own _abort(); a group with none of them is left alone; the first that
         raises falls through to the next; nothing is aborted for gloo
device   with CUDA faked, Group._start() binds the process to the GPU of its local rank
         (torch.cuda.set_device), and in the recovery's agreement (_agree) every tensor a collective
         gets (all_gather, send, recv) is on that device, as a donor and as a receiver (the state
         still arrives)

Exit 0 when every check holds, 1 with the first failure otherwise."""
import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "worker_runtime", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from ddprun import _board  # noqa: E402
from ddprun.torch import UsageError, _group, _state  # noqa: E402

MISSING = object()


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


@contextlib.contextmanager
def patched(*triples):
    """Sets (obj, name, value) for the block (value MISSING: the attribute is removed), then
    restores every attribute as it was."""
    saved = [(obj, name, getattr(obj, name, MISSING)) for obj, name, _ in triples]
    try:
        for obj, name, value in triples:
            if value is MISSING:
                if hasattr(obj, name):
                    delattr(obj, name)
            else:
                setattr(obj, name, value)
        yield
    finally:
        for obj, name, value in reversed(saved):
            if value is MISSING:
                if hasattr(obj, name):
                    delattr(obj, name)
            else:
                setattr(obj, name, value)


def cuda(count):
    """torch.cuda faked: `count` devices (0: none)."""
    return [(torch.cuda, "is_available", lambda: count > 0),
            (torch.cuda, "device_count", lambda: count),
            (dist, "is_nccl_available", lambda: True)]


@contextlib.contextmanager
def env(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- backend ---------------------------------------------------------------------------------------
def refused(backend):
    """The UsageError _check_backend raises for `backend` (fails when it returns a device)."""
    try:
        device = _group._check_backend(backend)
    except UsageError as e:
        return str(e.code)
    raise Failure("_check_backend(%r) accepted it (device %s)" % (backend, device))


def backend():
    with patched(*cuda(0)):
        line = refused("nccl")
        check(line.startswith("ddprun: ") and "\n" not in line, "not one 'ddprun:' line: %r" % line)
        check("nccl" in line and "CUDA device" in line and "gloo" in line,
              "the line names neither the backend, the missing device nor the way out: %r" % line)
        check(issubclass(UsageError, SystemExit), "UsageError is no SystemExit (a traceback)")
        check("CUDA" in refused("gloo,cuda:nccl"), "a mix with nccl without CUDA accepted")
        check(_group._check_backend("gloo") == torch.device("cpu"), "gloo is not on the CPU")
    check("mpi" in refused("mpi"), "an unknown backend's line does not name it")
    with patched(*cuda(2)):
        for local, want in (("0", 0), ("1", 1), ("3", 1)):
            with env(LOCAL_RANK=local):
                got = _group._check_backend("nccl")
                check(got == torch.device("cuda", want), "nccl at LOCAL_RANK=%s with 2 GPUs: %s, "
                      "want cuda:%d" % (local, got, want))
        with env(LOCAL_RANK="1"):
            check(_group._check_backend("NCCL") == torch.device("cuda", 1), "'NCCL' not on the GPU")
            check(_group._check_backend("cpu:gloo,cuda:nccl") == torch.device("cpu"),
                  "a gloo+nccl mix does not run the recovery's tensors on the CPU")
    with patched(*cuda(2), (dist, "is_nccl_available", lambda: False)):
        check("without NCCL" in refused("nccl"), "a torch built without NCCL is not named")


# -- abort -----------------------------------------------------------------------------------------
class Recorder:
    """An object whose listed methods record their calls into `calls` (`fail`: they raise)."""

    def __init__(self, tag, calls, methods, fail=()):
        for name in methods:
            setattr(self, name, self._method(tag, name, calls, name in fail))

    @staticmethod
    def _method(tag, name, calls, fail):
        def method(*args):
            calls.append(("%s.%s" % (tag, name),) + args)
            if fail:
                raise RuntimeError("%s.%s failed" % (tag, name))
        return method


class FakeGroup(Recorder):
    """A process group: `methods` of its own; with `backend_methods`, _get_backend(device) gives a
    CUDA backend that has them."""

    def __init__(self, calls, methods=(), backend_methods=None, fail=()):
        super().__init__("pg", calls, methods, fail)
        if backend_methods is not None:
            backend = Recorder("backend", calls, backend_methods, fail)

            def get_backend(device):
                calls.append(("pg._get_backend", device))
                return backend
            self._get_backend = get_backend


def aborted(pg, calls, c10d_abort=MISSING, backend="nccl"):
    """The calls _abort(pg) made, with distributed_c10d's _abort_process_group as given."""
    err = io.StringIO()
    with patched((dist.distributed_c10d, "_abort_process_group", c10d_abort)), \
            contextlib.redirect_stderr(err):
        _group._abort(pg, backend)
    return [c[0] for c in calls], err.getvalue()


def abort():
    calls = []
    pg = FakeGroup(calls, ("abort", "_abort", "shutdown"), ("abort",))
    got, _ = aborted(pg, calls, lambda group: calls.append(("c10d._abort_process_group", group)))
    check(got == ["c10d._abort_process_group"] and calls[0][1] is pg,
          "torch's _abort_process_group(pg) not used when it exists: %s" % calls)

    calls = []
    pg = FakeGroup(calls, ("abort",), ("abort",))
    got, _ = aborted(pg, calls)
    check(got == ["pg._get_backend", "backend.abort"], "the CUDA backend's abort() not used: %s" % got)
    check(calls[0][1] == torch.device("cuda"), "_get_backend asked for %s, want cuda" % (calls[0][1],))

    calls = []
    pg = FakeGroup(calls, ("_abort",))
    got, _ = aborted(pg, calls)
    check(got == ["pg._abort"], "the group's _abort() not used when it has nothing else: %s" % got)

    calls = []
    got, err = aborted(FakeGroup(calls), calls)
    check(got == [] and err == "", "a group without any abort: calls %s, stderr %r" % (got, err))

    calls = []
    pg = FakeGroup(calls, ("abort",), ("abort",), fail=("abort",))
    got, err = aborted(pg, calls, Recorder("c10d", calls, ("_abort_process_group",),
                                           ("_abort_process_group",))._abort_process_group)
    check(got == ["c10d._abort_process_group", "pg._get_backend", "backend.abort", "pg.abort"],
          "an abort that raises does not fall through to the next one: %s" % got)
    check(err.count("\n") == 3 and "failed" in err, "each failed abort not logged on one line: %r"
          % err)

    calls = []
    pg = FakeGroup(calls, ("abort", "_abort"), ("abort",))
    got, _ = aborted(pg, calls, lambda group: calls.append(("c10d._abort_process_group", group)),
                     backend="gloo")
    check(got == [], "a gloo group was aborted: %s" % got)


# -- device ----------------------------------------------------------------------------------------
class FakeBoard:
    def __init__(self, path, slot):
        self.path, self.slot = path, slot

    def read(self):
        return None

    def epoch(self):
        return 0


def start_binds_device():
    bound = []
    with patched(*cuda(2), (torch.cuda, "set_device", bound.append),
                 (_group._board, "QuorumBoard", FakeBoard),
                 (_group.Group, "_join", lambda self, newer_than: None),
                 (_group.Group, "_watch", lambda self: None)), \
            env(DDP_QUORUM_BOARD="/nonexistent/board", DDP_QUORUM_SLOT="1", LOCAL_RANK="1"):
        g = _group.Group("nccl", None)
        g._start()
        g._watchdog.join(5)
    check(bound == [torch.device("cuda", 1)], "set_device calls %s, want [cuda:1]" % bound)
    check(g._device == torch.device("cuda", 1), "the group's device is %s, want cuda:1" % g._device)


class DeviceSpy:
    """What _group and _state see as torch, with the rank's GPU faked: a tensor factory asked for
    cuda:1 (or zeros_like of such a tensor, or Tensor.to(cuda:1)) builds on the CPU and marks the
    tensor as being on the GPU (`on_device`); `asked` keeps every device a factory was asked for."""

    def __init__(self):
        self.asked, self.on_device = [], []

    def __getattr__(self, name):
        return getattr(torch, name)

    def is_on_device(self, t):
        return any(t is x for x in self.on_device)

    def _make(self, name, args, kwargs):
        dev = kwargs.pop("device", None)
        self.asked.append((name, dev))
        t = getattr(torch, name)(*args, **kwargs)
        if dev == torch.device("cuda", 1):
            self.on_device.append(t)
        return t

    def tensor(self, *args, **kwargs):
        return self._make("tensor", args, kwargs)

    def zeros(self, *args, **kwargs):
        return self._make("zeros", args, kwargs)

    def empty(self, *args, **kwargs):
        return self._make("empty", args, kwargs)

    def zeros_like(self, t, **kwargs):
        out = torch.zeros_like(t, **kwargs)
        if self.is_on_device(t):
            self.on_device.append(out)
        return out

    def tensors_to(self):
        real, spy = torch.Tensor.to, self

        def to(t, *args, **kwargs):
            dev = args[0] if args else kwargs.get("device")
            if isinstance(dev, torch.device) and dev.type == "cuda":
                spy.asked.append(("Tensor.to", dev))
                if dev == torch.device("cuda", 1):
                    spy.on_device.append(t)
                return t
            return real(t, *args, **kwargs)
        return (torch.Tensor, "to", to)


class FakeDist:
    """_group's torch.distributed for _agree: all_gather answers the peers' rows; send records;
    recv answers from `inbox`. Every tensor a collective gets must be on the rank's device
    (`off_device` lists those that were not)."""

    def __init__(self, spy, rank, peers, inbox=()):
        self.spy, self.rank, self.peers, self.inbox = spy, rank, peers, list(inbox)
        self.sent, self.off_device = [], []

    def __getattr__(self, name):
        return getattr(dist, name)

    def _on_device(self, op, *tensors):
        self.off_device += [(op, tuple(t.shape)) for t in tensors if not self.spy.is_on_device(t)]

    def all_gather(self, rows, row, async_op=False):
        self._on_device("all_gather", row, *rows)
        for r, out in enumerate(rows):
            out.copy_(row if r == self.rank else torch.tensor(self.peers[r], dtype=torch.int64))
        return _DoneWork() if async_op else None

    def send(self, tensor, dst):
        self._on_device("send", tensor)
        self.sent.append((dst, tensor.clone()))

    def recv(self, tensor, src):
        self._on_device("recv", tensor)
        tensor.copy_(self.inbox.pop(0))


class _DoneWork:
    """What an async collective returns, done already."""

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True


def agreeing_group(rank, net, step, replaced=()):
    g = _group.Group("nccl", None)
    g._record = _board.QuorumRecord(generation=0, quorum=1, rank=rank, world_size=2, local_rank=1,
                                    local_world_size=2, group_rank=0, group_world_size=1,
                                    master_addr="127.0.0.1", master_port=1, replaced=list(replaced))
    g._device = torch.device("cuda", 1)
    g._first_agreement = False
    g._objects = {"model": net}
    g._step = step
    return g


def row_of(net, step, late=0):
    d = _state.digest(_state.snapshot({"model": net}, {"step": step}))
    return [step, int.from_bytes(d[:8], "little", signed=True),
            int.from_bytes(d[8:], "little", signed=True), late]


def agreeing(g, spy, fake):
    with patched((_group, "torch", spy), (_state, "torch", spy), (_group, "dist", fake),
                 spy.tensors_to()):
        g._agree()


def check_on_device(spy, fake, what):
    check(not fake.off_device, "%s: collectives got tensors off the rank's device cuda:1: %s"
          % (what, fake.off_device))
    off = [a for a in spy.asked if a[1] != torch.device("cuda", 1)]
    check(not off, "%s: tensors made off the rank's device cuda:1: %s" % (what, off))


def agree_on_device():
    torch.manual_seed(0)
    donor_net, fresh_net = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    # The donor (rank 0, step 7) sends to rank 1, a replacement.
    spy = DeviceSpy()
    fake = FakeDist(spy, 0, {1: [0, 0, 0, 1]})
    agreeing(agreeing_group(0, donor_net, 7), spy, fake)
    check(fake.sent and {d for d, _ in fake.sent} == {1}, "the donor sent to %s, want rank 1"
          % [d for d, _ in fake.sent])
    check_on_device(spy, fake, "donor")

    # The replacement (rank 1) receives it.
    spy = DeviceSpy()
    fake = FakeDist(spy, 1, {0: row_of(donor_net, 7)}, inbox=[t for _, t in fake.sent])
    g = agreeing_group(1, fresh_net, 0, replaced=[1])
    agreeing(g, spy, fake)
    check(not fake.inbox, "the receiver left %d of the donor's messages" % len(fake.inbox))
    check_on_device(spy, fake, "receiver")
    check(g._step == 7, "the receiver's step is %d after the agreement, want the donor's 7" % g._step)
    check(all(torch.equal(a, b) for a, b in zip(fresh_net.parameters(), donor_net.parameters())),
          "the receiver's parameters differ from the donor's after the agreement")


def device():
    start_binds_device()
    agree_on_device()


CASES = {"backend": backend, "abort": abort, "device": device}


def main():
    names = sys.argv[1:] or list(CASES)
    for name in names:
        try:
            CASES[name]()
        except Failure as e:
            print("FAIL %s: %s" % (name, e), flush=True)
            return 1
        except Exception as e:  # noqa: BLE001 (a path that breaks instead of refusing: a failure)
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
            return 1
        print("ok %s" % name, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

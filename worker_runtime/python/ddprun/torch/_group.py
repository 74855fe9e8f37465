"""The group a script gets from ddprun.torch.init_process_group(): torch's default process group
for the current quorum, rebuilt in place when a peer fails (docs/python.md; the C++ twin is
worker_runtime/elastic_group.hpp).

Under ddprun with --restart-scope=failed (DDP_QUORUM_BOARD is set) the group reads its membership
from the quorum board, announces that it recovers in place once it built its first process group,
and recovers from a failed step: it shuts its process group's connections down (peers blocked on it
fail at once too), destroys the group, waits for the agent's newer quorum, builds a default group
for it under a prefix of its own, agrees on the state with its peers (the lowest rank with the
highest step sends the registered state to every rank whose digest differs) and wraps the model in a
new DDP. The step that failed is yielded again. Without a board every call is plain
torch.distributed (torchrun, --restart-scope=all, env:// by hand).

Thread safety: the training thread calls everything; a watchdog thread of the group's own watches
the board (it shuts down the connections of a build or a collective that a newer quorum superseded)."""
import contextlib
import copy
import ctypes
import datetime
import functools
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

from .. import _board, _keys
from . import _loop_ticks, _sockets, _state
from ._ddp import ElasticDDP
from ._errors import UsageError

_WATCH_PERIOD_S = 0.005
_WAIT_SLICE = datetime.timedelta(milliseconds=100)  # a collective's wait, between looks (CPU)
# Process groups abandoned with a collective that never ends (Group._wait): never destroyed, in
# this process's life or at its exit, since their destructor would wait for that collective.
_ABANDONED = []
_FINISHED_POLL_S = 0.25
# The newest quorum's build failed and no newer quorum came this long after (a peer that dies
# makes its agent publish one within its back-off, at most 8 s): nothing will replace that quorum,
# and its peers wait in it for this rank. The process exits; its agent replaces it, which is the
# newer quorum everyone moves to (instead of a hang until the process group's timeout).
_FAILED_BUILD_GRACE_S = 10.0
_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)  # torch's default for a process group

_IDLE, _BUILDING, _RUNNING = "idle", "building", "running"


def _log(line):
    sys.stderr.write("[ddprun.torch] %s\n" % line)
    sys.stderr.flush()


def _fatal(line, code=3):
    """One line, then the exit: the agent restarts every worker (os._exit: a process group with a
    dead peer must not be waited for in interpreter teardown)."""
    _log(line)
    sys.stdout.flush()
    os._exit(code)


class Group:
    """What init_process_group returns. rank, world_size, local_rank: the current quorum's."""

    def __init__(self, backend, timeout):
        self._backend = backend
        self._timeout = timeout or _DEFAULT_TIMEOUT
        self._objects = {}           # name -> registered object (g.state)
        self._ddps = []              # ElasticDDP wrappers to rebuild after a recovery
        self._sampler = None
        self._sampler_adopted = False
        self._undo = []              # (restore, saved) of the running step: what a failure puts back
        self._on_rewind = []         # g.batches() iterators: a recovery drops their loader iterator
        self._step = 0
        self._failed = None          # why the running step failed (a line), or None
        self._steps_started = False
        self._first_agreement = True
        self._prepared = None        # _Prepared: this rank's state digest, made while it rebuilds
        self._record = None
        self._board = None
        self._announced = False
        self._control = None         # (generation, addr, port, TCPStore) for the /ddp/ keys
        self._lock = threading.Lock()
        # Guarded by _lock: what the watchdog looks at.
        self._phase = _IDLE
        self._phase_id = None        # the quorum being built or run
        self._pg_sockets = {}
        self._pg = None              # the current default group (the watchdog may abort it)
        self._unblocked = None       # (running quorum, newer quorum) the watchdog acted on
        self._abandoned = None       # the group of a collective _wait() gave up on
        self._build_before = {}
        self._stop = threading.Event()
        self._watchdog = None
        self._device = torch.device("cpu")  # where the recovery's own tensors live (NCCL: the GPU)
        self._built_epoch = None     # the board's epoch when the current quorum's record was read

    # --- what a script reads -------------------------------------------------------------------
    @property
    def rank(self):
        return self._record.rank if self._record else dist.get_rank()

    @property
    def world_size(self):
        return self._record.world_size if self._record else dist.get_world_size()

    @property
    def local_rank(self):
        return self._record.local_rank if self._record else int(os.environ.get("LOCAL_RANK", "0"))

    @property
    def step(self):
        """Steps committed so far (the one g.steps() yields next is step + 1). A script that resumes
        from its own checkpoint sets it before g.steps() (g.step = checkpoint["step"])."""
        return self._step

    @step.setter
    def step(self, value):
        if self._steps_started:
            raise UsageError("g.step set after g.steps() began; set it when you load a "
                             "checkpoint, before the loop")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError("g.step must be an int >= 0, not %r" % (value,))
        self._step = value

    @property
    def in_place(self):
        """True when failures are recovered in place (a quorum board was opened)."""
        return self._board is not None

    @property
    def quorum(self):
        """(generation, quorum) of the current membership; None without a board."""
        return self._record.id if self._record else None

    # --- setup ---------------------------------------------------------------------------------
    def _start(self):
        path = os.environ.get("DDP_QUORUM_BOARD", "")
        if path:
            slot = int(os.environ.get("DDP_QUORUM_SLOT", os.environ.get("LOCAL_RANK", "0")))
            try:
                self._board = _board.QuorumBoard(path, slot)
            except _board.BoardError as e:
                _log("%s; this worker does not recover in place (a failure restarts every worker)" % e)
        if self._board is None:
            dist.init_process_group(self._backend, timeout=self._timeout)
            return
        self._device = _check_backend(self._backend)
        if self._device.type == "cuda":
            torch.cuda.set_device(self._device)
        if "nccl" in str(self._backend).lower():
            # An NCCL error must fail the collective, not end the process (1, the torchrun
            # contract's default, tears it down): 2 aborts the communicator and raises in wait().
            for name in ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"):
                os.environ[name] = "2"
        self._watchdog = threading.Thread(target=self._watch, name="ddprun-watchdog", daemon=True)
        self._watchdog.start()
        try:
            self._join(newer_than=None)
        except _RecoveryFailed as e:
            _fatal(str(e))

    def ddp(self, module, **ddp_kwargs):
        """A DistributedDataParallel of `module` that is rebuilt after each recovery. Its
        collectives never raise into the loop body because a peer died: the step fails instead."""
        if self._board is None:
            from torch.nn.parallel import DistributedDataParallel
            return DistributedDataParallel(module, **ddp_kwargs)
        wrapper = ElasticDDP(self, module, ddp_kwargs)
        self._ddps.append(wrapper)
        return wrapper

    def batches(self, loader):
        """An endless iterator over `loader`'s batches, one per step: the next epoch starts when
        one ends, and after a recovery the batches resume where the committed steps left off (a
        redone step gets its batch again). The loader's sampler must be
        ddprun.torch.DistributedSampler(..., group=g)."""
        from ._batches import Batches
        return Batches(self, loader)

    def state(self, **objects):
        """Registers the training state: each value has state_dict() and load_state_dict() (a
        module, optimizer, scheduler, GradScaler, sampler). A step that failed changes none of it
        (their step() does nothing in it), and a recovery sends it to the ranks that differ."""
        if self._steps_started:
            raise UsageError("g.state() after g.steps() began: register the state first")
        for name, obj in objects.items():
            _state.check_registrable(name, obj)
            if name == "ddprun":
                raise UsageError("g.state(ddprun=...): that name is the group's own")
            self._objects[name] = obj
            if hasattr(obj, "_ddprun_commit"):
                self._sampler = obj
                obj._group = self if self._board is not None else obj._group
            elif callable(getattr(obj, "step", None)) and not isinstance(obj, torch.nn.Module):
                self._guard_step(obj)

    def _holds_agreed(self, module):
        """True when every parameter and buffer of `module` belongs to a registered module (so
        that the agreement makes it equal on every rank)."""
        registered = set()
        for obj in self._objects.values():
            if isinstance(obj, torch.nn.Module):
                registered.update(id(t) for t in obj.parameters())
                registered.update(id(t) for t in obj.buffers())
        return all(id(t) in registered for t in module.parameters()) and \
            all(id(t) in registered for t in module.buffers())

    def _adopt_sampler(self, sampler):
        self.state(sampler=sampler)
        self._sampler_adopted = True  # registered by the sampler itself: not the script's state
        if self._board is not None:
            sampler._group = self

    def _guard_step(self, obj):
        """obj.step() does nothing in a failed step. An optimizer gets an instance attribute (a
        scheduler already wraps its step that way); anything else (a scheduler, whose state_dict()
        is its __dict__) a subclass, so that its state holds no function."""
        group = self

        def guarded(original):
            @functools.wraps(original)  # keeps what torch marked on it (the scheduler's counter)
            def step(*args, **kwargs):
                if group._failed is not None:
                    return None  # a failed step commits nothing
                return original(*args, **kwargs)
            return step
        if isinstance(obj, torch.optim.Optimizer) or "step" in vars(obj):
            obj.step = guarded(obj.step)
            return
        cls = type(obj)
        method = cls.step
        obj.__class__ = type(cls.__name__, (cls,), {
            "step": lambda self, *a, **k: guarded(lambda *a2, **k2: method(self, *a2, **k2))(*a, **k),
            "__module__": cls.__module__, "__qualname__": cls.__qualname__})

    # --- the loop ------------------------------------------------------------------------------
    def steps(self, total_steps):
        """Yields step numbers start+1 .. total_steps (start: the steps already committed, as the
        state says). A step whose collectives failed is yielded again after the recovery."""
        if self._steps_started:
            raise UsageError("g.steps() was called twice; one loop per process")
        if not [n for n in self._objects if not (n == "sampler" and self._sampler_adopted)]:
            raise UsageError("g.steps() before g.state(...): register the model and "
                             "optimizer (anything with state_dict) so a recovery can restore them")
        self._steps_started = True
        if self._board is None:
            return self._plain_steps(total_steps)
        return self._elastic_steps(total_steps)

    def _plain_steps(self, total_steps):
        report = _progress()
        while self._step < total_steps:
            yield self._step + 1
            self._step += 1
            if self._sampler is not None:
                self._sampler._ddprun_commit(self.world_size)
            report(self._step)

    def _elastic_steps(self, total_steps):
        report = _progress()
        self._settle(self._establish)
        while self._step < total_steps:
            if self._board_moved():
                self._settle(self._recover, "the agent published a newer quorum")
            self._failed = None
            self._save_for_undo()
            yield self._step + 1
            if self._failed is None:
                self._step += 1
                if self._sampler is not None:
                    self._sampler._ddprun_commit(self.world_size)
                report(self._step)
            else:
                self._undo_step()
                self._settle(self._recover, self._failed)
        self._mark(_keys.finished, "rank %d of quorum %s" % (self.rank, _board.quorum_name(self.quorum)))

    def _settle(self, first, *args):
        """Runs `first`, then recovers until a recovery holds (each failure moves to a newer quorum)."""
        try:
            try:
                first(*args)
                return
            except _StepFailed as e:
                reason = str(e)
            while True:
                try:
                    self._recover(reason)
                    return
                except _StepFailed as e:
                    reason = str(e)
        except _RecoveryFailed as e:
            _fatal(str(e))

    def _save_for_undo(self):
        """What a step may change besides the parameters (the optimizer's step() does nothing in a
        failed step): every registered module's buffers (BatchNorm's running statistics, which a
        forward updates) and the state of every other registered object but optimizers and the
        sampler (a scheduler, a GradScaler: a failed step's update() is put back). Small next to
        the model; copied before every step."""
        undo = []
        for obj in self._objects.values():
            if isinstance(obj, torch.nn.Module):
                buffers = [b for b in obj.buffers()]
                if buffers:
                    undo.append((_restore_buffers, (buffers, [b.detach().clone() for b in buffers])))
            elif not isinstance(obj, torch.optim.Optimizer) and obj is not self._sampler:
                undo.append((obj.load_state_dict, copy.deepcopy(obj.state_dict())))
        self._undo = undo

    def _undo_step(self):
        for restore, saved in self._undo:
            restore(saved)
        self._undo = []

    def all_reduce(self, tensor, op=None):
        """dist.all_reduce for the loop body's own collectives (a metric to log): when a peer died
        it fails the step instead of raising, and leaves `tensor` as it was. Returns `tensor`.
        Outside the in-place mode it is dist.all_reduce."""
        op = dist.ReduceOp.SUM if op is None else op
        if self._board is None:
            dist.all_reduce(tensor, op=op)
            return tensor
        if self._failed is not None:
            return tensor
        before = tensor.detach().clone()
        try:
            self._wait(dist.all_reduce(tensor, op=op, async_op=True))
        except RuntimeError as e:
            tensor.detach().copy_(before)
            self._fail_step("all_reduce: %s" % _one_line(e))
        return tensor

    def _wait(self, work):
        """Waits for a collective of the current group (`work`: its async handle); raises what it
        raises. On the CPU it waits in slices, and gives a collective up (RuntimeError) once the
        watchdog shut its superseded group's connections down and it still runs: torch's Gloo does
        not wake a receive whose message was halfway on the wire when its connection ended (a peer
        killed or frozen mid-message, which a large model's gradients make likely), and would wait
        out the group's timeout. Such a group is never destroyed (_ABANDONED). Any thread."""
        if self._device.type != "cpu":
            work.wait()
            return
        while True:
            try:
                work.wait(_WAIT_SLICE)
                return
            except RuntimeError:
                if work.is_completed():  # it failed, or ended as the slice did
                    work.wait()  # its own outcome: returns, or raises what the collective raised
                    return
            with self._lock:  # the slice ended: shut down as superseded?
                if self._phase != _RUNNING or self._unblocked is None or \
                        self._unblocked[0] != self._phase_id:
                    continue
                self._abandoned = self._pg
                quorum = _board.quorum_name(self._phase_id)
            raise RuntimeError("a collective of quorum %s still ran after its connections were "
                               "shut down (a message halfway on the wire); given up" % quorum)

    def _broadcast(self, tensors, src):
        """`tensors` (this rank's) become rank `src`'s, one broadcast per dtype, waited as _wait
        waits (DDP's buffer broadcast). Raises RuntimeError as a collective does. The training
        thread."""
        by_dtype = {}
        for t in tensors:
            by_dtype.setdefault(t.dtype, []).append(t)
        for group in by_dtype.values():
            flat = torch._utils._flatten_dense_tensors(group)
            self._wait(dist.broadcast(flat, src, async_op=True))
            if self.rank != src:
                for t, part in zip(group, torch._utils._unflatten_dense_tensors(flat, group)):
                    t.copy_(part)

    def _fail_step(self, reason):
        """Called from DDP's collectives (any thread): the running step failed."""
        if self._failed is None:
            self._failed = reason

    def _board_moved(self):
        """At a step boundary: one 4-byte load while the agent published nothing new."""
        epoch = self._board.epoch()
        if epoch == self._built_epoch:
            return False
        rec = self._board.read()
        if rec is not None and rec.id > self._record.id:
            return True
        self._built_epoch = epoch  # a publish that did not change this rank's quorum
        return False

    # --- recovery ------------------------------------------------------------------------------
    def _recover(self, reason):
        had = self._record.id
        self._close_group()
        for obj in self._objects.values():
            if isinstance(obj, torch.nn.Module):
                for p in obj.parameters():
                    p.grad = None
        if self._sampler is not None:
            self._sampler._ddprun_rewind()
        for rewind in self._on_rewind:
            rewind()
        if self._prepared is None and not self._receives_anyway():
            self._prepared = _Prepared(self._objects, self._step)
        self._join(newer_than=had)
        _log("rank %d recovered in place: quorum %s -> %s, rank %d of %d (%s)"
             % (self.rank, _board.quorum_name(had), _board.quorum_name(self._record.id), self.rank,
                self.world_size, reason))
        self._establish()

    def _establish(self):
        """Agrees on the state with the quorum's ranks, then wraps the model in DDP again."""
        try:
            self._agree()
            for wrapper in self._ddps:
                wrapper._rebuild()
        except (RuntimeError, OSError) as e:
            raise _StepFailed("quorum %s: %s" % (_board.quorum_name(self._record.id), _one_line(e)))
        self._failed = None

    def _join(self, newer_than):
        """Builds the default process group for the newest quorum (newer than `newer_than`)."""
        deadline = time.monotonic() + self._timeout.total_seconds()
        failed, last = None, "no newer quorum was published"
        failed_at = None
        next_finished_check = 0.0
        while True:
            epoch = self._board.epoch()
            rec = self._record_or_env()
            usable = rec is not None and (newer_than is None or rec.id > newer_than) and \
                (failed is None or rec.id > failed)
            if usable:
                failed_at = None  # a newer quorum: its own attempt
                try:
                    self._build(rec, epoch)
                    return
                except Exception as e:  # noqa: BLE001 (torch raises RuntimeError, ValueError, ...)
                    self._close_group()
                    last = "quorum %s: %s" % (_board.quorum_name(rec.id), _one_line(e))
                    if self._board.epoch() == epoch:
                        failed, failed_at = rec.id, time.monotonic()
                        _log("rank %d could not build %s; waiting for a newer quorum"
                             % (rec.rank, last))
            now = time.monotonic()
            if failed_at is not None and now - failed_at >= _FAILED_BUILD_GRACE_S:
                raise _RecoveryFailed("could not build %s, and no newer quorum came within %g s; "
                                      "this process exits so that its agent replaces it"
                                      % (last, _FAILED_BUILD_GRACE_S))
            if now >= deadline:
                raise _RecoveryFailed("rank %d found no quorum to %s within %d s: %s"
                                      % (self.rank if self._record else -1,
                                         "recover into" if newer_than else "join",
                                         self._timeout.total_seconds(), last))
            if now >= next_finished_check and newer_than is not None:
                next_finished_check = now + _FINISHED_POLL_S
                who = self._peek(_keys.finished)
                if who:
                    raise _RecoveryFailed("%s finished the job while this rank waited for a newer "
                                          "quorum than %s: none can form" % (who, _board.quorum_name(newer_than)))
            self._board.wait_for_change(epoch, min(_FINISHED_POLL_S, deadline - now))

    def _record_or_env(self):
        rec = self._board.read()
        if rec is not None:
            return rec
        env = os.environ  # before the agent's first publish, the env's (quorum 0 of the generation)
        return _board.QuorumRecord(
            generation=int(env.get("TORCHELASTIC_RESTART_COUNT", "0")), quorum=0,
            rank=int(env["RANK"]), world_size=int(env["WORLD_SIZE"]),
            local_rank=int(env.get("LOCAL_RANK", "0")),
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", "1")),
            group_rank=int(env.get("GROUP_RANK", "0")),
            group_world_size=int(env.get("GROUP_WORLD_SIZE", "1")),
            master_addr=env["MASTER_ADDR"], master_port=int(env["MASTER_PORT"]))

    def _build(self, rec, epoch):
        devices = _gloo_devices(self._backend)  # before the group's sockets are told apart
        with self._lock:
            self._phase, self._phase_id = _BUILDING, rec.id
            self._build_before = _sockets.socket_inodes()
        going_on = set(range(rec.world_size)) - set(rec.replaced)
        if self._prepared is not None and rec.replaced and going_on and rec.rank == min(going_on):
            self._prepared.encode_ahead(self._device)  # the lowest rank that goes on: the donor
        store = dist.TCPStore(rec.master_addr, rec.master_port, None, False, self._timeout)
        store_sockets = _sockets.opened_since(self._build_before)
        prefixed = dist.PrefixStore(_keys.quorum_prefix(rec.generation, rec.quorum), store)
        with _no_store_barrier(), _kept_gloo_devices(devices), _loop_ticks.Ticks(_GLOO_LOOPS):
            dist.init_process_group(self._backend, store=prefixed, rank=rec.rank,
                                    world_size=rec.world_size, timeout=self._timeout)
        with self._lock:
            # Gloo's pairs, not the store client's connections: a running collective never waits
            # on the store, and torch 1.13's store client has a thread that spins at 100% of a CPU
            # on a connection that ended for as long as the client lives (a group torch keeps
            # alive after its destroy keeps it: one per process seen, a core lost to it).
            self._pg_sockets = _sockets.without(_sockets.opened_since(self._build_before),
                                                store_sockets)
            self._pg = dist.distributed_c10d._get_default_group()
            self._build_before = {}  # sockets opened from now on are not the group's
            self._phase = _RUNNING
        self._record = rec
        self._built_epoch = epoch
        self._announce()

    def _close_group(self):
        """Ends the current group's connections (peers blocked on them fail at once), aborts it
        where torch can, and destroys it."""
        with self._lock:
            self._phase = _IDLE
            sockets, self._pg_sockets = self._pg_sockets, {}
            self._pg = None
            sockets.update(_sockets.opened_since(self._build_before) if self._build_before else {})
            self._build_before = {}
        if not dist.is_initialized():
            _sockets.shutdown(sockets)
            _reset_group_count()
            return
        pg = dist.distributed_c10d._get_default_group()
        if self._abandoned is not None:
            # Its worker thread still waits in the collective given up: destroying the group would
            # wait for it (until the group's timeout). Kept, even through interpreter teardown.
            _ABANDONED.append(self._abandoned)
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(self._abandoned))
            self._abandoned = None
        _abort(pg, self._backend)
        _sockets.shutdown(sockets)
        for wrapper in self._ddps:
            wrapper._drop()
        try:
            if dist.is_initialized():  # torch's _abort_process_group already took it away
                with _loop_ticks.Ticks(_GLOO_LOOPS):  # each pair's end waits for a tick too
                    dist.destroy_process_group()
        except Exception as e:  # noqa: BLE001 (a group with a dead peer may complain; it is gone)
            _log("destroying the process group of quorum %s: %s" % (
                _board.quorum_name(self._phase_id) if self._phase_id else "?", _one_line(e)))
        _reset_group_count()

    # --- agreeing on the state -----------------------------------------------------------------
    def _receives_anyway(self):
        """True for a process whose state is the script's fresh one (a replacement): it takes the
        donor's whatever its digest."""
        return self._first_agreement and os.environ.get("DDP_STATE_FROM_PEER") == "1"

    def _agree(self):
        late = self._receives_anyway() or self.rank in self._record.replaced
        # A rank that receives anyway (a replacement) skips its snapshot and digest: they would only
        # hold up everyone's allgather. A survivor's were made while it built the process group.
        prepared, self._prepared = self._prepared, None
        try:
            self._agree_with(late, prepared)
        finally:
            if prepared is not None:
                prepared.settle()  # an encoding made for nothing (this rank did not send) is done
        self._first_agreement = False

    def _agree_with(self, late, prepared):
        if late:
            mine, d = None, bytes(16)
        elif prepared is not None:
            mine, d = prepared.result()
        else:
            mine, d = _state.snapshot_and_digest(self._objects, self._step)
        row = torch.tensor([self._step, int.from_bytes(d[:8], "little", signed=True),
                            int.from_bytes(d[8:], "little", signed=True), int(late)],
                           dtype=torch.int64, device=self._device)
        rows = [torch.zeros_like(row) for _ in range(self.world_size)]
        self._wait(dist.all_gather(rows, row, async_op=True))
        table = [r.tolist() for r in rows]
        holders = [r for r in range(self.world_size) if not table[r][3]]
        if not holders:
            self._mark(_keys.state_lost, "quorum %s" % _board.quorum_name(self._record.id))
            raise _RecoveryFailed("no rank of quorum %s holds the training state (every process is "
                                  "new): every worker restarts" % _board.quorum_name(self._record.id))
        top = max(table[r][0] for r in holders)
        donor = min(r for r in holders if table[r][0] == top)
        receivers = [r for r in range(self.world_size)
                     if r != donor and (table[r][3] or table[r][1:3] != table[donor][1:3])]
        if self.rank == donor and receivers:
            skeleton, flat = (prepared and prepared.encoded()) or _state.encode(mine, self._device)
            head, separate = _state.header(skeleton, flat.numel())
            messages = [torch.frombuffer(head, dtype=torch.uint8).to(self._device)]
            if separate is not None:
                messages.append(torch.frombuffer(bytearray(separate), dtype=torch.uint8)
                                .to(self._device))
            # Waited whole, not through _wait: a timed wait on torch 1.13 Gloo's send or recv that
            # ends before the message fails the transfer for good (a collective's does not).
            for r in receivers:
                for m in messages:
                    dist.send(m, r)
                if flat.numel():
                    dist.send(flat, r)
        elif self.rank in receivers:
            head = torch.empty(_state.HEADER_BYTES, dtype=torch.uint8, device=self._device)
            dist.recv(head, donor)
            skeleton, n, flat_bytes = _state.read_header(head.cpu().numpy().tobytes())
            if skeleton is None:
                packed = torch.empty(n, dtype=torch.uint8, device=self._device)
                dist.recv(packed, donor)
                skeleton = packed.cpu().numpy().tobytes()
            flat = torch.empty(flat_bytes, dtype=torch.uint8, device=self._device)
            if flat.numel():
                dist.recv(flat, donor)
            state = _state.decode(skeleton, flat)
            self._step = int(_state.apply(self._objects, state)["step"])

    # --- the worker store's /ddp/ keys ---------------------------------------------------------
    def _control_store(self):
        rec = self._record
        if self._control is None or self._control[:3] != (rec.generation, rec.master_addr, rec.master_port):
            store = dist.TCPStore(rec.master_addr, rec.master_port, None, False,
                                  datetime.timedelta(seconds=30))
            self._control = (rec.generation, rec.master_addr, rec.master_port, store)
        return self._control[3]

    def _announce(self):
        """Once per process: this rank recovers in place and can wait as a standby (a replacement
        was counted for its rank already, and says that it joined instead; the agents carry the
        processes that go on into a generation formed in place)."""
        if self._announced:
            return
        self._announced = True
        store = self._control_store()
        if os.environ.get("DDP_STATE_FROM_PEER") == "1":
            # Counted already; its agent learns that it joined (it did not fail at start).
            store.add(_keys.joined_count(self._record.generation, self._record.rank), 1)
            return
        store.add(_keys.standby_count(self._record.generation), 1)
        store.add(_keys.in_place_count(self._record.generation), 1)

    def _mark(self, key_of, value):
        try:
            self._control_store().set(key_of(self._record.generation), value)
        except Exception as e:  # noqa: BLE001 (best effort, as the C++ runtime's)
            _log("could not set %s: %s" % (key_of(self._record.generation), _one_line(e)))

    def _peek(self, key_of):
        try:
            store = self._control_store()
            key = key_of(self._record.generation)
            return store.get(key).decode() if store.check([key]) else ""
        except Exception:  # noqa: BLE001 (a store that cannot answer tells nothing)
            return ""

    # --- the watchdog --------------------------------------------------------------------------
    def _watch(self):
        seen, rec = None, None
        while not self._stop.wait(_WATCH_PERIOD_S):
            epoch = self._board.epoch()
            if epoch != seen:  # the record is read (JSON) only after a publish
                try:
                    rec = self._board.read()
                except _board.BoardError:
                    continue
                seen = epoch
            with self._lock:
                if rec is None or self._phase == _IDLE or not rec.id > self._phase_id:
                    continue
                stuck = None
                if self._phase == _BUILDING:
                    victims = _sockets.opened_since(self._build_before)
                elif self._unblocked != (self._phase_id, rec.id):
                    # A superseded quorum's group is of no use (every rank rebuilds and the state
                    # is agreed again), and a collective on it may never end by itself (a peer cut
                    # off, frozen, or killed halfway through a message): shut it down at once.
                    self._unblocked = (self._phase_id, rec.id)  # once per superseded quorum
                    victims, stuck = self._pg_sockets, self._pg
                else:
                    continue
            _sockets.shutdown(victims)
            if stuck is not None:  # NCCL waits on the GPU, not on a socket: abort it
                _abort(stuck, self._backend)


class _Background:
    """fn() on a thread of its own; result() waits for it and returns its value or raises its
    error (in the thread that asks)."""

    def __init__(self, fn, name):
        self._out = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn):
        try:
            self._out = (True, fn())
        except BaseException as e:  # noqa: BLE001 (raised again in the training thread)
            self._out = (False, e)

    def join(self):
        """Waits for fn() to end, whatever it raised."""
        self._thread.join()

    def result(self):
        self.join()
        ok, value = self._out
        if not ok:
            raise value
        return value


class _Prepared:
    """The registered state's snapshot and digest, made on a thread of its own while the training
    thread builds the next process group (the build mostly waits on its peers with the GIL
    released; the digest's hashing releases it too), so that a survivor that was last to fail does
    not add its digest to everyone's wait in the agreement; and, for the rank that will most
    likely send it, the snapshot encoded as it is sent (the copy out of the model's tensors made
    before the replacement waits for it). The state must not change until result() and
    encoded() (nothing runs the step meanwhile)."""

    def __init__(self, objects, step):
        self._digest = _Background(lambda: _state.snapshot_and_digest(objects, step), "ddprun-digest")
        self._encoding = None

    def result(self):
        """(snapshot, digest); raises what making them raised."""
        return self._digest.result()

    def encode_ahead(self, device):
        """Encodes the snapshot (_state.encode) on a thread once it is made."""
        if self._encoding is None:
            self._encoding = _Background(lambda: _state.encode(self.result()[0], device),
                                         "ddprun-encode")

    def encoded(self):
        """(skeleton, flat) of encode_ahead(), or None where it was not asked for; raises what
        encoding raised."""
        return self._encoding.result() if self._encoding is not None else None

    def settle(self):
        """Waits for the threads (the state may change after), whatever they raised."""
        for work in (self._digest, self._encoding):
            if work is not None:
                work.join()


class _StepFailed(Exception):
    """A collective of the recovery failed: move on to a newer quorum."""


class _RecoveryFailed(Exception):
    """No recovery is possible (no quorum came, the state is lost, the job finished)."""


def _restore_buffers(saved):
    buffers, copies = saved
    with torch.no_grad():
        for b, c in zip(buffers, copies):
            b.copy_(c)


def _progress():
    try:
        from ..progress import report_progress
        return report_progress
    except ImportError:
        return lambda step: None


def _one_line(e):
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _check_backend(backend):
    """The device a backend the quorum can build runs its collectives on; raises SystemExit with one
    line for one it cannot (in place, ddprun.torch builds gloo and nccl process groups)."""
    name = str(backend).lower()
    parts = {p.split(":")[-1] for p in name.split(",")}
    if not parts <= {"gloo", "nccl"}:
        raise UsageError("backend %r: in place, ddprun.torch builds 'gloo' or 'nccl' process "
                         "groups" % (backend,))
    if "gloo" in parts and not dist.is_gloo_available():
        raise UsageError("backend 'gloo': this torch was built without Gloo")
    if "nccl" in parts:
        if not dist.is_nccl_available():
            raise UsageError("backend 'nccl': this torch was built without NCCL")
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            raise UsageError("backend 'nccl' needs a CUDA device and this process sees none "
                             "(torch.cuda.is_available() is False): use 'gloo' on CPUs")
        if parts == {"nccl"}:
            local = int(os.environ.get("LOCAL_RANK", "0"))
            return torch.device("cuda", local % torch.cuda.device_count())
    return torch.device("cpu")


@contextlib.contextmanager
def _no_store_barrier():
    """torch 1.13's init_process_group ends with a store barrier that polls every 10 ms; the group
    it just built has connected every pair already (Gloo's full mesh), so a build of ddprun.torch
    skips it (torch 2.x skips it unless TORCH_DIST_INIT_BARRIER=1)."""
    c10d = dist.distributed_c10d
    barrier = getattr(c10d, "_store_based_barrier", None)
    if barrier is None:
        yield
        return
    c10d._store_based_barrier = lambda *args, **kwargs: None
    try:
        yield
    finally:
        c10d._store_based_barrier = barrier


_GLOO_DEVICES = []  # made by the first group of this process, kept by every group after it
_GLOO_LOOPS = []  # the thread ids of their event loops ([] where unknown: _loop_ticks)


def _gloo_devices(backend):
    """The Gloo devices every group of this process gets (torch's rule: one per interface of
    GLOO_SOCKET_IFNAME, else the one for this host's name), made once; None where torch makes its
    own: another backend, a torch without what this needs, or Gloo's lazy connections asked for
    (TORCH_GLOO_LAZY_INIT, torch 2.x). torch makes new ones for each group: two lookups of the
    host's name (a DNS query where it is not in /etc/hosts) and an event-loop thread whose end,
    when the group is destroyed, waits out the loop's 10 ms poll. Made before a build's sockets
    are counted: a device's own sockets (a torch 2.x Gloo listens on one) are no group's."""
    gloo = getattr(dist.distributed_c10d, "ProcessGroupGloo", None)
    if backend != "gloo" or getattr(gloo, "_Options", None) is None or \
            not hasattr(gloo, "create_default_device") or \
            os.environ.get("TORCH_GLOO_LAZY_INIT", "0").lower() not in ("", "0", "false"):
        return None
    if not _GLOO_DEVICES:
        names = os.environ.get("GLOO_SOCKET_IFNAME", "")
        names = names.split(",") if len(names) > 1 else [None]
        try:
            devices, loops = _loop_ticks.threads_started_by(
                lambda: [gloo.create_device(interface=n) if n else gloo.create_default_device()
                         for n in names], len(names))
        except Exception:  # noqa: BLE001 (torch's own construction reports the cause)
            return None
        _GLOO_DEVICES.extend(devices)
        _GLOO_LOOPS.extend(loops)
    return list(_GLOO_DEVICES)


@contextlib.contextmanager
def _kept_gloo_devices(devices):
    """init_process_group's Gloo group gets `devices` (None: torch's own). A call torch makes with
    arguments this does not know keeps torch's."""
    c10d = dist.distributed_c10d
    gloo = getattr(c10d, "ProcessGroupGloo", None)
    if devices is None:
        yield
        return
    options = gloo._Options

    class KeptDevices(gloo):
        def __init__(self, *args, **kwargs):
            timeout = kwargs.get("timeout", args[3] if len(args) == 4 else None)
            known = len(args) + len(kwargs) in (3, 4) and set(kwargs) <= {"timeout"} and \
                len(args) >= 3 and isinstance(timeout, (datetime.timedelta, type(None)))
            if not known:
                super().__init__(*args, **kwargs)  # a call this does not know: torch's devices
                return
            opts = options()
            opts._devices = devices
            opts._timeout = timeout or _DEFAULT_GLOO_TIMEOUT
            opts._threads = 2 * len(devices)
            super().__init__(args[0], args[1], args[2], opts)

    c10d.ProcessGroupGloo = KeptDevices
    try:
        yield
    finally:
        c10d.ProcessGroupGloo = gloo


_DEFAULT_GLOO_TIMEOUT = datetime.timedelta(minutes=30)  # torch's, for a call that passes none


def _reset_group_count():
    """torch names the default group after a counter (the store barrier's key too) that only
    destroy_process_group() resets: a build that failed half-way bumped it, and this process's next
    group would meet its peers under another name (a new process's is "0"): Gloo's connect and the
    barrier wait out their timeout."""
    c10d = dist.distributed_c10d
    if isinstance(getattr(c10d, "_group_count", None), int):
        c10d._group_count = 0  # torch 1.x
    world = getattr(c10d, "_world", None)
    if isinstance(getattr(world, "group_count", None), int):
        world.group_count = 0  # torch 2.x


def _abort(pg, backend):
    """Aborts a process group's communicators where torch has a way (NCCL on torch 2.x: never
    destroy a communicator while a peer is gone, ncclCommDestroy would wait for it)."""
    if str(backend).lower() != "nccl":
        return
    abort_group = getattr(dist.distributed_c10d, "_abort_process_group", None)
    if abort_group is not None:
        try:
            abort_group(pg)
            return
        except Exception as e:  # noqa: BLE001
            _log("aborting the NCCL group: %s" % _one_line(e))
    targets = [pg]
    get_backend = getattr(pg, "_get_backend", None)
    if get_backend is not None:
        try:
            targets.insert(0, get_backend(torch.device("cuda")))
        except Exception:  # noqa: BLE001 (no CUDA backend on this group)
            pass
    for target in targets:
        for name in ("abort", "_abort", "shutdown"):
            fn = getattr(target, name, None)
            if callable(fn):
                try:
                    fn()
                    return
                except Exception as e:  # noqa: BLE001
                    _log("%s() on the NCCL group: %s" % (name, _one_line(e)))

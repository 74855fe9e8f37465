"""Unit tests of ddprun.torch's pure parts, with Debian's /usr/bin/python3 and torch 1.13 (issue 32).

  ddprun_torch_units_test.py [sampler|sampler_tail|standby|board|join|ddp_sync|buffer_broadcast|digest|
                              store_sockets|gloo_devices|gloo_ticks]

sampler  ddprun.torch.DistributedSampler equals torch's DistributedSampler without faults (shuffle,
         seeds, epochs, padding, drop_last); resharded at a step boundary (a world that shrinks
         and grows, new ranks loaded from a peer's state_dict) it hands out every index of each
         epoch exactly once; failed steps redone at one world commit torch's order
sampler_tail  the same with failed steps redone across world changes: a failed step that drew an
         epoch's short last batch gets it again when redone with a new iterator (as g.batches()
         takes one after a recovery), and a script that keeps its exhausted iterator would skip it;
         g.batches() over real DataLoaders (0 and 2 worker processes) with failed steps: every
         sample of each epoch once
standby  _standby.decode of good and malformed payloads; await_assignment over a real FIFO (the
         environment replaced; a short or oversized message an error, the environment unchanged)
board    _board.QuorumRecord.decode refuses every malformed record with a BoardError naming the
         field; QuorumBoard refuses files that are no board
join     Group._join over a fake board: the newest quorum's build fails and no newer one comes
         within the grace: the process gives up with one line (its agent replaces it) instead of
         waiting out the group's timeout, the failed quorum not tried again; a newer quorum
         within the grace is built; a build the board superseded meanwhile is no failure
ddp_sync g.ddp's DDP is built without DDP's own check and broadcast from rank 0 (collectives on a
         recovery's path) when the agreement covers every tensor of the module: counted calls of
         torch's two steps (torch 1.x) or init_sync=False (torch 2.x); with a tensor no registered
         module holds, DDP syncs as it always does; torch's functions are put back either way
buffer_broadcast  g.ddp's buffer broadcast (DDP's, before a forward) on a real 2-rank Gloo group
         whose rank 0 never serves it is given up once the quorum is marked superseded: the step
         fails instead of the forward waiting in C++ for the group's timeout
digest   the digest a survivor makes on a thread while it rebuilds equals the one made in place,
         changes with one bit of the state, and an error making it is raised to the caller; the
         transfer: the encoding the likely donor makes ahead equals the one made at send time,
         the header carries a skeleton that fits (else it is sent on its own) and refuses
         negative sizes, and the state decoded loads bit for bit
gloo_ticks  a Gloo device's event-loop thread is found as the device is made and woken while a
         group connects (more wakeups than its 10 ms timeout makes), for KICK_FOR_S at most,
         SIGURG's disposition put back after; a script's own SIGURG handler and threads other than the main one left alone
store_sockets  a group built for a quorum (a real 1-rank Gloo group on a real TCPStore server) counts
         none of its store client's connections among the sockets a recovery shuts down (torch
         1.13's client spins a thread at 100% of a CPU on a connection that ended)

Exit 0 when every check holds, 1 with the first failure otherwise."""
import json
import os
import random
import struct
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "worker_runtime", "python"))


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


# -- sampler ---------------------------------------------------------------------------------
class FakeGroup:
    """What the sampler asks of the group: the current quorum's rank and world size."""

    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def _adopt_sampler(self, sampler):
        sampler._group = self


def sampler_matches_torch():
    from torch.utils.data.distributed import DistributedSampler as Torch
    from ddprun.torch import DistributedSampler as Ours
    for size in (1, 7, 64, 100, 1000):
        for world in (1, 2, 3, 4, 8):
            for shuffle in (True, False):
                for drop_last in (False, True):
                    for seed in (0, 5):
                        if drop_last and size < world:
                            continue  # torch gives every rank nothing: same as ours, below
                        for rank in range(world):
                            theirs = Torch(range(size), world, rank, shuffle, seed, drop_last)
                            ours = Ours(range(size), world, rank, shuffle, seed, drop_last)
                            for epoch in (0, 3):
                                theirs.set_epoch(epoch)
                                ours.set_epoch(epoch)
                                want, got = list(theirs), list(ours)
                                check(got == want and len(ours) == len(theirs),
                                      "size %d world %d rank %d shuffle %s drop_last %s seed %d "
                                      "epoch %d: %s..., torch %s..." % (size, world, rank, shuffle,
                                      drop_last, seed, epoch, got[:8], want[:8]))
    # Without a group and without torch.distributed: torch's error, in one line.
    try:
        list(Ours(range(4)))
        raise Failure("a sampler without world and without torch.distributed iterated")
    except RuntimeError as e:
        check("num_replicas" in str(e), "unclear error: %s" % e)


class Rank:
    """One rank's process: its sampler and the DataLoader-like iterator it keeps across steps."""

    def __init__(self, sampler, group):
        self.sampler, self.group, self.it = sampler, group, None

    def draw(self, batch):
        out = []
        while len(out) < batch:
            if self.it is None:
                self.it = iter(self.sampler)
            try:
                out.append(next(self.it))
            except StopIteration:
                break
        return out


def run_worlds(size, batch, plan, rng, fail_rate=0.2, tail_fix=True):
    """Trains through `plan` ([(steps, world)]) with failed steps redone; returns {epoch: [index]}
    of the committed steps. A world change happens at a step boundary: ranks below the new world
    keep their process; new ranks load a survivor's state_dict (the donor's)."""
    from ddprun.torch import DistributedSampler
    ranks = {}
    epochs = {}
    epoch = 0
    for steps, world in plan:
        donor = ranks[0].sampler.state_dict() if ranks else None
        for r in list(ranks):
            if r >= world:
                del ranks[r]
            else:
                ranks[r].group.world_size = world
                ranks[r].sampler._ddprun_rewind()
        for r in range(world):
            if r not in ranks:
                g = FakeGroup(r, world)
                s = DistributedSampler(range(size), seed=3, group=g)
                if donor:
                    s.load_state_dict(donor)
                ranks[r] = Rank(s, g)
        for _ in range(steps):
            while True:
                drawn = {r: ranks[r].draw(batch) for r in ranks}
                if not any(drawn.values()):  # the epoch is over: every rank starts the next
                    epoch += 1
                    for rk in ranks.values():
                        rk.sampler.set_epoch(epoch)
                        rk.it = None
                    continue
                if rng.random() < fail_rate:  # the step failed: nothing committed, redone
                    for rk in ranks.values():
                        rk.sampler._ddprun_rewind()
                        if tail_fix:  # as g.batches() does: a new iterator after a recovery
                            rk.it = None
                    continue
                lens = {len(d) for d in drawn.values()}
                check(len(lens) == 1, "ranks drew batches of different sizes %s" % lens)
                for rk in ranks.values():
                    rk.sampler._ddprun_commit(world)
                for d in drawn.values():
                    epochs.setdefault(ranks[0].sampler.epoch, []).extend(d)
                break
    return epochs


def check_epochs(epochs, size, what):
    last = max(epochs)
    for epoch, idx in sorted(epochs.items()):
        seen = set(idx)
        check(seen <= set(range(size)), "%s: indices outside the data set" % what)
        if epoch < last:
            check(seen == set(range(size)), "%s epoch %d: %d indices skipped" %
                  (what, epoch, size - len(seen)))
        # A repeat only pads an epoch's tail (torch's rule): fewer than a world's worth.
        check(len(idx) - len(seen) < 4, "%s epoch %d: %d repeated" % (what, epoch,
                                                                     len(idx) - len(seen)))


PLANS = [[(10, 4), (7, 2), (9, 4), (30, 3), (40, 1), (50, 4)],
         [(3, 2), (1, 4), (1, 2), (1, 3), (60, 4)]]


def sampler_reshards():
    """World changes at step boundaries: every index of each epoch once (a padded tail aside)."""
    rng = random.Random(1)
    for size, batch in ((256, 8), (240, 4), (96, 3)):
        for plan in PLANS:
            check_epochs(run_worlds(size, batch, plan, rng, fail_rate=0.0), size,
                         "size %d batch %d plan %s" % (size, batch, plan))
    # Failed steps redone at a fixed world whose batches always fill (no short tail).
    for world in (1, 2, 4):
        check_epochs(run_worlds(256, 8, [(200, world)], rng, fail_rate=0.3), 256,
                     "world %d with failed steps" % world)


def sampler_tail():
    """World changes and failed steps together: a failed step that drew an epoch's short last
    batch ended the sampler's iterator (as a DataLoader's batch sampler does before it yields a
    short batch), so its redo must take a new iterator to get that batch, not the next epoch."""
    rng = random.Random(1)
    for size, batch in ((256, 8), (240, 4), (96, 3)):
        for plan in PLANS:
            check_epochs(run_worlds(size, batch, plan, rng, fail_rate=0.2), size,
                         "size %d batch %d plan %s, failed steps redone" % (size, batch, plan))
    try:  # the same without a new iterator: the tail is skipped (the test can fail)
        for plan in PLANS:
            check_epochs(run_worlds(256, 8, plan, random.Random(1), 0.2, tail_fix=False), 256, "")
        raise Failure("an exhausted iterator kept across a redo skipped nothing: the check is blind")
    except Failure as e:
        check("skipped" in str(e), "unexpected: %s" % e)
    batches_over_dataloader()


class BatchesGroup(FakeGroup):
    """The group's part that g.batches() uses: recoveries call _on_rewind."""

    def __init__(self, rank, world_size):
        super().__init__(rank, world_size)
        self._on_rewind = []
        self.in_place = True


def batches_over_dataloader():
    """g.batches() over a real DataLoader at one world, with failed steps redone: each epoch's
    samples once, whatever the loader's worker processes drew ahead."""
    import torch
    from ddprun.torch import DistributedSampler
    from ddprun.torch._batches import Batches
    rng = random.Random(2)
    for workers in (0, 2):
        world, size, batch = 2, 50, 4   # 25 per rank: a short last batch of 1
        ranks = []
        for r in range(world):
            g = BatchesGroup(r, world)
            s = DistributedSampler(range(size), seed=1, group=g)
            loader = torch.utils.data.DataLoader(list(range(size)), batch_size=batch, sampler=s,
                                                 num_workers=workers)
            ranks.append((g, s, Batches(g, loader)))
        seen = {}
        committed = 0
        while committed < 40:
            got = []
            for g, s, b in ranks:
                idx = next(b).tolist()  # may start the next epoch: read the epoch after it
                got.append((s.epoch, idx))
            if rng.random() < 0.25:
                for g, s, b in ranks:
                    s._ddprun_rewind()
                    for rewind in g._on_rewind:
                        rewind()
                continue
            for (epoch, idx), (g, s, b) in zip(got, ranks):
                seen.setdefault(epoch, []).extend(idx)
                s._ddprun_commit(world)
            committed += 1
        for epoch in sorted(seen)[:-1]:
            check(sorted(seen[epoch]) == list(range(size)),
                  "g.batches with %d workers, epoch %d: %s" % (workers, epoch, sorted(seen[epoch])))


def sampler_same_world():
    # The same world throughout: the committed indices are torch's, step by step.
    from torch.utils.data.distributed import DistributedSampler as Torch
    epochs = run_worlds(64, 4, [(40, 4)], random.Random(2), fail_rate=0.3)
    for epoch in (0, 1):
        want = []
        per_rank = []
        for r in range(4):
            t = Torch(range(64), 4, r, True, 3)
            t.set_epoch(epoch)
            per_rank.append(list(t))
        for step in range(len(per_rank[0]) // 4):
            for r in range(4):
                want.extend(per_rank[r][step * 4:step * 4 + 4])
        check(epochs[epoch] == want, "epoch %d with failed steps redone differs from torch's order"
              % epoch)


# -- standby ---------------------------------------------------------------------------------
def standby_decode():
    from ddprun import _standby
    check(_standby.decode(b"") == [], "an empty payload")
    check(_standby.decode(b"A=1\0B=x=y\0C=\0") == [("A", "1"), ("B", "x=y"), ("C", "")],
          "entries with '=' in the value, an empty value")
    check(_standby.decode(b"P=\xff\xfe\0")[0][1] == os.fsdecode(b"\xff\xfe"), "non-UTF-8 bytes")
    for bad, why in ((b"A=1", "no terminating NUL"), (b"A=1\0B", "no terminating NUL"),
                     (b"NOEQUALS\0", "has no NAME="), (b"=value\0", "has no NAME="),
                     (b"\0", "has no NAME="), (b"A=1\0\0", "has no NAME=")):
        try:
            _standby.decode(bad)
            raise Failure("decode(%r) accepted" % bad)
        except _standby.StandbyError as e:
            check(why in str(e) and "\n" not in str(e), "decode(%r): %s" % (bad, e))


def standby_fifo():
    from ddprun import _standby
    d = tempfile.mkdtemp()
    fifo = os.path.join(d, "standby")

    def assign(message):
        os.mkfifo(fifo)
        writer = threading.Thread(target=lambda: open(fifo, "wb").write(message))
        writer.start()
        saved = dict(os.environ)
        os.environ["DDP_STANDBY"] = fifo
        try:
            return _standby.await_assignment(), dict(os.environ)
        finally:
            writer.join()
            os.unlink(fifo)
            os.environ.clear()
            os.environ.update(saved)

    payload = b"RANK=3\0WORLD_SIZE=4\0DDP_STATE_FROM_PEER=1\0"
    ok, env = assign(struct.pack("<Q", len(payload)) + payload)
    check(ok and env == {"RANK": "3", "WORLD_SIZE": "4", "DDP_STATE_FROM_PEER": "1"},
          "the environment taken: %s" % env)
    for message, why in ((struct.pack("<Q", 100) + b"RANK=3\0", "closed after"),
                         (b"\1\2", "closed after"),
                         (struct.pack("<Q", 1 << 40), "at most"),
                         (struct.pack("<Q", 3) + b"A=1", "no terminating NUL")):
        before = dict(os.environ)
        try:
            assign(message)
            raise Failure("message %r accepted" % message[:16])
        except _standby.StandbyError as e:
            check(why in str(e), "message %r: %s" % (message[:16], e))
        check(dict(os.environ) == before, "a failed assignment changed the environment")
    os.environ.pop("DDP_STANDBY", None)
    check(_standby.await_assignment() is False, "no standby: False at once")
    os.rmdir(d)


# -- board -----------------------------------------------------------------------------------
def board_decode():
    from ddprun import _board
    good = {"generation": 0, "quorum": 2, "rank": 1, "world_size": 4, "local_rank": 1,
            "local_world_size": 2, "group_rank": 0, "group_world_size": 2,
            "master_addr": "127.0.0.1", "master_port": 29500, "reason": "x", "replaced": [1]}
    rec = _board.QuorumRecord.decode(json.dumps(good))
    check(rec.id == (0, 2) and rec.rank == 1 and rec.replaced == [1], "a good record: %r" % rec)
    check(_board.QuorumRecord.decode(json.dumps(dict(good, reason=None, replaced=None))).replaced
          == [], "optional fields left out")
    bads = [("", "not JSON"), ("{", "not JSON"), ("[1, 2]", "not a JSON object"),
            ("null", "not a JSON object"), ("\"text\"", "not a JSON object")]
    for field in ("generation", "quorum", "rank", "world_size", "local_rank", "local_world_size",
                  "group_rank", "group_world_size", "master_port"):
        without = dict(good)
        del without[field]
        bads += [(json.dumps(without), "'%s'" % field),
                 (json.dumps(dict(good, **{field: "1"})), "'%s'" % field),
                 (json.dumps(dict(good, **{field: 1.5})), "'%s'" % field),
                 (json.dumps(dict(good, **{field: True})), "'%s'" % field)]
    bads += [(json.dumps(dict(good, master_addr=5)), "'master_addr'"),
             (json.dumps({k: v for k, v in good.items() if k != "master_addr"}), "'master_addr'"),
             (json.dumps(dict(good, rank=4)), "outside world size"),
             (json.dumps(dict(good, rank=-1)), "outside world size"),
             (json.dumps(dict(good, world_size=0, rank=0)), "outside world size")]
    for text, why in bads:
        try:
            _board.QuorumRecord.decode(text)
            raise Failure("decode(%r) accepted" % text[:80])
        except _board.BoardError as e:
            check(why in str(e) and "\n" not in str(e), "decode(%r): %s" % (text[:80], e))
    rng = random.Random(3)
    for _ in range(2000):  # random bytes: a BoardError or a record, never another exception
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        try:
            _board.QuorumRecord.decode(blob.decode("latin-1"))
        except _board.BoardError:
            pass
    d = tempfile.mkdtemp()
    for name, content, why in (("missing", None, "cannot open"), ("small", b"x" * 10, "bytes"),
                               ("magic", b"NOTBOARD" + b"\0" * 200, "bad magic"),
                               ("slots", b"DDPQRM01" + struct.pack("=II", 1, 64) + b"\0" * 200,
                                "no slot")):
        path = os.path.join(d, name)
        if content is not None:
            with open(path, "wb") as f:
                f.write(content)
        try:
            _board.QuorumBoard(path, 3)
            raise Failure("QuorumBoard(%s) opened" % name)
        except _board.BoardError as e:
            check(why in str(e), "QuorumBoard(%s): %s" % (name, e))
        if content is not None:
            os.unlink(path)
    os.rmdir(d)


# -- join ------------------------------------------------------------------------------------
class FakeBoard:
    """The quorum board as _join reads it: an epoch that moves with each publish, the newest
    record, a wait for the next publish."""

    def __init__(self, quorum):
        self._cv = threading.Condition()
        self._epoch, self._quorum = 1, quorum

    def publish(self, quorum):
        with self._cv:
            self._epoch += 1
            self._quorum = quorum
            self._cv.notify_all()

    def epoch(self):
        with self._cv:
            return self._epoch

    def read(self):
        from ddprun import _board
        with self._cv:
            q = self._quorum
        return _board.QuorumRecord(generation=0, quorum=q, rank=1, world_size=2, local_rank=1,
                                   local_world_size=2, group_rank=0, group_world_size=1,
                                   master_addr="127.0.0.1", master_port=1)

    def wait_for_change(self, epoch, timeout):
        with self._cv:
            self._cv.wait_for(lambda: self._epoch != epoch, timeout)


def joining_group(board, build):
    """A Group with only what _join uses: the board, a 30-minute timeout, `build(record)`."""
    import datetime
    from ddprun.torch import _group
    g = object.__new__(_group.Group)
    g._board, g._record = board, board.read()
    g._timeout = datetime.timedelta(minutes=30)
    g._build = lambda rec, epoch: build(rec)
    g._close_group = lambda: None
    g._peek = lambda key_of: None
    return g


def join_gives_up():
    from ddprun.torch import _group
    saved = _group._FAILED_BUILD_GRACE_S
    _group._FAILED_BUILD_GRACE_S = 0.3
    try:
        # 1. The newest quorum (0.2) fails to build; nothing newer comes.
        board, built = FakeBoard(2), []

        def broken(rec):
            built.append(rec.quorum)
            raise RuntimeError("Broken pipe")
        g, outcome = joining_group(board, broken), []

        def join():
            try:
                g._join(newer_than=(0, 1))
                outcome.append("returned")
            except _group._RecoveryFailed as e:
                outcome.append(e)
        t = threading.Thread(target=join, daemon=True)
        t.start()
        t.join(30)  # the grace is 0.3 s; without it, _join waits out the group's 30 minutes
        check(outcome, "_join still waits 30 s after quorum 0.2 failed to build")
        e = outcome[0]
        check(isinstance(e, _group._RecoveryFailed), "_join %s though quorum 0.2 failed" % e)
        check("could not build quorum 0.2: Broken pipe" in str(e) and "agent replaces it" in
              str(e) and "\n" not in str(e), "the line: %s" % e)
        check(built == [2], "quorum 0.2 built %d times: %s" % (len(built), built))

        # 2. A newer quorum comes within the grace: it is built, nothing raised.
        board, built = FakeBoard(2), []

        def fails_once(rec):
            built.append(rec.quorum)
            if rec.quorum == 2:
                threading.Timer(0.1, board.publish, (3,)).start()
                raise RuntimeError("Broken pipe")
        joining_group(board, fails_once)._join(newer_than=(0, 1))
        check(built == [2, 3], "quorums built: %s" % built)

        # 3. A build the board superseded meanwhile (the watchdog shut its sockets) is no failure
        # of that quorum: the newer one is built, and a failure of it starts its own grace.
        board, built = FakeBoard(2), []

        def superseded(rec):
            built.append(rec.quorum)
            if rec.quorum == 2:
                board.publish(3)
                raise RuntimeError("Connection reset by peer")
        joining_group(board, superseded)._join(newer_than=(0, 1))
        check(built == [2, 3], "quorums built: %s" % built)
    finally:
        _group._FAILED_BUILD_GRACE_S = saved


def elastic_group(objects):
    """A Group with only what ElasticDDP's rebuild and the agreement read: registered `objects`."""
    from ddprun.torch import _group
    g = object.__new__(_group.Group)
    g._objects, g._failed = dict(objects), None
    return g


def ddp_sync():
    import inspect
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import distributed as ddp_module
    from ddprun.torch import _ddp
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    steps = ("_verify_param_shape_across_processes", "_sync_module_states")
    originals = {name: getattr(ddp_module, name) for name in steps}
    calls, kwargs_seen = [], []

    def counting(name):
        def fn(*args, **kwargs):
            calls.append(name)
            return originals[name](*args, **kwargs)
        return fn
    counters = {name: counting(name) for name in steps}
    real_init = ddp_module.DistributedDataParallel.__init__
    has_init_sync = "init_sync" in inspect.signature(real_init).parameters

    def spying_init(self, *args, **kwargs):
        kwargs_seen.append(dict(kwargs))
        return real_init(self, *args, **kwargs)
    try:
        for name, fn in counters.items():
            setattr(ddp_module, name, fn)
        ddp_module.DistributedDataParallel.__init__ = spying_init

        def synced(net, objects):
            del calls[:], kwargs_seen[:]
            wrapper = _ddp.ElasticDDP(elastic_group(objects), net, {})
            wrapper._rebuild()
            check(wrapper._ddp is not None, "no DDP was built")
            check(all(getattr(ddp_module, n) is counters[n] for n in steps),
                  "torch's DDP steps were not put back after the build")
            if has_init_sync:
                return kwargs_seen[0].get("init_sync", True)
            return bool(calls)

        net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        check(not synced(net, {"model": net, "optimizer": opt}),
              "DDP synced from rank 0 a module the agreement covers (%s)" % (calls or kwargs_seen))
        outer = torch.nn.Sequential(net, torch.nn.ReLU())  # registered through a parent
        check(not synced(net, {"model": outer}), "DDP of a registered module's child synced")
        fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
        check(synced(fresh, {"model": fresh[0]}),
              "DDP skipped its sync for a module with a tensor no registered module holds")
        check(synced(net, {"optimizer": opt}),
              "DDP skipped its sync though only an optimizer was registered")
    finally:
        ddp_module.DistributedDataParallel.__init__ = real_init
        for name, fn in originals.items():
            setattr(ddp_module, name, fn)
        dist.destroy_process_group()


_BROADCAST_PEER = r"""
import datetime, sys, torch, torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), None, False, datetime.timedelta(seconds=60))
dist.init_process_group("gloo", store=store, rank=0, world_size=2,
                        timeout=datetime.timedelta(seconds=120))
store.wait(["done"])           # rank 1's buffer broadcast waits for rank 0 meanwhile
dist.broadcast(torch.zeros(6), 0)  # then it gets one, so its group ends cleanly
"""


def buffer_broadcast():
    """Rank 1 of a real 2-rank Gloo group runs g.ddp's forward, whose buffer broadcast (BatchNorm)
    rank 0 never serves; once the quorum is marked superseded (as the watchdog marks it), the
    forward gives the broadcast up and fails the step instead of waiting in C++ for the group's
    timeout (120 s here), as a survivor whose peer was killed halfway through a message would."""
    import datetime
    import subprocess
    import torch
    import torch.distributed as dist
    from ddprun.torch import _ddp, _group
    store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=60))
    peer = subprocess.Popen([sys.executable, "-c", _BROADCAST_PEER, str(store.port)],
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    real_broadcast = dist.broadcast
    try:
        dist.init_process_group("gloo", store=store, rank=1, world_size=2,
                                timeout=datetime.timedelta(seconds=120))
        net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
        g = _group.Group("gloo", datetime.timedelta(seconds=120))
        g._objects = {"model": net}  # agreed: DDP's constructor makes no collective
        g._phase, g._phase_id = _group._RUNNING, (0, 0)
        g._pg = dist.distributed_c10d._get_default_group()
        wrapper = _ddp.ElasticDDP(g, net, {})
        wrapper._rebuild()
        entered = threading.Event()

        def spying_broadcast(*args, **kwargs):
            entered.set()
            return real_broadcast(*args, **kwargs)
        dist.broadcast = spying_broadcast
        done = []
        t = threading.Thread(target=lambda: done.append(wrapper(torch.randn(5, 4))), daemon=True)
        t.start()
        check(entered.wait(60), "g.ddp's forward made no buffer broadcast through the group")
        with g._lock:
            g._unblocked = ((0, 0), (0, 1))  # what the watchdog sets for a superseded quorum
        t.join(60)
        check(not t.is_alive(), "the forward still waits in a buffer broadcast of a superseded "
                                "quorum 60 s after the mark")
        check(done and done[0].shape == (5, 3), "the forward returned no output")
        check("DDP forward" in (g._failed or "") and "given up" in g._failed,
              "the step did not fail as one whose broadcast was given up: %r" % g._failed)
        check(g._abandoned is g._pg, "the given-up group was not kept from destruction")
    finally:
        dist.broadcast = real_broadcast
        store.set("done", "1")
        peer.wait(60)
        if dist.is_initialized():
            dist.destroy_process_group()


def trained_state(seed=0, steps=1):
    """{"model": a small module with a BatchNorm, "optimizer": its AdamW} after `steps` steps (0:
    a replacement's fresh state, the optimizer's empty)."""
    import torch
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.BatchNorm1d(64))
    opt = torch.optim.AdamW(net.parameters(), lr=0.1)
    for _ in range(steps):
        net(torch.randn(8, 64)).sum().backward()
        opt.step()
    return {"model": net, "optimizer": opt}


def digest():
    import torch
    from ddprun.torch import _group, _state
    objects = trained_state()
    net = objects["model"]
    _, in_place = _state.snapshot_and_digest(objects, 7)
    state, on_thread = _group._Prepared(objects, 7).result()
    check(on_thread == in_place, "the digest made on a thread differs from the one made in place")
    check(state["ddprun"] == {"step": 7}, "the snapshot's step: %r" % state.get("ddprun"))
    check(_group._Prepared(objects, 8).result()[1] != in_place, "the step is not in the digest")
    with torch.no_grad():
        w = net[0].weight.view(-1)
        w[1000] = torch.tensor(w[1000].item()).view(torch.int32).add(1).view(torch.float32)
    check(_group._Prepared(objects, 7).result()[1] != in_place, "one bit of a weight: same digest")

    class Broken:
        def state_dict(self):
            raise RuntimeError("no state here")

        def load_state_dict(self, state):
            pass
    try:
        _group._Prepared({"broken": Broken()}, 7).result()
        check(False, "an error making the digest was not raised")
    except RuntimeError as e:
        check("no state here" in str(e), "raised: %s" % e)


def transfer():
    """What a donor sends: the encoding it makes ahead (on a thread, while it builds the group)
    equals the one made when it sends; the header carries the sizes and a skeleton that fits (two
    messages) or leaves a larger one to a message of its own, and a header with a negative size
    is refused; the state decoded from either way loads into fresh objects, bit for bit."""
    import torch
    from ddprun.torch import _group, _state
    objects = trained_state()
    prepared = _group._Prepared(objects, 7)
    check(prepared.encoded() is None, "an encoding nobody asked for")
    prepared.encode_ahead(torch.device("cpu"))
    skeleton, flat = prepared.encoded()
    state, _ = prepared.result()
    skeleton_now, flat_now = _state.encode(state, torch.device("cpu"))
    check(skeleton == skeleton_now and _state.digest(_state.decode(skeleton, flat)) ==
          _state.digest(_state.decode(skeleton_now, flat_now)) == _state.digest(state),
          "the encoding made ahead differs from the one made at send time")
    prepared.settle()
    big = skeleton + b"x" * _state.HEADER_BYTES  # a skeleton that cannot fit
    for sk, inline in ((skeleton, True), (big, False)):
        head, separate = _state.header(sk, flat.numel())
        check(len(head) == _state.HEADER_BYTES, "a header of %d bytes" % len(head))
        check((separate is None) == inline, "a skeleton of %d bytes: separate=%s"
              % (len(sk), separate is not None))
        got, n, flat_bytes = _state.read_header(bytes(head))
        check(n == len(sk) and flat_bytes == flat.numel(), "sizes read back: %d, %d" % (n, flat_bytes))
        check(got == (sk if inline else None), "the skeleton read back from the header")
    bad = bytearray(_state.HEADER_BYTES)
    bad[0:8] = (-1).to_bytes(8, "little", signed=True)
    try:
        _state.read_header(bytes(bad))
        check(False, "a header with a negative size was read")
    except RuntimeError as e:  # as a failed transfer: the step fails, a new quorum is tried
        check("-1" in str(e), "the refusal names the size: %s" % e)
    fresh = trained_state(seed=1, steps=0)
    got, _, _ = _state.read_header(bytes(_state.header(skeleton, flat.numel())[0]))
    extra = _state.apply(fresh, _state.decode(got, flat.clone()))
    check(extra == {"step": 7}, "the step sent: %r" % extra)
    check(_state.digest(_state.snapshot(fresh, {"step": 7})) == _state.digest(state),
          "the state loaded from the transfer differs from the donor's")


def remote_ports():
    """{socket inode: remote port} of this process's TCP connections (IPv4 and IPv6)."""
    ports = {}
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                ports[fields[9]] = int(fields[2].rsplit(":", 1)[1], 16)
    return ports


def store_sockets():
    import datetime
    import torch.distributed as dist
    from ddprun import _board
    from ddprun.torch import _group, _sockets
    server = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=30))
    g = _group.Group("gloo", datetime.timedelta(seconds=30))
    rec = _board.QuorumRecord(generation=0, quorum=0, rank=0, world_size=1, local_rank=0,
                              local_world_size=1, group_rank=0, group_world_size=1,
                              master_addr="127.0.0.1", master_port=server.port)
    g._build(rec, 0)
    try:
        ports = remote_ports()
        to_server = [fd for fd, inode in g._pg_sockets.items()
                     if ports.get(inode[len("socket:["):-1]) == server.port]
        check(not to_server, "the group would shut down its store client's connections %s "
              "(fds %s)" % ([g._pg_sockets[fd] for fd in to_server], to_server))
        mine = [fd for fd, inode in _sockets.socket_inodes().items()
                if ports.get(inode[len("socket:["):-1]) == server.port]
        check(len(mine) >= 2, "the store clients' connections were not found (%s)" % mine)
    finally:
        g._close_group()


def rebuild_twice(rank, port):
    """Builds quorums 0.0 and 0.1 of a 2-rank Gloo job in turn, as a recovery does (the first
    group's connections shut down and the group destroyed), an allreduce in each; returns each
    group's Gloo devices."""
    import datetime
    import torch
    import torch.distributed as dist
    from ddprun import _board
    from ddprun.torch import _group, _loop_ticks
    g = _group.Group("gloo", datetime.timedelta(seconds=60))
    devices = []
    for quorum in (0, 1):
        rec = _board.QuorumRecord(generation=0, quorum=quorum, rank=rank, world_size=2,
                                  local_rank=rank, local_world_size=2, group_rank=0,
                                  group_world_size=1, master_addr="127.0.0.1", master_port=port)
        g._build(rec, quorum)
        try:
            t = torch.ones(3) * (rank + 1)
            dist.all_reduce(t)
            check(t.tolist() == [3.0, 3.0, 3.0], "quorum 0.%d's allreduce gave %s" % (quorum, t))
            devices.append(list(g._pg.options._devices))
            loops = list(_group._GLOO_LOOPS)
            check(len(loops) == 1 and str(loops[0]) in _loop_ticks._tasks(),
                  "the Gloo device's event-loop thread was not found (%s)" % loops)
        finally:
            g._close_group()
    return devices


def gloo_devices():
    """Two groups of a process, one after the other (a recovery), share their Gloo devices, and
    the second connects through them to a peer doing the same: torch would make new devices for
    each group (host-name lookups, a loop thread whose end waits 10 ms)."""
    import datetime
    import subprocess
    import torch.distributed as dist
    server = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=60))
    peer = subprocess.Popen([sys.executable, os.path.abspath(__file__), "gloo_devices_peer"],
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path),
                                     DDP_TEST_STORE_PORT=str(server.port)))
    try:
        devices = rebuild_twice(0, server.port)
    finally:
        check(peer.wait(60) == 0, "the peer (rank 1) failed")
    check(len(devices[0]) == 1 and devices[0][0] is devices[1][0],
          "the group of quorum 0.1 made its own Gloo device (%s, then %s)" % tuple(devices))


def gloo_devices_peer():
    devices = rebuild_twice(1, int(os.environ["DDP_TEST_STORE_PORT"]))
    check(devices[0][0] is devices[1][0], "rank 1's group of quorum 0.1 made its own device")


def switches(tid):
    with open("/proc/self/task/%d/status" % tid) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise Failure("no voluntary_ctxt_switches for thread %d" % tid)


def gloo_ticks():
    """While a group connects, a Gloo device's event loop is woken (SIGURG to its thread) instead
    of sleeping out its 10 ms epoll_wait: the thread is found as the device is made, leaves
    epoll_wait more often than its timeout alone makes it, the kicks stop by themselves after
    KICK_FOR_S (a build that waits longer waits for a peer), and SIGURG's disposition is put back
    after; a script's own SIGURG handler is kept (no kicks), and so is any thread but the main."""
    import signal
    import time
    import torch.distributed as dist
    from ddprun.torch import _loop_ticks
    device, tids = _loop_ticks.threads_started_by(
        lambda: dist.ProcessGroupGloo.create_default_device(), 1)
    check(len(tids) == 1 and _loop_ticks._in_epoll(tids[0]),
          "the new device's loop thread was not found (%s)" % tids)
    check(signal.getsignal(signal.SIGURG) == signal.SIG_DFL, "SIGURG has a handler already")
    before, t0 = switches(tids[0]), time.monotonic()
    ticks = _loop_ticks.Ticks(tids, period_s=0.001)
    with ticks:
        check(signal.getsignal(signal.SIGURG) not in (signal.SIG_DFL, signal.SIG_IGN),
              "no SIGURG handler while the loop is woken")
        ticks._thread.join(60)  # the kicks stop by themselves after KICK_FOR_S
        check(not ticks._thread.is_alive(), "still kicking 60 s on (KICK_FOR_S = %g s)"
              % _loop_ticks.KICK_FOR_S)
        elapsed_ms, woke = (time.monotonic() - t0) * 1000, switches(tids[0]) - before
    check(ticks.kicks >= 20, "only %d kicks" % ticks.kicks)
    # Its own timeout wakes the loop at most once per 10 ms; each kick that finds it asleep once.
    check(woke >= elapsed_ms / 10 + ticks.kicks / 4,
          "the loop thread woke %d times in %.0f ms of %d kicks (its timeout alone: %.0f)"
          % (woke, elapsed_ms, ticks.kicks, elapsed_ms / 10))
    print("the loop woke %d times in %.0f ms of %d kicks" % (woke, elapsed_ms, ticks.kicks))
    check(signal.getsignal(signal.SIGURG) == signal.SIG_DFL, "SIGURG's default was not put back")

    def own(signum, frame):
        pass
    signal.signal(signal.SIGURG, own)
    try:
        with _loop_ticks.Ticks(tids, period_s=0.002) as kept:
            check(signal.getsignal(signal.SIGURG) is own, "the script's SIGURG handler was replaced")
        check(kept._thread is None and kept.kicks == 0, "a script with its own handler got kicks")
    finally:
        signal.signal(signal.SIGURG, signal.SIG_DFL)
    off_main = []
    t = threading.Thread(target=lambda: off_main.append(_loop_ticks.Ticks(tids).__enter__()))
    t.start()
    t.join()
    check(off_main[0]._thread is None, "Ticks kicked from a thread other than the main one")
    del device


def main():
    groups = {"sampler": [sampler_matches_torch, sampler_reshards, sampler_same_world],
              "sampler_tail": [sampler_tail],
              "standby": [standby_decode, standby_fifo],
              "board": [board_decode],
              "join": [join_gives_up],
              "ddp_sync": [ddp_sync],
              "buffer_broadcast": [buffer_broadcast],
              "digest": [digest, transfer],
              "store_sockets": [store_sockets],
              "gloo_devices": [gloo_devices],
              "gloo_ticks": [gloo_ticks],
              "gloo_devices_peer": [gloo_devices_peer]}  # gloo_devices' rank 1
    names = sys.argv[1:] or [n for n in groups if not n.endswith("_peer")]
    try:
        for name in names:
            for test in groups[name]:
                test()
                print("ok %s" % test.__name__, flush=True)
    except Failure as e:
        print("FAIL: %s" % e, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

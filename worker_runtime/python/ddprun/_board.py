"""The quorum board as a worker reads it (rendezvous/quorum/quorum_board.hpp has the layout, byte by
byte): a shared-memory file the agent writes, one slot per local rank, an epoch word bumped at every
publish. The worker maps it once; checking for a new quorum is one 4-byte read, no system call.

Thread safety: any thread may call epoch(); read() retries while the agent writes the slot."""
import json
import mmap
import os
import struct
import time

_MAGIC = b"DDPQRM01"
_EPOCH = 64
_SLOTS = 128
_SLOT_HEADER = 8
_READ_TRIES = 1000


class BoardError(Exception):
    """The board cannot be opened or holds no valid record (the message says which)."""


class QuorumRecord:
    """One worker's place in the newest quorum (quorum_record.hpp): generation, quorum, rank,
    world_size, local_rank, local_world_size, group_rank, group_world_size, master_addr,
    master_port, reason, replaced (global ranks whose process is new)."""

    __slots__ = ("generation", "quorum", "rank", "world_size", "local_rank", "local_world_size",
                 "group_rank", "group_world_size", "master_addr", "master_port", "reason",
                 "replaced")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.get(name))
        self.reason = self.reason or ""
        self.replaced = list(self.replaced or [])

    @property
    def id(self):
        return (self.generation, self.quorum)

    @classmethod
    def decode(cls, text):
        try:
            j = json.loads(text)
        except ValueError as e:
            raise BoardError("quorum record is not JSON: %s" % e)
        if not isinstance(j, dict):
            raise BoardError("quorum record is not a JSON object")
        ints = ("generation", "quorum", "rank", "world_size", "local_rank", "local_world_size",
                "group_rank", "group_world_size", "master_port")
        for name in ints:
            if not isinstance(j.get(name), int) or isinstance(j.get(name), bool):
                raise BoardError("quorum record: field '%s' is missing or not an integer" % name)
        if not isinstance(j.get("master_addr"), str):
            raise BoardError("quorum record: field 'master_addr' is missing or not a string")
        if not 0 <= j["rank"] < j["world_size"]:
            raise BoardError("quorum record: rank %d outside world size %d" % (j["rank"], j["world_size"]))
        return cls(**{k: j.get(k) for k in cls.__slots__})

    def __repr__(self):
        return "QuorumRecord(%d.%d rank %d of %d)" % (self.generation, self.quorum, self.rank,
                                                     self.world_size)


def quorum_name(qid):
    return "%d.%d" % qid


class QuorumBoard:
    """One slot of the board at `path` (DDP_QUORUM_BOARD), slot `slot` (DDP_QUORUM_SLOT)."""

    def __init__(self, path, slot):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise BoardError("cannot open the quorum board %s: %s" % (path, e.strerror))
        try:
            size = os.fstat(fd).st_size
            if size < _SLOTS:
                raise BoardError("%s is not a quorum board (%d bytes)" % (path, size))
            self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        if self._map[:8] != _MAGIC:
            raise BoardError("%s is not a quorum board (bad magic)" % path)
        slots, slot_bytes = struct.unpack_from("=II", self._map, 8)
        if not 0 <= slot < slots or _SLOTS + slots * slot_bytes > size:
            raise BoardError("quorum board %s has no slot %d (%d slots)" % (path, slot, slots))
        self._words = memoryview(self._map).cast("I")  # aligned 4-byte loads
        self._slot = _SLOTS + slot * slot_bytes
        self._slot_bytes = slot_bytes

    def epoch(self):
        """Changes whenever the agent published. One aligned 4-byte load."""
        return self._words[_EPOCH // 4]

    def read(self):
        """This slot's record, or None while the agent wrote none. Raises BoardError when the slot
        holds no valid record."""
        for _ in range(_READ_TRIES):
            before = self._words[self._slot // 4]
            if before & 1:
                continue
            length = self._words[self._slot // 4 + 1]
            if length > self._slot_bytes - _SLOT_HEADER:
                raise BoardError("quorum board slot claims %d bytes" % length)
            text = bytes(self._map[self._slot + _SLOT_HEADER:self._slot + _SLOT_HEADER + length])
            if self._words[self._slot // 4] == before:
                return QuorumRecord.decode(text) if length else None
        raise BoardError("quorum board slot kept changing while read")

    def wait_for_change(self, seen, timeout_s, stop=None):
        """Until the epoch differs from `seen` or `timeout_s` passed (or `stop()` is true): True
        when it changed. Polls every millisecond (Python has no futex)."""
        deadline = time.monotonic() + timeout_s
        while self.epoch() == seen:
            if time.monotonic() >= deadline or (stop is not None and stop()):
                return False
            time.sleep(0.001)
        return True

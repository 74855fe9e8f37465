"""Standby processes for Python workers (worker_runtime/standby.hpp is the C++ side; the message is
rendezvous/quorum/standby_message.hpp): a process started with DDP_STANDBY=<fifo> waits until its
agent writes a failed worker's whole environment on the FIFO, then goes on as that worker."""
import os
import struct

_HEADER = 8
_MAX_MESSAGE = 16 << 20


class StandbyError(Exception):
    """The FIFO cannot be read or its message is malformed (the message says which)."""


def started_as_standby():
    return bool(os.environ.get("DDP_STANDBY"))


def _read_exactly(fd, n, path):
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            raise StandbyError("standby FIFO %s closed after %d of %d bytes" % (path, got, n))
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def decode(payload):
    """The (name, value) pairs of a message's payload: "NAME=VALUE\\0" entries."""
    if payload and not payload.endswith(b"\0"):
        raise StandbyError("standby message: the last entry has no terminating NUL")
    entries = []
    for raw in payload.split(b"\0")[:-1]:
        name, eq, value = raw.partition(b"=")
        if not eq or not name:
            raise StandbyError("standby message: entry %r has no NAME=" % raw[:40])
        entries.append((os.fsdecode(name), os.fsdecode(value)))
    return entries


def await_assignment():
    """False at once when this process is no standby. Otherwise blocks (no time limit: the agent
    SIGKILLs a standby it no longer needs) until the agent assigns it, replaces os.environ with the
    environment received and returns True. Raises StandbyError with the environment unchanged."""
    path = os.environ.get("DDP_STANDBY")
    if not path:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise StandbyError("cannot open the standby FIFO %s: %s" % (path, e.strerror))
    try:
        (length,) = struct.unpack("<Q", _read_exactly(fd, _HEADER, path))
        if length > _MAX_MESSAGE:
            raise StandbyError("standby message of %d bytes (at most %d)" % (length, _MAX_MESSAGE))
        entries = decode(_read_exactly(fd, length, path))
    except OSError as e:
        raise StandbyError("cannot read the standby FIFO %s: %s" % (path, e.strerror))
    finally:
        os.close(fd)
    os.environ.clear()
    os.environ.update(entries)
    return True

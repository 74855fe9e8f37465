"""The sockets a process group opened, found in /proc/self/fd (what torch 1.13's Gloo offers no
abort for): shutting them down makes every wait on them end, in this process and in its peers, so a
rank blocked on a peer that froze or was cut off by the network fails its collective instead of
waiting out the group's timeout (ddprun's C++ runtime does the same: docs/recovery.md)."""
import os
import socket

_FD_DIR = "/proc/self/fd"


def socket_inodes():
    """{fd: "socket:[inode]"} for every socket this process has open now."""
    found = {}
    for name in os.listdir(_FD_DIR):
        try:
            target = os.readlink(os.path.join(_FD_DIR, name))
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:"):
            found[int(name)] = target
    return found


def opened_since(before):
    """The sockets open now that were not open (as the same socket) in `before`."""
    now = socket_inodes()
    return {fd: inode for fd, inode in now.items() if before.get(fd) != inode}


def without(sockets, others):
    """The sockets of {fd: inode} that are not in `others` (as the same socket)."""
    return {fd: inode for fd, inode in sockets.items() if others.get(fd) != inode}


def shutdown(sockets):
    """Shuts down each socket of {fd: inode} that is still that socket (an fd closed and reused for
    something else is left alone). Never raises."""
    for fd, inode in sockets.items():
        try:
            if os.readlink(os.path.join(_FD_DIR, str(fd))) != inode:
                continue
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected (a listener): nothing waits on it for a peer's bytes
        finally:
            s.close()

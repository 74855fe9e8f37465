"""Waking a Gloo device's event loop while a process group connects (Linux; else nothing).

Gloo's TCP transport runs one event-loop thread per device, which sleeps in epoll_wait for up to
10 ms at a time. A pair that dials its peer first unregisters its listening socket, and that waits
for the loop's next tick: with nothing else happening, the rest of the 10 ms. A rank of a full
mesh dials up to world size - 1 peers one after the other, and a peer that listens waits for the
dial, so a 4-rank group took 20-40 ms to connect where the connections themselves take 1-2 ms.
epoll_wait ends at once, and the loop ticks, when a signal with a handler reaches its thread
(Gloo's loop goes on after EINTR: `nfds == -1 && errno == EINTR`). While a group connects, a
thread of ours sends SIGURG to the loops' threads every KICK_PERIOD_S, for at most KICK_FOR_S.

SIGURG because its default action is to ignore it (a signal still in flight when the build is
over does nothing) and Python scripts do not use it; a script that installed its own SIGURG
handler keeps it, and its builds wait out Gloo's ticks. Thread rules: `threads_started_by` from
any thread; `Ticks` is entered by the main thread only (Python sets handlers from it alone);
anywhere else it does nothing."""
import ctypes
import os
import signal
import threading
import time

KICK_PERIOD_S = 0.0005
# Kicks stop this long after a build began: one that takes longer waits for a peer (a process still
# starting), and kicking through such a wait starved a job's other processes (a 2 x 2 job grown back
# by a new node: its agent's rendezvous heartbeats went unanswered for 3 s, every time the survivors
# kicked through the seconds the newcomers took to start; never with the kicks bounded).
KICK_FOR_S = 0.25
_FIND_S = 0.5  # how long a new device's loop thread is looked for (it starts at once)
_EPOLL_SYSCALLS = {"x86_64": (232, 281, 441), "aarch64": (22, 441)}  # epoll_wait, epoll_pwait(2)

try:
    _tgkill = ctypes.CDLL(None, use_errno=True).tgkill  # glibc >= 2.30
    _tgkill.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int)
except (OSError, AttributeError):
    _tgkill = None


def _tasks():
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()


def _in_epoll(tid):
    """True when thread `tid` of this process sleeps in epoll_wait."""
    try:
        with open("/proc/self/task/%s/wchan" % tid) as f:
            if "epoll" in f.read():
                return True
        with open("/proc/self/task/%s/syscall" % tid) as f:
            number = f.read().split()[0]
    except (OSError, IndexError):
        return False
    return number.isdigit() and int(number) in _EPOLL_SYSCALLS.get(os.uname().machine, ())


def threads_started_by(make, count):
    """Calls make() (which starts `count` event-loop threads: Gloo devices) and returns (what it
    returned, the thread ids of those loops). The ids are [] where they cannot be told apart: no
    /proc, no tgkill, or not exactly `count` new threads in epoll_wait within _FIND_S."""
    before = _tasks()
    made = make()
    if _tgkill is None or not before:
        return made, []
    deadline = time.monotonic() + _FIND_S
    while True:
        new = [int(t) for t in _tasks() - before if _in_epoll(t)]
        if len(new) == count:
            return made, new
        if len(new) > count or time.monotonic() > deadline:
            return made, []
        time.sleep(0.001)


def _ignore(signum, frame):
    pass


class Ticks:
    """A context manager: while it is entered (for KICK_FOR_S at most), the loops of `tids` tick
    every `period_s`."""

    def __init__(self, tids, period_s=KICK_PERIOD_S):
        self._tids = list(tids)
        self._period_s = period_s
        self.kicks = 0  # rounds of signals sent (read by tests)
        self._thread = None
        self._stop = threading.Event()
        self._previous = None

    def __enter__(self):
        if not self._tids or threading.current_thread() is not threading.main_thread():
            return self
        previous = signal.getsignal(signal.SIGURG)
        if previous not in (signal.SIG_DFL, signal.SIG_IGN):
            return self  # the script's own handler (or one set outside Python): left alone
        signal.signal(signal.SIGURG, _ignore)
        self._previous = previous
        self._thread = threading.Thread(target=self._run, name="ddprun-gloo-ticks", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is None:
            return False
        self._stop.set()
        self._thread.join()
        signal.signal(signal.SIGURG, self._previous)
        return False

    def _run(self):
        pid = os.getpid()
        end = time.monotonic() + KICK_FOR_S
        while not self._stop.wait(self._period_s) and time.monotonic() < end:
            for tid in self._tids:
                _tgkill(pid, tid, signal.SIGURG)
            self.kicks += 1

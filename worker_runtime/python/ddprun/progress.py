"""Progress beats from a Python training script to its ddprun agent (docs/worker_runtime.md
"Progress beats"): what worker_runtime's ddp::reportProgress does for C++ workers, for hang
detection (ddprun --hang-timeout) and straggler detection (ddprun --straggler-threshold).

Once per step (`ddprun.report_progress` is this function):

    import time
    import ddprun

    for step, (x, y) in enumerate(loader, 1):
        t0 = time.perf_counter()
        loss = loss_fn(model(x), y)          # forward: this rank's own work
        t1 = time.perf_counter()
        loss.backward()                      # DDP waits here for the gradients' allreduce
        t2 = time.perf_counter()
        optimizer.step()                     # this rank's own work again
        ddprun.report_progress(step, compute_s=(t1 - t0) + (time.perf_counter() - t2))

`compute_s` is the step's own work: its time less what it spent waiting for its peers. In
synchronous data-parallel training every rank's wall step time is the same (the allreduce waits
for the slowest), so only the compute time tells a slow rank apart. DDP's backward() returns
only once the allreduce is done, so the example counts forward and the optimizer and leaves
backward out (a rank slow at backward alone goes unseen; on GPU, synchronise or use CUDA events
before reading the clock). Without `compute_s` a beat only says the step moved on (hang
detection).

The agent exports DDP_PROGRESS_FILE (its FIFO) when --hang-timeout or --straggler-threshold is
given; without it (torchrun, or ddprun without those flags) report_progress does nothing. The
variable is read at the first call, not at import (a standby imports the package before it is
handed its place). A beat is
one line of torch's file-timer protocol — the release of the scope "ddprun.progress" with "step"
and "compute_s" (the mean per step since the previous beat) — written as torch's FileTimerClient
writes: open non-blocking, one write, close. At most one beat per 100 ms; a beat nobody can take
(no reader, a full pipe) is dropped, never waited for. Costs about a microsecond per call between
beats. Not thread-safe: call it from the training loop's thread.
"""
import json
import os
import time
from typing import Optional

_MIN_INTERVAL_S = 0.1
_path: Optional[str] = None  # DDP_PROGRESS_FILE, read at the first call ("" = none)
_last_sent = float("-inf")
_compute_sum = 0.0
_compute_steps = 0


def report_progress(step: int, compute_s: Optional[float] = None) -> None:
    """Tells the agent that `step` (an int >= 0) is done, and how many seconds of its own work it
    took (`compute_s`, a float >= 0, optional). Never blocks, never raises for the FIFO's sake."""
    global _path, _last_sent, _compute_sum, _compute_steps
    if _path is None:
        _path = os.environ.get("DDP_PROGRESS_FILE", "")
    if not _path:
        return
    if compute_s is not None and compute_s >= 0 and compute_s != float("inf"):
        _compute_sum += float(compute_s)
        _compute_steps += 1
    now = time.monotonic()
    if now - _last_sent < _MIN_INTERVAL_S:
        return
    _last_sent = now
    beat = {"version": 1, "pid": os.getpid(), "scope_id": "ddprun.progress",
            "expiration_time": -1, "signal": 0, "step": int(step)}
    if _compute_steps:
        beat["compute_s"] = _compute_sum / _compute_steps
    _compute_sum, _compute_steps = 0.0, 0
    line = (json.dumps(beat) + "\n").encode()
    try:
        fd = os.open(_path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return  # no reader (ENXIO) or no FIFO: nobody listens now
    try:
        os.write(fd, line)  # Python ignores SIGPIPE: a closed reader is an EPIPE OSError
    except OSError:
        pass  # a full pipe (EAGAIN) or a reader gone (EPIPE): the beat is dropped
    finally:
        os.close(fd)

"""Metric points from a Python training script to ddprun's status page (docs/status.md "Status
page and metrics"): what `train` publishes for its logged steps, for a PyTorch script.

    import ddprun

    for step, (x, y) in enumerate(loader, 1):
        ...
        ddprun.publish_point(step, loss=loss.item(), samples_per_s=rate, epoch=epoch, lr=lr)

Call it on every rank or on rank 0 only: only rank 0 of the job sends (the rank of torch's
default group when one is initialized, else RANK). A point goes to the worker store
(MASTER_ADDR:MASTER_PORT, which node rank 0's agent hosts) as `train` writes it (docs/status.md,
the `/ddp/metrics/n` table): n = ADD of `/ddp/metrics/n`, then SET of `/ddp/metrics/<n % 64>` to
one JSON object with "n", "step", "time" (seconds since the epoch) and the fields given; the
agent relays it to the status pages. Like `train`, at most one point per 200 ms is sent: a call
sooner after the last point sent is dropped.

Outside ddprun (no DDP_AGENT_VERSION: torchrun, `env://` by hand, no launcher) and without torch
every call does nothing. The store client (torch.distributed.TCPStore) is made at the first point
sent; connecting blocks up to 5 s. A store error ends publishing for the process with one line on
stderr (the training goes on); no call ever raises for the store's sake. Not thread-safe: call it
from the training loop's thread.
"""
import json
import math
import os
import sys
import time
from typing import Any, Dict, Optional

from ddprun._agent import agent_version

_MIN_INTERVAL_S = 0.2  # train's kPublishInterval (trainer/metrics.cpp)
_SLOTS = 64  # the ring of the newest points (rendezvous/store/metric_points.hpp)
_CONNECT_TIMEOUT_S = 5.0
# torch's Store sends "/" + key: these are /ddp/metrics/n and /ddp/metrics/<slot> on the wire.
_COUNT_KEY = "ddp/metrics/n"
_SLOT_KEY = "ddp/metrics/%d"

_store: Any = None
_stopped = False  # a store error ended publishing
_last_sent = float("-inf")


def publish_point(step: int, loss: Optional[float] = None, samples_per_s: Optional[float] = None,
                  epoch: Optional[int] = None, lr: Optional[float] = None) -> bool:
    """Sends one point (the training's `step`, and any of `loss`, `samples_per_s`, `epoch`, `lr`;
    plain numbers, 0-d tensors or numpy scalars) to the status page. A field that is NaN or
    infinite is left out of the point. Returns True when the point was sent; False when the call
    did nothing (not under ddprun, not rank 0, within 200 ms of the last point, publishing
    stopped). Blocks for two store round trips (the first point: also the connection, up to 5 s).
    Raises TypeError when a field is not a number, under any launcher; never for the store's
    sake."""
    global _last_sent
    point = _point(step, loss=loss, samples_per_s=samples_per_s, epoch=epoch, lr=lr)
    if _stopped or agent_version() is None or _rank() != 0:
        return False
    now = time.monotonic()
    if now - _last_sent < _MIN_INTERVAL_S:
        return False
    try:
        store = _client()
        if store is None:
            return False
        n = store.add(_COUNT_KEY, 1)
        store.set(_SLOT_KEY % (n % _SLOTS), json.dumps(dict(point, n=n)))
    except Exception as e:  # noqa: BLE001 (torch raises RuntimeError and its own kinds)
        _stop("%s: %s" % (type(e).__name__, e))
        return False
    _last_sent = now
    return True


def _point(step: int, **fields: Optional[float]) -> Dict[str, Any]:
    """The point's JSON fields ("n" aside): integers for step and epoch, floats for the rest,
    non-finite values left out. Raises TypeError for a field that is not a number."""
    point: Dict[str, Any] = {}
    for key, value in [("step", step)] + [(k, v) for k, v in fields.items() if v is not None]:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise TypeError("ddprun.publish_point: %s must be a number, not %r" % (key, value))
        if math.isfinite(number):
            point[key] = int(value) if key in ("step", "epoch") else number
    if "step" not in point:
        raise TypeError("ddprun.publish_point: step must be a finite number, not %r" % (step, ))
    point["time"] = time.time()
    return point


def _rank() -> int:
    """This process's rank in the job: torch's default group when one is initialized (it follows
    an in-place recovery), else RANK (-1 when unset)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # noqa: BLE001 (a group being torn down)
        pass
    try:
        return int(os.environ.get("RANK", "-1"))
    except ValueError:
        return -1


def _client() -> Any:
    """The worker store's client, made on first use; None without torch or MASTER_ADDR/PORT."""
    global _store
    if _store is None:
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        if not addr or not port:
            return None
        try:
            import datetime

            from torch.distributed import TCPStore
        except ImportError:
            return None
        _store = TCPStore(addr, int(port), is_master=False,
                          timeout=datetime.timedelta(seconds=_CONNECT_TIMEOUT_S))
    return _store


def _stop(why: str) -> None:
    global _store, _stopped
    _store, _stopped = None, True
    print("ddprun: metric points for the status page stop: %s" % why, file=sys.stderr, flush=True)

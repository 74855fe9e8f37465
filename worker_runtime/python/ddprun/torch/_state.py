"""The registered training state (g.state(...)): what a recovery agrees on and sends from the donor
to the ranks that differ. Each entry is an object with state_dict() and load_state_dict()."""
import hashlib
import io

import torch

from ._errors import UsageError


def check_registrable(name, obj):
    for method in ("state_dict", "load_state_dict"):
        if not callable(getattr(obj, method, None)):
            raise UsageError("g.state(%s=...): a %s has no %s(); register objects with state_dict() "
                             "and load_state_dict() (a module, an optimizer, a scheduler, a sampler)"
                             % (name, type(obj).__name__, method))


def _feed(h, value):
    if isinstance(value, torch.Tensor):
        t = value.detach()
        h.update(b"T" + str(t.dtype).encode() + repr(tuple(t.shape)).encode())
        if t.numel():
            t = t.to("cpu").contiguous()
            h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.dtype != torch.bool
                     else t.numpy().tobytes())
    elif isinstance(value, dict):
        h.update(b"D%d" % len(value))
        for k, v in value.items():
            _feed(h, k)
            _feed(h, v)
    elif isinstance(value, (list, tuple)):
        h.update(b"L%d" % len(value))
        for v in value:
            _feed(h, v)
    else:
        h.update(b"V" + repr(value).encode())


def snapshot(objects, extra):
    """{name: obj.state_dict()} for every registered object, plus `extra` under "ddprun"."""
    state = {name: obj.state_dict() for name, obj in objects.items()}
    state["ddprun"] = extra
    return state


def digest(state):
    """16 bytes that differ when two ranks' states differ (BLAKE2b over every tensor's bytes and
    every other value's repr, in the state's own order)."""
    h = hashlib.blake2b(digest_size=16)
    _feed(h, state)
    return h.digest()


def encode(state):
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def decode(blob):
    return torch.load(io.BytesIO(blob), map_location="cpu")


def apply(objects, state):
    """Loads each registered object's part of `state`; returns state["ddprun"]."""
    for name, obj in objects.items():
        if name not in state:
            raise UsageError("the donor's state has no '%s': every rank must register the same "
                             "names with g.state()" % name)
        obj.load_state_dict(state[name])
    return state["ddprun"]

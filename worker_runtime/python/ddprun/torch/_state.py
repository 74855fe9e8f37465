"""The registered training state (g.state(...)): what a recovery agrees on and sends from the donor
to the ranks that differ. Each entry is an object with state_dict() and load_state_dict()."""
import hashlib
import pickle

import torch

from ._errors import UsageError


def check_registrable(name, obj):
    for method in ("state_dict", "load_state_dict"):
        if not callable(getattr(obj, method, None)):
            raise UsageError("g.state(%s=...): an object of type %s has no %s(); register objects "
                             "with state_dict() and load_state_dict() (a module, an optimizer, a "
                             "scheduler, a sampler)"
                             % (name, type(obj).__name__, method))


def _feed(h, value):
    if isinstance(value, torch.Tensor):
        t = value.detach()
        h.update(b"T" + str(t.dtype).encode() + repr(tuple(t.shape)).encode())
        if t.numel():
            t = t.to("cpu").contiguous()
            h.update(t.view(-1).view(torch.uint8).numpy())  # the bytes, not a copy
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


def snapshot_and_digest(objects, step):
    """(snapshot(objects, {"step": step}), its digest)."""
    state = snapshot(objects, {"step": step})
    return state, digest(state)


class _TensorRef:
    """Where a tensor of the state lies in the flat buffer that carries the state's bytes."""
    __slots__ = ("offset", "nbytes", "dtype", "shape")

    def __init__(self, offset, nbytes, dtype, shape):
        self.offset, self.nbytes, self.dtype, self.shape = offset, nbytes, dtype, shape

    def __getstate__(self):
        return (self.offset, self.nbytes, self.dtype, self.shape)

    def __setstate__(self, state):
        self.offset, self.nbytes, self.dtype, self.shape = state


_ALIGN = 64  # every tensor starts at a multiple: a view of the buffer as any dtype is aligned


def _split(value, tensors, offset):
    """The value with its tensors replaced by _TensorRef (appended to `tensors`); returns
    (skeleton, next offset). Dict subclasses and their attributes (a module's state_dict keeps
    its version `_metadata` on its OrderedDict) are kept."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        nbytes = t.numel() * t.element_size()
        ref = _TensorRef(offset, nbytes, t.dtype, tuple(t.shape))
        tensors.append((ref, t))
        return ref, offset + (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
    if isinstance(value, dict):
        out = type(value)()
        for k, v in value.items():
            out[k], offset = _split(v, tensors, offset)
        if getattr(value, "__dict__", None):
            out.__dict__.update(value.__dict__)
        return out, offset
    if isinstance(value, (list, tuple)):
        items = []
        for v in value:
            item, offset = _split(v, tensors, offset)
            items.append(item)
        return (items if isinstance(value, list) else type(value)(items)), offset
    return value, offset


def _join(value, flat):
    if isinstance(value, _TensorRef):
        if value.nbytes == 0:
            return torch.empty(value.shape, dtype=value.dtype, device=flat.device)
        return flat[value.offset:value.offset + value.nbytes].view(value.dtype).view(value.shape)
    if isinstance(value, dict):
        out = type(value)()
        for k, v in value.items():
            out[k] = _join(v, flat)
        if getattr(value, "__dict__", None):
            out.__dict__.update(value.__dict__)
        return out
    if isinstance(value, (list, tuple)):
        items = [_join(v, flat) for v in value]
        return items if isinstance(value, list) else type(value)(items)
    return value


def encode(state, device):
    """(skeleton bytes, flat uint8 tensor on `device`): the state's structure pickled with its
    tensors replaced by places in the flat buffer, and every tensor's bytes in that buffer (one
    copy, no serialisation of the tensors)."""
    tensors = []
    skeleton, size = _split(state, tensors, 0)
    flat = torch.empty(size, dtype=torch.uint8, device=device)
    for ref, t in tensors:
        if ref.nbytes:
            flat[ref.offset:ref.offset + ref.nbytes].copy_(t.contiguous().reshape(-1).view(torch.uint8))
    return pickle.dumps(skeleton, protocol=pickle.HIGHEST_PROTOCOL), flat


def decode(skeleton, flat):
    """The state encode() took apart; its tensors are views of `flat` (load_state_dict copies)."""
    return _join(pickle.loads(skeleton), flat)


def apply(objects, state):
    """Loads each registered object's part of `state`; returns state["ddprun"]."""
    for name, obj in objects.items():
        if name not in state:
            raise UsageError("the donor's state has no '%s': every rank must register the same "
                             "names with g.state()" % name)
        obj.load_state_dict(state[name])
    return state["ddprun"]

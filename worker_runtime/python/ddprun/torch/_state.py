"""The registered training state (g.state(...)): what a recovery agrees on and sends from the donor
to the ranks that differ. Each entry is an object with state_dict() and load_state_dict()."""
import hashlib
import pickle
import struct

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
    """16 bytes that differ when two ranks' states differ (the first 16 of SHA-256 over every
    tensor's bytes and every other value's repr, in the state's own order). SHA-256 because CPUs
    hash it in hardware (x86 SHA-NI, Armv8 SHA2): 2.3 ms for 3.6 MB against BLAKE2b's 6.2 ms on the development VM,
    and a recovery's survivors hash on CPUs their training shares."""
    h = hashlib.sha256()
    _feed(h, state)
    return h.digest()[:16]


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


HEADER_BYTES = 64 << 10  # the first message of a transfer: the sizes, and the skeleton if it fits
_SIZES = struct.Struct("<qq")


def header(skeleton, flat_bytes):
    """(the transfer's first message: HEADER_BYTES with the skeleton's and the flat buffer's sizes
    and the skeleton itself where it fits, the skeleton where it does not: a message of its own,
    else None). A transfer is two messages (header, flat buffer) or three."""
    head = bytearray(HEADER_BYTES)
    _SIZES.pack_into(head, 0, len(skeleton), flat_bytes)
    if len(skeleton) > HEADER_BYTES - _SIZES.size:
        return head, skeleton
    head[_SIZES.size:_SIZES.size + len(skeleton)] = skeleton
    return head, None


def read_header(head):
    """(skeleton bytes or None when it comes in a message of its own, its size, the flat buffer's
    size) of a header(); raises RuntimeError, as a failed transfer does, for sizes no header()
    writes."""
    n, flat_bytes = _SIZES.unpack_from(head, 0)
    if n < 0 or flat_bytes < 0:
        raise RuntimeError("state transfer header with sizes %d and %d" % (n, flat_bytes))
    if n <= len(head) - _SIZES.size:
        return bytes(head[_SIZES.size:_SIZES.size + n]), n, flat_bytes
    return None, n, flat_bytes

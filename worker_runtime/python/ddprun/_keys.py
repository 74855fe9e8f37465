"""Worker store keys that ddprun agents and workers share (rendezvous/store/worker_store_keys.hpp
states each one). torch's TCPStore client sends every key as "/" + key, so these are the C++ keys
without their leading "/" ("ddp/attempt_0/in_place" is "/ddp/attempt_0/in_place" on the wire)."""


def _attempt(generation):
    return "ddp/attempt_%d" % generation


def in_place_count(generation):
    return _attempt(generation) + "/in_place"


def standby_count(generation):
    return _attempt(generation) + "/standby"


def joined_count(generation, rank):
    return _attempt(generation) + "/joined/%d" % rank


def state_lost(generation):
    return _attempt(generation) + "/state_lost"


def finished(generation):
    return _attempt(generation) + "/finished"


def quorum_prefix(generation, quorum):
    """The prefix of one quorum's process group: a prefix never repeats (torch's store barrier key
    would find the previous group's count and hang, pytorch#55967)."""
    return "ddprun/q%d.%d" % (generation, quorum)

"""(d) The same raw v1a request sequences sent to torch 1.13's own TCPStore server and to ddprund
(default --legacy-dialect=auto, and 1.13) must give identical replies, byte for byte, except for
the documented improvements, whose exact results are asserted on both sides:
  * GET of a missing key: torch closes the connection, ddprund replies an empty value;
  * COMPARE_SET creating a key: torch does not wake its waiters, ddprund does.
"""
import hashlib
import os
import sys
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import (Ddprund, RawConn, fail, req_add, req_cas, req_check,  # noqa: E402
                         req_delete, req_get, req_numkeys, req_set, req_wait, req_watch,
                         require_torch)

require_torch()
from torch.distributed import TCPStore  # noqa: E402

BIG = bytes(range(256)) * (9 * 4096)  # 9 MiB: past torch's libuv limit, fine for legacy

# Steps: ("req", conn, bytes, kind) sends and reads a reply of `kind` (value/int/byte/none);
# ("send", conn, bytes); ("read", conn, kind); ("sync", conn) = GETNUMKEYS round trip (proves
# that nothing, e.g. a WAIT reply, is queued ahead on that connection); ("close", conn);
# ("split", conn, bytes) sends one byte per send().
SEQUENCES = {
    "basic ops": [
        ("req", "a", req_set(b"/k1", b"v1"), "none"),
        ("req", "a", req_get(b"/k1"), "value"),
        ("req", "a", req_add(b"/cnt", 8), "int"),
        ("req", "a", req_add(b"/cnt", -10), "int"),
        ("req", "a", req_get(b"/cnt"), "value"),
        ("req", "a", req_add(b"/new", 0), "int"),
        ("req", "a", req_get(b"/new"), "value"),
        ("req", "a", req_cas(b"/cas", b"", b"first"), "value"),
        ("req", "a", req_cas(b"/cas", b"wrong", b"second"), "value"),
        ("req", "a", req_cas(b"/cas", b"first", b"second"), "value"),
        ("req", "a", req_cas(b"/m", b"zz", b"v2"), "value"),
        ("req", "a", req_check([b"/m"]), "byte"),
        ("req", "a", req_check([b"/k1", b"/cas"]), "byte"),
        ("req", "a", req_check([]), "byte"),
        ("sync", "a"),
        ("req", "a", req_delete(b"/k1"), "int"),
        ("req", "a", req_delete(b"/k1"), "int"),
        ("sync", "a"),
        ("req", "a", req_wait([b"/cas"]), "byte"),
        ("req", "a", req_wait([]), "byte"),
    ],
    "add parsing": [
        ("req", "a", req_set(b"/p", b" 12abc"), "none"),
        ("req", "a", req_add(b"/p", 1), "int"),
        ("req", "a", req_set(b"/neg", b"-5"), "none"),
        ("req", "a", req_add(b"/neg", -1), "int"),
        ("req", "a", req_get(b"/neg"), "value"),
    ],
    "multi-key wait with a duplicate key": [
        ("send", "w", req_wait([b"/a", b"/b", b"/a"])),
        ("sync", "w"),
        ("req", "s", req_set(b"/b", b"1"), "none"),
        ("sync", "s"),
        ("sync", "w"),
        ("req", "s", req_set(b"/a", b"2"), "none"),
        ("read", "w", "byte"),
        ("sync", "w"),
    ],
    "stale wait reply of a timed-out 1.13 client": [
        ("send", "a", req_wait([b"/late"])),
        ("sync", "a"),
        ("req", "b", req_set(b"/x", b"5"), "none"),
        ("req", "b", req_set(b"/late", b"1"), "none"),
        ("sync", "b"),
        ("req", "a", req_add(b"/x", 1), "int"),  # 1536: the stray 00 shifts the reply
    ],
    "waiter disconnects": [
        ("send", "a", req_wait([b"/w"])),
        ("sync", "a"),
        ("close", "a"),
        ("req", "b", req_set(b"/w", b"1"), "none"),
        ("sync", "b"),
        ("req", "c", req_wait([b"/w"]), "byte"),
    ],
    "delete does not wake": [
        ("req", "a", req_set(b"/g", b"v"), "none"),
        ("req", "a", req_delete(b"/g"), "int"),
        ("send", "b", req_wait([b"/g"])),
        ("sync", "b"),
        ("req", "a", req_delete(b"/g"), "int"),
        ("sync", "b"),
        ("req", "a", req_set(b"/g", b"back"), "none"),
        ("read", "b", "byte"),
    ],
    "pipelined requests": [
        ("send", "a", req_set(b"/p1", b"a") + req_get(b"/p1") + req_add(b"/p2", 3) +
         req_numkeys() + req_check([b"/p1", b"/p2"])),
        ("read", "a", "value"),
        ("read", "a", "int"),
        ("read", "a", "int"),
        ("read", "a", "byte"),
    ],
    "split request": [
        ("split", "a", req_set(b"/s", b"value") + req_get(b"/s")),
        ("read", "a", "value"),
    ],
    "add on a non-numeric value closes only that connection": [
        ("req", "a", req_set(b"/t", b"abc"), "none"),
        ("req", "b", req_add(b"/t", 1), "int"),
        ("req", "a", req_get(b"/t"), "value"),
        ("sync", "a"),
    ],
    "unknown opcode closes only that connection": [
        ("send", "c", req_set(b"/pp", b"1") + req_get(b"/pp") + b"\x2a"),
        ("read", "c", "value"),
        ("read", "c", "byte"),
        ("req", "b", b"\x2a", "byte"),
        ("req", "a", req_set(b"/u", b"1"), "none"),
        ("req", "a", req_get(b"/u"), "value"),
    ],
    "large value": [
        ("req", "a", req_set(b"/big", BIG), "none"),
        ("req", "a", req_get(b"/big"), "value"),
        ("req", "a", req_check([b"/big"]), "byte"),
    ],
    "idle connection": [
        ("open", "idle"),
        ("req", "a", req_set(b"/i", b"1"), "none"),
        ("req", "a", req_get(b"/i"), "value"),
        ("sync", "a"),
    ],
}

WATCH_SEQUENCE = [("req", "cb", req_watch(b"/wk"), "byte")]  # 1.13 mode only: 7 = WATCH_KEY

IMPROVEMENTS = {
    "get of a missing key": (
        [("req", "a", req_get(b"/nope"), "value")],
        ["EOF"], ["0000000000000000"]),
    "compare_set creating a key wakes its waiters": (
        [("send", "w", req_wait([b"/c"])), ("sync", "w"),
         ("req", "s", req_cas(b"/c", b"", b"v"), "value"), ("sync", "s"), ("sync", "w")],
        ["0000000000000000", "010000000000000076", "0100000000000000", "0100000000000000"],
        ["0000000000000000", "010000000000000076", "0100000000000000", "0001000000000000"]),
}


def describe(result):
    if isinstance(result, str):
        return result
    if len(result) > 64:
        return "%d bytes sha256 %s" % (len(result), hashlib.sha256(result).hexdigest()[:16])
    return result.hex()


def run(port, steps):
    conns, results = {}, []

    def conn(name):
        if name not in conns:
            conns[name] = RawConn(port)
        return conns[name]

    def read(c, kind):
        if kind == "value":
            return c.read_value()
        return c.read({"int": 8, "byte": 1}[kind])

    for step in steps:
        kind, name = step[0], step[1]
        if kind == "open":
            conn(name)
        elif kind == "close":
            conns.pop(name).close()
        elif kind == "send":
            conn(name).send(step[2])
        elif kind == "split":
            for i in range(len(step[2])):
                conn(name).send(step[2][i:i + 1])
        elif kind == "sync":
            conn(name).send(req_numkeys())
            results.append(describe(read(conn(name), "int")))
        elif kind == "read":
            results.append(describe(read(conn(name), step[2])))
        elif step[3] == "none":
            conn(name).send(step[2])
        else:
            conn(name).send(step[2])
            results.append(describe(read(conn(name), step[3])))
    for c in conns.values():
        c.close()
    return results


def torch_server():
    return TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=30), False)


def main():
    mismatches = []
    for mode in (["--legacy-dialect=auto"], ["--legacy-dialect=1.13"]):
        sequences = dict(SEQUENCES)
        if mode == ["--legacy-dialect=1.13"]:
            sequences["watch key registration"] = WATCH_SEQUENCE
        for name, steps in sequences.items():
            master = torch_server()
            expected = run(master.port, steps)
            del master
            with Ddprund(*mode) as daemon:
                actual = run(daemon.port, steps)
            if actual != expected:
                mismatches.append("%s [%s]:\n  torch 1.13: %s\n  ddprund:    %s"
                                  % (name, mode[0], expected, actual))
            else:
                print("same replies: %s [%s] %s" % (name, mode[0], expected[:6]))
    for name, (steps, torch_wanted, ours_wanted) in IMPROVEMENTS.items():
        master = torch_server()
        theirs = run(master.port, steps)
        del master
        with Ddprund() as daemon:
            ours = run(daemon.port, steps)
        if theirs != torch_wanted or ours != ours_wanted:
            mismatches.append("improvement %s:\n  torch 1.13: %s (expected %s)\n  ddprund:    %s "
                              "(expected %s)" % (name, theirs, torch_wanted, ours, ours_wanted))
        else:
            print("documented difference holds: %s" % name)
    if mismatches:
        fail("replies differ from torch 1.13's server:\n" + "\n".join(mismatches))
    print("differential test against torch 1.13's TCPStore server: OK")


if __name__ == "__main__":
    main()

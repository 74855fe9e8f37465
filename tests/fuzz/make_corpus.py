#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/store_fuzz.cpp into tests/fuzz/corpus/.

The frames are byte examples of torch's TCPStore dialects (captured from real torch 1.13
processes, or built from torch 2.x source where marked synthetic) and of ddprun's
wire extension (rendezvous/wire/wire_codec.hpp), arranged into the harness's input layout:
byte 0 = configuration, then records of (u8 connection | length << 2, bytes). Re-run after
changing the frames: python3 tests/fuzz/make_corpus.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def h(text):
    return bytes.fromhex(text.replace(" ", ""))


def s(b):
    return struct.pack("<Q", len(b)) + b


VALIDATE = h("00 cef7853c")

# v1a (torch 1.13), captured.
V1A = {
    "set": h("00 0300000000000000 2f6b31 0200000000000000 7631"),
    "cas": h("01 0400000000000000 2f636173 0000000000000000 0500000000000000 6669727374"),
    "get": h("02 0300000000000000 2f6b31"),
    "add": h("03 0400000000000000 2f636e74 f6ffffffffffffff"),
    "check": h("04 0200000000000000 0200000000000000 2f61 0300000000000000 2f7a7a"),
    "wait": h("05 0100000000000000 0300000000000000 2f6b31"),
    "numkeys": h("06"),
    "watch": h("07 0300000000000000 2f776b"),
    "delete": h("08 0300000000000000 2f6b31"),
    "init_add": h("03 0500000000000000 696e69742f 0100000000000000"),
}

# v1b (torch 2.1) and v2 (torch 2.2+), synthetic.
V1B = {
    "append": h("08 0200000000000000 2f6b 0100000000000000 77"),
    "multi_get": h("09 0300000000000000") + s(b"/k") + s(b"/a") + s(b"/b"),
    "multi_set": h("0a 0200000000000000") + s(b"/a") + s(b"1") + s(b"/b") + s(b"22"),
    "cancel": h("0b"),
}
V2 = {
    "ping": h("0d 8c590000"),
    "set": h("01 0200000000000000 2f6b 0100000000000000 76"),
    "append": h("09 0200000000000000 2f6b 0100000000000000 77"),
    "multi_get": h("0a 0300000000000000") + s(b"/k") + s(b"/a") + s(b"/b"),
    "multi_set": h("0b 0200000000000000") + s(b"/a") + s(b"1") + s(b"/b") + s(b"22"),
    "cancel": h("0c"),
    "queue_push": h("0e 0200000000000000 2f71 0400000000000000 6974656d"),
    "queue_pop": h("0f 0200000000000000 2f71"),
    "queue_len": h("10 0200000000000000 2f71"),
    "list_keys": h("11"),
    "barrier": h("12 0400000000000000 2f626172 0200000000000000"),
    "wait": h("06 0100000000000000 0300000000000000 2f6b31"),
    "add": h("04 0400000000000000 2f636e74 f6ffffffffffffff"),
    # ddprun's extension: HELLO client=ddprun wanting ON_CLOSE, ON_CLOSE "k" "" "v", clear all.
    "hello": h("f0 01000000 0100000000000000 0100000000000000") + s(b"client") + s(b"ddprun"),
    "on_close": h("f1 0100000000000000 6b 0000000000000000 0100000000000000 76"),
    "on_close_clear": h("f2 0000000000000000"),
    # REQUEST_ID client 0x0102 sequence 7, tagging the ADD that follows.
    "request_id": h("f3 0201000000000000 0700000000000000 04 0400000000000000 2f636e74 "
                    "0100000000000000"),
}


def records(conn, data):
    """Splits `data` for connection `conn` into records of at most 63 bytes."""
    out = b""
    for i in range(0, len(data), 63):
        part = data[i:i + 63]
        out += bytes([conn | (len(part) << 2)]) + part
    return out


def event(conn):
    return bytes([conn])


def write(name, config, body):
    with open(os.path.join(HERE, "corpus", name), "wb") as f:
        f.write(bytes([config]) + body)


def main():
    os.makedirs(os.path.join(HERE, "corpus"), exist_ok=True)
    for name, frame in V1A.items():
        write("v1a-" + name, 1, records(0, frame))
    for name, frame in V1B.items():
        write("v1b-" + name, 2, records(0, frame))
    for name, frame in V2.items():
        write("v2-" + name, 0, records(0, VALIDATE + frame))
    # Sequences across connections: a waiter woken by another's SET; a barrier of two; a 1.13
    # DELETE_KEY resolved by the grace event; ON_CLOSE firing when its connection closes.
    write("v1a-session", 1, records(0, b"".join(V1A[k] for k in V1A)))
    write("wait-then-set", 0, records(1, V1A["wait"]) + records(0, V1A["set"]) +
          records(1, V1A["get"]))
    write("barrier-of-two", 0, records(0, VALIDATE + V2["barrier"]) +
          records(1, VALIDATE + V2["barrier"]))
    write("grace-delete", 0, records(2, V1A["set"]) + records(2, V1A["delete"]) + event(2) +
          records(2, V1A["numkeys"]))
    write("on-close-fires", 0, records(0, VALIDATE + V2["hello"] + V2["on_close"]) +
          records(1, V1A["wait"][:1] + h("0100000000000000") + s(b"k")) + event(0))
    write("v2-session", 0, records(0, VALIDATE + b"".join(V2.values())))
    # A tagged ADD sent twice (a client retrying after a lost reply): applied once.
    write("request-id-retry", 0, records(0, VALIDATE + V2["request_id"]) +
          records(1, VALIDATE + V2["request_id"] + V2["request_id"]))
    write("tight-limits", 4, records(0, V1A["set"] + V1A["check"] + V1A["add"] + V1A["add"]))
    write("backlog", 8, records(3, V1A["set"] + V1A["get"] * 40))
    write("replies", 0x80, h("0200000000000000 7631 0100000000000000 01"))


if __name__ == "__main__":
    main()

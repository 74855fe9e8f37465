"""A foreign client of a TCPStore-compatible server, for the security tests (security_test.py).

  foreign_client.py HOST PORT ping|end-jobs [--source ADDR] [--timeout S] [--token T]

Speaks raw v2 TCPStore (the bytes: rendezvous/wire/wire_codec.hpp): VALIDATE, then
  ping      PING: served when the nonce comes back
  end-jobs  what the intruder of issue 11 did: LIST_KEYS, then for every rendezvous round found
            (rdzv/<run>/<inc>/r/<g>/...) SET its end marker to "jobfailed|...", the run's
            `ended` tombstone and the `round` hint past it, then PING to learn whether all of that
            was applied (against an unprotected store this ends the job: both agents exit 1)
--source binds the client's own address first (e.g. 127.0.0.2: outside an allowlist); --token
first says ddprun's HELLO with that token (as a ddprun agent with token_file does).

Prints one line and exits: 0 served, 10 refused (the server closed the connection without
answering), 11 could not connect at all.
"""
import argparse
import re
import socket
import struct
import sys

VALIDATE = b"\x00" + struct.pack("<I", 0x3C85F7CE)
SET, PING, LIST_KEYS = 1, 13, 17


class Refused(Exception):
    pass


def s(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def recv_exact(sock, n):
    out = b""
    while len(out) < n:
        try:
            chunk = sock.recv(n - len(out))
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise Refused("closed after %d of %d reply bytes" % (len(out), n))
        out += chunk
    return out


def ping(sock, nonce=0x5EC0):
    sock.sendall(bytes([PING]) + struct.pack("<I", nonce))
    got = struct.unpack("<I", recv_exact(sock, 4))[0]
    if got != nonce:
        raise SystemExit("PING echoed %d, not %d" % (got, nonce))


def list_keys(sock):
    sock.sendall(bytes([LIST_KEYS]))
    n = struct.unpack("<q", recv_exact(sock, 8))[0]
    keys = []
    for _ in range(n):
        size = struct.unpack("<Q", recv_exact(sock, 8))[0]
        keys.append(recv_exact(sock, size).decode(errors="replace"))
    return keys


def hello(sock, token):
    """ddprun's HELLO with a token field; Refused when the server refuses it."""
    fields = s("client") + s("foreign") + s("token") + s(token)
    sock.sendall(b"\xf0" + struct.pack("<IQQ", 1, 0, 2) + fields)
    status = recv_exact(sock, 1)[0]
    recv_exact(sock, 4 + 8)
    n = struct.unpack("<Q", recv_exact(sock, 8))[0]
    for _ in range(2 * n):
        recv_exact(sock, struct.unpack("<Q", recv_exact(sock, 8))[0])
    if status != 0:
        raise Refused("HELLO refused")


def end_jobs(sock):
    keys = list_keys(sock)
    writes = {}
    rounds = {}  # job root -> newest round seen
    for key in keys:
        m = re.match(r"(rdzv/[^/]+/\d+/)r/(\d+)/", key)
        if m:
            rounds[m.group(1)] = max(rounds.get(m.group(1), 0), int(m.group(2)))
            writes[m.group(1) + "r/%s/end" % m.group(2)] = "jobfailed|ended by a foreign client"
            writes[m.group(1) + "ended"] = "failed|0|0|ended by a foreign client"
    for root, g in rounds.items():  # the hint that round g ended
        writes[root + "round"] = str(g + 1)
    for key, value in writes.items():
        sock.sendall(bytes([SET]) + s(key) + s(value))
    ping(sock)
    return "%d keys listed, %d written" % (len(keys), len(writes))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("action", choices=["ping", "end-jobs"])
    ap.add_argument("--source")
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("--token")
    a = ap.parse_args()
    family = socket.AF_INET6 if ":" in a.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(a.timeout)
    try:
        if a.source:
            sock.bind((a.source, 0))
        sock.connect((a.host, a.port))
    except OSError as e:
        print("could not connect: %s" % e)
        return 11
    try:
        sock.sendall(VALIDATE)
        if a.token:
            hello(sock, a.token)
        if a.action == "ping":
            ping(sock)
            print("served: PING answered")
        else:
            print("served: " + end_jobs(sock))
        return 0
    except (Refused, BrokenPipeError, ConnectionResetError) as e:
        print("refused: %s" % e)
        return 10
    except socket.timeout:
        print("no answer within %.0f s" % a.timeout)
        return 12


if __name__ == "__main__":
    sys.exit(main())

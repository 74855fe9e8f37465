"""A flood of idle connections to a TCPStore server, for the security tests (security_test.py).

  flood_client.py HOST PORT COUNT SECONDS STATUS_FILE

Opens COUNT connections at once (each sends the v2 VALIDATE and then nothing, as a stranger
without the token would), keeps them open, and opens a new one for each connection the server
closes, for SECONDS. Every second it rewrites STATUS_FILE with "held H opened O closed C
failed F" (H open now; O opened in all; C closed by the server; F connects that failed). Needs a
descriptor limit above COUNT (run it under prlimit --nofile).
"""
import os
import selectors
import socket
import struct
import sys
import time

VALIDATE = b"\x00" + struct.pack("<I", 0x3C85F7CE)


def main():
    host, port, count, seconds, status = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        float(sys.argv[4]), sys.argv[5]
    sel = selectors.DefaultSelector()
    stats = {"opened": 0, "closed": 0, "failed": 0}

    def open_one():
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect((host, port))
        except BlockingIOError:
            pass
        except OSError:
            stats["failed"] += 1
            s.close()
            return
        stats["opened"] += 1
        sel.register(s, selectors.EVENT_WRITE)

    for _ in range(count):
        open_one()
    end = time.monotonic() + seconds
    next_report = 0.0
    while time.monotonic() < end:
        for key, events in sel.select(timeout=0.2):
            s = key.fileobj
            if events & selectors.EVENT_WRITE:
                try:
                    s.send(VALIDATE)
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                except OSError:
                    pass
            else:
                try:
                    if s.recv(4096):
                        continue
                except OSError:
                    pass
            sel.unregister(s)
            s.close()
            stats["closed"] += 1
            open_one()
        if time.monotonic() >= next_report:
            next_report = time.monotonic() + 1
            with open(status + ".tmp", "w") as f:
                f.write("held %d opened %d closed %d failed %d\n" %
                        (len(sel.get_map()), stats["opened"], stats["closed"], stats["failed"]))
            os.replace(status + ".tmp", status)


if __name__ == "__main__":
    main()

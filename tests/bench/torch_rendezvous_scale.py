#!/usr/bin/env python3
"""torch 1.13's dynamic c10d rendezvous, driven like tests/bench/rendezvous_scale.cpp.

join   : N DynamicRendezvousHandlers (create_handler + C10dRendezvousBackend), each with its own
         TCPStore client connection, call next_rendezvous() in threads; time until all returned.
detect : N handlers in one round; one stops heartbeating (as if SIGKILLed); polls the survivors'
         num_nodes_waiting() (what torchrun's agent checks to re-rendezvous) for --watch-s seconds.
Prints one JSON line. Run with /usr/bin/python3 (the interpreter that has torch).
"""
import argparse
import json
import os
import sys
import threading
import time
from datetime import timedelta

from torch.distributed import TCPStore
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler


def make_handlers(args, port):
    handlers = []
    for _ in range(args.nodes):
        store = TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=args.timeout))
        backend = C10dRendezvousBackend(store, args.run_id)
        params = RendezvousParameters(backend="c10d", endpoint=f"127.0.0.1:{port}",
                                      run_id=args.run_id, min_nodes=args.min_nodes or args.nodes,
                                      max_nodes=args.nodes, join_timeout=args.timeout,
                                      last_call_timeout=args.last_call_s)
        handlers.append((store, create_handler(store, backend, params)))
    return handlers


def join_all(handlers):
    done, errors = [None] * len(handlers), []
    start = threading.Barrier(len(handlers) + 1)
    t0 = [0.0]

    def run(i, handler):
        start.wait()
        try:
            handler.next_rendezvous()
            done[i] = (time.monotonic() - t0[0]) * 1000
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(i, h)) for i, (_, h) in enumerate(handlers)]
    for t in threads:
        t.start()
    t0[0] = time.monotonic()
    start.wait()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} joins failed: {errors[0]}")
    done.sort()
    return done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--mode", choices=["join", "detect"], default="join")
    ap.add_argument("--port", type=int, default=0, help="a running store; 0 hosts a TCPStore here")
    ap.add_argument("--run-id", default="torchbench")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--min-nodes", type=int, default=0)
    ap.add_argument("--last-call-s", type=float, default=1)
    ap.add_argument("--watch-s", type=float, default=40)
    args = ap.parse_args()

    master = None
    port = args.port
    if port == 0:
        master = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=args.timeout))
        port = master.port
    handlers = make_handlers(args, port)
    done = join_all(handlers)
    if args.mode == "join":
        print(json.dumps({"mode": "join", "impl": "torch-1.13-c10d", "nodes": args.nodes,
                          "join_ms": round(done[-1], 1), "first_ms": round(done[0], 1),
                          "median_ms": round(done[len(done) // 2], 1)}))
        finish(handlers)
    victim = handlers[0][1]
    victim._stop_heartbeats()  # what SIGKILL does to its keep-alive thread
    killed = time.monotonic()
    signalled = None
    while time.monotonic() - killed < args.watch_s:
        if all(h.num_nodes_waiting() > 0 for _, h in handlers[1:]):
            signalled = (time.monotonic() - killed) * 1000
            break
        time.sleep(0.5)
    print(json.dumps({"mode": "detect", "impl": "torch-1.13-c10d", "nodes": args.nodes,
                      "heartbeat_timeout_ms": 15000, "watched_s": args.watch_s,
                      "survivors_signalled_ms": signalled}))
    finish(handlers)


def finish(handlers):
    # Stop the keep-alive threads, then leave without torch's noisy interpreter teardown.
    for _, handler in handlers:
        handler._stop_heartbeats()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

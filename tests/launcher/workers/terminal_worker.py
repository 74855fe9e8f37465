"""A worker for terminal_test.py: what users' scripts do at a terminal.

  terminal_worker.py pdb DIR       rank 0 stops at breakpoint() (x = 6); rank 1 prints a tick every
                                   0.2 s until DIR/done exists
  terminal_worker.py input DIR     rank 0 asks input("name? ") and greets; rank 1 exits
  terminal_worker.py tdbreak DIR   torch.distributed.breakpoint() (torch >= 2.2) on rank 0 over
                                   Gloo; rank 1 waits in the barrier it ends with
  terminal_worker.py progress DIR  rank 0 writes "\\rprogress N" without a newline for N = 1..3,
                                   each only once DIR/go<N> exists (the test makes it when it saw
                                   the previous one), then "\\n"; rank 1 exits
  terminal_worker.py sigint DIR    every rank writes its pid to DIR/pid<rank>, counts SIGINT, and
                                   once DIR/done exists writes the count to DIR/count<rank> and
                                   exits 130
  terminal_worker.py binary DIR    rank 0 writes bytes 0..255 sixteen times and "\\n" to stdout
  terminal_worker.py flood DIR     rank 0 writes 32 MiB without a newline, then 200,000 "\\r"
                                   updates, then "\\nflood done\\n", and waits for DIR/done

Waits are bounded (60 s): a test that stalls fails instead of hanging.
"""
import os
import signal
import sys
import time

MODE, DIR = sys.argv[1], sys.argv[2]
RANK = int(os.environ["RANK"])


def await_file(name, seconds=60.0):
    deadline = time.monotonic() + seconds
    while not os.path.exists(os.path.join(DIR, name)):
        if time.monotonic() > deadline:
            sys.exit("terminal_worker: %s never appeared" % name)
        time.sleep(0.02)


def pdb_mode():
    if RANK == 0:
        x = 6
        breakpoint()  # noqa: T100 (the point of the test)
        print("after pdb x=%d" % x, flush=True)
        return
    for tick in range(300):
        if os.path.exists(os.path.join(DIR, "done")):
            return
        print("rank1 tick %d" % tick, flush=True)
        time.sleep(0.2)


def input_mode():
    if RANK == 0:
        name = input("name? ")
        print("hello " + name, flush=True)


def tdbreak_mode():
    import torch.distributed as dist
    if not hasattr(dist, "breakpoint"):
        print("torch %s has no torch.distributed.breakpoint" % __import__("torch").__version__)
        return
    dist.init_process_group("gloo")
    x = 6  # noqa: F841 (read at the prompt)
    dist.breakpoint(rank=0)
    print("after dist.breakpoint rank %d" % RANK, flush=True)
    dist.destroy_process_group()


def progress_mode():
    if RANK != 0:
        return
    for n in range(1, 4):
        if n > 1:
            await_file("go%d" % n)
        sys.stdout.write("\rprogress %d" % n)
        sys.stdout.flush()
    sys.stdout.write("\n")


def sigint_mode():
    count = [0]

    def on_int(signo, frame):
        count[0] += 1

    signal.signal(signal.SIGINT, on_int)
    with open(os.path.join(DIR, "pid%d" % RANK), "w") as f:
        f.write(str(os.getpid()))
    await_file("done")
    with open(os.path.join(DIR, "count%d" % RANK), "w") as f:
        f.write(str(count[0]))
    sys.exit(130)


def binary_mode():
    if RANK == 0:
        sys.stdout.buffer.write(bytes(range(256)) * 16 + b"\n")
        sys.stdout.flush()


def flood_mode():
    if RANK != 0:
        return
    out = sys.stdout.buffer
    chunk = b"x" * 65536
    for _ in range(512):
        out.write(chunk)
    out.write(b"".join(b"\r%6d%%" % (i % 100) for i in range(200000)))
    out.write(b"\nflood done\n")
    out.flush()
    await_file("done")


{"flood": flood_mode, "pdb": pdb_mode, "input": input_mode, "tdbreak": tdbreak_mode, "progress": progress_mode,
 "sigint": sigint_mode, "binary": binary_mode}[MODE]()

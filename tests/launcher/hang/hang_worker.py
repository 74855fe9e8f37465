"""Workers for hang_test.py (run under ddprun, torch 1.13's Gloo where they talk).

  hang_worker.py gloo_sleep    every rank allreduces and prints once per step; in generation 0 the
                               last rank sleeps inside step 10 (no code for ddprun: only its output
                               and CPU time stop); rank 0 waits in that step's all_reduce
  hang_worker.py file_timer    torch's FileTimerClient on $TORCHELASTIC_TIMER_FILE: a 5 s scope is
                               released, then rank 1 sleeps inside a 1 s scope; rank 0 sleeps
  hang_worker.py just_sleep    rank 0 prints every 0.3 s, rank 1 spins on the CPU without a word,
                               rank 2 just sleeps

Before a rank stops for good it prints "<name> from monotonic T" (CLOCK_MONOTONIC, which the test
shares), so the test can bound how late ddprun saw it.
"""
import os
import sys
import time

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
GENERATION = int(os.environ["TORCHELASTIC_RESTART_COUNT"])


def announce(what):
    print("%s: rank %d from monotonic %.3f" % (what, RANK, time.monotonic()), flush=True)


def sleep_inside_step():
    announce("sleeping inside a step")
    time.sleep(3600)


def gloo_sleep():
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(16)
    for step in range(30):
        if GENERATION == 0 and RANK == WORLD - 1 and step == 10:
            sleep_inside_step()
        dist.all_reduce(t)
        print("rank %d step %d" % (RANK, step), flush=True)
        time.sleep(0.02)
    dist.destroy_process_group()
    print("rank %d finished generation %d" % (RANK, GENERATION), flush=True)


def stuck_in_scope(timer):
    with timer.expires(after=1):
        announce("sleeping in a 1 s timer scope")
        time.sleep(3600)


def file_timer():
    import torch.distributed.elastic.timer as timer
    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    with timer.expires(after=5):
        time.sleep(0.1)
    print("rank %d: a 5 s scope released" % RANK, flush=True)
    if RANK == 1:
        stuck_in_scope(timer)
    time.sleep(3600)


def just_sleep():
    if RANK == 0:
        while True:
            print("rank 0 talks", flush=True)
            time.sleep(0.3)
    if RANK == 1:
        x = 0
        while True:
            x = (x * 31 + 7) % 1000003
    announce("just sleeping")
    time.sleep(3600)


if __name__ == "__main__":
    {"gloo_sleep": gloo_sleep, "file_timer": file_timer, "just_sleep": just_sleep}[sys.argv[1]]()

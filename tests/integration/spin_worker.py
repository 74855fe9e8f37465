"""A CPU-bound worker for the liveness tests (tests/integration/liveness_test.py), run by ddprun.

It records its environment in $MN_DIR/rec.<MN_NODE>.<restart>.<rank>.json (the same records as
multinode_worker.py, so multinode_harness.Harness.records() reads them), then keeps one core busy
for SPIN_SECONDS (default 60) and exits 0. Only the standard library.
"""
import json
import os
import sys
import time


def main():
    env = os.environ
    rank = int(env["RANK"])
    restart = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
    record = {k: v for k, v in env.items()
              if k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                       "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                       "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID")}
    record["pid"] = os.getpid()
    name = "%s/rec.%s.%d.%d.json" % (env["MN_DIR"], env["MN_NODE"], restart, rank)
    with open(name + ".tmp", "w") as f:
        json.dump(record, f)
    os.rename(name + ".tmp", name)
    until = time.monotonic() + float(env.get("SPIN_SECONDS", "60"))
    spins = 0
    while time.monotonic() < until:
        for _ in range(100000):
            spins += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

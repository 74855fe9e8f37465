#!/usr/bin/env python3
"""Checks that PyTorch 1.13's elastic agent reads the error file our C++ workers write.

Runs failing_worker (argv[1]) with TORCHELASTIC_ERROR_FILE set, checks its exit code and stderr
line, then parses the file with torch's own ProcessFailure / ChildFailedError as torchrun does.
Exits 77 when torch is not importable (skipped)."""
import os
import subprocess
import sys
import time

try:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
except ImportError:
    sys.exit(77)

WORKER = sys.argv[1]
TMP = os.environ.get("DDP_TEST_TMP", "/tmp")
CASES = [
    ("comm", 3, "ddp::CommError: gloo allreduce of 1000 float32 elements failed on rank 1 of 2"),
    ("config", 2, "ddp::ConfigError: RANK='x' is not an integer"),
    ("other", 1, "std::logic_error: invariant broken"),
]


def check(condition, what):
    if not condition:
        print("FAILED:", what)
        sys.exit(1)


for kind, code, message in CASES:
    path = os.path.join(TMP, "torch_compat", kind, "error.json")
    if os.path.exists(path):
        os.remove(path)
    env = dict(os.environ, TORCHELASTIC_ERROR_FILE=path)
    before = int(time.time())
    proc = subprocess.run([WORKER, kind], env=env, capture_output=True, text=True, timeout=60)
    check(proc.returncode == code, f"{kind}: exit code {proc.returncode}, expected {code}")
    check(f"worker failed (exit code {code})" in proc.stderr, f"{kind}: stderr {proc.stderr!r}")
    check(proc.stdout == "", f"{kind}: stdout must stay empty, got {proc.stdout!r}")
    failure = ProcessFailure(local_rank=0, pid=1,
                             exitcode=proc.returncode, error_file=path)
    check(failure.message["message"] == message, f"{kind}: message {failure.message!r}")
    check(before <= failure.timestamp <= int(time.time()) + 1, f"{kind}: timestamp {failure.timestamp}")
    summary = ChildFailedError("train", {0: failure}).format_msg()
    check(message in summary, f"{kind}: torch summary lacks the message:\n{summary}")

proc = subprocess.run([WORKER, "ok"], env=dict(os.environ, TORCHELASTIC_ERROR_FILE=os.path.join(
    TMP, "torch_compat", "ok.json")), capture_output=True, text=True, timeout=60)
check(proc.returncode == 0, f"ok: exit code {proc.returncode}")
check(not os.path.exists(os.path.join(TMP, "torch_compat", "ok.json")), "ok: wrote an error file")
print("torch 1.13 reads ddprun worker error files: OK")

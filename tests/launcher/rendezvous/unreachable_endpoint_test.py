"""The real ddprun binary facing a rendezvous endpoint it cannot reach: a refused loopback port and
a name under .invalid (RFC 6761: never resolves).

The documented rule (docs/cli.md, "Reaching the rendezvous store"): ddprun logs at info what it
waits for at the first failed attempt and every 5 s, and gives up after read_timeout (or
join_timeout if shorter) with one line that counts the attempts, exit code 1 ("rendezvous failed").
Here read_timeout=6 and join_timeout=120: the error must come from the connect budget, long before
the join timeout (without the rule ddprun waited the whole join_timeout, silently, then printed one
multi-kilobyte line, and exited 2 for a DNS failure).
"""
import os
import re
import socket
import subprocess
import sys
import time

DDPRUN = os.path.join(os.environ["DDP_BIN_DIR"], "ddprun")
READ_TIMEOUT_S = 6
JOIN_TIMEOUT_S = 120
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(endpoint):
    args = [DDPRUN, "--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=" + endpoint,
            "--rdzv-id=unreachable", "--rdzv-conf",
            "is_host=false,read_timeout=%d,join_timeout=%d" % (READ_TIMEOUT_S, JOIN_TIMEOUT_S),
            "--no-python", "/bin/true"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "SLURM_", "DDP_LOG"))}
    start = time.monotonic()
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=JOIN_TIMEOUT_S + 60)
    return out, time.monotonic() - start


def expect_failure(name, endpoint, error_pattern):
    out, took = run(endpoint)
    lines = out.stderr.splitlines()
    errors = [l for l in lines if l.startswith("ddprun: error: ")]
    progress = [l for l in lines if "waiting for the rendezvous store at " + endpoint in l]
    print("%s: exit %d after %.1f s, %d progress lines; %s" %
          (name, out.returncode, took, len(progress), errors[-1] if errors else "no error line"))
    check(out.returncode == 1, "%s: exit %d, want 1 (rendezvous failed)" % (name, out.returncode))
    check(len(errors) == 1, "%s: want one error line, got %d:\n%s" % (name, len(errors), out.stderr))
    check(took < JOIN_TIMEOUT_S / 2,
          "%s: gave up after %.1f s: not by read_timeout (%d s) but near join_timeout (%d s)" %
          (name, took, READ_TIMEOUT_S, JOIN_TIMEOUT_S))
    # At once, then every 5 s: at least two lines within a 6 s budget, each saying what and how long.
    check(len(progress) >= 2, "%s: %d progress lines, want >= 2:\n%s" % (name, len(progress), out.stderr))
    for line in progress:
        check("[info]" in line and re.search(r"attempt \d+ failed", line) and
              re.search(r"of %d\.0 s before giving up" % READ_TIMEOUT_S, line),
              "%s: progress line lacks level, attempts or budget: %s" % (name, line))
    if errors:
        error = errors[-1]
        check(re.search(error_pattern, error), "%s: error %r does not match %r" % (name, error, error_pattern))
        check(len(error) < 400, "%s: error line has %d characters" % (name, len(error)))
        check(re.search(r"\(\d+ attempts: \d+x ", error), "%s: attempts not summarised: %s" % (name, error))
    if errors and progress:
        check(lines.index(progress[0]) < lines.index(errors[-1]), "%s: progress after the error" % name)


def main():
    port = closed_port()
    expect_failure("refused", "127.0.0.1:%d" % port,
                   r"cannot reach the rendezvous store at 127\.0\.0\.1:%d \(from --rdzv-endpoint\): "
                   r"timed out after %d s connecting to .*Connection refused" % (port, READ_TIMEOUT_S))
    expect_failure("no such host", "nosuchhost.invalid:29400",
                   r"cannot reach the rendezvous store at nosuchhost\.invalid:29400 .*could not resolve "
                   r"the host of nosuchhost\.invalid:29400 within %d s .*resolving 'nosuchhost\.invalid'"
                   % READ_TIMEOUT_S)
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

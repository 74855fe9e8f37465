"""Differential test: the corpus of real torchrun command lines parsed by torch 1.13's own
torch.distributed.run parser and by `ddprun --dry-run` must agree on every value both define.

Dashed spellings are given to torch 1.13 underscored (it predates them). Skipped (and counted):
lines torch 1.13 rejects (newer flags), cases with an environment and expected errors. Not
compared, as documented differences: rendezvous settings when either side runs standalone (torch
1.13 uses localhost:29400, ddprun localhost:0 and also goes standalone for one static node without
--master-port), an empty --rdzv_id (torch keeps "" and its c10d handler then refuses it; ddprun
reads it as not given), and the command of a non-.py program (ddprun runs it directly, torch under
python). Empty values ("--rdzv_id=") are compared like any other: both parsers take them as values.
Run with /usr/bin/python3 (torch 1.13); exits 77 when torch is missing.
"""
import contextlib
import io
import json
import os
import shlex
import subprocess
import sys

try:
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint
    from torch.distributed.run import get_args_parser, parse_min_max_nnodes
except ImportError:
    print("torch is not importable; skipping")
    sys.exit(77)

CORPUS = os.path.join(os.environ["DDP_SOURCE_DIR"], "tests/launcher/data/torchrun_cmdlines.txt")
DDPRUN = os.path.join(os.environ["DDP_BIN_DIR"], "ddprun")
LAUNCHER_WORDS = {"torchrun", "ddprun", "torch.distributed.run", "torch.distributed.launch"}


def load_cases():
    cases, current = [], None
    with open(CORPUS) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("cmd: "):
                current = {"cmd": line[5:], "env": None, "error": False}
                cases.append(current)
            elif line.startswith("env: "):
                current["env"] = line[5:]
            elif line.startswith("expect: ") and "error=" in line:
                current["error"] = True
    return cases


def launcher_args(words):
    for i, w in enumerate(words):
        if w in LAUNCHER_WORDS:
            return words[i + 1:]
    return words


SWITCHES = {"--standalone", "-m", "--module", "--no_python", "--run_path", "--use_env", "-h", "--help"}


def underscored(args):
    """torch 1.13 knows only --nproc_per_node; newer torch (and ddprun) also --nproc-per-node."""
    out, i = list(args), 0
    while i < len(out) and out[i].startswith("-") and out[i] != "--":
        name, eq, value = out[i].partition("=")
        if name.startswith("--"):
            name = "--" + name[2:].replace("-", "_")
        out[i] = name + eq + value
        i += 1 if (eq or name in SWITCHES) else 2
    return out


def torch_view(args):
    """What torch 1.13 makes of the arguments, or None if it rejects them."""
    parser = get_args_parser()
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            a = parser.parse_args(underscored(args))
    except SystemExit:
        return None
    min_nodes, max_nodes = parse_min_max_nnodes(a.nnodes)
    view = {"min_nodes": min_nodes, "max_nodes": max_nodes, "rdzv_id": a.rdzv_id,
            "max_restarts": a.max_restarts, "role": a.role, "redirects": a.redirects,
            "tee": a.tee, "standalone": a.standalone, "node_rank": a.node_rank,
            "script": a.training_script, "no_python": a.no_python, "module": a.module}
    try:
        view["nproc_per_node"] = int(a.nproc_per_node)
    except ValueError:
        pass
    view["rdzv_backend"] = "c10d" if a.standalone else a.rdzv_backend
    if a.rdzv_backend == "static" and not a.rdzv_endpoint:
        view["endpoint"] = (a.master_addr, int(a.master_port))
    elif not a.standalone:  # an empty endpoint is localhost with the backend's port
        default_port = 2379 if a.rdzv_backend.startswith("etcd") else 29400
        view["endpoint"] = parse_rendezvous_endpoint(a.rdzv_endpoint, default_port)
    if a.no_python:
        view["command"] = [a.training_script, *a.training_script_args]
    else:
        view["command"] = ["python3", "-u", *(["-m"] if a.module else []), a.training_script,
                           *a.training_script_args]
    return view


def ddprun_view(args):
    env = dict(os.environ, PYTHON_EXEC="python3", CUDA_VISIBLE_DEVICES="")
    for k in list(env):
        if k.startswith(("PET_", "SLURM_")):
            del env[k]
    out = subprocess.run([DDPRUN, "--dry-run", *args], env=env, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, f"ddprun {args} exited {out.returncode}: {out.stderr}"
    return json.loads(out.stdout)


def compare(torch, ours):
    """Differences between torch's view and ddprun's, ignoring documented ones."""
    diffs = []
    for key in ("min_nodes", "max_nodes", "nproc_per_node", "rdzv_id", "max_restarts", "role",
                "redirects", "tee", "command"):
        if key == "rdzv_id" and (torch["standalone"] or ours["standalone"] or torch["rdzv_id"] == ""):
            continue  # random ids (and ddprun's implicit standalone for one static node); "" = none
        if key in torch and torch[key] != ours[key]:
            diffs.append(f"{key}: torch {torch[key]!r} ddprun {ours[key]!r}")
    if not ours["standalone"]:
        if torch["rdzv_backend"] != ours["rdzv_backend"]:
            diffs.append(f"rdzv_backend: torch {torch['rdzv_backend']} ddprun {ours['rdzv_backend']}")
        mine = (ours["rdzv_host"], ours["rdzv_port"])
        if "endpoint" in torch and torch["endpoint"] != mine:
            diffs.append(f"endpoint: torch {torch['endpoint']} ddprun {mine}")
    return diffs


def main():
    compared, skipped, failures = 0, 0, []
    for case in load_cases():
        if case["env"] or case["error"]:
            skipped += 1
            continue
        args = launcher_args(shlex.split(case["cmd"]))
        torch = torch_view(args)
        if torch is None:
            skipped += 1
            continue
        if not (torch["script"].endswith(".py") or torch["no_python"] or torch["module"]):
            torch.pop("command")  # documented: ddprun runs non-.py programs directly
        ours = ddprun_view(args)
        compared += 1
        for d in compare(torch, ours):
            failures.append(f"{case['cmd']}\n    {d}")
    print(f"compared {compared} command lines with torch 1.13, skipped {skipped}")
    for f in failures:
        print("MISMATCH:", f)
    if failures or compared < 20:
        print("FAIL" if failures else f"FAIL: only {compared} lines compared")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())

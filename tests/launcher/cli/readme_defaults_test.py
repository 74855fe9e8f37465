"""The defaults the docs state are the ones ddprun uses.

Parses the command-line table (Flag | Variable | Default | Meaning) and the --rdzv-conf table
(Key | Default | Meaning) wherever they are in README.md or docs/*.md (docs/cli.md today) and
compares every stated default with `ddprun --dry-run`. Every row must have a check here or be
listed as having no default to check, so a new row, a changed default or changed docs fail this
test until they agree again; so does a table found nowhere. The --rdzv-conf keys that
`ddprun --help` lists must all have a row.
"""
import json
import os
import re
import subprocess
import sys

SRC = os.environ["DDP_SOURCE_DIR"]
DDPRUN = os.path.join(os.environ["DDP_BIN_DIR"], "ddprun")
# One node without flags runs standalone (c10d); --nnodes=2 shows the static backend's defaults.
BACKEND_ARGS = {"c10d": ["--rdzv-backend=c10d"], "etcd": ["--rdzv-backend=etcd"],
                "etcd-v2": ["--rdzv-backend=etcd-v2"], "static": ["--nnodes=2"]}
failures = []


def dry_run(args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "SLURM_", "DDP_", "TORCH"))}
    out = subprocess.run([DDPRUN, "--dry-run", *args, "x"], env=env, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, f"ddprun --dry-run {args}: {out.stderr}"
    return json.loads(out.stdout)


def doc_files():
    """README.md, then every docs/*.md by name: the README and the pages it links."""
    docs = os.path.join(SRC, "docs")
    return [os.path.join(SRC, "README.md")] + sorted(
        os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))


def table(header):
    """Rows (lists of cells, backticks kept) of every markdown table of the doc files whose header
    starts so; none found is a failure."""
    rows = []
    for path in doc_files():
        lines = open(path).read().splitlines()
        for start in (i for i, l in enumerate(lines) if l.startswith(header)):
            for line in lines[start + 2:]:
                if not line.startswith("|"):
                    break
                cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
                rows.append([c.strip() for c in cells])
    if not rows:
        failures.append(f"no table '{header}' in README.md or docs/*.md")
    return rows


def ticked(cell):
    return re.findall(r"`([^`]+)`", cell)


def check(what, stated, actual):
    if str(stated) != str(actual):
        failures.append(f"{what}: the docs say {stated!r}, --dry-run says {actual!r}")


def seconds(ms):
    return str(ms // 1000) if ms % 1000 == 0 else str(ms / 1000)


# Flag -> how --dry-run shows its default (base = dry_run of a one-node, no-flag command line).
WORD = {"off": False, "assigned": None, "detected": "", "none": "", "all": []}
FLAG_VALUES = {
    "--nnodes": lambda b, s: b["min_nodes"] == b["max_nodes"] and b["min_nodes"],
    "--nproc-per-node": lambda b, s: b["nproc_per_node"],
    "--node-rank": lambda b, s: b["node_rank"],
    "--max-restarts": lambda b, s: b["max_restarts"],
    "--restart-scope": lambda b, s: b["restart_scope"],
    "--verdict-after": lambda b, s: b["verdict_after"],
    "--exclude-after": lambda b, s: b["exclude_after"],
    "--exclude-window": lambda b, s: seconds(b["exclude_window_ms"]),
    "--exclude-cooldown": lambda b, s: seconds(b["exclude_cooldown_ms"]),
    "--standby-workers": lambda b, s: b["standby_workers"],
    "--rdzv-backend": lambda b, s: s["rdzv_backend"],
    "--rdzv-id": lambda b, s: s["rdzv_id"],
    "--standalone": lambda b, s: s["standalone"],
    "--local-addr": lambda b, s: b["local_addr"],
    "--role": lambda b, s: b["role"],
    "-m,": lambda b, s: b["module"] or b["no_python"] or b["run_path"],
    "--log-dir": lambda b, s: b["log_dir"],
    "-r,": lambda b, s: b["redirects"],
    "-t,": lambda b, s: b["tee"],
    "--local-ranks-filter": lambda b, s: b["local_ranks_filter"],
    "--log-prefix": lambda b, s: b["log_prefix"],
    "--signals-to-handle": lambda b, s: ",".join(b["signals_to_handle"]),
    "--shutdown-timeout": lambda b, s: seconds(b["shutdown_timeout_ms"]),
    "--hang-timeout": lambda b, s: b["hang_timeout_ms"] != 0 or b["file_timer"],
    "--straggler-threshold": lambda b, s: "%g" % b["straggler_threshold"],
    "--straggler-window": lambda b, s: seconds(b["straggler_window_ms"]),
    "--exclude-stragglers": lambda b, s: b["exclude_stragglers"],
    "--virtual-local-rank": lambda b, s: b["virtual_local_rank"],
    "--numa-binding": lambda b, s: b["numa_binding"] is not None,
    "--no-slurm": lambda b, s: b["no_slurm"],
    "--log-level": lambda b, s: b["log_level"],
    "--preflight": lambda b, s: b["preflight"],
    "--http-port": lambda b, s: b["http_port"],
    "--http-host": lambda b, s: b["http_host"],
}
NO_DEFAULT = {"--rdzv-conf", "--monitor-interval,", "--dry-run", "-h/--help,"}


def check_flags():
    base, static = dry_run([]), dry_run(BACKEND_ARGS["static"])
    for flag_cell, _, default, _ in table("| Flag | Variable | Default |"):
        flag = ticked(flag_cell)[0].split()[0] if ticked(flag_cell) else flag_cell
        key = next((k for k in list(FLAG_VALUES) + list(NO_DEFAULT) + ["--rdzv-endpoint", "--master-addr"]
                    if flag == k.rstrip(",") or flag_cell.startswith("`" + k)), None)
        if key is None:
            failures.append(f"flag table row {flag_cell!r} has no check in {os.path.basename(__file__)}")
        elif key == "--rdzv-endpoint":  # "c10d `localhost:29400`, etcd `localhost:2379`, ..."
            pairs = re.findall(r"(static|c10d|etcd-v2|etcd)\s*`([^`]+)`", default)
            if not pairs:
                failures.append("--rdzv-endpoint: no per-backend defaults in the flag table")
            for backend, value in pairs:
                check(f"--rdzv-endpoint ({backend})", value, dry_run(BACKEND_ARGS[backend])["rdzv_endpoints"][0])
        elif key == "--master-addr":  # "`127.0.0.1` / `29500`"
            addr, port = ticked(default)
            check("--master-addr", addr, static["master_addr"])
            check("--master-port", port, static["rdzv_port"])
        elif key in FLAG_VALUES:
            values = ticked(default)
            stated = values[0] if values else WORD.get(default, f"<unknown word {default!r}>")
            actual = FLAG_VALUES[key](base, static)
            if isinstance(actual, str) or not values:
                check(flag, stated, actual)
            else:
                check(flag, stated, json.dumps(actual))


# --rdzv-conf key -> its field in --dry-run's "rdzv" object (durations in ms, the docs in seconds).
CONF_FIELDS = {"join_timeout": "join_timeout_ms", "last_call_timeout": "last_call_timeout_ms",
               "close_timeout": "close_timeout_ms", "keep_alive_interval": "keep_alive_interval_ms",
               "keep_alive_max_attempt": "keep_alive_max_attempt",
               "heartbeat_timeout": "heartbeat_timeout_ms", "read_timeout": "read_timeout_ms",
               "exit_barrier_timeout": "exit_barrier_timeout_ms", "is_host": "is_host",
               "protocol": "protocol", "etcd_prefix": "etcd_prefix",
               "request_timeout": "request_timeout_ms", "retry_timeout": "retry_timeout_ms",
               "tls_ca": "tls_ca", "tls_cert": "tls_cert", "tls_key": "tls_key",
               "store_allow": "store_allow", "store_unverified_local": "store_unverified_local"}
# token_file's default is $DDP_RDZV_TOKEN_FILE, which --dry-run here runs without.
CONF_NO_DEFAULT = {"timeout", "store_type", "use_libuv", "rank", "token_file"}


def shown(field, value):
    if field.endswith("_ms"):
        return seconds(value)
    if value == "":
        return "none"
    return "auto" if value is None else str(value)


def check_conf():
    dry = {b: dry_run(args)["rdzv"] for b, args in BACKEND_ARGS.items()}
    rows = table("| Key | Default | Meaning |")
    keys = set()
    for key_cell, default, _ in rows:
        for key in ticked(key_cell):
            keys.add(key)
            if key in CONF_NO_DEFAULT:
                continue
            if key not in CONF_FIELDS:
                failures.append(f"--rdzv-conf table row {key!r} has no check")
                continue
            # "`600` s (c10d, etcd-v2); `900` s (static, etcd)", or one value for every backend.
            parts = re.findall(r"`([^`]+)`[^`;(]*(?:\(([^)]*)\))?", default) or [(default, "")]
            covered = set()
            for value, backends in parts[:1] if ";" not in default else parts:
                names = [n.strip() for n in backends.split(",")] if ";" in default else list(dry)
                covered.update(names)
                for backend in names:
                    check(f"--rdzv-conf {key} ({backend})", value, shown(CONF_FIELDS[key], dry[backend][CONF_FIELDS[key]]))
            if covered != set(dry):
                failures.append(f"--rdzv-conf {key}: the docs give no default for {sorted(set(dry) - covered)}")
    help_text = subprocess.run([DDPRUN, "--help"], capture_output=True, text=True).stdout
    listed = re.search(r"--rdzv-conf KEY=VALUE,...\n\s+rendezvous settings[^:]*\): ([^\[]+)", help_text)
    if not listed:
        failures.append("--help does not list the --rdzv-conf keys")
    else:
        for key in re.split(r",\s*", listed.group(1).strip()):
            if key not in keys:
                failures.append(f"--rdzv-conf key {key!r} (from --help) has no row in the docs")


def main():
    check_flags()
    check_conf()
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

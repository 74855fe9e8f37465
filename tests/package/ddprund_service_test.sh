#!/usr/bin/env bash
# ddprund.service (scripts/package/ddprund.service.in, as the build configured it): it passes
# `systemd-analyze verify`, and what the unit can meet at start stops ddprund with one line on
# stderr (the journal) and a non-zero exit: no token file (exit 2: the unit does not restart),
# a data dir it cannot write (exit 1), a data dir a newer ddprund wrote (exit 1).
set -u
fail() { echo "FAIL: $*"; exit 1; }
bin="$DDP_BIN_DIR/ddprund"
tmp=$(mktemp -d "${DDP_TEST_TMP:-/tmp}/service.XXXXXX")
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
unit="$DDP_UNIT_FILE"
[ -f "$unit" ] || fail "no unit at $unit"

# -- systemd-analyze verify: the unit as installed, its ExecStart pointed at this build's binary
# (verify checks that the program exists); everything else as shipped.
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (package systemd, scripts/setup.sh)"
grep -q '^ExecStart=/.*/ddprund --data-dir %S/ddprund \$DDPRUND_OPTS$' "$unit" || fail "ExecStart: $(grep ExecStart "$unit")"
for key in StateDirectory=ddprund LimitNOFILE=262144 Restart=on-failure RestartPreventExitStatus=2 \
           User=ddprund EnvironmentFile=-/etc/default/ddprund NoNewPrivileges=yes ProtectSystem=strict; do
  grep -qx "$key" "$unit" || fail "the unit has no $key"
done
sed "s|^ExecStart=[^ ]*|ExecStart=$bin|" "$unit" > "$tmp/ddprund.service"
if ! out=$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$tmp/ddprund.service" 2>&1); then
  fail "systemd-analyze verify: $out"
fi
[ -z "$out" ] || fail "systemd-analyze verify warns: $out"
echo "ok: systemd-analyze verify"

# -- start-up failures: one line, non-zero
expect_one_line() {  # expect_one_line <exit code> <text> <command...>
  want_rc="$1" want="$2"; shift 2
  "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ "$rc" = "$want_rc" ] || fail "$*: exit $rc, want $want_rc ($(cat "$tmp/err"))"
  [ "$(wc -l < "$tmp/err")" = 1 ] || fail "$*: want one line on stderr, got: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "$*: got '$(cat "$tmp/err")', want '$want'"
  echo "ok: exit $rc: $(cat "$tmp/err")"
}
run=("$bin" --port 0 --http-port 0)
expect_one_line 2 "ddprund: cannot read the token file '$tmp/absent': No such file or directory" \
  "${run[@]}" --data-dir "$tmp/data" --token-file "$tmp/absent"

mkdir -p "$tmp/readonly"
if [ "$(id -u)" = 0 ]; then  # root writes anywhere: the unit's user cannot
  chmod 0755 "$tmp" "$tmp/readonly"
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
else
  chmod 0555 "$tmp/readonly"
  as_user=()
fi
expect_one_line 1 "ddprund: cannot open $tmp/readonly/LOCK: Permission denied" \
  "${as_user[@]}" "${run[@]}" --data-dir "$tmp/readonly"

# A data directory of a newer format: made by this ddprund, then its headers say format 2.
mkfifo "$tmp/stdout"
"${run[@]}" --data-dir "$tmp/newer" > "$tmp/stdout" 2> "$tmp/daemon.err" &
pid=$!
exec 3< "$tmp/stdout"
read -r -t 60 line <&3 || fail "ddprund did not start: $(cat "$tmp/daemon.err")"
case "$line" in "listening on "*) ;; *) fail "ddprund printed '$line'" ;; esac
kill -TERM "$pid"; wait "$pid" || fail "ddprund exited $? on SIGTERM"
exec 3<&-
for f in "$tmp"/newer/snapshot.* "$tmp"/newer/journal.*; do
  printf '\x02' | dd of="$f" bs=1 seek=8 conv=notrunc status=none  # u32 format version, LE
done
expect_one_line 1 "written in data format 2 by a newer ddprund; this ddprund reads format 1 only" \
  "${run[@]}" --data-dir "$tmp/newer"

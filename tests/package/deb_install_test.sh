#!/usr/bin/env bash
# The Debian package for real: scripts/package.sh builds it; a minimal Debian 12 root
# (debootstrap --variant=minbase, cached in $DDP_DEBIAN_ROOT_CACHE, default
# /var/cache/ddprun-test/bookworm-minbase) is copied to a scratch folder; apt installs the .deb
# there from the Debian mirror this machine uses (so Depends is proven); inside it (chroot, /proc
# mounted) `ddprun --standalone --nproc-per-node=2 train` trains, `python3 -c 'import ddprun'` works
# without torch, the maintainer scripts make the user and the token, a reinstall (an upgrade) keeps
# the data dir and the token, a remove keeps them, a purge removes them.
# Exit 77 (skipped) when the mirror cannot be reached or this is not root; says why.
set -euo pipefail
src="$DDP_SOURCE_DIR"
tmp="${DDP_TEST_TMP:-/tmp}"
cache=${DDP_DEBIAN_ROOT_CACHE:-/var/cache/ddprun-test/bookworm-minbase}
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot, mount)"
for tool in debootstrap chroot mount curl; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/setup.sh)"
done

# The mirror: the first Debian archive URI in this machine's apt sources (deb822 or one-line).
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
  awk '/^URIs:/ {uri=$2} /^Suites:/ && / bookworm( |$)/ {print uri; exit}')
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}')
fi
mirror=${mirror:-http://deb.debian.org/debian}
curl -sf --max-time 20 -o /dev/null "$mirror/dists/bookworm/Release" ||
  skip "the Debian mirror $mirror (from /etc/apt/sources.list*) cannot be reached"
echo "mirror: $mirror"

# -- the package
t0=$SECONDS
DDP_PACKAGE_BUILD_DIR="${DDP_PACKAGE_BUILD_DIR:-$src/build-package}" "$src/scripts/package.sh" \
  > "$tmp/package.log" 2>&1 || fail "scripts/package.sh: $(tail -20 "$tmp/package.log")"
deb=$(tail -1 "$tmp/package.log")
[ -f "$deb" ] || fail "scripts/package.sh made no package ($deb)"
grep -E '^(== package|[EW]: )' "$tmp/package.log" || true
echo "package: $deb ($((SECONDS - t0)) s)"

# -- the Debian root: made once per machine, copied per run
if [ ! -f "$cache/.complete" ]; then
  t0=$SECONDS
  rm -rf "$cache.tmp"
  mkdir -p "$(dirname "$cache")"
  debootstrap --variant=minbase bookworm "$cache.tmp" "$mirror" > "$tmp/debootstrap.log" 2>&1 ||
    fail "debootstrap failed: $(tail -5 "$tmp/debootstrap.log")"
  touch "$cache.tmp/.complete"
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
  echo "debootstrap: $cache in $((SECONDS - t0)) s"
fi
root="$tmp/root"
umount_all() {  # by path, innermost first; then the copy
  for m in "$root/proc" "$root/dev/pts" "$root/dev"; do
    mountpoint -q "$m" && umount "$m"
  done
  # chroot processes are ours only: anything still inside the root at exit is killed by pid
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -KILL "${p#/proc/}" 2>/dev/null
  done
  return 0
}
cleanup() {  # never removes the copy while anything is still mounted in it (/dev is the host's)
  umount_all
  for m in "$root/proc" "$root/dev/pts" "$root/dev"; do
    mountpoint -q "$m" && { echo "cleanup: $m is still mounted; $root left in place"; return; }
  done
  rm -rf "$root"
}
trap cleanup EXIT
rm -rf "$root"
t0=$SECONDS
cp -a "$cache" "$root"
echo "deb $mirror bookworm main" > "$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
echo "root copied in $((SECONDS - t0)) s"

# -- install with apt: Depends resolved from the mirror
t0=$SECONDS
cp "$deb" "$root/tmp/ddprun.deb"
in_root apt-get update -q > "$tmp/apt.log" 2>&1 || fail "apt-get update: $(tail -5 "$tmp/apt.log")"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  /tmp/ddprun.deb >> "$tmp/apt.log" 2>&1 || fail "apt-get install: $(tail -15 "$tmp/apt.log")"
echo "apt install: $((SECONDS - t0)) s, $(grep -c '^Unpacking' "$tmp/apt.log") packages"
in_root dpkg-query -W -f='${Status}\n' python3-torch 2>/dev/null | grep -q installed &&
  fail "torch got installed: the import check would prove nothing"

# -- what the package put there
in_root ddprun --version | tee "$tmp/version"
grep -q "^ddprun $(sed -n 's/^project(ddprun VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" "$tmp/version" ||
  fail "ddprun --version: $(cat "$tmp/version")"
in_root python3 -c 'import sys, ddprun; assert "torch" not in sys.modules; print("import ddprun:", ddprun.__file__)' ||
  fail "import ddprun in the Debian root"
for f in /usr/share/man/man1/ddprun.1.gz /usr/share/man/man8/ddprund.8.gz \
         /usr/share/bash-completion/completions/ddprun /lib/systemd/system/ddprund.service \
         /etc/default/ddprund /usr/share/doc/ddprun/examples/quickstart.json; do
  [ -e "$root$f" ] || fail "the package did not install $f"
done
in_root getent passwd ddprund | grep -q ":/var/lib/ddprund:" || fail "no system user ddprund"
[ -s "$root/etc/ddprund/token" ] || fail "postinst made no token"
[ "$(in_root stat -c '%U:%G %a' /etc/ddprund/token)" = "root:ddprund 640" ] ||
  fail "token: $(in_root stat -c '%U:%G %a' /etc/ddprund/token)"

# -- a job: train's data, then two workers under ddprun, all inside the root
t0=$SECONDS
in_root train make-data --out /tmp/data --samples 2000 --features 16 --classes 4 --shards 2 --seed 1 \
  > "$tmp/make-data.log" 2>&1 || fail "train make-data: $(cat "$tmp/make-data.log")"
in_root ddprun --standalone --nproc-per-node=2 train \
  --config /usr/share/doc/ddprun/examples/quickstart.json --data /tmp/data --max-steps 30 \
  --checkpoint-dir /tmp/ckpt --metrics /tmp/metrics.jsonl > "$tmp/job.log" 2>&1 ||
  fail "ddprun in the Debian root: $(tail -20 "$tmp/job.log")"
grep -q '"step"' "$root/tmp/metrics.jsonl" || fail "the job wrote no metrics: $(tail -20 "$tmp/job.log")"
echo "ddprun --standalone --nproc-per-node=2 train: $((SECONDS - t0)) s, $(wc -l < "$root/tmp/metrics.jsonl") metric lines"
# A Python worker under the installed agent imports the package (torch-free).
cat > "$root/tmp/worker.py" <<'PY'
import os, ddprun
print("worker", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], ddprun.__version__)
PY
in_root ddprun --standalone --nproc-per-node=2 /tmp/worker.py > "$tmp/py.log" 2>&1 ||
  fail "a .py worker under the installed ddprun: $(tail -20 "$tmp/py.log")"
[ "$(grep -c 'worker [01] of 2' "$tmp/py.log")" = 2 ] || fail "python workers: $(cat "$tmp/py.log")"
echo "ok: installed, trained, imported"

# -- upgrade (the same package again), remove, purge: the state survives until the purge
token=$(cat "$root/etc/ddprund/token")
mkdir -p "$root/var/lib/ddprund"
echo kept > "$root/var/lib/ddprund/marker"
in_root dpkg -i /tmp/ddprun.deb > "$tmp/dpkg.log" 2>&1 || fail "reinstall: $(tail "$tmp/dpkg.log")"
[ "$(cat "$root/etc/ddprund/token")" = "$token" ] || fail "the reinstall changed the token"
[ -f "$root/var/lib/ddprund/marker" ] || fail "the reinstall lost /var/lib/ddprund"
in_root dpkg --remove ddprun >> "$tmp/dpkg.log" 2>&1 || fail "remove: $(tail "$tmp/dpkg.log")"
[ ! -e "$root/usr/bin/ddprun" ] || fail "remove left /usr/bin/ddprun"
[ -d "$root/usr/lib/python3/dist-packages/ddprun" ] && fail "remove left the Python package: $(find "$root/usr/lib/python3/dist-packages/ddprun")"
[ "$(cat "$root/etc/ddprund/token")" = "$token" ] || fail "remove lost the token"
[ -f "$root/var/lib/ddprund/marker" ] || fail "remove lost /var/lib/ddprund"
in_root dpkg --purge ddprun >> "$tmp/dpkg.log" 2>&1 || fail "purge: $(tail "$tmp/dpkg.log")"
[ ! -e "$root/etc/ddprund" ] || fail "purge left /etc/ddprund"
[ ! -e "$root/var/lib/ddprund" ] || fail "purge left /var/lib/ddprund"
[ ! -e "$root/etc/default/ddprund" ] || fail "purge left /etc/default/ddprund"
echo "ok: reinstall and remove kept the token and the data dir; purge removed them"

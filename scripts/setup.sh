#!/usr/bin/env bash
# Installs every Debian package that building and testing ddprun needs. Idempotent: does nothing
# when all are present. Needs root (CI and the development machines run as root).
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake pkg-config ccache
  libboost1.81-dev libcli11-dev libspdlog-dev nlohmann-json3-dev catch2
  libgloo-dev libopenblas-dev zlib1g-dev
  libxxhash-dev  # the trainer's state hash when a quorum forms in place
  libssl-dev  # TLS of the rendezvous transport (Boost.Asio SSL over OpenSSL)
  # fuzzing: libFuzzer needs clang (tests/fuzz/, scripts/fuzz.sh)
  clang-14 libfuzzer-14-dev
  libhwloc-dev  # --numa-binding: topology, cores, caches, GPU locality
  libdnnl-dev   # the CPU trainer's GEMMs (oneDNN's sgemm; OpenBLAS without it)
  # tests: real peers and services
  python3 python3-torch slurm-wlm munge etcd-server etcd-client iproute2 util-linux procps
  # the ddprun Python package: `pip install worker_runtime/python` offline, into a fresh venv
  python3-pip python3-setuptools python3-wheel python3-venv
  nftables  # preflight tests: a port blocked inside a network namespace
  stress-ng
  openssl curl  # throwaway certificates of the TLS tests; the https etcd health check
  # hang detection takes a native worker's stacks with gdb; the scaling report draws with matplotlib
  gdb python3-matplotlib
  # tests of the status pages: promtool (Prometheus' text-format checker), headless Chromium
  prometheus chromium
  # the Debian package (scripts/package.sh, tests/package): man pages from --help, the package's
  # checks, systemd-analyze verify of the unit, a Debian 12 root to install it in, completion tests
  help2man dpkg-dev lintian systemd debootstrap bash-completion
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"

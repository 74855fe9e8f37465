#!/usr/bin/env bash
# Builds the Debian package of ddprun: ${DDP_PACKAGE_BUILD_DIR:-build-package}/ddprun_<version>_<arch>.deb
# (docs/deploy.md, "Debian package"), then checks it with lintian.
#
# version = the project's version + the number of commits + the commit: 0.1.0+1234.g2fd8e8889d48
# (".dirty" appended when tracked files differ from the commit), so a later commit of one branch
# sorts later for apt. A tree of its own, configured for /usr with dpkg-buildflags' hardening: CPU
# build (CUDA and NCCL are no Debian packages), no tests, man pages required.
#
#   DDP_PACKAGE_BUILD_DIR  the build tree (default build-package)
#   DDP_JOBS               parallel compile jobs (default: the number of CPUs)
#   DDP_LINTIAN=0          skip lintian
# The last line printed is the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${DDP_PACKAGE_BUILD_DIR:-build-package}
start=$SECONDS
base=$(sed -n 's/^project(ddprun VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
if git rev-parse --git-dir >/dev/null 2>&1; then
  version="$base+$(git rev-list --count HEAD).g$(git rev-parse --short=12 HEAD)"
  git diff --quiet HEAD -- || version="$version.dirty"
  date=$(git log -1 --format=%aD)
else
  version="$base"
  date=""
fi
# Debian's hardening flags (all of them: fortify, stack protector, relro + bindnow, ...).
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
cxxflags="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CXXFLAGS)"
ldflags=$(dpkg-buildflags --get LDFLAGS)
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
  -DCMAKE_SHARED_LINKER_FLAGS="$ldflags" \
  -DDDP_WITH_CUDA=OFF -DDDP_BUILD_TESTS=OFF -DDDP_MAN_PAGES=ON \
  -DDDP_PACKAGE_VERSION="$version" -DDDP_PACKAGE_DATE="$date" >/dev/null
cmake --build "$BUILD_DIR" -j "${DDP_JOBS:-$(nproc)}" --target ddp_programs ddp_docs
rm -f "$BUILD_DIR"/ddprun_*.deb
(cd "$BUILD_DIR" && cpack -G DEB >/dev/null)
deb="$BUILD_DIR/ddprun_${version}_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || { echo "package.sh: cpack made no $deb" >&2; exit 1; }
echo "== package: $(du -h "$deb" | cut -f1) in $((SECONDS - start)) s; Depends: $(dpkg-deb -f "$deb" Depends)"
if [ "${DDP_LINTIAN:-1}" != "0" ]; then
  # Clean of errors and warnings; the informational tags left are explained in docs/deploy.md
  # ("Debian package"). An error or a warning fails the script.
  lintian --fail-on error,warning "$deb" 2>&1 | grep -v "running with root privileges" || true
  lintian --fail-on error,warning "$deb" >/dev/null 2>&1 || { echo "package.sh: lintian failed" >&2; exit 1; }
fi
echo "$deb"

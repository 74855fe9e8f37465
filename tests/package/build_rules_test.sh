#!/usr/bin/env bash
# The build's rules do not depend on the shell that configured the tree. CMake deletes the outputs
# of a custom command whose rule changed at a reconfigure (CMakeFiles/CMakeRuleHashes.txt): the man
# pages baked the configuring shell's PATH into their rule, so the README test's quick start, which
# reconfigures the built tree under Debian's default PATH, deleted them from it. A scratch tree is
# configured, then reconfigured with another PATH, PYTHONPATH, HOME and locale: every rule's hash
# is the same.
set -u
fail() { echo "FAIL: $*"; exit 1; }
tree="$DDP_TEST_TMP/tree"
rm -rf "$tree"
cmake -S "$DDP_SOURCE_DIR" -B "$tree" -DDDP_WITH_CUDA=OFF >"$DDP_TEST_TMP/configure1.log" 2>&1 ||
  fail "configure: $(tail -5 "$DDP_TEST_TMP/configure1.log")"
hashes="$tree/CMakeFiles/CMakeRuleHashes.txt"
[ "$(grep -c 'install/man/' "$hashes")" -eq 3 ] || fail "no man page rules in $hashes: $(cat "$hashes")"
cp "$hashes" "$DDP_TEST_TMP/hashes.before"
mkdir -p "$DDP_TEST_TMP/elsewhere"
PATH="$DDP_TEST_TMP/elsewhere:$PATH" PYTHONPATH="$DDP_TEST_TMP/elsewhere" HOME="$DDP_TEST_TMP" \
  LC_ALL=C cmake -S "$DDP_SOURCE_DIR" -B "$tree" >"$DDP_TEST_TMP/configure2.log" 2>&1 ||
  fail "reconfigure: $(tail -5 "$DDP_TEST_TMP/configure2.log")"
changed=$(diff "$DDP_TEST_TMP/hashes.before" "$hashes" | sed -n 's/^> [0-9a-f]* //p')
[ -z "$changed" ] || fail "rules changed by the configuring shell's environment (their outputs would be deleted): $changed"
echo "ok: $(grep -vc '^#' "$hashes") rules, none changed by a reconfigure under another environment"
rm -rf "$tree"

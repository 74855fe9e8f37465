#!/usr/bin/env bash
# The man pages and bash completion the build generated (cmake/DdpInstall.cmake) against the
# binaries' own --help: every flag --help lists is in ddprun(1)/ddprund(8) and in the completion;
# the completion completes flags, enumerated values and --rdzv-conf keys (bash-completion loaded).
set -u
gen="$DDP_BIN_DIR/../install"
fail() { echo "FAIL: $*"; exit 1; }
[ -f /usr/share/bash-completion/bash_completion ] || fail "bash-completion is not installed (scripts/setup.sh)"
for f in man/ddprun.1.gz man/ddprund.8.gz completions/ddprun completions/ddprund; do
  [ -s "$gen/$f" ] || fail "$gen/$f was not generated (help2man installed? scripts/setup.sh, then reconfigure)"
done

checked=0
for spec in ddprun:1 ddprund:8; do
  prog=${spec%%:*}
  man=$(zcat "$gen/man/$prog.${spec##*:}.gz" | sed 's/\\-/-/g; s/\\f[BIRP]//g')
  flags=$("$DDP_BIN_DIR/$prog" --help | grep -oE '^ +(-[a-z],)?--[a-z0-9][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+')
  [ "$(echo "$flags" | wc -l)" -gt 20 ] || fail "$prog --help: too few flags read: $flags"
  for flag in $flags; do
    grep -qF -- "$flag" <<< "$man" || fail "$prog --help lists $flag; its man page does not"
    grep -qE -- "(^|[ |\"])$flag([ |)\"]|\$)" "$gen/completions/$prog" ||
      fail "$prog --help lists $flag; its completion does not"
    checked=$((checked + 1))
  done
done
echo "ok: $checked flags in --help, man pages and completion"

# Completion at work: COMP_WORDS as bash would set them, the words offered.
complete_words() {  # complete_words <program> <words...> (the last one is the word being typed)
  bash -c '
    source /usr/share/bash-completion/bash_completion
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    "_${COMP_WORDS[0]}" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$gen/completions/$1" "$@"  2>/dev/null
}
expect() {  # expect "<words offered>" <program> <words...>
  want="$1"; shift
  got=$(complete_words "$@")
  [ "$got" = "$want " ] || fail "completing '$*': got '$got', want '$want'"
}
expect "c10d etcd etcd-v2 static" ddprun --rdzv-backend ""
expect "c10d etcd etcd-v2 static" ddprun --rdzv_backend ""
expect "failed" ddprun --standalone --restart-scope f
expect "--rdzv-backend --rdzv-conf --rdzv-endpoint --rdzv-id" ddprun --rdzv
expect "join_timeout=" ddprun --rdzv-conf join_t
expect "is_host=false,heartbeat_timeout=" ddprun --rdzv-conf "is_host=false,heart"
expect "debug" ddprun --log-level deb
expect "always batch off" ddprund --fsync ""
expect "1.13 2.1 auto" ddprund --legacy-dialect ""
expect "--allow --allow-any-local-user --allow-unauthenticated --allow-users" ddprund --allow
# After the program, the words are the program's own: ddprun's flags are not offered.
got=$(complete_words ddprun --nproc-per-node 2 train --rdzv)
[ -z "${got// /}" ] || fail "completing after the program offered ddprun's flags: '$got'"
echo "ok: completion of values, --rdzv-conf keys and the program's own words"

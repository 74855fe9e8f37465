#!/usr/bin/env python3
"""Writes bash completion for ddprun and ddprund from their own --help (the one flag table).

Usage: make_completion.py --bin-dir build/bin --out-dir DIR   (writes DIR/ddprun, DIR/ddprund)

What is read from --help:
  ddprun   option lines "  --name METAVAR" (launcher/cli/cli_options.cpp): a METAVAR of
           lower-case words joined by "|" ("all|failed", "N|gpu|cpu|auto") lists the values to
           complete; the --rdzv-conf help ends with its keys ("...: join_timeout, timeout, ...").
  ddprund  CLI11 lines "  --name TYPE:{a,b,c}=default": the {...} set lists the values.
Options named *-file, *-dir, --tls-* or with a FILE/DIR metavar complete file names. ddprun's
first word that is no option (nor an option's value) is the program: it completes as a command,
and the words after it as that program's own arguments. Stdlib only; fails loudly on a --help it
cannot read (no option found), so a changed format breaks the build, not the completion.
"""
import argparse
import os
import re
import subprocess
import sys

VALUE = re.compile(r"^(?:[a-z][a-z0-9.-]*|[0-9]+)$")


def run_help(path):
    return subprocess.run([path, "--help"], check=True, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}).stdout


def parse_ddprun(text):
    """[(names, takes_value, values)], rdzv-conf keys."""
    options, conf_keys = [], []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^  (-[-\w,]+)(?: (\S+))?$", line)
        if not m:
            continue
        names = [n for n in m.group(1).split(",") if n.startswith("-")]
        metavar = m.group(2) or ""
        values = [v for v in metavar.split("|") if VALUE.match(v)] if "|" in metavar else []
        options.append((names, bool(metavar), values, metavar))
        if "--rdzv-conf" in names and i + 1 < len(lines):
            described = re.sub(r"\s*\[[A-Z_, ]+\]\s*$", "", lines[i + 1])
            conf_keys = [k.strip() for k in described.rsplit(":", 1)[1].split(",")]
    return options, conf_keys


def parse_ddprund(text):
    options = []
    for line in text.splitlines():
        m = re.match(r"^  (-[-\w,]+)(?: ?(\S+))?", line)
        if not m:
            continue
        names = [n for n in m.group(1).split(",") if n.startswith("-")]
        typ = m.group(2) or ""
        if typ and not re.match(r"^[A-Z]", typ):
            typ = ""  # the description began on this line: a flag without a value
        sets = re.search(r"\{([^}]*)\}", typ)
        values = sets.group(1).split(",") if sets else []
        options.append((names, bool(typ), values, typ.split(":")[0].split("=")[0]))
    return options


def wants_file(names, metavar):
    return metavar in ("FILE", "DIR") or any(
        n.endswith("-file") or n.endswith("-dir") or n.startswith("--tls-") for n in names)


def spellings(names, underscores):
    """The names, and with `underscores` (ddprun: --nproc_per_node) their underscore spellings."""
    out = set(names)
    if underscores:
        out |= {"--" + n[2:].replace("-", "_") for n in names if n.startswith("--")}
    return out


def case_arms(options, underscores):
    arms = []
    for names, takes_value, values, metavar in options:
        if not takes_value or "--rdzv-conf" in names:
            continue
        pattern = "|".join(sorted(spellings(names, underscores)))
        if values:
            arms.append(f'    {pattern}) COMPREPLY=($(compgen -W "{" ".join(values)}" -- "$cur")); return ;;')
        elif wants_file(names, metavar):
            arms.append(f"    {pattern}) _filedir; return ;;")
        else:
            arms.append(f"    {pattern}) return ;;")
    return "\n".join(arms)


def valued_names(options):
    names = set()
    for n, takes_value, _, _ in options:
        if takes_value:
            names |= spellings(n, True)
    return " ".join(sorted(names))


def flag_words(options):
    return " ".join(n for names, _, _, _ in options for n in names if n.startswith("--"))


HEADER = "# bash completion for {prog}; generated from `{prog} --help` by scripts/package/make_completion.py.\n"


def ddprun_script(options, conf_keys):
    return HEADER.format(prog="ddprun") + f"""_ddprun() {{
  local cur prev words cword split
  _init_completion -s || return
  # The program: the first word that is neither an option nor an option's value.
  local i=1 valued=" {valued_names(options)} "
  while [ "$i" -lt "$cword" ]; do
    case "${{words[i]}}" in
      --) i=$((i + 1)); break ;;
      --*=*) ;;
      -*) [[ "$valued" == *" ${{words[i]}} "* ]] && i=$((i + 1)) ;;
      *) break ;;
    esac
    i=$((i + 1))
  done
  if [ "$i" -lt "$cword" ]; then
    _command_offset "$i"
    return
  fi
  case "$prev" in
    --rdzv-conf|--rdzv_conf)
      local done="${{cur%,*}}"
      [ "$done" = "$cur" ] && done="" || done="$done,"
      compopt -o nospace
      COMPREPLY=($(compgen -P "$done" -S = -W "{" ".join(conf_keys)}" -- "${{cur##*,}}"))
      return ;;
{case_arms(options, True)}
  esac
  $split && return
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "{flag_words(options)}" -- "$cur"))
    [[ "${{COMPREPLY-}}" == *= ]] && compopt -o nospace
    return
  fi
  COMPREPLY=($(compgen -c -- "$cur"))
  _filedir
}}
complete -F _ddprun ddprun
"""


def ddprund_script(options):
    return HEADER.format(prog="ddprund") + f"""_ddprund() {{
  local cur prev words cword split
  _init_completion -s || return
  case "$prev" in
{case_arms(options, False)}
  esac
  $split && return
  COMPREPLY=($(compgen -W "{flag_words(options)}" -- "$cur"))
}}
complete -F _ddprund ddprund
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args()
    launcher, conf_keys = parse_ddprun(run_help(os.path.join(args.bin_dir, "ddprun")))
    daemon = parse_ddprund(run_help(os.path.join(args.bin_dir, "ddprund")))
    if len(launcher) < 10 or len(daemon) < 10 or len(conf_keys) < 5:
        sys.exit(f"make_completion.py: cannot read --help: {len(launcher)} ddprun options, "
                 f"{len(daemon)} ddprund options, {len(conf_keys)} --rdzv-conf keys")
    os.makedirs(args.out_dir, exist_ok=True)
    for name, text in (("ddprun", ddprun_script(launcher, conf_keys)), ("ddprund", ddprund_script(daemon))):
        with open(os.path.join(args.out_dir, name + ".tmp"), "w") as out:
            out.write(text)
        os.replace(os.path.join(args.out_dir, name + ".tmp"), os.path.join(args.out_dir, name))


if __name__ == "__main__":
    main()

"""README and `ddprun --help` agree on every default they state (issue 10, item 5).

For each row of the README's flag table ("## Command line"), the Default cell is compared with the
"(default ...)" text of the same flag in `ddprun --help` (up to its first "; " or ": "), after
dropping backticks, quotes and a leading ":". A row whose cell is "off" (a switch), "—" or "see below" (a
pointer to the --rdzv-conf table) states none here; the help text must then state none either. Every flag the help gives a default must have a
README row. Also checked: the default console prefix both state uses {rank}, and the README says
that is the global rank — as ddprun prints (launcher_ddprun_test "the default prefix").
"""
import os
import re
import subprocess
import sys

README = os.path.join(os.environ["DDP_SOURCE_DIR"], "README.md")
DDPRUN = os.path.join(os.environ["DDP_BIN_DIR"], "ddprun")
# "see below" points at the --rdzv-conf table, whose defaults the --dry-run test compares.
NO_DEFAULT = {"off", "—", "-", "", "see below"}


def norm(text):
    """The stated default: up to the first ";" or ":" (the rest explains it), without a leading
    ":", backticks or quotes."""
    text = text.strip().lstrip(":").strip()
    text = re.split(r"[;:]\s", text + " ")[0]
    return text.replace("`", "").strip().strip("'\"").strip()


def readme_defaults():
    """{--flag: default cell} from the flag table; rows naming two flags split "a / b" cells."""
    text = open(README).read()
    table = text[text.index("## Command line (`ddprun`)"):]
    table = table[:table.index("\n\n**")]
    out = {}
    for line in table.splitlines():
        if not line.startswith("|"):
            continue
        # Cells split on unescaped pipes (a cell may hold N\|MIN:MAX).
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) != 4 or not cells[0].startswith("`-"):
            continue
        flag_cell, default = cells[0], cells[2]
        flags = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", flag_cell)
        parts = [p.strip() for p in default.split(" / ")]
        if len(parts) == len(flags) and len(flags) > 1:
            out.update(zip(flags, parts))
        else:
            for flag in flags:
                out[flag] = default
    return out


def help_defaults():
    """{--flag: "(default ...)" text} from `ddprun --help`."""
    text = subprocess.run([DDPRUN, "--help"], check=True, capture_output=True, text=True).stdout
    out = {}
    flags = []
    for line in text.splitlines():
        if re.match(r"^  -", line):
            flags = re.findall(r"--[a-z][a-z0-9-]*", line)
            continue
        m = re.search(r"\(default([^()]*(?:\([^()]*\)[^()]*)*)\)", line)
        if flags and m:
            for flag in flags:
                out[flag] = m.group(1)
    return out, text


def main():
    readme = readme_defaults()
    helps, help_text = help_defaults()
    problems = []
    if len(readme) < 20:
        problems.append("found only %d flags in the README table: %s" % (len(readme), readme))
    for flag, cell in sorted(readme.items()):
        want = norm(cell)
        got = helps.get(flag)
        if want in NO_DEFAULT:
            if got is not None and norm(got) not in NO_DEFAULT:
                problems.append("%s: README states no default, --help says '%s'" % (flag, got))
            continue
        if got is None:
            problems.append("%s: README default '%s', --help states none" % (flag, want))
        elif norm(got) != want:
            problems.append("%s: README default '%s', --help '%s'" % (flag, want, norm(got)))
    for flag in sorted(set(helps) - set(readme)):
        problems.append("%s: --help states a default ('%s') but the README has no row" %
                        (flag, helps[flag]))
    prefix = norm(helps.get("--log-prefix", ""))
    if prefix != "[{role}{rank}]:":
        problems.append("--help's default prefix is '%s', not '[{role}{rank}]:'" % prefix)
    if "{rank}` (global rank)" not in open(README).read():
        problems.append("the README does not say {rank} is the global rank")
    if "{rank} (global rank)" not in help_text:
        problems.append("--help does not say {rank} is the global rank")
    for p in problems:
        print("FAIL: " + p)
    if problems:
        return 1
    print("PASS: %d README defaults match --help" % len(readme))
    return 0


if __name__ == "__main__":
    sys.exit(main())

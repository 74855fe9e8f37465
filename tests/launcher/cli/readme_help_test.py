"""The docs and `ddprun --help` agree on every default they state (issue 10, item 5).

For each row of the flag table (header "| Flag | Variable | Default | Meaning |", in README.md or
a page of docs/: docs/cli.md today), the Default cell is compared with the "(default ...)" text of
the same flag in `ddprun --help` (up to its first "; " or ": "), after dropping backticks, quotes
and a leading ":". A row whose cell is "off" (a switch), "—" or "see below" (a pointer to the
--rdzv-conf table) states none here; the help text must then state none either. Every flag the
help gives a default must have a row. Also checked: the default console prefix both state uses
{rank}, and the docs say that is the global rank — as ddprun prints (launcher_ddprun_test "the
default prefix").
"""
import os
import re
import subprocess
import sys

SRC = os.environ["DDP_SOURCE_DIR"]
DDPRUN = os.path.join(os.environ["DDP_BIN_DIR"], "ddprun")
# "see below" points at the --rdzv-conf table, whose defaults the --dry-run test compares.
NO_DEFAULT = {"off", "—", "-", "", "see below"}


def norm(text):
    """The stated default: up to the first ";" or ":" (the rest explains it), without a leading
    ":", backticks or quotes."""
    text = text.strip().lstrip(":").strip()
    text = re.split(r"[;:]\s", text + " ")[0]
    return text.replace("`", "").strip().strip("'\"").strip()


HEADER = "| Flag | Variable | Default | Meaning |"


def doc_files():
    """README.md, then every docs/*.md by name: the README and the pages it links."""
    docs = os.path.join(SRC, "docs")
    return [os.path.join(SRC, "README.md")] + sorted(
        os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))


def doc_text():
    return "\n".join(open(path).read() for path in doc_files())


def table_lines():
    """The rows of every flag table of the doc files (header, separator and rows)."""
    lines, out = doc_text().splitlines(), []
    for start in (i for i, l in enumerate(lines) if l.startswith(HEADER)):
        for line in lines[start:]:
            if not line.startswith("|"):
                break
            out.append(line)
    return out


def readme_defaults():
    """{--flag: default cell} from the flag table; rows naming two flags split "a / b" cells."""
    out = {}
    for line in table_lines():
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
        problems.append("found only %d flags in the flag table (%s) of README.md and docs/*.md: %s"
                        % (len(readme), HEADER, readme))
    for flag, cell in sorted(readme.items()):
        want = norm(cell)
        got = helps.get(flag)
        if want in NO_DEFAULT:
            if got is not None and norm(got) not in NO_DEFAULT:
                problems.append("%s: the docs state no default, --help says '%s'" % (flag, got))
            continue
        if got is None:
            problems.append("%s: docs default '%s', --help states none" % (flag, want))
        elif norm(got) != want:
            problems.append("%s: docs default '%s', --help '%s'" % (flag, want, norm(got)))
    for flag in sorted(set(helps) - set(readme)):
        problems.append("%s: --help states a default ('%s') but the flag table has no row" %
                        (flag, helps[flag]))
    prefix = norm(helps.get("--log-prefix", ""))
    if prefix != "[{role}{rank}]:":
        problems.append("--help's default prefix is '%s', not '[{role}{rank}]:'" % prefix)
    if "{rank}` (global rank)" not in doc_text():
        problems.append("the docs do not say {rank} is the global rank")
    if "{rank} (global rank)" not in help_text:
        problems.append("--help does not say {rank} is the global rank")
    for p in problems:
        print("FAIL: " + p)
    if problems:
        return 1
    print("PASS: %d documented defaults match --help" % len(readme))
    return 0


if __name__ == "__main__":
    sys.exit(main())

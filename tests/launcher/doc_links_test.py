"""Every link of the docs resolves, and so does every docs page a code comment cites.

Checked: each relative link `[text](target)` and image `![alt](target)` of README.md and
docs/*.md (outside code blocks and code spans) names a file or folder that exists, and its
`#anchor`, if any, is a heading of that page (or of the same page for a bare `#anchor`); each
`docs/<page>.md` or `README.md` that a code comment cites (*.cpp, *.hpp, *.py, *.sh, *.cmake,
CMakeLists.txt under the source folders) names a page that exists, and its `#anchor`, if any, is a
heading of it.
Anchors follow GitHub's rule: the heading's text lowercased, every character dropped that is not
a letter, a digit, '_', '-' or a space, spaces turned into '-'; a repeated anchor gets -1, -2, ...

Prints one line per broken link (file:line: the link and what is wrong) and exits 1; exits 0
when every link resolves. Reads DDP_SOURCE_DIR (the repository root).
"""
import os
import re
import sys
import unicodedata

SRC = os.environ["DDP_SOURCE_DIR"]
CODE_DIRS = ["launcher", "rendezvous", "worker_runtime", "trainer", "scripts", "tests", "cmake"]
CODE_SUFFIXES = (".cpp", ".hpp", ".py", ".sh", ".cmake")
FENCE = re.compile(r"^\s*(```|~~~)")
# [text](target) or ![alt](target); the text may hold code spans but no brackets.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# An anchor is letters, digits, '_' and '-' only, so a sentence's full stop after it is not part of it.
CODE_CITE = re.compile(r"(?<![\w/.-])(README\.md|docs/[A-Za-z0-9_.-]+\.md)(#[\w-]+)?")
problems = []


def check(ok, where, message):
    if not ok:
        problems.append("%s: %s" % (where, message))


def slug(text):
    """GitHub's anchor for a heading's text (before duplicates are numbered)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link shows its text
    text = text.replace("`", "").replace("*", "")
    text = text.lower()
    kept = [c for c in text
            if c in " -_" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc"]
    return "".join(kept).replace(" ", "-")


def prose_lines(path):
    """(line number, line) of a markdown file outside fenced code blocks."""
    inside = False
    for number, line in enumerate(open(path, encoding="utf-8").read().splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


_anchors = {}


def anchors(path):
    """Every anchor of a markdown page's headings, duplicates numbered as GitHub does."""
    if path not in _anchors:
        seen, out = {}, set()
        for _, line in prose_lines(path):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else "%s-%d" % (base, n))
        _anchors[path] = out
    return _anchors[path]


def check_target(where, source, target):
    """A relative link from `source` (a file) to `target` ("path", "path#anchor" or "#anchor")."""
    path, _, anchor = target.partition("#")
    dest = source if not path else os.path.normpath(os.path.join(os.path.dirname(source), path))
    if not os.path.exists(dest):
        check(False, where, "%s: no such file" % target)
        return
    if anchor and dest.endswith(".md"):
        check(anchor in anchors(dest), where, "%s: no heading with anchor #%s in %s"
              % (target, anchor, os.path.relpath(dest, SRC)))


def doc_files():
    docs = os.path.join(SRC, "docs")
    return [os.path.join(SRC, "README.md")] + sorted(
        os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))


def check_docs():
    count = 0
    for path in doc_files():
        for number, line in prose_lines(path):
            line = re.sub(r"`[^`]*`", "``", line)  # links inside code spans are code
            for target in LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
                    continue
                count += 1
                check_target("%s:%d" % (os.path.relpath(path, SRC), number), path, target)
    return count


def code_files():
    for top in CODE_DIRS:
        for root, dirs, files in os.walk(os.path.join(SRC, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if name.endswith(CODE_SUFFIXES) or name == "CMakeLists.txt":
                    yield os.path.join(root, name)
    yield os.path.join(SRC, "CMakeLists.txt")


def check_code():
    count, me = 0, os.path.abspath(__file__)
    for path in code_files():
        if os.path.abspath(path) == me or not os.path.exists(path):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        for number, line in enumerate(text.splitlines(), 1):
            for page, anchor in CODE_CITE.findall(line):
                count += 1
                check_target("%s:%d" % (os.path.relpath(path, SRC), number),
                             os.path.join(SRC, "x.md"), page + (anchor or ""))
    return count


def main():
    # The rule itself, on headings of these docs.
    check(slug("Straggler detection (`--straggler-threshold`)") ==
          "straggler-detection---straggler-threshold", "slug", "GitHub's rule broken for flags")
    check(slug("Console latency: ddprun vs torchrun 1.13 — `scripts/bench/x.py build`") ==
          "console-latency-ddprun-vs-torchrun-113--scriptsbenchxpy-build", "slug",
          "GitHub's rule broken for punctuation")
    docs, code = check_docs(), check_code()
    check(docs >= 50, "README.md, docs/*.md", "found only %d relative links" % docs)
    for p in problems:
        print("FAIL: " + p)
    if problems:
        return 1
    print("PASS: %d doc links and %d pages cited by code comments resolve" % (docs, code))
    return 0


if __name__ == "__main__":
    sys.exit(main())

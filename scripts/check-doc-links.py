#!/usr/bin/env python3
"""Fails when a Markdown file of the repository links to something that is not there.

Every relative link `[text](path)` or `[text](path#anchor)` in a tracked *.md file must
name an existing file or directory (relative to the linking file), and an anchor must be
a heading of the target (GitHub's slugs: lowercase, punctuation dropped, spaces as
hyphens, `-1`, `-2` ... for repeats). `[text](#anchor)` is checked against the file
itself. Links with a scheme (https:, mailto:) are not followed. Code blocks and inline
code are skipped.

    python3 scripts/check-doc-links.py              # every tracked *.md
    python3 scripts/check-doc-links.py README.md    # only these
    python3 scripts/check-doc-links.py --self-test  # proves it catches a broken link
"""

import os
import re
import subprocess
import sys
import tempfile

LINK = re.compile(r"\]\(([^()\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def slug(heading):
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            stripped = line.lstrip()
            marker = stripped[:3]
            if marker in ("```", "~~~"):
                if fence is None:
                    fence = marker
                elif fence == marker:
                    fence = None
                continue
            if fence is None:
                yield number, line.rstrip("\n")


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        for _, line in prose_lines(path):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def check(files):
    problems = []
    for md in files:
        if not os.path.isfile(md):
            problems.append(f"{md}: no such file")
            continue
        for number, line in prose_lines(md):
            for target in LINK.findall(INLINE_CODE.sub("", line)):
                if SCHEME.match(target):
                    continue
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                where = f"{md}:{number}: ({target})"
                if not os.path.exists(dest):
                    problems.append(f"{where} {dest} does not exist")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    problems.append(f"{where} {dest} has no heading #{anchor}")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as d:
        good, bad = os.path.join(d, "good.md"), os.path.join(d, "bad.md")
        with open(good, "w") as f:
            f.write("# Top\n\n## A `b` c?\n\n[x](#a-b-c) [y](bad.md#broken) [z](https://x)\n")
            f.write("```\n[not a link](nowhere.md)\n```\n")
        with open(bad, "w") as f:
            f.write("# Broken\n\n[gone](missing.md) [anchor](good.md#nope) `[code](gone.md)`\n")
        if check([good]):
            sys.exit(f"self-test: good links reported: {check([good])}")
        found = check([bad])
        if len(found) != 2:
            sys.exit(f"self-test: expected 2 broken links in bad.md, got {found}")
    print("doc links: self-test passed (broken links and anchors are caught)")


def main(args):
    if args == ["--self-test"]:
        return self_test()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = args or subprocess.run(
        ["git", "ls-files", "*.md"], check=True, capture_output=True, text=True
    ).stdout.split()
    problems = check(files)
    for p in problems:
        print(p)
    if problems:
        sys.exit(f"doc links: {len(problems)} broken")
    print(f"doc links: {len(files)} files, every relative link resolves")


main(sys.argv[1:])

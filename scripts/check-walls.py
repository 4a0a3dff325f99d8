#!/usr/bin/env python3
"""Fails when one of the project's walls has a hole.

1. Every statement lives in core/: no PHP file under bridges/ holds SQL. Comments are
   blanked first; then every string literal (single- or double-quoted, heredoc, nowdoc)
   is searched for the shape of a statement: SELECT ... FROM and UPDATE ... SET (in
   capitals: English selects from lists too), and in any case INSERT INTO, DELETE FROM,
   REPLACE INTO, CREATE/ALTER/DROP/TRUNCATE TABLE, SHOW TABLES/VARIABLES/CREATE,
   information_schema, performance_schema, GET_LOCK(, RELEASE_LOCK(, IS_USED_LOCK(,
   KILL <number>.
2. docs/architecture.md names every file of core/src: each one, in backticks, by its path
   under core/src (`transport/wire/resolve.rs`), by its file name (`resolve.rs`), or, for a
   file that is a module of its own, by the module's name (`value` for value.rs, `wire/`
   or `wire` for wire/mod.rs). A new file the map does not name is a room nobody can find.

Usage:
  check-walls.py [--root DIR]   check the repository at DIR (default: this one)
  check-walls.py --self-test    prove on a throwaway tree that both checks can fail

Exit 0 and one line "walls: ..." when both hold; exit 1 and one line per hole otherwise.
"""

import os
import re
import sys
import tempfile

# Unambiguous in any case; SELECT ... FROM and UPDATE ... SET in capitals only, as English
# has "select a store from the list" too.
STATEMENT = re.compile(
    r"(?i:\binsert\s+into\b|\breplace\s+into\b|\bdelete\s+from\b|\b(create|alter|drop|truncate)\s+table\b"
    r"|\bshow\s+(tables|variables|create)\b|\binformation_schema\b|\bperformance_schema\b"
    r"|\b(get_lock|release_lock|is_used_lock)\s*\(|\bkill\s+\d)"
    r"|\bSELECT\b[\s\S]*\bFROM\b|\bUPDATE\b[\s\S]*\bSET\b"
)


def php_strings(text):
    """The string literals of a PHP source, comments skipped: (line, contents) pairs."""
    out = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i) or c == "#" and not text.startswith("#[", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
        elif text.startswith("<<<", i):
            m = re.match(r"<<<[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1\r?\n", text[i:])
            if not m:
                i += 3
                continue
            body_start = i + m.end()
            closing = re.compile(r"^[ \t]*" + re.escape(m.group(2)) + r"\b", re.MULTILINE)
            found = closing.search(text, body_start)
            end = n if found is None else found.end()
            out.append((line, text[body_start:end]))
            line += text.count("\n", i, end)
            i = end
        elif c in "'\"":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append((line, text[i + 1 : j]))
            line += text.count("\n", i, j)
            i = j + 1
        else:
            i += 1
    return out


def sql_in_bridges(root):
    holes = []
    bridges = os.path.join(root, "bridges")
    for dirpath, dirnames, filenames in os.walk(bridges):
        dirnames[:] = sorted(d for d in dirnames if d != "vendor")
        for name in sorted(filenames):
            if not name.endswith(".php"):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for line, literal in php_strings(text):
                m = STATEMENT.search(literal)
                if m:
                    shown = " ".join(literal.split())[:80]
                    holes.append(f"{os.path.relpath(path, root)}:{line}: SQL in a bridge (statements live in core/): {shown!r}")
    return holes


def unnamed_core_files(root):
    doc_path = os.path.join(root, "docs", "architecture.md")
    with open(doc_path, encoding="utf-8") as f:
        named = set(re.findall(r"`([^`\n]+)`", f.read()))
    src = os.path.join(root, "core", "src")
    holes = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), src).replace(os.sep, "/")
            folder = os.path.dirname(rel)
            names = {rel, name}
            if name == "mod.rs" and folder:
                module = folder.split("/")[-1]
                names |= {module, module + "/", folder + "/"}
            elif "/" not in rel:
                names.add(name[: -len(".rs")])
            if not names & named:
                holes.append(f"docs/architecture.md does not name core/src/{rel} (say what it is for, e.g. as `{rel}`)")
    return holes


def check(root):
    return sql_in_bridges(root) + unnamed_core_files(root)


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def self_test():
    with tempfile.TemporaryDirectory() as root:
        write(root, "core/src/lib.rs", "mod value;\nmod transport;\n")
        write(root, "core/src/value.rs", "")
        write(root, "core/src/transport/mod.rs", "")
        write(root, "core/src/transport/wire/resolve.rs", "")
        write(root, "docs/architecture.md", "`lib`, `value` and `transport/`; `resolve.rs`.\n")
        write(
            root,
            "bridges/laravel/src/Clean.php",
            "<?php\n// SELECT resource FROM t: a comment may say so\n/* DELETE FROM t */\n"
            "$lock->forceReleaseWithPrefix($prefix); $m = 'Select a store from the list';\n",
        )
        if check(root):
            sys.exit(f"self-test: a clean tree reported: {check(root)}")
        write(root, "core/src/transport/wire/socket.rs", "")
        write(
            root,
            "bridges/laravel/src/Leases.php",
            "<?php\n$st = $pdo->prepare(\"SELECT resource FROM $t WHERE resource LIKE ?\");\n"
            "$sql = <<<SQL\ndelete from t where x = 1\nSQL;\n$pdo->exec('select get_lock(\\'x\\', 0)');\n",
        )
        holes = check(root)
        expected = ["Leases.php:2:", "Leases.php:3:", "Leases.php:6:", "core/src/transport/wire/socket.rs"]
        missing = [e for e in expected if not any(e in h for h in holes)]
        if missing or len(holes) != len(expected):
            sys.exit(f"self-test: expected holes {expected}, got {holes}")
    print("walls: self-test passed (SQL in a bridge and an unnamed core file are caught)")


def main(args):
    if args == ["--self-test"]:
        self_test()
        return 0
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if len(args) == 2 and args[0] == "--root":
        root = args[1]
    elif args:
        sys.exit(__doc__)
    holes = check(root)
    for hole in holes:
        print(hole)
    if holes:
        return 1
    core_files = sum(len([f for f in fs if f.endswith(".rs")]) for _, _, fs in os.walk(os.path.join(root, "core", "src")))
    print(f"walls: no SQL in bridges/, docs/architecture.md names all {core_files} files of core/src")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

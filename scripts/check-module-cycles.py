#!/usr/bin/env python3
"""Fails when a crate of the workspace has an import cycle between its top-level modules.

Every crate should read top-down: a module may use the modules below it, never one that
(directly or through others) uses it back. For each crate root of every workspace member
(src/lib.rs, src/main.rs, src/bin/NAME.rs, src/bin/NAME/main.rs, and a [lib]/[[bin]] path
from the member's Cargo.toml) this builds the graph "top-level module A uses top-level
module B" from

  * `use crate::b::...`, `use super::...` (resolved against the module the line is in,
    inline `mod x { }` blocks included), grouped trees `use crate::{a, b::{c, d}}`;
  * `pub use` / `pub(crate) use` re-exports (they are uses like any other);
  * `crate::b::...` and `super::...` paths written inline in code;
  * names the crate root imports or re-exports (`pub use b::Thing;` in lib.rs makes
    `crate::Thing` a use of `b`).

Comments, doc comments, string and char literals are blanked before scanning. A submodule
file counts as its top-level module; uses inside one module tree are not edges. The crate
root (lib.rs/main.rs) is a node too, "(root)": it uses every module it declares, so a
module that uses an item the root defines itself (not one it re-exports: that counts as a
use of the module it comes from) makes a cycle. A crate root should be a table of
contents: declarations and re-exports, its items living in the modules.

Usage:
  check-module-cycles.py [--root DIR]   check the workspace at DIR (default: the repo)
  check-module-cycles.py --self-test    prove on a throwaway tree that the check can fail
  check-module-cycles.py --edges [--root DIR]   print every edge with where it comes from

Exit 0 and "module cycles: none in N crates" when clean; exit 1 and one line per cycle
(`crate: a -> b -> a`, then the file:line of each edge) otherwise.
"""

import glob
import os
import re
import subprocess
import sys
import tempfile
import tomllib

IDENT = r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*"
ROOT = "(root)"  # the crate root as a node of the graph
MAX_CYCLES = 200  # an absurd tangle is reported in part; any cycle already fails the check


# ---------------------------------------------------------------- lexing


def blank_comments_and_literals(src):
    """Returns src with comments and string/char literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(src)

    def blank(text):
        out.append("".join("\n" if ch == "\n" else " " for ch in text))

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(src[i:j])
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(src[i:j])
            i = j
        else:
            raw = re.match(r'(?:br|r|cr)(#*)"', src[i:i + 260])
            if raw and not (i and re.match(r"[A-Za-z0-9_]", src[i - 1])):
                close = '"' + raw.group(1)
                j = src.find(close, i + raw.end())
                j = n if j < 0 else j + len(close)
                blank(src[i:j])
                i = j
            elif c == '"' or (c in "bc" and src.startswith('"', i + 1)
                              and not (i and re.match(r"[A-Za-z0-9_]", src[i - 1]))):
                j = i + (1 if c == '"' else 2)
                while j < n and src[j] != '"':
                    j += 2 if src[j] == "\\" else 1
                j = min(j + 1, n)
                blank(src[i:j])
                i = j
            elif c == "'":
                # A char literal ('x', '\n', '\u{41}', '"'); otherwise a lifetime or label.
                lit = re.match(r"'(?:\\u\{[0-9A-Fa-f]*\}|\\x[0-9A-Fa-f]{2}|\\.|[^\\'\n])'", src[i:i + 12])
                if lit:
                    blank(lit.group(0))
                    i += lit.end()
                else:
                    out.append(c)
                    i += 1
            else:
                out.append(c)
                i += 1
    return "".join(out)


TOKEN = re.compile(r"\s+|(" + IDENT + r")|(::)|([{}();,*#\[\]!<>=])|(.)", re.S)


def tokens(code):
    """Yields (kind, text, line) for identifiers, '::' and punctuation."""
    line = 1
    for m in TOKEN.finditer(code):
        text = m.group(0)
        if m.group(1):
            yield "id", text, line
        elif m.group(2) or m.group(3) or m.group(4):
            yield "p", text, line
        line += text.count("\n")


# ---------------------------------------------------------------- use trees


def expand_use_tree(toks, pos):
    """Parses one use tree starting at toks[pos]; returns (list of segment lists, next pos)."""
    prefix = []
    while pos < len(toks):
        kind, text, _ = toks[pos]
        if text == "::":
            if not prefix:
                prefix.append("::")  # `use ::extern_crate` — never a local module
            pos += 1
        elif text == "{":
            paths, pos = [], pos + 1
            while pos < len(toks) and toks[pos][1] != "}":
                sub, pos = expand_use_tree(toks, pos)
                paths += [prefix + s for s in sub]
                if pos < len(toks) and toks[pos][1] == ",":
                    pos += 1
            return paths, pos + 1
        elif text == "*":
            return [prefix + ["*"]], pos + 1
        elif kind == "id" and text == "as":
            alias = toks[pos + 1][1] if pos + 1 < len(toks) else "_"
            return [prefix + ["as", alias]], pos + 2
        elif kind == "id":
            prefix.append(text)
            pos += 1
        else:
            break
    return [prefix], pos


def imported_name(path):
    """The name a use path brings into scope (alias, last segment, `self` -> its parent)."""
    if "as" in path:
        return path[path.index("as") + 1]
    segs = [s for s in path if s != "::"]
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    return segs[-1] if segs else None


# ---------------------------------------------------------------- crate model


class Crate:
    def __init__(self, label, root_file):
        self.label = label
        self.root_file = root_file
        self.files = {}  # path -> module path (tuple of names below the root)
        self.top_modules = set()
        self.root_aliases = {}  # name usable as crate::NAME -> top-level module it comes from
        self.edges = {}  # (a, b) -> [(file, line)]

    # --- module discovery (follows `mod x;` from the root, like rustc does)

    def discover(self):
        self._add_file(self.root_file, (), owns_dir=True)

    def _add_file(self, path, modpath, owns_dir):
        if path in self.files or not os.path.isfile(path):
            return
        self.files[path] = modpath
        with open(path, encoding="utf-8") as f:
            original = f.read()
        code = blank_comments_and_literals(original)  # same offsets as the original
        base = os.path.dirname(path)
        if not owns_dir:
            base = os.path.join(base, os.path.splitext(os.path.basename(path))[0])
        for m in re.finditer(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?\bmod\s+(" + IDENT + r")\s*([;{])",
                             code):
            name, end = m.group(2).removeprefix("r#"), m.group(3)
            nesting = code.count("{", 0, m.start(2)) - code.count("}", 0, m.start(2))
            if nesting:
                continue  # a module inside an inline block or a fn: part of its parent's tree
            if not modpath:
                self.top_modules.add(name)
            if end == "{":
                continue  # inline module: scanned as part of this file
            explicit = re.search(r'#\[\s*path\s*=\s*"([^"]*)"', original[m.start(1):m.end(1)])
            if explicit:
                self._add_file(os.path.join(os.path.dirname(path), explicit.group(1)),
                               modpath + (name,), owns_dir=False)
                continue
            flat = os.path.join(base, name + ".rs")
            nested = os.path.join(base, name, "mod.rs")
            if os.path.isfile(flat):
                self._add_file(flat, modpath + (name,), owns_dir=False)
            elif os.path.isfile(nested):
                self._add_file(nested, modpath + (name,), owns_dir=True)

    # --- scanning

    def scan(self, rel):
        # The root's own imports first: they make `crate::Name` resolvable to a module.
        self._scan_file(self.root_file, rel, root_pass=True)
        for path in self.files:
            self._scan_file(path, rel, root_pass=False)

    def _scan_file(self, path, rel, root_pass):
        with open(path, encoding="utf-8") as f:
            toks = list(tokens(blank_comments_and_literals(f.read())))
        file_mod = self.files[path]
        inline = []  # stack of (name, brace depth at which its block opened)
        depth = 0
        i = 0
        while i < len(toks):
            kind, text, line = toks[i]
            if text == "{":
                depth += 1
            elif text == "}":
                depth -= 1
                if inline and inline[-1][1] == depth:
                    inline.pop()
            elif kind == "id" and text == "mod" and i + 2 < len(toks) and toks[i + 2][1] == "{":
                inline.append((toks[i + 1][1], depth))
                depth += 1
                i += 3
                continue
            here = file_mod + tuple(n for n, _ in inline)
            prev = toks[i - 1][1] if i else ""
            if kind == "id" and text == "use" and prev != "::" and not (i + 1 < len(toks) and toks[i + 1][1] == "<"):
                paths, j = expand_use_tree(toks, i + 1)
                for p in paths:
                    if root_pass and not here:
                        self._note_root_alias(p)
                    elif not root_pass:
                        self._edge(here, p, rel(path), line)
                i = j
                continue
            if (not root_pass and kind == "id" and text in ("crate", "super") and prev != "::"
                    and i + 1 < len(toks) and toks[i + 1][1] == "::"):
                segs, j = [text], i + 1
                while j + 1 < len(toks) and toks[j][1] == "::" and toks[j + 1][0] == "id":
                    segs.append(toks[j + 1][1])
                    j += 2
                self._edge(here, segs, rel(path), line)
                i = j
                continue
            i += 1

    def _absolute(self, here, path):
        """Resolves a use path to segments below the crate root, or None (external/local)."""
        segs = path[:path.index("as")] if "as" in path else path
        if not segs or segs[0] == "::":
            return None
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("super", "self"):
            cur = list(here)
            k = 0
            while k < len(segs) and segs[k] in ("super", "self"):
                if segs[k] == "super":
                    if not cur:
                        return None  # `super` of the root: not valid Rust, ignore
                    cur.pop()
                k += 1
            return cur + segs[k:]
        if not here:
            return segs  # in the root, a bare first segment may name a module
        return None  # an extern crate or a name already in this module's scope

    def _note_root_alias(self, path):
        absolute = self._absolute((), path)
        if not absolute or absolute[0] not in self.top_modules:
            return
        name = imported_name(path)
        if name == "*":
            self._note_glob(absolute[0])
        elif name and name not in self.top_modules:
            self.root_aliases[name] = absolute[0]  # an item, or the module under another name

    def _note_glob(self, module):
        """`pub use m::*;` in the root: every pub item of m becomes crate::ITEM."""
        for path, modpath in self.files.items():
            if modpath[:1] != (module,) or len(modpath) != 1:
                continue
            with open(path, encoding="utf-8") as f:
                code = blank_comments_and_literals(f.read())
            for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+(?:unsafe\s+|const\s+|async\s+|extern\s+)*"
                                 r"(?:fn|struct|enum|union|trait|type|const|static|mod)\s+(" + IDENT + ")", code):
                self.root_aliases.setdefault(m.group(1), module)

    def _edge(self, here, path, where, line):
        if not here:
            return  # the root may import everything
        absolute = self._absolute(here, path)
        if not absolute:
            return
        first = absolute[0]
        if first in self.top_modules:
            target = first
        elif first in self.root_aliases:
            target = self.root_aliases[first]
        else:
            target = ROOT  # an item the root defines itself
        if target != here[0]:
            places = self.edges.setdefault((here[0], target), [])
            if (where, line) not in places:
                places.append((where, line))

    # --- cycles

    def root_users(self):
        """The modules that use an item the crate root defines itself, with where: each is
        a cycle (root -> module -> root), reported once rather than through every path."""
        return sorted((a, places) for (a, b), places in self.edges.items() if b == ROOT)

    def cycles(self):
        """Every elementary cycle once, starting at its smallest module (depth-first search
        from each module through larger ones only)."""
        graph = {}
        for a, b in self.edges:
            if b != ROOT:  # the root's own items: see root_users()
                graph.setdefault(a, set()).add(b)
        found = []
        for start in sorted(graph):
            stack = [(start, iter(sorted(graph.get(start, ()))))]
            path, on_path = [start], {start}
            while stack and len(found) < MAX_CYCLES:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    on_path.discard(path.pop())
                elif nxt == start:
                    found.append(path + [start])
                elif nxt > start and nxt not in on_path:
                    path.append(nxt)
                    on_path.add(nxt)
                    stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
        return found


# ---------------------------------------------------------------- workspace


def crate_roots(root):
    """(label, root file) for every lib/bin target of every workspace member."""
    with open(os.path.join(root, "Cargo.toml"), "rb") as f:
        members = tomllib.load(f).get("workspace", {}).get("members", [])
    dirs = []
    for pattern in members:
        dirs += sorted(glob.glob(os.path.join(root, pattern))) if any(c in pattern for c in "*?[") \
            else [os.path.join(root, pattern)]
    roots = []
    for d in dirs:
        manifest = os.path.join(d, "Cargo.toml")
        if not os.path.isfile(manifest):
            raise SystemExit(f"check-module-cycles: workspace member {d} has no Cargo.toml")
        with open(manifest, "rb") as f:
            cfg = tomllib.load(f)
        member = os.path.relpath(d, root)
        package = cfg.get("package", {}).get("name", member)
        found = {}  # root file -> label
        lib = os.path.normpath(os.path.join(d, cfg.get("lib", {}).get("path", "src/lib.rs")))
        if os.path.isfile(lib):
            found[lib] = member
        bins = [(b.get("name", package), os.path.join(d, b["path"])) for b in cfg.get("bin", []) if "path" in b]
        bins.append((package, os.path.join(d, "src/main.rs")))
        bins += [(os.path.splitext(os.path.basename(f))[0], f) for f in glob.glob(os.path.join(d, "src/bin/*.rs"))]
        bins += [(os.path.basename(os.path.dirname(f)), f) for f in glob.glob(os.path.join(d, "src/bin/*/main.rs"))]
        for name, path in bins:
            path = os.path.normpath(path)
            if os.path.isfile(path) and path not in found:
                # a package's only crate is named after the package; its bins beside a lib by bin name
                found[path] = member if not found and path.endswith("src/main.rs") else f"{member}/bin/{name}"
        if not found:
            raise SystemExit(f"check-module-cycles: workspace member {member} has no crate root under src/")
        roots += sorted(((label, path) for path, label in found.items()), key=lambda t: t[0])
    return roots


def check(root, show_edges=False):
    roots = crate_roots(root)

    def rel(p):
        return os.path.relpath(p, root)

    problems = 0
    for label, root_file in roots:
        crate = Crate(label, root_file)
        crate.discover()
        crate.scan(rel)
        if show_edges:
            for (a, b), places in sorted(crate.edges.items()):
                print(f"{label}: {a} -> {b}  " + ", ".join(f"{f}:{ln}" for f, ln in places))
        for cycle in crate.cycles():
            problems += 1
            print(f"{label}: {' -> '.join(cycle)}")
            for a, b in zip(cycle, cycle[1:]):
                where = ", ".join(f"{f}:{ln}" for f, ln in crate.edges[(a, b)][:3])
                more = len(crate.edges[(a, b)]) - 3
                print(f"    {a} -> {b}  {where}" + (f" (+{more} more)" if more > 0 else ""))
        for module, places in crate.root_users():
            problems += 1
            print(f"{label}: {ROOT} -> {module} -> {ROOT}")
            where = ", ".join(f"{f}:{ln}" for f, ln in places[:3])
            more = len(places) - 3
            print(f"    {module} -> {ROOT}  {where}" + (f" (+{more} more)" if more > 0 else ""))
    if problems:
        print(f"module cycles: {problems} found; in each, move what the lower module takes from the upper "
              f"one down (into the lower module or a new small one) so the crate reads top-down", file=sys.stderr)
        return 1
    print(f"module cycles: none in {len(roots)} crates")
    return 0


# ---------------------------------------------------------------- self-test


SELF_TEST_FILES = {
    "Cargo.toml": '[workspace]\nmembers = ["cyclic", "clean"]\n',
    "cyclic/Cargo.toml": '[package]\nname = "cyclic"\n',
    # lib.rs may use everything; its re-export makes `crate::Gamma` a use of `c`.
    "cyclic/src/lib.rs": "mod a;\nmod b;\nmod c;\npub use c::Gamma;\nuse a::alpha;\npub struct Root;\n",
    # a -> b through `use super::` from a submodule file (still module a)
    "cyclic/src/a.rs": "mod inner;\npub fn alpha() {}\n",
    "cyclic/src/a/inner.rs": "use super::super::b::{self, Beta};\npub fn f() -> Beta { b::make() }\n",
    # b -> c through the root's re-export, in a grouped tree
    "cyclic/src/b.rs": "use crate::{Gamma as G};\npub struct Beta;\npub fn make() -> Beta { let _ = G; Beta }\n",
    # c -> a through an inline path in code
    # c -> the root, through an item the root defines itself
    "cyclic/src/c.rs": "pub struct Gamma;\npub fn go() {\n    crate::a::alpha();\n}\npub fn root() -> crate::Root { crate::Root }\n",

    "clean/Cargo.toml": '[package]\nname = "clean"\n',
    "clean/src/lib.rs": "mod low;\nmod mid;\nmod high;\npub use high::*;\n",
    "clean/src/low.rs": (
        "//! Doc text mentioning crate::high::Top must not count.\n"
        "/* use crate::mid::Mid; /* nested */ use crate::high; */\n"
        "pub struct Low;\n"
        "pub const TEXT: &str = \"crate::high::Top\";\n"
        "pub const RAW: &str = r#\"use crate::mid::Mid; \"quoted\"\"#;\n"
        "pub const QUOTE: char = '\"';\n"
        "pub fn low<'a>(x: &'a str) -> &'a str { x } // crate::mid::Mid\n"
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    fn t() { let _ = super::Low; }\n}\n"
    ),
    "clean/src/mid/mod.rs": "mod detail;\nuse crate::low::Low;\npub struct Mid(pub Low);\n",
    # within one module tree: not an edge
    "clean/src/mid/detail.rs": "use super::Mid;\nuse crate::mid::Mid as Again;\nfn f(_: Mid, _: Again) {}\n",
    "clean/src/high.rs": "use crate::mid::Mid;\npub struct Top(pub Mid);\nmod sub {\n    use super::Top;\n}\n",
    # a bin is its own crate: its modules share names with the lib's but not their edges
    # (merged with the lib, bin low -> high would close lib high -> mid -> low)
    "clean/src/bin/tool/main.rs": "mod high;\nmod low;\nfn main() { low::helper(); }\n",
    "clean/src/bin/tool/low.rs": "use crate::high::run;\npub fn helper() { run() }\n",
    "clean/src/bin/tool/high.rs": "pub fn run() {}\n",
}

SELF_TEST_EXPECTED = [
    "cyclic: a -> b -> c -> a",
    "    a -> b  cyclic/src/a/inner.rs:1",
    "    b -> c  cyclic/src/b.rs:1",
    "    c -> a  cyclic/src/c.rs:3",
    "cyclic: (root) -> c -> (root)",
    "    c -> (root)  cyclic/src/c.rs:5",
]


def self_test():
    with tempfile.TemporaryDirectory(prefix="module-cycles-") as tmp:
        for name, text in SELF_TEST_FILES.items():
            path = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        run = subprocess.run([sys.executable, os.path.abspath(__file__), "--root", tmp],
                             capture_output=True, text=True)
        got = run.stdout.splitlines()
        if run.returncode != 1 or got != SELF_TEST_EXPECTED:
            print("module cycles self-test FAILED: expected exit 1 and", file=sys.stderr)
            print("\n".join(SELF_TEST_EXPECTED), file=sys.stderr)
            print(f"got exit {run.returncode} and", file=sys.stderr)
            print(run.stdout + run.stderr, file=sys.stderr)
            return 1
        # The clean crate alone (plus its bin) must pass.
        os.remove(os.path.join(tmp, "Cargo.toml"))
        with open(os.path.join(tmp, "Cargo.toml"), "w", encoding="utf-8") as f:
            f.write('[workspace]\nmembers = ["clean"]\n')
        run = subprocess.run([sys.executable, os.path.abspath(__file__), "--root", tmp],
                             capture_output=True, text=True)
        if run.returncode != 0 or run.stdout.strip() != "module cycles: none in 2 crates":
            print("module cycles self-test FAILED: the acyclic crate was flagged:", file=sys.stderr)
            print(run.stdout + run.stderr, file=sys.stderr)
            return 1
    print("module cycles self-test: the cyclic crate is flagged with each edge, the acyclic one passes")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    show_edges = argv[:1] == ["--edges"]
    if show_edges:
        argv = argv[1:]
    if len(argv) == 2 and argv[0] == "--root":
        return check(argv[1], show_edges)
    if not argv:
        return check(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), show_edges)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

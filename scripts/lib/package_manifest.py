"""The release manifest, [workspace.metadata.package] in the workspace Cargo.toml: what
scripts/package.sh builds, scripts/trees.sh makes and tests/suites/80-package.sh loads,
and the check that everything else saying which PHP lives where agrees with it.

    python3 scripts/lib/package_manifest.py build REPO [TAG]   # shell assignments
    python3 scripts/lib/package_manifest.py tree REPO NAME     # one tree, as shell assignments
    python3 scripts/lib/package_manifest.py trees REPO         # the trees' names
    python3 scripts/lib/package_manifest.py built-by REPO HOME # the script building its PHP
    python3 scripts/lib/package_manifest.py table REPO         # docs/php.md's platform table
    python3 scripts/lib/package_manifest.py check REPO         # the agreement check
    python3 scripts/lib/package_manifest.py check REPO --self-test  # it catches each kind

The extension's name is composer.json's php-ext.extension-name (where PIE reads it). Every
value is checked against a narrow pattern before it is printed, so what reaches the shell
is data, never code.

`check` holds together what used to be written in several places with nothing comparing
them: the PHP versions of each home (the manifest's homes and trees) against tests/matrix's
rows (every row's home has its PHP), against the package lists that install them (the
installer function of a home installs phpX.Y-cli for exactly its versions), against the
targets (every archive's PHP is in the home it is built against), and docs/php.md's table
of archives against the one made from the targets, and composer.json's support-zts and
support-nts against the targets' thread safety. It prints one line per disagreement
and exits 1 when there is any.
"""

import json
import re
import shlex
import sys
import tomllib

WORD = re.compile(r"^[A-Za-z0-9_.+-]+$")
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
TEMPLATE = re.compile(r"^[A-Za-z0-9_.{}-]+$")
VERSION = re.compile(r"^[0-9]+\.[0-9]+$")
TOOL = re.compile(r"^[A-Za-z0-9_.-]+==[A-Za-z0-9_.+-]+$")
PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]*(:[a-z0-9]+)?$")
FLAGS = re.compile(r"^[A-Za-z0-9_=+ .,-]*$")
INSTALLER = re.compile(r"^scripts/[A-Za-z0-9_./-]+\.sh(:[A-Za-z_][A-Za-z0-9_]*)?$")
ARCHES = {"x86_64": "amd64", "arm64": "arm64"}  # PIE's spelling -> Debian's
LIBCS = ("glibc", "musl")
TABLE_BEGIN = "<!-- platforms: made by scripts/lib/package_manifest.py table; checked by 01-lint -->"
TABLE_END = "<!-- /platforms -->"


def fail(message):
    print(f"package manifest: {message}", file=sys.stderr)
    sys.exit(1)


def checked(what, value, pattern):
    if not isinstance(value, str) or not pattern.match(value):
        fail(f"{what} = {value!r} is not allowed")
    return value


def version_key(v):
    major, minor = v.split(".")
    return (int(major), int(minor))


class Manifest:
    def __init__(self, repo, tag=None):
        self.repo = repo
        with open(f"{repo}/Cargo.toml", "rb") as f:
            cargo = tomllib.load(f)
        with open(f"{repo}/composer.json", encoding="utf-8") as f:
            self.composer = json.load(f)
        workspace = cargo.get("workspace", {})
        meta = workspace.get("metadata", {}).get("package")
        if not isinstance(meta, dict):
            fail("Cargo.toml has no [workspace.metadata.package]")
        self.meta = meta
        self.version = checked("workspace version", workspace.get("package", {}).get("version"), WORD)
        self.tag = checked("tag", tag if tag is not None else self.version, WORD)
        self.ext = checked("composer.json php-ext.extension-name",
                           self.composer.get("php-ext", {}).get("extension-name"), WORD)
        self.glibc = checked("glibc", meta.get("glibc"), VERSION)
        self.os = checked("os", meta.get("os"), WORD)
        self.checksums = checked("checksums", meta.get("checksums"), WORD)
        tools = meta.get("zig-tools")
        if not isinstance(tools, list) or not tools:
            fail("zig-tools must list pip requirements")
        self.zig_tools = [checked("zig-tools", t, TOOL) for t in tools]
        self.templates = {k: checked(k, meta.get(k), TEMPLATE)
                          for k in ("ext-archive", "cli-archive", "lib-archive")}
        self.trees = self._trees(meta.get("trees"))
        self.homes = self._homes(meta.get("homes"))
        self.targets = self._targets(meta.get("targets"))

    def _trees(self, trees):
        if not isinstance(trees, dict):
            fail("[workspace.metadata.package.trees] is missing")
        out = {}
        for name, tree in trees.items():
            checked("tree name", name, NAME)
            if not isinstance(tree, dict):
                fail(f"tree {name} is not a table")
            arch = checked(f"tree {name} arch", tree.get("arch"), NAME)
            suite = checked(f"tree {name} suite", tree.get("suite"), NAME)
            foreign = [checked(f"tree {name} foreign", a, NAME) for a in tree.get("foreign", [])]
            packages = [checked(f"tree {name} packages", p, PACKAGE) for p in tree.get("packages", [])]
            php = tree.get("php", {})
            if not isinstance(php, dict):
                fail(f"tree {name}: php is a table of version = suite")
            for minor, from_suite in php.items():
                checked(f"tree {name} php version", minor, VERSION)
                checked(f"tree {name} php {minor} suite", from_suite, NAME)
            variant = tree.get("variant", "apt")
            if variant not in ("apt", "extract"):
                fail(f"tree {name}: variant is apt or extract, not {variant!r}")
            out[name] = {"arch": arch, "suite": suite, "foreign": foreign, "variant": variant,
                         "packages": packages, "php": dict(php)}
        return out

    def _homes(self, homes):
        if not isinstance(homes, dict):
            fail("[workspace.metadata.package.homes] is missing")
        out = {}
        for name, home in homes.items():
            checked("home name", name, NAME)
            if name in self.trees:
                fail(f"home {name} is also a tree: a tree with php is a home already")
            if not isinstance(home, dict) or not isinstance(home.get("php"), list):
                fail(f"home {name} needs php = [versions]")
            php = [checked(f"home {name} php", v, VERSION) for v in home["php"]]
            if "built-by" in home:
                # A PHP built from source by a script (`SCRIPT build NAME` prints its prefix).
                out[name] = {"php": php, "installer": None, "kind": "src",
                             "built_by": checked(f"home {name} built-by", home["built-by"], INSTALLER)}
            else:
                out[name] = {
                    "php": php,
                    "installer": checked(f"home {name} installer", home.get("installer"), INSTALLER),
                    "kind": name if name in ("host", "sid") else "other",
                }
        for name, tree in self.trees.items():
            if tree["php"]:
                out[name] = {"php": sorted(tree["php"], key=version_key), "installer": None,
                             "kind": "tree"}
        return out

    def _targets(self, targets):
        if not isinstance(targets, list) or not targets:
            fail("[[workspace.metadata.package.targets]] must list at least one target")
        out, names = [], set()
        for t in targets:
            arch = checked("target arch", t.get("arch"), WORD)
            if arch not in ARCHES:
                fail(f"target arch {arch}: one of {', '.join(ARCHES)} (PIE's spelling)")
            libc = checked("target libc", t.get("libc"), WORD)
            if libc not in LIBCS:
                fail(f"target libc {libc}: one of {', '.join(LIBCS)}")
            zts = t.get("zts")
            if not isinstance(zts, bool):
                fail(f"target {arch}-{libc}: zts is true or false")
            name = f"{arch}-{self.os}-{libc}" + ("-zts" if zts else "")
            if name in names:
                fail(f"target {name} is listed twice")
            names.add(name)
            triple = checked(f"target {name} triple", t.get("triple"), WORD)
            toolchain = checked(f"target {name} toolchain", t.get("toolchain"), NAME)
            if toolchain != "host" and toolchain not in self.trees:
                fail(f"target {name}: toolchain {toolchain} is neither host nor a tree")
            binaries = t.get("binaries")
            if not isinstance(binaries, bool):
                fail(f"target {name}: binaries is true or false")
            build_std = t.get("build-std", False)
            if not isinstance(build_std, bool):
                fail(f"target {name}: build-std is true or false")
            if build_std and toolchain == "host":
                fail(f"target {name}: build-std needs a tree's toolchain (its rust-src)")
            rustflags = checked(f"target {name} rustflags", t.get("rustflags", ""), FLAGS)
            cli_rustflags = checked(f"target {name} cli-rustflags", t.get("cli-rustflags", ""), FLAGS)
            php = t.get("php")
            if not isinstance(php, dict) or not php:
                fail(f"target {name}: php must map at least one version to its home")
            exts = []
            for minor, home in php.items():
                checked(f"target {name} php version", minor, VERSION)
                checked(f"target {name} php {minor} home", home, NAME)
                if home not in self.homes:
                    fail(f"target {name}: php {minor} is built against home {home}, which is no home or tree")
                if minor not in self.homes[home]["php"]:
                    fail(f"target {name}: home {home} has no PHP {minor} (it has {', '.join(self.homes[home]['php'])})")
                exts.append({"php": minor, "home": home, "kind": self.homes[home]["kind"],
                             "file": self.name("ext-archive", arch, libc, zts, minor)})
            out.append({
                "name": name, "arch": arch, "libc": libc, "zts": zts, "triple": triple,
                "toolchain": toolchain, "exts": exts, "build_std": build_std,
                "rustflags": rustflags, "cli_rustflags": cli_rustflags,
                "cli": self.name("cli-archive", arch, libc, zts) if binaries else "",
                "lib": self.name("lib-archive", arch, libc, zts) if binaries else "",
            })
        return out

    def name(self, template, arch, libc, zts, php=None):
        values = {"ext": self.ext, "tag": self.tag, "arch": arch, "os": self.os, "libc": libc,
                  "zts": "-zts" if zts else ""}
        if php is not None:
            values["php"] = php
        try:
            name = self.templates[template].format(**values)
        except KeyError as e:
            fail(f"{template} names {e}, which it cannot have")
        if template == "ext-archive":
            # PIE lowercases every candidate name (and the release's asset names before
            # comparing): the archive carries the name already lowercased.
            name = name.lower()
        return checked(template, name, WORD)


def shell_scalar(key, value):
    print(f"{key}={shlex.quote(value)}")


def shell_array(key, values):
    print(f"{key}=({' '.join(shlex.quote(v) for v in values)})")


def cmd_build(m):
    """Shell assignments: the release's values, one array entry per target (t_*) and one
    per extension archive (e_*, whose e_target is the index of its target)."""
    for key in ("tag", "ext", "glibc", "os", "checksums"):
        shell_scalar(key, getattr(m, key))
    shell_scalar("zig_tools", " ".join(m.zig_tools))
    t = m.targets
    shell_array("t_name", [x["name"] for x in t])
    shell_array("t_arch", [x["arch"] for x in t])
    shell_array("t_debian_arch", [ARCHES[x["arch"]] for x in t])
    shell_array("t_libc", [x["libc"] for x in t])
    shell_array("t_zts", ["1" if x["zts"] else "0" for x in t])
    shell_array("t_triple", [x["triple"] for x in t])
    shell_array("t_toolchain", [x["toolchain"] for x in t])
    shell_array("t_cli", [x["cli"] for x in t])
    shell_array("t_lib", [x["lib"] for x in t])
    shell_array("t_build_std", ["1" if x["build_std"] else "0" for x in t])
    shell_array("t_rustflags", [x["rustflags"] for x in t])
    shell_array("t_cli_rustflags", [x["cli_rustflags"] for x in t])
    exts = [(i, e) for i, x in enumerate(t) for e in x["exts"]]
    shell_array("e_target", [str(i) for i, _ in exts])
    shell_array("e_php", [e["php"] for _, e in exts])
    shell_array("e_home", [e["home"] for _, e in exts])
    shell_array("e_kind", [e["kind"] for _, e in exts])
    shell_array("e_file", [e["file"] for _, e in exts])


def cmd_tree(m, name):
    tree = m.trees.get(name)
    if tree is None:
        fail(f"no tree {name} (trees: {', '.join(m.trees)})")
    shell_scalar("tree_arch", tree["arch"])
    shell_scalar("tree_suite", tree["suite"])
    shell_scalar("tree_variant", tree["variant"])
    shell_array("tree_foreign", tree["foreign"])
    shell_array("tree_packages", tree["packages"])
    # PHP's packages, each with the suite it comes from (apt's pkg/suite). An extracted
    # tree's php has no conf.d to enable PDO MySQL in: it gets the CLI and the headers.
    php_packages = []
    parts = ("cli", "mysql", "dev") if tree["variant"] == "apt" else ("cli", "dev")
    for minor in sorted(tree["php"], key=version_key):
        suite = tree["php"][minor]
        for part in parts:
            package = f"php{minor}-{part}"
            php_packages.append(package if suite == tree["suite"] else f"{package}/{suite}")
    shell_array("tree_php_packages", php_packages)
    suites = sorted({s for s in tree["php"].values() if s != tree["suite"]})
    shell_array("tree_extra_suites", suites)


def table(m):
    """docs/php.md's table: for each platform a target could be (arch x libc x thread
    safety), which PHP versions have an archive and which build from source. The PHP
    versions run from composer.json's lowest to the newest the manifest knows."""
    require = m.composer.get("require", {}).get("php", "")
    found = re.match(r"^>=\s*([0-9]+\.[0-9]+)", require)
    if not found:
        fail(f"composer.json require.php = {require!r}: expected >=X.Y")
    low = version_key(found.group(1))
    high = max(version_key(v) for h in m.homes.values() for v in h["php"])
    if low[0] != high[0]:
        fail(f"the table spans PHP {low[0]} and {high[0]}: list the minors of each by hand here")
    versions = [f"{low[0]}.{minor}" for minor in range(low[1], high[1] + 1)]
    have = {}
    for t in m.targets:
        for e in t["exts"]:
            have[(t["arch"], t["libc"], t["zts"], e["php"])] = True
    lines = [TABLE_BEGIN,
             "| Linux | " + " | ".join(f"PHP {v}" for v in versions) + " |",
             "|---|" + "---|" * len(versions)]
    for arch in ARCHES:
        for libc in LIBCS:
            for zts in (False, True):
                label = f"{arch}, {libc}, {'ZTS' if zts else 'NTS'}"
                cells = ["**archive**" if have.get((arch, libc, zts, v)) else "source"
                         for v in versions]
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(TABLE_END)
    return "\n".join(lines)


def installer_text(m, installer):
    """The text of an installer: the whole script, or one shell function of it."""
    path, _, function = installer.partition(":")
    try:
        with open(f"{m.repo}/{path}", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        return None, f"{path}: {e.strerror}"
    if not function:
        return text, None
    found = re.search(rf"^{re.escape(function)}\(\) \{{\n(.*?)^\}}", text, re.M | re.S)
    if not found:
        return None, f"{path} has no function {function}"
    return found.group(1), None


def matrix_rows(m):
    """tests/matrix's rows as (line number, server, php, home)."""
    rows = []
    with open(f"{m.repo}/tests/matrix", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if words:
                rows.append((number, words[0], words[1] if len(words) > 1 else "",
                             words[2] if len(words) > 2 else ""))
    return rows


def cmd_check(m):
    problems = []
    # 1. tests/matrix: every row's PHP is in its home.
    for number, server, php, home in matrix_rows(m):
        if home not in m.homes:
            problems.append(f"tests/matrix:{number}: home {home!r} is no home of the manifest "
                            f"(homes: {', '.join(sorted(m.homes))})")
        elif php not in m.homes[home]["php"]:
            problems.append(f"tests/matrix:{number}: PHP {php} is not in home {home} "
                            f"(the manifest gives it {', '.join(m.homes[home]['php'])})")
    # 2. The package lists: a home's installer installs phpX.Y-cli for exactly its versions.
    for name, home in sorted(m.homes.items()):
        if home["kind"] == "src":
            # The script builds one PHP version, named in it as php_minor=X.Y.
            text, error = installer_text(m, home["built_by"])
            if error:
                problems.append(f"home {name}: {error}")
                continue
            built = set(re.findall(r"^php_minor=([0-9]+\.[0-9]+)$", text, re.M))
            if built != set(home["php"]):
                problems.append(f"home {name}: {home['built_by']} builds PHP "
                                f"{', '.join(sorted(built, key=version_key)) or 'none'}, the manifest "
                                f"says {', '.join(home['php'])}")
            continue
        if home["installer"] is None:
            continue  # a tree: scripts/trees.sh installs what the manifest lists
        text, error = installer_text(m, home["installer"])
        if error:
            problems.append(f"home {name}: {error}")
            continue
        installed = set(re.findall(r"\bphp([0-9]+\.[0-9]+)-cli\b", text))
        if installed != set(home["php"]):
            problems.append(f"home {name}: {home['installer']} installs PHP "
                            f"{', '.join(sorted(installed, key=version_key)) or 'none'}, the manifest "
                            f"says {', '.join(home['php'])}")
    # 3. composer.json lets PIE use what is shipped: it refuses a thread-safe PHP unless
    # support-zts is true (and a non-thread-safe one unless support-nts is).
    php_ext = m.composer.get("php-ext", {})
    for zts, key in ((True, "support-zts"), (False, "support-nts")):
        if any(t["zts"] == zts for t in m.targets) and php_ext.get(key, True) is not True:
            problems.append(f"composer.json php-ext.{key} is {php_ext.get(key)!r}, but a target has "
                            f"{'thread-safe' if zts else 'non-thread-safe'} archives, which PIE would then never use")
    # 4. docs/php.md's table is the one the targets make.
    with open(f"{m.repo}/docs/php.md", encoding="utf-8") as f:
        docs = f.read()
    found = re.search(re.escape(TABLE_BEGIN) + r".*?" + re.escape(TABLE_END), docs, re.S)
    if not found:
        problems.append(f"docs/php.md has no platform table ({TABLE_BEGIN} ... {TABLE_END})")
    elif found.group(0) != table(m):
        problems.append("docs/php.md's platform table is not the manifest's: paste the output of "
                        "`python3 scripts/lib/package_manifest.py table .` in its place")
    for problem in problems:
        print(f"package manifest: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"package manifest: tests/matrix, the homes' package lists and docs/php.md agree "
          f"({len(m.targets)} targets, {sum(len(t['exts']) for t in m.targets)} extension archives, "
          f"{len(m.homes)} homes)")


def self_test(repo):
    """The check, on a copy of what it reads, passes as it is and fails on each kind of
    disagreement (a matrix row, a package list, the docs' table), naming it."""
    import os
    import shutil
    import subprocess
    import tempfile

    def run(root):
        return subprocess.run([sys.executable, __file__, "check", root],
                              capture_output=True, text=True)

    def edit(root, path, old, new):
        with open(f"{root}/{path}", encoding="utf-8") as f:
            text = f.read()
        if old not in text:
            fail(f"self-test: {path} has no {old!r} to change")
        with open(f"{root}/{path}", "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, 1))

    m = Manifest(repo)
    files = ["Cargo.toml", "composer.json", "tests/matrix", "docs/php.md"]
    files += sorted({h["installer"].partition(":")[0] for h in m.homes.values() if h["installer"]})
    files += sorted({h["built_by"] for h in m.homes.values() if h["kind"] == "src"})
    sid_minor = m.homes["sid"]["php"][0]
    cases = [
        ("a matrix row whose PHP its home lacks", "tests/matrix", f" {sid_minor}  sid ",
         " 8.3  sid ", "tests/matrix:"),
        ("a home's package list without one of its PHPs", m.homes["sid"]["installer"].partition(":")[0],
         f"php{sid_minor}-cli", "php8.3-cli", "home sid:"),
        ("docs/php.md's table edited by hand", "docs/php.md", "| **archive** |", "| source |",
         "platform table is not the manifest's"),
        ("composer.json refusing what is shipped", "composer.json", '"support-nts": true',
         '"support-nts": false', "php-ext.support-nts"),
    ]
    src = sorted(name for name, h in m.homes.items() if h["kind"] == "src")
    if src:
        home = m.homes[src[0]]
        cases.append(("a PHP built from source of another version", home["built_by"],
                      f"php_minor={home['php'][0]}", "php_minor=8.3", f"home {src[0]}:"))
    # The copies live under the repository's target/, not /tmp (which other work on the
    # machine may empty meanwhile).
    os.makedirs(f"{repo}/target", exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="manifest-self-test.", dir=f"{repo}/target") as tmp:
        def fresh():
            root = f"{tmp}/repo"
            shutil.rmtree(root, ignore_errors=True)
            for path in files:
                os.makedirs(os.path.dirname(f"{root}/{path}"), exist_ok=True)
                shutil.copy(f"{repo}/{path}", f"{root}/{path}")
            return root

        result = run(fresh())
        if result.returncode != 0:
            fail(f"self-test: the check fails on an unchanged copy: {result.stderr.strip()}")
        for what, path, old, new, said in cases:
            root = fresh()
            edit(root, path, old, new)
            result = run(root)
            if result.returncode == 0 or said not in result.stderr:
                fail(f"self-test: {what} went unnoticed (exit {result.returncode}: {result.stderr.strip()})")
            print(f"package manifest self-test: {what} is caught: {result.stderr.strip().splitlines()[0]}")


def main():
    args = sys.argv[1:]
    usage = ("usage: package_manifest.py build REPO [TAG] | tree REPO NAME | trees REPO"
             " | built-by REPO HOME | table REPO"
             " | check REPO [--self-test]")
    if len(args) < 2:
        fail(usage)
    cmd, repo, rest = args[0], args[1], args[2:]
    if cmd == "build" and len(rest) <= 1:
        cmd_build(Manifest(repo, rest[0] if rest else None))
    elif cmd == "tree" and len(rest) == 1:
        cmd_tree(Manifest(repo), rest[0])
    elif cmd == "built-by" and len(rest) == 1:
        home = Manifest(repo).homes.get(rest[0])
        if not home or home["kind"] != "src":
            fail(f"{rest[0]} is no home built from source")
        print(home["built_by"])
    elif cmd == "trees" and not rest:
        print("\n".join(Manifest(repo).trees))
    elif cmd == "table" and not rest:
        print(table(Manifest(repo)))
    elif cmd == "check" and not rest:
        cmd_check(Manifest(repo))
    elif cmd == "check" and rest == ["--self-test"]:
        self_test(repo)
    else:
        fail(usage)


if __name__ == "__main__":
    main()

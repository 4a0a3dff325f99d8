"""Prints the release manifest as shell assignments, for scripts/package.sh to eval.

The manifest is [workspace.metadata.package] in the workspace Cargo.toml; the extension's
name is composer.json's php-ext.extension-name (where PIE reads it). Every value is
checked against a narrow pattern before it is printed, so what reaches the shell is
data, never code.

    python3 scripts/lib/package_manifest.py REPO [TAG]
"""

import json
import re
import shlex
import sys
import tomllib

WORD = re.compile(r"^[A-Za-z0-9_.+-]+$")
TEMPLATE = re.compile(r"^[A-Za-z0-9_.{}-]+$")
VERSION = re.compile(r"^[0-9]+\.[0-9]+$")
TOOL = re.compile(r"^[A-Za-z0-9_.-]+==[A-Za-z0-9_.+-]+$")
PLACES = ("host", "sid")


def fail(message):
    print(f"package manifest: {message}", file=sys.stderr)
    sys.exit(1)


def checked(what, value, pattern):
    if not isinstance(value, str) or not pattern.match(value):
        fail(f"{what} = {value!r} is not allowed")
    return value


def main():
    if len(sys.argv) not in (2, 3):
        fail("usage: package_manifest.py REPO [TAG]")
    repo = sys.argv[1]
    with open(f"{repo}/Cargo.toml", "rb") as f:
        cargo = tomllib.load(f)
    with open(f"{repo}/composer.json", encoding="utf-8") as f:
        composer = json.load(f)

    workspace = cargo.get("workspace", {})
    meta = workspace.get("metadata", {}).get("package")
    if not isinstance(meta, dict):
        fail("Cargo.toml has no [workspace.metadata.package]")
    version = workspace.get("package", {}).get("version")
    tag = sys.argv[2] if len(sys.argv) == 3 else version
    ext = composer.get("php-ext", {}).get("extension-name")

    out = {
        "tag": checked("tag", tag, WORD),
        "ext": checked("composer.json php-ext.extension-name", ext, WORD),
        "glibc": checked("glibc", meta.get("glibc"), VERSION),
    }
    for key in ("triple", "arch", "os", "libc", "checksums"):
        out[key] = checked(key, meta.get(key), WORD)
    names = {k: v for k, v in out.items() if k in ("tag", "ext", "arch", "os", "libc")}
    for key in ("cli-archive", "lib-archive"):
        out[key.replace("-", "_")] = checked(key, meta.get(key), TEMPLATE).format(**names)
    ext_template = checked("ext-archive", meta.get("ext-archive"), TEMPLATE)

    tools = meta.get("zig-tools")
    if not isinstance(tools, list) or not tools:
        fail("zig-tools must list pip requirements")
    out["zig_tools"] = " ".join(checked("zig-tools", t, TOOL) for t in tools)

    php = meta.get("php")
    if not isinstance(php, dict) or not php:
        fail("[workspace.metadata.package.php] must name at least one PHP version")
    versions, places, archives = [], [], []
    for minor, place in php.items():
        versions.append(checked("php version", minor, VERSION))
        if place not in PLACES:
            fail(f"php {minor} = {place!r}: the place is one of {', '.join(PLACES)}")
        places.append(place)
        archives.append(ext_template.format(php=minor, **names))

    for key, value in out.items():
        print(f"{key}={shlex.quote(value)}")
    for key, values in (("php_versions", versions), ("php_places", places), ("ext_archives", archives)):
        print(f"{key}=({' '.join(shlex.quote(v) for v in values)})")


if __name__ == "__main__":
    main()

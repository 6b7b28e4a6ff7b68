#!/usr/bin/env python3
"""check_requirements.py: are the pinned Python packages of a requirements file installed, at
the pinned versions?

    check_requirements.py REQUIREMENTS.txt [--quiet]

Reads every `name==version` line of the file (and of the files it includes with `-r`), looks up
the installed distribution of each (importlib.metadata, the interpreter running this script) and
compares its version with the pin (PEP 440: `torch==2.11.0` is met by 2.11.0+cu130). Prints one
line per package that is missing or at another version, and the pip command that installs the
pins. install_deps.sh and reproduce.sh call it.

Exit status: 0 every pin is met, 1 a package is missing or at another version, 2 the file cannot
be read or holds a line that is not an exact pin.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Sequence

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # checked in main(): a fresh interpreter may not have it yet
    Requirement = None  # type: ignore[assignment,misc]


class RequirementsError(Exception):
    """A requirements file that cannot be checked; the message names the file and line."""


@dataclass(frozen=True)
class Pin:
    name: str      # as written in the file
    version: str   # the pinned version
    source: str    # "analysis/requirements.txt:3"


@dataclass(frozen=True)
class Mismatch:
    pin: Pin
    installed: str | None  # None: not installed

    def __str__(self) -> str:
        have = "not installed" if self.installed is None else f"{self.installed} installed"
        return f"{self.pin.name}=={self.pin.version} ({self.pin.source}): {have}"


def read_pins(path: Path, _seen: frozenset[Path] = frozenset()) -> list[Pin]:
    """The exact pins of `path` in file order, `-r FILE` includes followed (relative to the
    including file). Comments and blank lines are skipped; anything else is an error."""
    path = path.resolve()
    if path in _seen:
        raise RequirementsError(f"{path}: includes itself")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise RequirementsError(f"cannot read {path}: {e}") from None
    pins: list[Pin] = []
    for number, raw in enumerate(lines, 1):
        line = raw.split(" #", 1)[0].strip()
        where = f"{path}:{number}"
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            pins += read_pins(path.parent / line.split(None, 1)[1], _seen | {path})
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement as e:
            raise RequirementsError(f"{where}: {line!r} is not a requirement: {e}") from None
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version or req.marker:
            raise RequirementsError(f"{where}: {line!r} is not an exact pin (name==version)")
        pins.append(Pin(req.name, specs[0].version, where))
    return pins


def mismatches(pins: Sequence[Pin]) -> list[Mismatch]:
    """The pins the running interpreter does not meet; a package pinned twice counts once per
    distinct pin."""
    out: list[Mismatch] = []
    seen: set[tuple[str, str]] = set()
    for pin in pins:
        key = (canonicalize_name(pin.name), pin.version)
        if key in seen:
            continue
        seen.add(key)
        try:
            installed = metadata.version(pin.name)
        except metadata.PackageNotFoundError:
            out.append(Mismatch(pin, None))
            continue
        if not Requirement(f"{pin.name}=={pin.version}").specifier.contains(
                installed, prereleases=True):
            out.append(Mismatch(pin, installed))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("requirements", type=Path)
    ap.add_argument("--quiet", action="store_true", help="print nothing when every pin is met")
    a = ap.parse_args(argv)
    if Requirement is None:
        print("check_requirements: the 'packaging' module is missing, so the pins cannot be "
              f"compared; install them: {sys.executable} -m pip install -r {a.requirements}")
        return 1
    try:
        pins = read_pins(a.requirements)
    except RequirementsError as e:
        print(f"check_requirements: {e}", file=sys.stderr)
        return 2
    bad = mismatches(pins)
    for m in bad:
        print(f"check_requirements: {m}")
    if bad:
        print(f"check_requirements: install the pinned versions with\n"
              f"    {sys.executable} -m pip install -r {a.requirements}")
        return 1
    if not a.quiet:
        print(f"check_requirements: {len(pins)} pins of {a.requirements} met")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Keep the numbers quoted in README.md and docs/*.md equal to the committed results sets.

A generated block is delimited by two HTML comments, each alone on its line at column 0:

    <!-- generated:NAME [ARGS...] from docs/results/nvidia-h200 -->
    (body: written by this tool, never by hand)
    <!-- /generated:NAME -->

NAME picks a generator (analysis/block_generators.py, e.g. `headline`,
`strategy-table b256 u8 static`); `from` names the results set, relative to the repository
root. Running

    python3 analysis/docs_blocks.py            # rewrite every block from its results set
    python3 analysis/docs_blocks.py --check    # rewrite nothing; diff and exit 1 if stale

replaces each block's body with its generator's output (which ends with a provenance line)
and leaves every other byte of the file alone; a second run changes nothing. Markers inside
fenced code blocks are text, not blocks (so the syntax can be shown in the docs).

Files: README.md and docs/**/*.md under --root (default: this repository), or --files.
--results DIR renders every block from DIR instead of the set its marker names.
Exit status: 0 done / all current, 1 (--check) a block is stale, 2 usage error: an unknown
block or argument, a missing or unreadable results set, malformed markers (unclosed,
nested, duplicated, a closing marker without its opening); messages say file:line.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
import sys
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # run as a script: make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.block_generators import BlockError, render  # noqa: E402
import analysis.block_generators_advice  # noqa: E402,F401  (registers its blocks)
import analysis.block_generators_crossover  # noqa: E402,F401  (registers its blocks)
import analysis.block_generators_decision  # noqa: E402,F401  (registers its blocks)
import analysis.block_generators_drift  # noqa: E402,F401  (registers its blocks)
import analysis.block_generators_gpus  # noqa: E402,F401  (registers its blocks)
import analysis.block_generators_model  # noqa: E402,F401  (registers its blocks)
import analysis.block_generators_pipelines  # noqa: E402,F401  (registers its blocks)
import analysis.block_generators_ranking  # noqa: E402,F401  (registers its blocks)
import analysis.block_generators_summary  # noqa: E402,F401  (registers its blocks)
import analysis.block_generators_timelines  # noqa: E402,F401  (registers its blocks)
from analysis.records import RecordError  # noqa: E402
from analysis.results_set import ResultsSet, load_results_set  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
_MARKER_START = re.compile(r"\s*<!--\s*/?generated:")
_MARKER = re.compile(r"<!--\s*(/?)generated:(.*?)\s*-->\s*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


class MarkerError(ValueError):
    """'file:line: problem' for a block that cannot be rendered."""


@dataclasses.dataclass(frozen=True)
class Block:
    name: str
    args: tuple[str, ...]
    source: str          # the results set as the marker names it
    open_line: int       # 0-based index of the opening marker
    close_line: int      # 0-based index of the closing marker

    @property
    def title(self) -> str:
        return " ".join(("generated:" + self.name,) + self.args)


def _fence_after(line: str, fence: str | None) -> str | None:
    """The open code fence after `line` (CommonMark: a closing fence is the opening's
    character, at least as long, and nothing else on the line)."""
    f = _FENCE.match(line)
    if fence is None:
        return f.group(1) if f else None
    closes = (f is not None and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence)
              and not line.strip().strip(fence[0]))
    return None if closes else fence


def find_blocks(lines: Sequence[str], path: str) -> list[Block]:
    """The blocks of a file (lines with their endings); MarkerError when malformed."""
    blocks: list[Block] = []
    seen: dict[tuple, int] = {}
    current: tuple[str, tuple[str, ...], str, int] | None = None
    fence: str | None = None
    for i, line in enumerate(lines):
        opened, fence = fence, _fence_after(line, fence)
        if opened is not None or fence is not None or not _MARKER_START.match(line):
            continue
        where = f"{path}:{i + 1}"
        m = _MARKER.fullmatch(line.rstrip("\r\n"))
        if line[0].isspace() or m is None:
            raise MarkerError(f"{where}: malformed marker (a marker is one HTML comment alone "
                              "on its line, at column 0)")
        words = m.group(2).split()
        if m.group(1):                                   # closing marker
            if len(words) != 1:
                raise MarkerError(f"{where}: a closing marker is <!-- /generated:NAME -->")
            if current is None:
                raise MarkerError(f"{where}: closing marker /generated:{words[0]} without "
                                  "an opening marker")
            if words[0] != current[0]:
                raise MarkerError(f"{where}: /generated:{words[0]} closes the block "
                                  f"generated:{current[0]} opened at line {current[3] + 1}")
            blocks.append(Block(current[0], current[1], current[2], current[3], i))
            current = None
            continue
        if current is not None:
            raise MarkerError(f"{where}: nested block: generated:{current[0]} opened at line "
                              f"{current[3] + 1} is not closed")
        if len(words) < 3 or words[-2] != "from" or "from" in words[:-2]:
            raise MarkerError(f"{where}: an opening marker is <!-- generated:NAME [ARGS] from "
                              "RESULTS_DIR -->")
        ident = (words[0], tuple(words[1:-2]), words[-1])
        if ident in seen:
            raise MarkerError(f"{where}: duplicated block generated:{' '.join(words[:-2])} "
                              f"from {words[-1]} (also at line {seen[ident] + 1})")
        seen[ident] = i
        current = (*ident, i)
    if current is not None:
        raise MarkerError(f"{path}:{current[3] + 1}: unclosed block generated:{current[0]} "
                          "(no <!-- /generated:" + current[0] + " --> after it)")
    return blocks


class Renderer:
    """Renders blocks; loads each results set once."""

    def __init__(self, root: Path, results: str | None = None):
        self.root = root
        self.results = results
        self.sets: dict[Path, ResultsSet] = {}

    def results_set(self, source: str) -> ResultsSet:
        if self.results is not None:
            path = Path(self.results).resolve()
            label = _display(path, self.root)
        else:
            if Path(source).is_absolute():
                raise BlockError(f"results set {source}: give it relative to the repository "
                                 "root")
            path, label = (self.root / source).resolve(), source
        if path not in self.sets:
            try:
                self.sets[path] = load_results_set(path, label)
            except RecordError as e:
                raise BlockError(f"results set {label}: {e}") from None
        return self.sets[path]

    def rewrite(self, text: str, path: str) -> tuple[str, int]:
        """(the file with every block's body regenerated, number of blocks)."""
        lines = text.splitlines(keepends=True)
        blocks = find_blocks(lines, path)
        out: list[str] = []
        pos = 0
        for b in blocks:
            try:
                body = render(b.name, b.args, self.results_set(b.source))
            except BlockError as e:
                raise MarkerError(f"{path}:{b.open_line + 1}: {b.title}: {e}") from None
            eol = "\r\n" if lines[b.open_line].endswith("\r\n") else "\n"
            out += lines[pos:b.open_line + 1]
            out.append(eol + eol.join(body.split("\n")) + eol + eol)
            pos = b.close_line
        out += lines[pos:]
        return "".join(out), len(blocks)


def _display(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def default_files(root: Path) -> list[Path]:
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    return files + sorted((root / "docs").rglob("*.md"))


def run(files: Sequence[Path], root: Path, check: bool, results: str | None) -> int:
    out, err = sys.stdout, sys.stderr
    renderer = Renderer(root, results)
    changed: list[tuple[Path, str, str, str]] = []
    total, errors = 0, []
    for f in files:
        name = _display(f, root)
        try:
            with open(f, "r", encoding="utf-8", newline="") as fh:
                old = fh.read()
            new, n = renderer.rewrite(old, name)
        except (OSError, MarkerError) as e:
            errors.append(str(e) if isinstance(e, MarkerError) else f"{name}: {e.strerror}")
            continue
        except UnicodeDecodeError as e:
            errors.append(f"{name}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset "
                          f"{e.start})")
            continue
        total += n
        if new != old:
            changed.append((f, name, old, new))
    if errors:
        for e in errors:
            print(f"error: {e}", file=err)
        print("nothing was rewritten", file=err)
        return 2
    if check:
        for _, name, old, new in changed:
            out.writelines(difflib.unified_diff(old.splitlines(keepends=True),
                                                new.splitlines(keepends=True),
                                                f"a/{name}", f"b/{name}"))
        if changed:
            print(f"{len(changed)} file(s) with stale generated blocks; run "
                  "`python3 analysis/docs_blocks.py` and commit the result", file=err)
            return 1
        print(f"{total} generated block(s) in {len(files)} file(s): all current", file=out)
        return 0
    for f, name, _, new in changed:
        try:
            with open(f, "w", encoding="utf-8", newline="") as fh:
                fh.write(new)
        except OSError as e:
            print(f"error: {name}: cannot write: {e.strerror or e}", file=err)
            return 2
        print(f"rewrote {name}", file=out)
    print(f"{total} generated block(s) in {len(files)} file(s), {len(changed)} file(s) "
          "rewritten", file=out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="docs_blocks.py",
        description="Regenerate the numbers blocks (<!-- generated:NAME ... from DIR --> ... "
                    "<!-- /generated:NAME -->) of README.md and docs/**/*.md from the "
                    "committed results sets.",
        epilog="Example: python3 analysis/docs_blocks.py --check  (exit 1 and a diff when a "
               "block is stale)")
    ap.add_argument("--check", action="store_true",
                    help="rewrite nothing; print a diff of what would change and exit 1 if "
                         "any block is stale")
    ap.add_argument("--files", nargs="+", type=Path, metavar="MD",
                    help="Markdown files to process (default: README.md and docs/**/*.md)")
    ap.add_argument("--results", metavar="DIR",
                    help="render every block from this results set instead of its own")
    ap.add_argument("--root", type=Path, default=REPO,
                    help="repository root that markers' results sets are relative to "
                         "(default: this repository)")
    args = ap.parse_args(argv)
    files = args.files if args.files is not None else default_files(args.root)
    return run(files, args.root, args.check, args.results)


if __name__ == "__main__":
    sys.exit(main())

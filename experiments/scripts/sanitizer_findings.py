#!/usr/bin/env python3
"""sanitizer_findings.py: sort compute-sanitizer's report into NCCL's own expected errors and the rest.

    compute-sanitizer --tool memcheck --print-limit 100000 ... 2>&1 | sanitizer_findings.py [--findings FILE]

When a communicator is created, NCCL's ncclInitKernelsForDevice (src/enqueue.cc) asks
cudaFuncGetAttributes about every kernel in libnccl and silently skips the ones that have no
image for this GPU. Each skipped kernel is a CUDA API error 209 (no kernel image for the
device), and compute-sanitizer reports every one of them: with NCCL's pip wheel on an H200, about
a hundred per process. And where several ranks share one process (memstrat's one-process
form), NCCL's p2pMap (src/transport/p2p.cc) enables peer access for each connection it makes
between two of its GPUs; from the second on, CUDA answers cudaErrorPeerAccessAlreadyEnabled
(API error 704), which NCCL expects and clears with cudaGetLastError, where compute-sanitizer
reports it: about a hundred per two-GPU process. Both are NCCL's expected paths, not a fault of
the program under test; any other report is (error 704 raised anywhere but under NCCL's p2pMap
included).

Reads the tool's whole output on stdin and prints one line: the errors in the tool's summaries,
how many reports are NCCL's kernel probe and its peer mapping, how many are anything else. With
--findings, writes every other report in full to FILE (appended).

Exit status: 0 every report is one of NCCL's two (or there is none); 1 at least one other
report, a report the tool did not print (its print limit), or a summary count that the printed
reports do not add up to; 2 no compute-sanitizer output at all (no COMPUTE-SANITIZER banner).
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field

PREFIX = "========="
# A report's first line: the prefix, one space, then text that is not indented.
REPORT_START = re.compile(r"^=========\s(?! )(?!COMPUTE-SANITIZER)(?!ERROR SUMMARY)"
                          r"(?!RACECHECK SUMMARY)(?!LEAK SUMMARY)(?!Target application)\S")
ERROR_SUMMARY = re.compile(r"^=========\s+ERROR SUMMARY:\s+(\d+)\s+errors?\s*$")
RACE_SUMMARY = re.compile(r"^=========\s+RACECHECK SUMMARY:\s+(\d+)\s+hazards?\s+displayed")
NOT_PRINTED = re.compile(r"(\d+) errors? (?:were|was) not printed")


@dataclass
class Sorted:
    nccl_probe: int = 0
    nccl_peer_map: int = 0
    others: list[str] = field(default_factory=list)
    summary_total: int = 0
    counted: bool = False  # an ERROR SUMMARY was read: the printed reports must add up to it
    not_printed: int = 0
    banner: bool = False

    @property
    def printed(self) -> int:
        return self.nccl_probe + self.nccl_peer_map + len(self.others)

    @property
    def clean(self) -> bool:
        adds_up = self.printed == self.summary_total or not self.counted
        return not self.others and self.not_printed == 0 and adds_up


def is_nccl_probe(report: str) -> bool:
    """An API error 209 raised under NCCL's kernel probe: named, or its frames in NCCL's enqueue.cc
    under a communicator's initialisation."""
    if "error 209" not in report and "cudaErrorNoKernelImageForDevice" not in report:
        return False
    if "on CUDA API call" not in report:
        return False
    if "ncclInitKernelsForDevice" in report:
        return True
    return "enqueue.cc" in report and "ncclCommInit" in report


def is_nccl_peer_map(report: str) -> bool:
    """An API error 704 (peer access already enabled) that NCCL's p2pMap clears: raised on the
    cudaGetLastError with which it consumes the error, its frames in NCCL's p2p.cc."""
    if "error 704" not in report and "cudaErrorPeerAccessAlreadyEnabled" not in report:
        return False
    if "on CUDA API call to cudaGetLastError" not in report:
        return False
    return "p2pMap(" in report and "libnccl" in report


def split_reports(lines: list[str]) -> list[str]:
    reports: list[list[str]] = []
    current: list[str] | None = None
    for line in lines:
        if REPORT_START.match(line):
            current = [line]
            reports.append(current)
        elif current is not None and line.startswith(PREFIX + " ") and line.strip() != PREFIX:
            current.append(line)
        else:
            current = None  # a blank "=========" line, a summary or the program's own output ends it
    return ["\n".join(r) for r in reports]


def sort_output(text: str) -> Sorted:
    lines = text.splitlines()
    out = Sorted(banner=any(line.startswith(PREFIX + " COMPUTE-SANITIZER") for line in lines))
    errors = [int(m.group(1)) for m in map(ERROR_SUMMARY.match, lines) if m]
    hazards = [int(m.group(1)) for m in map(RACE_SUMMARY.match, lines) if m]
    out.counted = bool(errors)
    out.summary_total = sum(errors) if errors else sum(hazards)
    for line in lines:
        if line.startswith(PREFIX):
            n = NOT_PRINTED.search(line)
            if n:
                out.not_printed += int(n.group(1))
    for report in split_reports(lines):
        if is_nccl_probe(report):
            out.nccl_probe += 1
        elif is_nccl_peer_map(report):
            out.nccl_peer_map += 1
        else:
            out.others.append(report)
    return out


def describe(s: Sorted) -> str:
    text = (f"{s.summary_total} in the tool's summaries: {s.nccl_probe} NCCL kernel probe "
            f"(API error 209 under ncclInitKernelsForDevice, expected), {s.nccl_peer_map} NCCL "
            f"peer mapping (API error 704 cleared under p2pMap, expected), {len(s.others)} other")
    if s.not_printed:
        text += f"; {s.not_printed} not printed (raise --print-limit)"
    elif s.counted and s.printed != s.summary_total:
        text += f"; {s.printed} printed reports do not add up to the summaries"
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--findings", metavar="FILE", help="append every report that is not one of NCCL's expected errors to FILE")
    args = p.parse_args(argv)
    s = sort_output(sys.stdin.read())
    if not s.banner:
        print("no compute-sanitizer output on stdin (no COMPUTE-SANITIZER banner)", file=sys.stderr)
        return 2
    print(describe(s))
    if args.findings and s.others:
        with open(args.findings, "a", encoding="utf-8") as f:
            f.write("\n\n".join(s.others) + "\n\n")
    return 0 if s.clean else 1


if __name__ == "__main__":
    sys.exit(main())

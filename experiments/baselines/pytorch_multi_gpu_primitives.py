#!/usr/bin/env python3
"""The PyTorch anchor of `memstrat primitives --gpus N`: what a skilled PyTorch user gets from
the data movements between the host and N GPUs of one host and among them, measured on the same
machine in the same run as memstrat, which is held to >= 95% of it.

    NCCL_NVLS_ENABLE=0 python3 experiments/baselines/pytorch_multi_gpu_primitives.py \\
        --gpus 4 --max-size 256MiB --json results/multi_gpu_primitives.jsonl

Patterns (--patterns, default all), at every power of two from --min-size to --max-size:
  h2d-alone  pinned host tensor -> cuda:g, copy_(non_blocking=True), each GPU g alone
  h2d-all    every GPU from its own pinned host tensor at once (enqueued on each GPU's stream,
             then all synchronised): each GPU's rate and the aggregate
  d2d-ce     dst.copy_(src) from cuda:s to cuda:d (cudaMemcpyAsync: the copy engines, peer to
             peer), one way, per ordered pair
  d2d-ce-both  both ways at once per unordered pair, each direction on a stream of its source
             GPU (memstrat primitives --gpus N names the patterns alike)
  nccl-all-reduce, nccl-all-gather, nccl-broadcast: torch.distributed over NCCL, one process per
             GPU (torch.multiprocessing.spawn), float32; all_reduce and broadcast are in place in
             torch, all_gather_into_tensor out of place; for all-gather the size is the gathered
             output (nccl-tests' -b/-e), each rank sending size / N

Copies: after --warmup untimed ones, each of --samples is timed by CUDA events on the copy's
stream where one stream is involved (h2d-alone, d2d-ce one way), else by the host clock around
enqueue-all + synchronize-all. Collectives as nccl-tests: after warm-up, a dist.barrier(), then
rank 0's host clock around --iters back-to-back operations and torch.cuda.synchronize(); a sample
is that time / iters. algbw = bytes / median time, GB/s = 1e9 B/s; busbw (nccl-tests'
doc/PERFORMANCE.md) = algbw x 2(N-1)/N for all-reduce, x (N-1)/N for all-gather, x 1 for
broadcast. After timing every size is verified on the device: the whole destination against the
expected bytes; each collective once more on fresh integer-valued floats (exact sums).

--json appends one JSON Lines record ("multi-gpu-primitive", schema 1) per pattern and GPU or
pair. NVLink multicast must be off (export NCCL_NVLS_ENABLE=0), as memstrat requires. Exit codes:
0 ok, 1 a measurement failed or was wrong, 2 bad option, 3 no PyTorch, CUDA, NCCL (collectives)
or second GPU.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baseline_record import append_jsonl, git_revision, iso_utc_now  # noqa: E402
from memstrat_inputs import UsageError  # noqa: E402
from nccl_env import import_torch_cuda  # noqa: E402
from multi_gpu_record import (COLLECTIVES, COPIES, PATTERNS, build_record,  # noqa: E402
                              busbw_factor, collective_count, format_nccl_version, format_size,
                              make_config, nccl_settings, nvls_refusal, parse_size, result_entry,
                              size_sweep)

PROG = "pytorch_multi_gpu_primitives.py"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_DEVICE = 0, 1, 2, 3


class NoDevice(RuntimeError):
    """No PyTorch, CUDA, NCCL or second GPU: exit code 3."""


# ---------------------------------------------------------------------------------------------
# the options (no torch)

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", type=int, metavar="N",
                   help="GPUs 0..N-1, N >= 2 (default: every visible GPU)")
    p.add_argument("--patterns", metavar="LIST", default=",".join(PATTERNS),
                   help="comma list of " + ", ".join(PATTERNS) + " (default all)")
    p.add_argument("--min-size", metavar="SIZE", default="4KiB",
                   help="smallest size, a power of two: 4KiB, 64K, 4096 (default %(default)s)")
    p.add_argument("--max-size", metavar="SIZE", default="1GiB",
                   help="largest size, a power of two (default %(default)s)")
    p.add_argument("--samples", type=int, metavar="K", default=9,
                   help="timed samples per size (default %(default)s)")
    p.add_argument("--warmup", type=int, metavar="K", default=2,
                   help="untimed samples per size before them (default %(default)s)")
    p.add_argument("--iters", type=int, metavar="K", default=20,
                   help="collectives: back-to-back operations per timed sample, as nccl-tests' "
                        "-n (default %(default)s)")
    p.add_argument("--json", metavar="FILE", help="append the records (JSON Lines) to FILE")
    p.add_argument("--quiet", action="store_true", help="no per-size lines, only each record's")
    return p


def parse_cli(argv: list[str], environ=os.environ) -> argparse.Namespace:
    """The checked options (a.sizes, a.patterns as lists): UsageError, or SystemExit from
    argparse. No torch needed."""
    a = build_parser().parse_args(argv)
    a.patterns = list(dict.fromkeys(x.strip() for x in a.patterns.split(",") if x.strip()))
    unknown = [x for x in a.patterns if x not in PATTERNS]
    if unknown or not a.patterns:
        raise UsageError(f"--patterns: unknown {', '.join(unknown) or '(none given)'}; choose "
                         "from " + ", ".join(PATTERNS))
    a.sizes = size_sweep(parse_size(a.min_size, "--min-size"),
                         parse_size(a.max_size, "--max-size"))
    if a.gpus is not None and a.gpus < 2:
        raise UsageError(f"--gpus {a.gpus}: this measures several GPUs, give 2 or more")
    for opt, v, least in (("--samples", a.samples, 1), ("--warmup", a.warmup, 0),
                          ("--iters", a.iters, 1)):
        if v < least:
            raise UsageError(f"{opt} {v}: must be at least {least}")
    if a.json and not Path(a.json).resolve().parent.is_dir():
        raise UsageError(f"--json {a.json}: its directory does not exist")
    if nvls_refusal(environ):
        raise UsageError(nvls_refusal(environ))
    return a


# ---------------------------------------------------------------------------------------------
# on the GPUs

def open_devices(a: argparse.Namespace):
    """torch once the GPUs check out (sets a.gpus); NoDevice or UsageError otherwise."""
    torch, dist = import_torch_cuda(NoDevice)
    visible = torch.cuda.device_count()
    if visible < 2:
        raise NoDevice(f"{visible} GPU visible; this needs at least 2")
    a.gpus = visible if a.gpus is None else a.gpus
    if a.gpus > visible:
        raise UsageError(f"--gpus {a.gpus}, but only {visible} GPUs are visible")
    if "nccl-all-gather" in a.patterns and max(a.sizes) < 4 * a.gpus:
        raise UsageError(f"--max-size {format_size(max(a.sizes))}: all-gather over {a.gpus} GPUs "
                         f"needs at least {4 * a.gpus} B (one float per rank)")
    if set(a.patterns) & set(COLLECTIVES) and not (dist.is_available()
                                                   and dist.is_nccl_available()):
        raise NoDevice("this PyTorch has no NCCL; measure the copies alone with --patterns "
                       + ",".join(COPIES))
    return torch


def byte_pattern(torch, nbytes: int, seed: int, device):
    """Bytes whose 4-byte words all differ, along the buffer and between seeds; a prefix of a
    longer pattern is the shorter one."""
    w = torch.arange(nbytes // 4, dtype=torch.int32, device=device)
    return w.bitwise_xor_(((seed + 1) * 0x2545F491) & 0x7FFFFFFF).view(torch.uint8)


def float_pattern(torch, count: int, seed: int, device):
    """Integer-valued float32 in [0, 1020]: sums over thousands of ranks stay exact."""
    w = torch.arange(count, dtype=torch.int32, device=device)
    return w.mul_(7).add_(131 * seed).remainder_(1021).float()


def mismatch(torch, got, expected, what: str) -> str | None:
    """None when equal, else how many elements differ and the first."""
    if torch.equal(got, expected):
        return None
    ne = got != expected
    i = int(torch.argmax(ne.to(torch.uint8)))
    return (f"{what}: {int(ne.sum())} of {got.numel()} elements differ (first at {i}: got "
            f"{got[i].item()}, expected {expected[i].item()})")


class Copies:
    """Per GPU g: the sources (a device buffer of byte_pattern(seed g) and a pinned host copy of
    it), a destination, a copy stream with its two timing events, and an idle stream."""

    def __init__(self, torch, n: int, max_bytes: int):
        self.t, dev = torch, [torch.device("cuda", g) for g in range(n)]
        self.src = [byte_pattern(torch, max_bytes, g, d) for g, d in enumerate(dev)]
        self.host = [torch.empty(max_bytes, dtype=torch.uint8, pin_memory=True) for _ in dev]
        for h, s in zip(self.host, self.src):
            h.copy_(s)
        self.dst = [torch.empty(max_bytes, dtype=torch.uint8, device=d) for d in dev]
        self.stream = [torch.cuda.Stream(d) for d in dev]
        self.idle = [torch.cuda.Stream(d) for d in dev]
        self.ev = [[torch.cuda.Event(enable_timing=True) for _ in range(2)] for _ in dev]

    def enqueue(self, g: int, dst, src, other: int | None) -> None:
        """dst.copy_(src) on GPU g's stream between its events. Across GPUs torch orders the copy
        after the other GPU's current stream and that stream after the copy: it is made the idle
        one, so that the copy the other way does not wait for this one."""
        st, (e0, e1) = self.stream[g], self.ev[g]
        with contextlib.ExitStack() as cm:
            if other is not None:
                cm.enter_context(self.t.cuda.stream(self.idle[other]))
            cm.enter_context(self.t.cuda.stream(st))
            e0.record(st)
            dst.copy_(src, non_blocking=True)
            e1.record(st)

    def sweep(self, a, transfers, by_events: bool, moved: int, per_gpu: bool, say):
        """transfers: (stream's GPU, destination GPU, source GPU or None: the host, the other GPU
        or None), all at once. (results, errors)."""
        t, results, errors = self.t, [], []
        gpus = sorted({x for tr in transfers for x in tr[:3] if x is not None})
        for b in a.sizes:
            views = [(g, self.dst[d][:b], self.host[g][:b] if s is None else self.src[s][:b], o)
                     for g, d, s, o in transfers]
            for v in views:
                v[1].zero_()  # a copy that writes nothing fails the check
            times, per = [], [[] for _ in views]
            for i in range(a.warmup + a.samples):
                for g in gpus:
                    t.cuda.synchronize(g)
                t0 = time.perf_counter()
                for v in views:
                    self.enqueue(*v)
                for v in views:
                    self.stream[v[0]].synchronize()
                host_us = (time.perf_counter() - t0) * 1e6
                if i >= a.warmup:
                    ev_us = [self.ev[v[0]][0].elapsed_time(self.ev[v[0]][1]) * 1e3 for v in views]
                    times.append(ev_us[0] if by_events else host_us)
                    for k, us in enumerate(ev_us):
                        per[k].append(us)
            for (g, d, s, _), v in zip(transfers, views):
                what = f"{'host' if s is None else f'cuda:{s}'} -> cuda:{d} at {format_size(b)}"
                err = mismatch(t, v[1], byte_pattern(t, b, g if s is None else s, v[1].device),
                               what)
                errors += [err] if err else []
            results.append(result_entry(b, times, moved * b, None, per if per_gpu else None))
            say(results[-1])
        return results, errors


def copy_jobs(n: int, patterns: list[str]):
    """(pattern, src, dst, both_ways, transfers, bytes moved per byte, per GPU rates) of each
    copy record."""
    if "h2d-alone" in patterns:
        yield from (("h2d-alone", None, g, False, [(g, g, None, None)], 1, False)
                    for g in range(n))
    if "h2d-all" in patterns:
        yield "h2d-all", None, None, False, [(g, g, None, None) for g in range(n)], n, True
    if "d2d-ce" in patterns:
        yield from (("d2d-ce", s, d, False, [(s, d, s, d)], 1, False)
                    for s in range(n) for d in range(n) if s != d)
    if "d2d-ce-both" in patterns:
        yield from (("d2d-ce-both", s, d, True, [(s, d, s, d), (d, s, d, s)], 2, True)
                    for s in range(n) for d in range(s + 1, n))


def collective_worker(rank: int, n: int, opts: dict, out_path: str) -> None:
    """Rank `rank` of the collectives (torch.multiprocessing.spawn); rank 0 writes
    {pattern: {"sizes", "results", "errors"}} to out_path. An exception ends the process without
    destroying the group (which could wait on the others): spawn ends them and raises."""
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=dev)
    out = {p: run_collective(torch, dist, p, rank, n, opts, dev) for p in opts["patterns"]}
    dist.destroy_process_group()
    if rank == 0:
        Path(out_path).write_text(json.dumps(out))


def run_collective(torch, dist, pattern: str, rank: int, n: int, o: dict, dev) -> dict:
    per_max = collective_count(pattern, max(o["sizes"]), n)[0]
    buf = torch.empty(per_max, dtype=torch.float32, device=dev)
    gathered = torch.empty(per_max * n, dtype=torch.float32, device=dev) \
        if pattern == "nccl-all-gather" else None
    seed = 0 if pattern == "nccl-broadcast" else rank  # broadcast: root 0's values
    sizes, results, errors = [], [], []
    for size in o["sizes"]:
        count, nbytes = collective_count(pattern, size, n)
        if count == 0:
            continue  # all-gather below 4 N bytes: nothing to send
        sizes.append(size)
        x, y = buf[:count], None if gathered is None else gathered[:count * n]
        op = {"nccl-all-reduce": lambda: dist.all_reduce(x),
              "nccl-all-gather": lambda: dist.all_gather_into_tensor(y, x),
              "nccl-broadcast": lambda: dist.broadcast(x, src=0)}[pattern]

        def fill():  # fresh inputs (all_reduce is in place); outputs and receivers at -1
            if pattern == "nccl-broadcast" and rank != 0:
                x.fill_(-1.0)
            else:
                x.copy_(float_pattern(torch, count, seed, dev))
            if y is not None:
                y.fill_(-1.0)
        times = []
        for i in range(o["warmup"] + o["samples"]):
            fill()
            torch.cuda.synchronize()
            dist.barrier(device_ids=[rank])
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(o["iters"]):
                op()
            torch.cuda.synchronize()
            if i >= o["warmup"]:
                times.append((time.perf_counter() - t0) * 1e6 / o["iters"])
        fill()
        op()
        if pattern == "nccl-all-gather":
            err = next(filter(None, (mismatch(torch, y[j * count:(j + 1) * count],
                                              float_pattern(torch, count, j, dev), f"block {j}")
                                     for j in range(n))), None)
        else:
            err = mismatch(torch, x, sum(float_pattern(torch, count, r, dev) for r in range(n))
                           if pattern == "nccl-all-reduce" else float_pattern(torch, count, 0, dev),
                           "buffer")
        wrong = torch.zeros(n, dtype=torch.int64, device=dev)
        wrong[rank] = err is not None
        dist.all_reduce(wrong)
        if rank == 0 and wrong.any():
            ranks = wrong.nonzero().flatten().tolist()
            errors.append(f"{pattern} at {format_size(nbytes)}: wrong on ranks {ranks}"
                          + (f" (rank 0 {err})" if err else ""))
        results.append(result_entry(nbytes, times, factor=busbw_factor(pattern, n)))
        if rank == 0 and not o["quiet"]:
            print(size_line(f"{pattern} x{n}", results[-1]), flush=True)
    return {"sizes": sizes, "results": results, "errors": errors}


def run_collectives(torch, a: argparse.Namespace, patterns: list[str]) -> dict:
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    opts = {k: getattr(a, k) for k in ("sizes", "warmup", "samples", "iters", "quiet")}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "collectives.json")
        torch.multiprocessing.spawn(collective_worker, nprocs=a.gpus, join=True,
                                    args=(a.gpus, {**opts, "patterns": patterns}, path))
        return json.loads(Path(path).read_text())


def environment(torch, n: int) -> dict:
    sha, dirty = git_revision()
    try:
        import torch.cuda.nccl  # noqa: PLC0415
        nccl = format_nccl_version(torch.cuda.nccl.version())
    except (ImportError, RuntimeError, AttributeError):  # a torch built without NCCL
        nccl = None
    return {"gpu_names": [torch.cuda.get_device_name(g) for g in range(n)],
            "torch": torch.__version__, "cuda": torch.version.cuda, "nccl": nccl,
            "nccl_settings": nccl_settings(os.environ),
            "git_sha": sha, "git_dirty": dirty}


def size_line(label: str, r: dict) -> str:
    bus = "" if r["busbw_gbps"] is None else f"  busbw {r['busbw_gbps']:8.2f}"
    per = "" if r["per_gpu_gbps"] is None else \
        "  per GPU " + " ".join(f"{x:.2f}" for x in r["per_gpu_gbps"])
    return (f"{label:20s} {format_size(r['bytes']):>9s}  median {r['median_us']:10.1f} us  "
            f"algbw {r['algbw_gbps']:8.2f} GB/s{bus}{per}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        a = parse_cli(argv)
        torch = open_devices(a)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return EXIT_OK if e.code in (0, None) else EXIT_USAGE
    except (UsageError, NoDevice) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return EXIT_USAGE if isinstance(e, UsageError) else EXIT_NO_DEVICE
    n, status = a.gpus, EXIT_OK
    run = {"started_at": iso_utc_now(),
           "argv": [f"experiments/baselines/{PROG}", *argv], "env": environment(torch, n)}

    def emit(config: dict, results: list[dict], errors: list[str], label: str) -> None:
        nonlocal status
        rec = build_record(run, config, results, errors)
        status = EXIT_FAILED if errors else status
        s = rec["summary"]
        peak = "no results" if s["peak_bytes"] is None else \
            f"peak algbw {s['peak_algbw_gbps']:.2f} GB/s at {format_size(s['peak_bytes'])}"
        print(f"{label}: {rec['status']}, {peak}" + (f": {rec['error']}" if errors else ""),
              file=sys.stderr if errors else sys.stdout, flush=True)
        if a.json:
            append_jsonl(a.json, rec)

    if set(a.patterns) & set(COPIES):
        try:
            c, setup_error = Copies(torch, n, max(a.sizes)), None
        except Exception as e:  # noqa: BLE001  (out of memory, a CUDA error: the records fail)
            c, setup_error = None, f"setting up the copies: {type(e).__name__}: {e}"
        for pattern, src, dst, both, transfers, moved, per_gpu in copy_jobs(n, a.patterns):
            label = (f"{pattern} {'host' if src is None else src}{'<->' if both else '->'}"
                     f"{'all' if dst is None else dst}")
            if src is not None and not torch.cuda.can_device_access_peer(src, dst):
                print(f"{label}: no peer access between them: the driver stages the copy",
                      file=sys.stderr)
            config = make_config(pattern, a, src, dst, both)
            results, errors = [], [setup_error] if setup_error else []
            if c is not None:
                try:
                    results, errors = c.sweep(a, transfers, config["timed_by"] == "cuda-events",
                                              moved, per_gpu,
                                              lambda r: a.quiet or print(size_line(label, r)))
                except Exception as e:  # noqa: BLE001
                    errors = [f"{type(e).__name__}: {e}"]
            emit(config, results, errors, label)
        del c
        torch.cuda.empty_cache()
    colls = [p for p in a.patterns if p in COLLECTIVES]
    if colls:
        try:
            got = run_collectives(torch, a, colls)
        except Exception as e:  # noqa: BLE001  (a rank raised; spawn ended the others)
            got = {p: {"sizes": [], "results": [], "errors": [f"{type(e).__name__}: {e}"]}
                   for p in colls}
        for p in colls:
            emit(make_config(p, a, 0 if p == "nccl-broadcast" else None, None, False,
                             got[p]["sizes"]), got[p]["results"], got[p]["errors"], f"{p} x{n}")
    return status


if __name__ == "__main__":
    sys.exit(main())

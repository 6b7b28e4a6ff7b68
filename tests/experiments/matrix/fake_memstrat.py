#!/usr/bin/env python3
"""A stand-in for build/memstrat used by test_run_matrix.py (no GPU needed).

`list` prints the strategies; `train ... --json FILE --run-tag TAG` appends one small
valid schema-1 record to FILE. Behaviour is steered by environment variables:

  FAKE_MEMSTRAT_SLEEP  seconds to sleep before writing the record
  FAKE_MEMSTRAT_FAIL   if this substring is in the run tag: write a failed record, exit 1
  FAKE_MEMSTRAT_CRASH  if this substring is in the run tag: exit 3 without a record
  FAKE_MEMSTRAT_CALLS  file to which each call appends "start|done TAG PID CUDA_VISIBLE_DEVICES"
"""
import argparse
import json
import os
import sys
import time

STRATEGIES = [("resident", "data set uploaded once"), ("pageable", "cudaMemcpy"),
              ("pinned", "cudaMemcpyAsync from pinned memory"),
              ("double-buffer", "K device buffers, copy streams"),
              ("zero-copy", "mapped host memory"), ("um", "managed memory"),
              ("um-prefetch", "managed + prefetch"), ("um-advise", "managed + advise")]


def note(event, tag):
    path = os.environ.get("FAKE_MEMSTRAT_CALLS")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{event} {tag} {os.getpid()} "
                     f"{os.environ.get('CUDA_VISIBLE_DEVICES', '-')}\n")


def main(argv):
    if argv[:1] == ["list"]:
        for name, desc in STRATEGIES:
            print(f"{name:<16}{desc}")
        return 0
    if argv[:1] != ["train"]:
        print("usage: fake_memstrat.py list|train ...", file=sys.stderr)
        return 2
    ap = argparse.ArgumentParser()
    for opt in ("--strategy", "--scenario", "--transfer", "--hidden", "--gemm",
                "--json", "--run-tag"):
        ap.add_argument(opt, required=opt in ("--strategy", "--json"))
    for opt in ("--batch", "--epochs", "--seed", "--depth", "--copy-streams"):
        ap.add_argument(opt, type=int)
    ap.add_argument("--no-profile", action="store_true")
    a = ap.parse_args(argv[1:])
    tag = a.run_tag or ""
    note("start", tag)
    print(f"fake memstrat: {a.strategy} {tag}", flush=True)
    time.sleep(float(os.environ.get("FAKE_MEMSTRAT_SLEEP", "0")))
    if os.environ.get("FAKE_MEMSTRAT_CRASH") and os.environ["FAKE_MEMSTRAT_CRASH"] in tag:
        print("fake memstrat: simulated crash", file=sys.stderr)
        return 3
    failed = bool(os.environ.get("FAKE_MEMSTRAT_FAIL")) and \
        os.environ["FAKE_MEMSTRAT_FAIL"] in tag
    epochs = [{"epoch": i, "wall_ms": 5.0 + (i == 1), "gpu_ms": 4.5 + (i == 1),
               "host_ms": 0.0, "copy_ms": 1.0, "compute_ms": 4.4, "stall_ms": 0.1,
               "h2d_bytes": 47280000, "um_htod_bytes": None, "um_dtoh_bytes": None,
               "um_gpu_faults": None, "um_cpu_faults": None, "kernel_ms": None,
               "memcpy_ms": None, "api_calls": {"cudaMemcpyAsync": 470},
               "train_loss": 0.3, "train_acc": 0.9, "test_acc": 0.91}
              for i in range(1, (a.epochs or 2) + 1)]
    rec = {
        "schema_version": 1, "run_id": f"fake-{os.getpid()}-{time.time_ns()}",
        "started_at": "2026-11-21T23:30:12Z",
        "status": "failed" if failed else "ok",
        "error": "fake memstrat: simulated failure" if failed else None,
        "argv": ["memstrat", *argv],
        "env": {"gpu_name": "Fake GPU", "driver_version": "13.0", "runtime_version": "13.0",
                "pcie_gen": None, "pcie_width": None, "host": "test", "git_sha": "0" * 12,
                "git_dirty": False},
        "config": {"strategy": a.strategy, "scenario": a.scenario or "static",
                   "transfer": a.transfer or "u8", "batch": a.batch or 256,
                   "hidden": [int(h) for h in (a.hidden or "256").split(",")],
                   "epochs": a.epochs or 2, "seed": a.seed or 1, "gemm": a.gemm or "cublas",
                   "depth": a.depth or 2, "streams": a.copy_streams or 1},
        "setup": {"ms": 80.0, "api_calls": {"cudaMalloc": 14}},
        "epochs": [] if failed else epochs,
        "summary": None if failed else {"steady_epochs": len(epochs) - 1},
        "final": None if failed else {"test_loss": 0.1, "test_acc": 0.97,
                                      "samples_per_s": 1.2e7},
    }
    if a.run_tag is not None:
        rec["config"]["run_tag"] = a.run_tag
    with open(a.json, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    note("done", tag)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""A stand-in for build/memstrat used by test_run_matrix.py (no GPU needed).

It answers from the committed copies of what the real binary writes
(tests/experiments/fixtures/, kept equal to the binary's output by tests/cpu/): `describe
--json` prints describe.json, `list` its strategies, and `train` accepts exactly the options
describe.json declares and appends one record built from the example records
(run_record_ok.json / run_record_failed.json) with this run's config. Behaviour is steered by
environment variables:

  FAKE_MEMSTRAT_SLEEP  seconds to sleep before writing the record
  FAKE_MEMSTRAT_FAIL   if this substring is in the run tag: write a failed record, exit 1
  FAKE_MEMSTRAT_CRASH  if this substring is in the run tag: exit 3 without a record
  FAKE_MEMSTRAT_CALLS  file to which each call appends "start|done TAG PID CUDA_VISIBLE_DEVICES"
"""
import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DESCRIBE = json.loads((FIXTURES / "describe.json").read_text())


def note(event, tag):
    path = os.environ.get("FAKE_MEMSTRAT_CALLS")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{event} {tag} {os.getpid()} "
                     f"{os.environ.get('CUDA_VISIBLE_DEVICES', '-')}\n")


def train_parser():
    """The train options as describe.json declares them, defaults included."""
    ap = argparse.ArgumentParser(prog="fake_memstrat.py train")
    for o in DESCRIBE["train_options"]:
        names, dest = [o["name"], *o["aliases"]], o["name"][2:].replace("-", "_")
        if o["kind"] == "flag":
            ap.add_argument(*names, dest=dest, action="store_true", default=o["default"])
            for n in o["negations"]:
                ap.add_argument(n, dest=dest, action="store_false")
        elif o["kind"] == "integer":
            ap.add_argument(*names, dest=dest, type=int, default=o["default"])
        else:
            ap.add_argument(*names, dest=dest, default=o["default"])
    return ap


def record(a, argv, failed):
    """This run's record: the writer's example with this run's config and epoch count."""
    rec = copy.deepcopy(json.loads((FIXTURES / ("run_record_failed.json" if failed else
                                                "run_record_ok.json")).read_text()))
    rec["run_id"] = f"fake-{os.getpid()}-{time.time_ns()}"
    rec["argv"] = ["memstrat", *argv]
    hidden = a.hidden if isinstance(a.hidden, list) else [int(h) for h in a.hidden.split(",")]
    rec["config"].update({
        "strategy": a.strategy, "scenario": a.scenario, "transfer": a.transfer,
        "batch": a.batch, "hidden": hidden, "epochs": a.epochs, "seed": a.seed,
        "gemm": a.gemm, "depth": a.depth, "streams": a.copy_streams,
        "prefetch_chunk_mib": a.prefetch_chunk, "copy_chunk_mib": a.copy_chunk,
        "stage_blocks": a.stage_blocks,
        "profile": a.profile, "run_tag": a.run_tag})
    if "epoch_launch" in rec["config"]:
        # What the run decided, as experiments/core/trainer.cu decides it: one launch per
        # epoch needs --epoch-launch on and a strategy that acquires every batch ahead of
        # the compute (of the registered ones, resident).
        launch = a.epoch_launch == "on" and a.strategy == "resident"
        rec["config"]["epoch_launch"] = launch
        rec["config"]["epoch_launch_off_reason"] = (
            None if launch else "off (--epoch-launch off)" if a.epoch_launch == "off" else
            f"strategy {a.strategy} moves each batch while the previous ones compute")
    if failed:
        rec["error"] = "fake memstrat: simulated failure"
        return rec
    template = rec["epochs"][-1]
    rec["epochs"] = [dict(template, epoch=i) for i in range(1, a.epochs + 1)]
    rec["summary"]["steady_epochs"] = max(a.epochs - 1, 1)
    return rec


def main(argv):
    if argv[:2] == ["describe", "--json"]:
        print(json.dumps(DESCRIBE, indent=2))
        return 0
    if argv[:1] == ["list"]:
        for s in DESCRIBE["strategies"]:
            print(f"{s['name']:<15}{s['description']}")
        return 0
    if argv[:1] != ["train"]:
        print("usage: fake_memstrat.py describe --json|list|train ...", file=sys.stderr)
        return 2
    a = train_parser().parse_args(argv[1:])
    tag = a.run_tag or ""
    note("start", tag)
    print(f"fake memstrat: {a.strategy} {tag}", flush=True)
    time.sleep(float(os.environ.get("FAKE_MEMSTRAT_SLEEP", "0")))
    if os.environ.get("FAKE_MEMSTRAT_CRASH") and os.environ["FAKE_MEMSTRAT_CRASH"] in tag:
        print("fake memstrat: simulated crash", file=sys.stderr)
        return 3
    failed = bool(os.environ.get("FAKE_MEMSTRAT_FAIL")) and \
        os.environ["FAKE_MEMSTRAT_FAIL"] in tag
    with open(a.json, "a") as fh:
        fh.write(json.dumps(record(a, argv, failed)) + "\n")
    note("done", tag)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

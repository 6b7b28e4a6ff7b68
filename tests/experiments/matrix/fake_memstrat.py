#!/usr/bin/env python3
"""A stand-in for build/memstrat used by test_run_matrix.py (no GPU needed).

It answers from the committed copies of what the real binary writes
(tests/experiments/fixtures/, kept equal to the binary's output by tests/cpu/): `describe
--json` prints describe.json, `list` its strategies, `info` a device line naming
$FAKE_MEMSTRAT_GPU (default "NVIDIA Fake GPU"), and `train` accepts exactly the options
describe.json declares and appends one record built from the example records
(run_record_ok.json / run_record_failed.json) with this run's config. Like memstrat, it exits 2
on an option or value describe.json does not allow (and on --hidden sizes outside 1..65536),
and on a launch form the strategy, the scenario or the step cannot run; the record names the
launch form asked for, the one that ran (auto: the strategy's own, as memstrat picks it) and
the step (launch_run below, which mirrors experiments/core/step_choice.cpp and
launch_request.cpp).
Behaviour is steered by environment variables:

  FAKE_MEMSTRAT_SLEEP      seconds to sleep before writing the record
  FAKE_MEMSTRAT_SLEEP_MAX  sleep a random time in [0, this) instead
  FAKE_MEMSTRAT_FAIL       if this substring is in the run tag: write a failed record, exit 1
  FAKE_MEMSTRAT_CRASH      if this substring is in the run tag: exit 134 without a record
  FAKE_MEMSTRAT_REJECT     if this substring is in the run tag: exit FAKE_MEMSTRAT_REJECT_CODE
                           (default 2) without a record, as memstrat refusing the run
  FAKE_MEMSTRAT_CALLS      file to which each call appends "start|done TAG PID CUDA_VISIBLE_DEVICES"
  FAKE_MEMSTRAT_CHILD      "1": run the training in a child process and wait for it, as
                           nsys_run does with memstrat (this process notes "wrap TAG PID")
  FAKE_MEMSTRAT_EXCLUSIVE  a file the training holds an exclusive lock on; finding it locked
                           (another training runs) appends "overlap TAG PID" to the calls file
"""
import argparse
import copy
import fcntl
import json
import os
import random
import subprocess
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


def bounded(o):
    """An integer in the option's declared range (argparse exits 2 otherwise)."""
    def parse(s):
        v = int(s)
        if ("min" in o and v < o["min"]) or ("max" in o and v > o["max"]):
            raise ValueError(s)
        return v
    parse.__name__ = o["name"]
    return parse


def layers(s):
    """--hidden as memstrat reads it: sizes in 1..65536."""
    sizes = [int(p) for p in s.split(",")]
    if not sizes or any(not 1 <= h <= 65536 for h in sizes):
        raise ValueError(s)
    return sizes


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
            ap.add_argument(*names, dest=dest, type=bounded(o), default=o["default"])
        elif o["kind"] == "list":
            ap.add_argument(*names, dest=dest, type=layers, default=o["default"])
        else:
            ap.add_argument(*names, dest=dest, default=o["default"])
    return ap


# The form each strategy was built for (--launch-form auto) where its batches are written
# before the epoch (static, refresh): one launch of every step (resident), one per chunk of
# its own, or one epoch graph; the others run per batch.
OWN_FORM = {"resident": "kernel", "double-buffer-graph": "kernel-per-chunk",
            "zero-copy-staged": "kernel-per-chunk", "pinned-graph": "graph"}
EPOCH_GRAPH = {"double-buffer-graph", "zero-copy-staged", "pinned-graph"}
SINGLE_LAUNCH_MAX_WORK = 262144
STRATEGIES = {s["name"]: s for s in DESCRIBE["strategies"]}
NEEDS_STEP = {f["name"]: f["needs_step"] for f in DESCRIBE["launch_forms"]}


def step_of(a):
    """(the step the run takes, why not the single-launch step or None)."""
    host = STRATEGIES[a.strategy]["batch_in_host_memory"]
    if a.fused == "off":
        return "layer-by-layer", "off in the configuration"
    lt = "cublaslt-fused" if len(a.hidden) == 1 and a.gemm == "cublas" and not (
        a.fused == "on" and host) else "layer-by-layer"
    if a.fused == "lt":
        return lt, "single-launch step off in the configuration"
    why = ("the single-launch step needs exactly one hidden layer" if len(a.hidden) != 1 else
           "the single-launch step stands in for the cuBLAS backend only" if a.gemm != "cublas"
           else "TF32: fp32 only" if a.tf32 else
           f"hidden size {a.hidden[0]} is not a multiple of 4" if a.hidden[0] % 4 else
           "the batch is read in place from mapped host memory" if a.fused == "on" and host else
           "batch x hidden > 262144" if a.fused == "on" and
           a.batch * a.hidden[0] > SINGLE_LAUNCH_MAX_WORK else None)
    return ("single-launch", None) if why is None else (lt, why)


def launch_run(a, given):
    """(launch form asked for, the form that runs, step, why the run is refused or None);
    `given`: the options on the command line."""
    asked = a.launch_form if "--launch-form" in given else None
    if "--epoch-launch" in given:
        old = "auto" if a.epoch_launch == "on" else "per-batch"
        if asked is not None and asked != old:
            return asked, None, None, f"--epoch-launch {a.epoch_launch} means --launch-form {old}"
        asked = old
    asked = asked or "auto"
    forms = STRATEGIES[a.strategy]["launch_forms"][a.scenario]
    step, not_single = step_of(a)
    if not forms:
        return asked, None, step, f"--strategy {a.strategy} does not run in {a.scenario}"
    if asked == "auto":
        form = OWN_FORM.get(a.strategy, "per-batch") if a.scenario != "stream" else "per-batch"
        if NEEDS_STEP.get(form) and not_single:
            form = "graph" if a.strategy in EPOCH_GRAPH else "per-batch"
        return asked, form, step, None
    if asked not in forms:
        return asked, None, step, f"--launch-form {asked}: strategy {a.strategy} does not allow it"
    if NEEDS_STEP.get(asked) and not_single:
        return asked, None, step, f"--launch-form {asked}: the {step} step ({not_single})"
    return asked, asked, step, None


def given_options(argv):
    return {arg.split("=", 1)[0] for arg in argv if arg.startswith("--")}


def record(a, argv, failed):
    """This run's record: the writer's example with this run's config and epoch count."""
    rec = copy.deepcopy(json.loads((FIXTURES / ("run_record_failed.json" if failed else
                                                "run_record_ok.json")).read_text()))
    rec["run_id"] = f"fake-{os.getpid()}-{time.time_ns()}"
    rec["argv"] = ["memstrat", *argv]
    hidden = a.hidden
    # a strategy's own options as the record writes them: null where the strategy does not
    # read the option (describe.json's strategies[].options)
    reads = set(STRATEGIES[a.strategy]["options"])
    own = {key: (value if option in reads else None) for option, key, value in (
        ("--depth", "depth", a.depth), ("--copy-streams", "streams", a.copy_streams),
        ("--prefetch-chunk", "prefetch_chunk_mib", a.prefetch_chunk),
        ("--copy-chunk", "copy_chunk_mib", a.copy_chunk),
        ("--stage-blocks", "stage_blocks", a.stage_blocks), ("--advise", "advise", a.advise))}
    stream = a.scenario == "stream"
    rec["config"].update({
        "strategy": a.strategy, "scenario": a.scenario, "transfer": a.transfer,
        "batch": a.batch, "hidden": hidden, "epochs": a.epochs, "seed": a.seed,
        "gemm": a.gemm, **own, "thread_placement": a.thread_placement,
        "workers": a.workers if stream else None, "prefetch": a.prefetch if stream else None,
        "augment": a.augment if stream else None,
        "profile": a.profile, "run_tag": a.run_tag})
    # the data-path and scale options, as experiments/core/record.cpp writes them
    augments = a.scenario == "refresh" or (a.scenario == "stream" and a.augment != "none")
    shards = max(a.gpus, a.emulate_gpus)
    rec["config"].update({
        "augment_device": a.augment_device if augments else None, "replicate": a.replicate,
        "device_budget_gib": None if a.device_budget is None else float(a.device_budget),
        "gpus": a.gpus, "emulate_gpus": a.emulate_gpus,
        "reduce": a.reduce if shards > 1 else None,
        "processes": a.processes if a.gpus > 1 else None})
    asked, form, step, _ = launch_run(a, given_options(argv))
    rec["config"].update({
        "launch_form": asked, "epoch_form": form, "epoch_launch": form != "per-batch",
        "epoch_launch_off_reason": None if form != "per-batch" else
        "per-batch asked for" if asked == "per-batch" else
        f"strategy {a.strategy} moves each batch while the previous ones compute",
        "step": step, "fused": step != "layer-by-layer"})
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
    if argv[:1] == ["info"]:  # the line scripts read the GPU's name from
        print(f"device 0 of 1: {os.environ.get('FAKE_MEMSTRAT_GPU', 'NVIDIA Fake GPU')}")
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
    refused = launch_run(a, given_options(argv))[3]
    if refused:
        print(f"memstrat: {refused}", file=sys.stderr)
        return 2
    if os.environ.get("FAKE_MEMSTRAT_REJECT") and os.environ["FAKE_MEMSTRAT_REJECT"] in tag:
        print("memstrat: simulated refusal", file=sys.stderr)
        return int(os.environ.get("FAKE_MEMSTRAT_REJECT_CODE", "2"))
    if os.environ.get("FAKE_MEMSTRAT_CHILD") == "1":  # a wrapper, as nsys_run around memstrat
        env = dict(os.environ, FAKE_MEMSTRAT_CHILD="0")
        note("wrap", tag)
        return subprocess.run([sys.executable, __file__, *argv], env=env).returncode
    exclusive = os.environ.get("FAKE_MEMSTRAT_EXCLUSIVE")
    if exclusive:
        held = open(exclusive, "a")  # noqa: SIM115 (held until the process ends)
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            note("overlap", tag)
    note("start", tag)
    print(f"fake memstrat: {a.strategy} {tag}", flush=True)
    if os.environ.get("FAKE_MEMSTRAT_SLEEP_MAX"):
        time.sleep(random.uniform(0, float(os.environ["FAKE_MEMSTRAT_SLEEP_MAX"])))
    else:
        time.sleep(float(os.environ.get("FAKE_MEMSTRAT_SLEEP", "0")))
    if os.environ.get("FAKE_MEMSTRAT_CRASH") and os.environ["FAKE_MEMSTRAT_CRASH"] in tag:
        print("fake memstrat: simulated crash", file=sys.stderr)
        return 134
    failed = bool(os.environ.get("FAKE_MEMSTRAT_FAIL")) and \
        os.environ["FAKE_MEMSTRAT_FAIL"] in tag
    with open(a.json, "a") as fh:
        fh.write(json.dumps(record(a, argv, failed)) + "\n")
    note("done", tag)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

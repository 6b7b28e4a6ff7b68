"""The crossover and decision blocks (analysis/block_generators_crossover.py,
block_generators_decision.py) on synthetic results sets: where a strategy's data-movement cost
falls under 5% of resident's epoch along the hidden width, beside the cost model; the measured
winner per regime with the tie rule; "not measured" where the set holds no such runs; bad
arguments exit 2."""
import copy
import json
import re
import shutil
from pathlib import Path

import pytest

from analysis import cost_model as M
from analysis import docs_blocks
from analysis.block_generators import render
from analysis.primitives import PrimitiveTable
from analysis.results_set import load_results_set

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

SET = "docs/results/nvidia-h200"
TEMPLATE = json.loads((REPO / "tests/experiments/fixtures/run_record_ok.json").read_text())


def run_record(strategy, scenario, hidden, wall, process, form="per-batch", host=0.0,
               auto=True):
    rec = copy.deepcopy(TEMPLATE)
    rec["run_id"] = f"{strategy}-{scenario}-h{hidden}-{form}-{process}"
    cfg = rec["config"]
    cfg.update(strategy=strategy, scenario=scenario, hidden=[hidden], batch=256,
               epoch_form=form, epoch_launch=form != "per-batch", run_tag=rec["run_id"],
               profile=False, launch_form="auto" if auto else form)
    if strategy == "double-buffer":
        cfg.update(depth=2, streams=1)
    for e in rec["epochs"]:
        e.update(wall_ms=wall * (1 + 0.001 * process), gpu_ms=(wall - host) * (1 + 0.001 * process),
                 host_ms=host)
    return rec


def write_set(root: Path, runs, processes=10) -> Path:
    """runs: (strategy, scenario, hidden, wall ms[, form[, host ms]]) -> records of `processes`
    processes each, and the fixture primitives."""
    records = root / SET / "records"
    records.mkdir(parents=True)
    with open(records / "results.jsonl", "w") as fh:
        for r in runs:
            strategy, scenario, hidden, wall, *rest = r
            form = rest[0] if rest else "per-batch"
            host = rest[1] if len(rest) > 1 else 0.0
            for p in range(processes):
                fh.write(json.dumps(run_record(strategy, scenario, hidden, wall, p, form,
                                               host, auto=strategy != "resident")) + "\n")
    shutil.copy(FIXTURES / "primitives.jsonl", records / "primitives.jsonl")
    return root


def rendered(root: Path, spec: str) -> str:
    rs = load_results_set(root / SET, SET)
    name, *words = spec.split()
    return render(name, words, rs)


def row(text: str, first_cell: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(f"| {first_cell} |"))


# ---- crossover --------------------------------------------------------------------------------

C = {64: 10.0, 256: 100.0, 1024: 1000.0}     # resident's epoch by width (ms, GPU = wall)


def predicted_movement(strategy: str, root: Path) -> dict[int, float]:
    """The cost model's data movement at each width's C (independent of the block's code)."""
    rs = load_results_set(root / SET, SET)
    table = PrimitiveTable.by_gpu(rs.primitives)["NVIDIA H200"]
    shape = M.Shape(60000, 256, "u8", "single-launch", 8, None)
    return {w: M.predict(strategy, "static", shape, c, table).gpu_ms - c for w, c in C.items()}


@pytest.fixture
def sweep_root(tmp_path):
    """Resident at three widths; pinned measured as the model predicts it; um (the model: C in
    static) measured 50 ms above resident at every width."""
    probe = write_set(tmp_path / "probe", [("resident", "static", 256, 1.0)])
    pinned = predicted_movement("pinned", probe)
    runs = [("resident", "static", w, c) for w, c in C.items()]
    runs += [("pinned", "static", w, c + pinned[w]) for w, c in C.items()]
    runs += [("um", "static", w, c + 50.0) for w, c in C.items()]
    return write_set(tmp_path / "set", runs), pinned


def test_crossover_measured_beside_the_model(sweep_root):
    root, pinned = sweep_root
    text = rendered(root, "crossover static u8")
    # pinned's cost is a constant P ms: P/10 at 64 is above 5%, P/100 at 256 under it
    assert pinned[64] / C[64] > 0.05 > pinned[256] / C[256]
    p = row(text, "pinned")
    cells = [c.strip() for c in p.split("|")[1:-1]]
    assert cells[3] == "256" and cells[4] == "256", cells
    assert cells[5].startswith("agree (") and "residual at 256: +0.0%" in cells[5], cells
    # um: 50 ms is 50/1000 = 5% at the largest width, not under it; the model says C (nothing
    # moves in static), under 5% from the smallest width: they differ, with the residual
    u = [c.strip() for c in row(text, "um").split("|")[1:-1]]
    assert u[3] == "not yet at 1024" and u[4] == "64 or less", u
    assert u[5].startswith("differ") and "residual at 1024: +5.0%" in u[5], u
    assert "64: +500%" in u[2] and "1024: +5.0%" in u[2]
    assert "| resident |" not in text            # the reference has no cost of its own


def test_crossover_uses_the_interval_not_the_estimate(tmp_path):
    """A cost whose estimate is under 5% but whose interval reaches over it is not under."""
    runs = [("resident", "static", w, c) for w, c in C.items()]
    runs += [("pinned", "static", w, c + 4.9) for w, c in C.items()]      # 4.9% at 100 ms
    text = rendered(write_set(tmp_path, runs, processes=3), "crossover static u8")
    cells = [c.strip() for c in row(text, "pinned").split("|")[1:-1]]
    # 3 processes: the Moses interval is [min, max] of the differences, up to ~5.0% at 256
    assert cells[3] == "1024", cells


def test_crossover_in_the_stream_scenario_follows_the_swept_pipeline(tmp_path):
    """In the stream scenario the sweep's input pipeline (compute.toml: 16 workers, light, at
    every width) stands for the strategy, not stream.toml's other worker counts at 256; the cost
    model has no stream model, and the row says so."""
    runs = [("resident", "static", w, c) for w, c in C.items()]
    root = write_set(tmp_path, runs)
    path = root / SET / "records" / "results.jsonl"

    def stream_runs(hidden, wall, workers, augment):
        out = []
        for p in range(10):
            rec = run_record("pinned", "stream", hidden, wall, p)
            rec["run_id"] += f"-w{workers}-{augment}"
            rec["config"].update(workers=workers, prefetch=32, augment=augment,
                                 run_tag=rec["run_id"])
            out.append(json.dumps(rec))
        return out

    lines = []
    for w, c in C.items():                       # swept: 1% above resident at 64, then less
        lines += stream_runs(w, c * 1.5 if w == 64 else c + 0.1, 16, "light")
    lines += stream_runs(256, 900.0, 1, "heavy")   # stream.toml's slow pipeline at 256 only
    with open(path, "a") as fh:
        fh.write("\n".join(lines) + "\n")
    text = rendered(root, "crossover stream u8")
    assert "**stream, u8**" in text and "16 workers, 32 slots, light augmentation" in text
    cells = [c.strip() for c in row(text, "pinned").split("|")[1:-1]]
    assert "256: +0.1%" in cells[2] and "64: +50%" in cells[2], cells   # not the 1-worker run
    assert cells[3] == "256", cells
    assert cells[4].startswith("no model"), cells


def test_crossover_without_a_sweep_says_not_measured_and_how(tmp_path):
    root = write_set(tmp_path, [("resident", "static", 256, 10.0), ("pinned", "static", 256, 12.0)])
    text = rendered(root, "crossover")
    assert "not measured in this set" in text and "--stages compute" in text
    body = text.split("\n\n_Generated")[0]
    assert not re.search(r"\d+\.\d+ ms", body)    # no invented number


# ---- decision ---------------------------------------------------------------------------------

def decision_runs():
    return [("resident", "static", 256, 10.0), ("um", "static", 256, 10.0),
            ("pinned", "static", 256, 12.0),
            ("resident", "refresh", 256, 30.0, "per-batch", 4.0),
            ("double-buffer", "refresh", 256, 15.0, "per-batch", 4.0),
            ("pinned", "refresh", 256, 20.0, "per-batch", 4.0)]


def test_decision_rows_winner_tie_rule_runner_up_and_movement(tmp_path):
    text = rendered(write_set(tmp_path, decision_runs()), "decision")
    static = row(text, "data fits, static (hidden 256)")
    # um and resident are not different (identical processes): the tie goes to the simpler
    assert "**resident (one launch per batch)** 10.0" in static
    assert "none: it is the reference" in static and "| um (one launch per batch) 10.0" in static
    assert "nothing moves in a steady epoch" in static
    refresh = row(text, "data fits, rewritten every epoch (refresh, hidden 256)")
    assert "**double-buffer (one launch per batch)** 15.0" in refresh
    assert "| +5.0" in refresh                      # 15 - resident's static 10
    assert "| pinned (one launch per batch) 20.0" in refresh
    assert "pinned-h2d" in refresh and "host's preparation, 4 ms (measured)" in refresh
    assert "tied, the simplest shown" not in refresh


def test_decision_says_when_the_tests_cannot_order_the_regime(tmp_path):
    text = rendered(write_set(tmp_path, decision_runs(), processes=3), "decision")
    refresh = row(text, "data fits, rewritten every epoch (refresh, hidden 256)")
    # 3 processes: no pair can be significant; every configuration ties, the simplest leads
    assert "**resident (one launch per batch)** 30.0" in refresh
    assert "tied, the simplest shown" in refresh


def test_decision_regimes_not_in_the_set_say_how_to_measure_them(tmp_path):
    text = rendered(write_set(tmp_path, decision_runs()), "decision")
    for regime, how in (("data larger than the device budget", "--replicate K --device-budget"),
                        ("data larger than the device budget", "advise.py --budget-gib"),
                        ("compute-light vs compute-heavy steps (hidden sweep)", "--stages compute"),
                        ("several GPUs", "memstrat train --gpus N"),
                        ("several GPUs", "`docs/results/<gpu>-x<N>/` (the scaling stage"),
                        ("data fits, augmented on the host batch by batch (stream, hidden 256)",
                         "the stream stage"),
                        ("data fits, augmented on the GPU batch by batch (stream, hidden 256)",
                         "the stream stage")):
        r = row(text, regime)
        assert "not measured in this set — " in r and how in r, r
    assert "python3 analysis/advise.py --step-us X --bytes-per-sample Y --samples N " \
           "--budget-gib W" in text


def test_decision_keeps_augmentation_on_the_host_and_on_the_gpu_apart(tmp_path):
    """stream.toml's GPU cells (--augment-device gpu) are their own regime: the host row never
    takes a GPU-augmented configuration (pinned's, at the same workers, is faster here), nor the
    GPU row a host one; each strategy's curve is its own per place (analysis/stream.py)."""
    root = write_set(tmp_path, decision_runs())
    path = root / SET / "records" / "results.jsonl"

    def stream_runs(strategy, wall, workers, gpu):
        out = []
        for p in range(10):
            rec = run_record(strategy, "stream", 256, wall, p)
            rec["run_id"] += f"-w{workers}" + ("-gpu" if gpu else "")
            rec["config"].update(workers=workers, prefetch=32, augment="light",
                                 run_tag=rec["run_id"])
            if gpu:
                rec["config"]["augment_device"] = "gpu"
            if strategy != "resident":                   # host workers: producer figures
                for e in rec["epochs"]:
                    e.update(input_wait_ms=0.5, input_wait_first_ms=0.1,
                             producer_samples_per_s=1e6)
            out.append(json.dumps(rec))
        return out

    lines = stream_runs("pinned", 40.0, 4, False) + stream_runs("pinned", 30.0, 16, False)
    lines += stream_runs("double-buffer", 35.0, 16, False)
    lines += stream_runs("pinned", 12.0, 4, True) + stream_runs("pinned", 11.0, 16, True)
    lines += stream_runs("resident", 8.0, 4, True)
    with open(path, "a") as fh:
        fh.write("\n".join(lines) + "\n")
    text = rendered(root, "decision")
    host = row(text, "data fits, augmented on the host batch by batch (stream, hidden 256, "
                     "light augmentation)")
    assert "**pinned (one launch per batch)** 30.1" in host, host   # 16 workers
    assert "| double-buffer (one launch per batch) 35.1" in host, host
    assert " 11.0" not in host and "resident" not in host.split("|")[2]
    gpu = row(text, "data fits, augmented on the GPU batch by batch (stream, hidden 256, "
                    "light augmentation)")
    assert "**resident (one launch per batch)** 8.0" in gpu, gpu
    assert "| pinned (one launch per batch) 11.0" in gpu, gpu   # its fastest count, 16 workers
    assert " 30.1" not in gpu
    stream = rendered(root, "stream")
    assert re.search(r"^\| light \| pinned \| 16 ", stream, re.M), stream
    assert re.search(r"^\| light \(GPU\) \| pinned \| 16 ", stream, re.M), stream
    assert re.search(r"^\| light \(GPU\) \| resident \| 4 ", stream, re.M), stream
    # resident gathers on the GPU: no host worker, no starvation; pinned's workers gather
    assert re.search(r"^\| light \(GPU\) \| resident \| no host worker", stream, re.M), stream
    assert re.search(r"^\| light \(GPU\) \| pinned \| 4 workers", stream, re.M), stream


def test_decision_reads_light_and_heavy_steps_from_the_sweep(tmp_path):
    runs = decision_runs() + [("resident", "static", w, c) for w, c in C.items() if w != 256]
    runs += [("pinned", "refresh", 64, 14.0), ("double-buffer", "refresh", 64, 12.0),
             ("pinned", "refresh", 1024, 1001.0), ("double-buffer", "refresh", 1024, 1000.5)]
    text = rendered(write_set(tmp_path, runs), "decision")
    light = row(text, "compute-light step (hidden 64), data rewritten every epoch")
    assert "**double-buffer (one launch per batch)** 12.0" in light and "| +2.0" in light
    heavy = row(text, "compute-heavy step (hidden 1024), data rewritten every epoch")
    # 0.5 ms apart under 1 ms of spread: not different, so the simpler pinned leads
    assert "**pinned (one launch per batch)** 1,00" in heavy
    assert "| double-buffer (one launch per batch) 1,00" in heavy
    assert "hidden sweep" not in text


# ---- arguments and the committed set ----------------------------------------------------------

@pytest.mark.parametrize("spec, problem", [
    ("decision b256 u8 static", "decision covers every regime"),
    ("decision bogus", "unexpected argument 'bogus'"),
    ("crossover hidden=64", "crossover sweeps the hidden width"),
    ("crossover nope=1", "unknown option 'nope'"),
    ("decision b256 u8 replicate=11", "decision picks the data size of each regime itself"),
])
def test_bad_block_arguments_exit_2(tmp_path, capsys, spec, problem):
    root = write_set(tmp_path, decision_runs())
    name = spec.split()[0]
    (root / "README.md").write_text(f"<!-- generated:{spec} from {SET} -->\n"
                                    f"<!-- /generated:{name} -->\n")
    assert docs_blocks.main(["--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"README\.md:1: .*{re.escape(problem)}", err), err
    assert "Traceback" not in err


def test_both_blocks_render_from_the_committed_set():
    rs = load_results_set(REPO / SET, SET)
    decision = render("decision", ["b256", "u8"], rs)
    assert row(decision, "data fits, static (hidden 256)").count("**") == 2
    widths = {g.key.hidden for g in rs.groups if len(g.key.hidden) == 1}
    crossover = render("crossover", [], rs)
    assert ("not measured in this set" in crossover) == (len(widths) < 2)


def budget_records(processes=10):
    """MNIST x 11 (0.484 GiB at u8): resident with the whole device, pinned and double-buffer
    under 0.24 GiB (ratio 2.02) and 0.12 GiB (4.04), resident under 0.97 GiB (ratio 0.5)."""
    runs = [("resident", None, 50.0), ("resident", 0.97, 50.0),
            ("pinned", 0.24, 120.0), ("double-buffer", 0.24, 90.0),
            ("pinned", 0.12, 121.0), ("double-buffer", 0.12, 80.0)]
    out = []
    for strategy, budget, wall in runs:
        for p in range(processes):
            rec = run_record(strategy, "static", 256, wall, p, auto=strategy != "resident")
            rec["run_id"] += f"-rep11-{budget}"
            rec["config"].update(replicate=11, device_budget_gib=budget)
            rec["config"]["dataset"] = dict(rec["config"].get("dataset") or {},
                                            train_samples=660000)
            out.append(rec)
    return out


def test_decision_budget_row_is_the_largest_ratio_measured(tmp_path):
    root = write_set(tmp_path, decision_runs())
    with open(root / SET / "records" / "results.jsonl", "a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in budget_records())
    text = rendered(root, "decision")
    r = row(text, "data larger than the device budget (11 copies of the set, 4.04× the budget, "
                  "static, hidden 256)")
    # the fastest at the largest ratio (4.04, not 2.02), against resident's 50 ms at 11 copies
    # with the whole device (processes scale by 1 + 0.001 p: medians 80.36, 50.22, 121.5)
    assert "**double-buffer (one launch per batch)** 80.36 ms" in r
    assert "| +30.14 ms" in r
    assert "| pinned (one launch per batch) 121.5 ms" in r
    assert "not measured in this set" not in r
    # the data-fits rows read the set as loaded: the replicated runs stay out of them
    static = row(text, "data fits, static (hidden 256)")
    assert "**resident (one launch per batch)** 10.0" in static and "50." not in static


def test_blocks_read_the_set_as_loaded_unless_the_marker_names_the_data(tmp_path):
    root = write_set(tmp_path, decision_runs())
    with open(root / SET / "records" / "results.jsonl", "a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in budget_records())
    loaded = rendered(root, "strategy-table b256 u8 static hidden=256")
    assert "120." not in loaded and "copies of the set" not in loaded
    budgeted = rendered(root, "strategy-table b256 u8 static hidden=256 replicate=11 "
                              "device_budget_gib=0.24")
    rows = [ln for ln in budgeted.splitlines() if ln.startswith("| ") and "copies" in ln]
    assert len(rows) == 2 and "120.5 ms" in budgeted
    assert all("(11 copies of the set) (device budget 0.24 GiB)" in ln for ln in rows)

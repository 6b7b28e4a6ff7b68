"""The gpus-table block (analysis/block_generators_gpus.py) on synthetic multi-GPU sets: every data
path on N GPUs against resident on every GPU, ranked by Holm-corrected tests; the rows of other
N, reductions or one process per GPU left out; bad arguments refused."""
import copy
import json
from pathlib import Path

import pytest

from analysis import docs_blocks  # noqa: F401  (registers every block)
from analysis.block_generators import BlockError, render
from analysis.results_set import load_results_set

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = json.loads((REPO / "tests/experiments/fixtures/run_record_ok.json").read_text())


def run_record(strategy, wall, process, gpus=2, reduce="ring", processes=None, scenario="static",
               per_gpu=None, reduce_ms=None, profile=False):
    rec = copy.deepcopy(TEMPLATE)
    rec["run_id"] = f"{strategy}-{scenario}-g{gpus}-{reduce}-{processes}-{profile}-{process}"
    cfg = rec["config"]
    cfg.update(strategy=strategy, scenario=scenario, batch=256, run_tag=rec["run_id"],
               profile=profile, gpus=gpus, reduce=reduce if gpus > 1 else None,
               processes=processes)
    if strategy in ("double-buffer", "host-shared-ring"):
        cfg.update(depth=2, streams=1)
    for e in rec["epochs"]:
        e.update(wall_ms=wall * (1 + 0.002 * process), gpu_ms=wall * (1 + 0.002 * process))
        if reduce_ms is not None:  # the slowest GPU's combination of the gradients (profiled)
            e["reduce_ms"] = reduce_ms * (1 + 0.01 * process)
        if per_gpu:  # the GPUs' GPU times as shares of the epoch's (the slowest's)
            e["per_gpu"] = [{"rank": i, "gpu_ms": e["gpu_ms"] * share, "stall_ms": 0.0,
                             "compute_ms": e["gpu_ms"] * share, "idle_ms": 0.0,
                             "copy_ms": None, "h2d_bytes": 0, "peer_bytes": 0}
                            for i, share in enumerate(per_gpu)]
    return rec


def write_set(root: Path, runs, processes=10) -> Path:
    """runs: (strategy, wall ms, **run_record options) -> records of `processes` processes each."""
    records = root / "set" / "records"
    records.mkdir(parents=True)
    with open(records / "gpus.jsonl", "w") as fh:
        for strategy, wall, *opts in runs:
            for p in range(processes):
                fh.write(json.dumps(run_record(strategy, wall, p, **(opts[0] if opts else {})))
                         + "\n")
    return root / "set"


def table(text):
    return {cells[0]: cells for cells in
            ([c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
             if line.startswith("|") and not line.startswith("|---"))}


@pytest.fixture
def two_gpu_set(tmp_path):
    return load_results_set(write_set(tmp_path, [
        ("resident", 5.0),
        ("host-shared", 5.3),                     # within 1.10x
        ("pinned", 9.0),                          # 1.8x
        ("peer-fanout", 5.0),                     # as fast as resident
        ("pageable", 3.0, {"gpus": 4}),           # another N: not in the table
        ("zero-copy", 3.0, {"reduce": "exact"}),  # another reduction: not in the table
        ("um", 3.0, {"processes": "per-gpu"}),    # one process per GPU: not in the table
    ]), "set")


def test_every_data_path_against_resident_on_every_gpu(two_gpu_set):
    text = render("gpus-table", ["b256", "u8", "static", "gpus=2", "reduce=ring"], two_gpu_set)
    rows = table(text)
    assert set(rows) - {"strategy"} == {"resident", "host-shared", "pinned", "peer-fanout"}
    assert rows["resident"][4] == "the reference"
    assert rows["host-shared"][4].startswith("1.06") and rows["host-shared"][6] == "yes"
    assert rows["host-shared"][5].startswith("slower (Holm p=")
    assert rows["pinned"][4].startswith("1.8") and rows["pinned"][6] == "no"
    assert rows["peer-fanout"][5].startswith("not significantly different")
    # ranks from the tests: resident and peer-fanout tie first, pinned last
    assert rows["resident"][1] == "1 (tie)" and rows["peer-fanout"][1] == "1 (tie)"
    assert rows["pinned"][1] == "4"
    assert "2 GPUs in one process" in text and "ncclAllReduce" in text


def test_the_defaults_are_two_gpus_and_ring(two_gpu_set):
    assert render("gpus-table", ["b256", "u8", "static"], two_gpu_set) == \
        render("gpus-table", ["b256", "u8", "static", "gpus=2", "reduce=ring"], two_gpu_set)


def test_other_n_and_reduction_are_their_own_tables(two_gpu_set):
    rows = table(render("gpus-table", ["b256", "u8", "static", "gpus=4"], two_gpu_set))
    assert set(rows) - {"strategy"} == {"pageable"}
    assert rows["pageable"][4] == "no resident run at this step"
    rows = table(render("gpus-table", ["b256", "u8", "static", "reduce=exact"], two_gpu_set))
    assert set(rows) - {"strategy"} == {"zero-copy"}


def test_nothing_measured_says_so(two_gpu_set):
    assert "not measured in this results set" in render(
        "gpus-table", ["b256", "u8", "refresh"], two_gpu_set)


def test_too_few_processes_are_not_ranked_nor_compared(tmp_path):
    rs = load_results_set(write_set(tmp_path, [("resident", 5.0), ("pinned", 9.0)], processes=2), "set")
    rows = table(render("gpus-table", ["b256", "u8", "static"], rs))
    assert rows["pinned"][1].startswith("none") and "not compared" in rows["pinned"][4]


@pytest.mark.parametrize("words,message", [
    (["b256", "u8", "static", "gpus=1"], "several GPUs"),
    (["b256", "u8", "static", "gpus=two"], "whole number"),
    (["b256", "u8", "static", "reduce=tree"], "reduce must be one of"),
    (["b256", "u8"], "needs scenario"),
    (["b256", "u8", "static", "nodes=2"], "unknown option"),
])
def test_bad_arguments_are_refused(two_gpu_set, words, message):
    with pytest.raises(BlockError, match=message):
        render("gpus-table", words, two_gpu_set)


def test_refresh_says_what_resident_moves_there(tmp_path):
    rs = load_results_set(write_set(tmp_path, [("resident", 9.0, {"scenario": "refresh"}),
                                               ("pinned", 12.0, {"scenario": "refresh"})]), "set")
    text = render("gpus-table", ["b256", "u8", "refresh"], rs)
    assert "uploaded whole, once per epoch, to every GPU" in text
    assert table(text)["pinned"][4].startswith("1.33")


# Each GPU's own GPU time (epochs[].per_gpu): the slowest over the fastest, per process, over processes
def test_the_spread_over_gpus_from_each_gpus_figures(tmp_path):
    rs = load_results_set(write_set(tmp_path, [
        ("resident", 5.0, {"per_gpu": [1.0, 1.0]}),
        ("peer-fanout", 5.5, {"per_gpu": [0.8, 1.0]}),   # GPU 1 pulls, GPU 0 waits for it
        ("pinned", 9.0),                                 # records without per-GPU figures
    ]), "set")
    text = render("gpus-table", ["b256", "u8", "static"], rs)
    rows = table(text)
    assert rows["resident"][8].startswith("1.000 ")
    assert rows["peer-fanout"][8].startswith("1.250 ")   # 1.0 / 0.8
    assert rows["pinned"][8] == "not recorded"
    assert "Slowest/fastest GPU" in text


# The epoch's reduce_ms (the slowest GPU's combination of the gradients), which only profiled
# processes record: per process the median of its steady epochs, over the profiled processes the
# median with its interval; the epoch itself from the unprofiled processes
def test_the_reduction_time_of_each_row(tmp_path):
    rs = load_results_set(write_set(tmp_path, [
        ("resident", 5.0),
        ("resident", 6.0, {"reduce_ms": 2.0, "profile": True}),
        ("pinned", 9.0),                                 # no profiled process
    ]), "set")
    text = render("gpus-table", ["b256", "u8", "static"], rs)
    rows = table(text)
    assert rows["resident"][7].startswith("2.0")         # processes 2.00 .. 2.18: median 2.09
    assert rows["resident"][7].split()[0] == "2.09", rows["resident"][7]
    assert rows["pinned"][7] == "not recorded"
    assert rows["resident"][2].startswith("5.0"), rows["resident"][2]  # the unprofiled epochs
    assert "Reduce: of the epoch" in text and "profiled processes" in text

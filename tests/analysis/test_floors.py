"""Compute-only reference, floors, overlap efficiency and the profiler split
(analysis/aggregate.py), on hand-made records with round numbers."""
import pytest

from analysis.aggregate import (COPY_ENGINE, MIN_SHORTER_SHARE, REFERENCE_MISSING, SM_MAPPED,
                                LinkRates, aggregate, compute_reference, data_movement,
                                dataset_bytes, floor_of, overlap_efficiency, overlap_value,
                                representative, slices)
from analysis.records import load_records

U8_BYTES = 60000 * (784 + 4)       # 47,280,000: pixels + int32 labels


def rec(strategy, *, gpu, scenario="static", copy=None, h2d=0, um_htod=None,
        wall=None, epoch_launch=None, profile=True, transfer="u8", batch=256):
    """A minimal ok record: 3 epochs, epoch 1 slower, steady epochs exactly as given."""
    def ep(i, factor):
        return {"epoch": i, "wall_ms": (wall or gpu + 0.2) * factor, "gpu_ms": gpu * factor,
                "copy_ms": None if copy is None else copy * factor, "h2d_bytes": h2d,
                "um_htod_bytes": um_htod if profile else None,
                "api_calls": {"cudaMalloc": 0} if profile else None}
    cfg = {"strategy": strategy, "scenario": scenario, "transfer": transfer,
           "batch": batch, "hidden": [256], "epochs": 3, "seed": 1, "gemm": "cublas",
           "depth": 2, "streams": 1, "profile": profile,
           "dataset": {"train_samples": 60000}}
    if epoch_launch is not None:
        cfg["epoch_launch"] = epoch_launch
    return {"status": "ok", "env": {"gpu_name": "GPU"}, "config": cfg,
            "epochs": [ep(1, 2.0), ep(2, 1.0), ep(3, 1.0)], "final": None}


def groups_of(*records):
    return {(g.key.strategy, g.key.scenario, g.key.epoch_launch): g
            for g in aggregate(records)}


@pytest.mark.parametrize("c, x, m, expected", [
    (10.0, 4.0, 10.0, 1.0),     # copy fully hidden behind compute: M = max(C, X)
    (10.0, 4.0, 14.0, 0.0),     # serial: M = C + X
    (10.0, 4.0, 12.0, 0.5),     # half of the copy hidden
    (4.0, 10.0, 11.0, 0.75),    # the shorter part may be the compute
    (10.0, 4.0, 9.0, 1.25),     # faster than the reference allows: not clamped
    (10.0, 4.0, 16.0, -0.5),    # slower than serial: not clamped
])
def test_overlap_value_by_hand(c, x, m, expected):
    assert overlap_value(c, x, m) == pytest.approx(expected)


def test_overlap_value_undefined_cases():
    assert overlap_value(None, 4.0, 10.0) is None
    assert overlap_value(10.0, 0.0, 10.0) is None
    # a copy under 5% of the compute: too little to hide for the ratio to mean anything
    assert overlap_value(10.0, 10.0 * MIN_SHORTER_SHARE * 0.99, 10.0) is None
    assert overlap_value(10.0, 10.0 * MIN_SHORTER_SHARE, 10.0) == pytest.approx(1.0)


def test_reference_is_per_batch_static_resident():
    gs = groups_of(rec("resident", gpu=10.0, epoch_launch=False),
                   rec("resident", gpu=8.0, epoch_launch=True),
                   rec("resident", gpu=11.0, scenario="refresh", copy=1.0, h2d=U8_BYTES,
                       epoch_launch=False),
                   rec("double-buffer", gpu=11.0, copy=4.0, h2d=U8_BYTES),
                   rec("double-buffer", gpu=12.0, copy=4.0, h2d=U8_BYTES,
                       scenario="refresh"))
    all_groups = list(gs.values())
    per_batch = gs[("resident", "static", False)]
    for k in (("double-buffer", "static", False), ("double-buffer", "refresh", False),
              ("resident", "refresh", False), ("resident", "static", False)):
        assert compute_reference(all_groups, gs[k]) is per_batch, k
    # the single-launch resident is its own launch form's reference
    single = gs[("resident", "static", True)]
    assert compute_reference(all_groups, single) is single

    pts = {(p.group.key.strategy, p.group.key.scenario): p
           for p in overlap_efficiency(all_groups)}
    db = pts[("double-buffer", "static")]
    assert (db.compute_only_ms, db.copy_only_ms, db.measured_ms) == (10.0, 4.0, 11.0)
    assert db.efficiency == pytest.approx((10 + 4 - 11) / 4)          # 0.75
    assert pts[("double-buffer", "refresh")].efficiency == pytest.approx((10 + 4 - 12) / 4)
    assert pts[("resident", "refresh")].efficiency == pytest.approx(0.0)   # upload is serial


def test_every_launch_form_is_compared_with_resident_at_the_same_form():
    graph = rec("double-buffer-graph", gpu=9.5, copy=4.0, h2d=U8_BYTES, epoch_launch=True)
    graph["config"]["epoch_form"] = "graph"
    chunks = rec("double-buffer-graph", gpu=8.5, copy=4.0, h2d=U8_BYTES, epoch_launch=True)
    chunks["config"]["epoch_form"] = "kernel-per-chunk"
    per_batch = rec("double-buffer-graph", gpu=11.0, copy=4.0, h2d=U8_BYTES,
                    epoch_launch=False)
    per_batch["config"]["epoch_form"] = "per-batch"
    kernel = rec("resident", gpu=8.0, epoch_launch=True)    # written before epoch_form
    ref = rec("resident", gpu=10.0, epoch_launch=False)
    ref_graph = rec("resident", gpu=9.0, epoch_launch=True)
    ref_graph["config"]["epoch_form"] = "graph"
    groups = aggregate([graph, chunks, per_batch, kernel, ref, ref_graph])
    by = {(g.key.strategy, g.key.epoch_form): g for g in groups}
    assert set(by) == {("double-buffer-graph", "graph"), ("double-buffer-graph", "per-batch"),
                       ("double-buffer-graph", "kernel-per-chunk"), ("resident", "graph"),
                       ("resident", "kernel"), ("resident", "per-batch")}
    assert by[("double-buffer-graph", "graph")].key.variant_label.endswith("(one graph per epoch)")
    assert by[("double-buffer-graph", "kernel-per-chunk")].key.variant_label.endswith(
        "(one launch per chunk)")
    for form in ("graph", "per-batch"):
        assert compute_reference(groups, by[("double-buffer-graph", form)]) is \
            by[("resident", form)], form
    # no resident run in one launch per chunk: no reference, never another form's
    assert compute_reference(groups, by[("double-buffer-graph", "kernel-per-chunk")]) is None
    assert REFERENCE_MISSING in floor_of(groups, by[("double-buffer-graph", "kernel-per-chunk")],
                                         25e9).reasons
    assert compute_reference(groups, by[("resident", "kernel")]) is by[("resident", "kernel")]


def test_one_launch_per_chunk_is_compared_with_resident_cut_into_the_same_chunks():
    runs = []
    for mib, gpu in ((8, 9.0), (2, 9.6)):
        r = rec("resident", gpu=gpu, epoch_launch=True)
        r["config"].update(epoch_form="kernel-per-chunk", copy_chunk_mib=mib)
        runs.append(r)
    staged = rec("zero-copy-staged", gpu=9.4, h2d=U8_BYTES, epoch_launch=True)
    staged["config"].update(epoch_form="kernel-per-chunk", copy_chunk_mib=2)
    groups = aggregate([*runs, staged])
    ref = compute_reference(groups, next(g for g in groups if g.key.strategy != "resident"))
    assert ref.key.option("copy_chunk_mib") == 2 and ref.median("gpu_ms") == 9.6


def test_data_movement_cost_is_the_shift_against_resident_at_the_same_form():
    runs = []
    for i in range(10):
        jitter = 0.001 * i
        runs.append(rec("resident", gpu=10.0 + jitter, epoch_launch=False))
        runs.append(rec("pinned", gpu=12.5 + jitter, copy=2.1, h2d=U8_BYTES))
    by = {g.key.strategy: g for g in aggregate(runs)}
    cost = data_movement(list(by.values()), by["pinned"])
    wall = by["pinned"].median("wall_ms") - by["resident"].median("wall_ms")
    assert cost.estimate == pytest.approx(wall, abs=0.02)
    assert cost.ci.low <= cost.estimate <= cost.ci.high and cost.ci.coverage >= 0.95
    assert data_movement(list(by.values()), by["resident"]).estimate == pytest.approx(0.0)
    gpu = data_movement(list(by.values()), by["pinned"], "gpu_ms")
    assert gpu.estimate == pytest.approx(2.5, abs=0.02)


def test_a_strategys_own_options_make_variants_not_slices():
    # Records null the options their strategy does not read: resident has no copy chunk, the
    # graph forms and um-prefetch-coarse have theirs. Each still finds the per-batch resident
    # as its reference and sits in its slice; a non-default value is its own variant, named.
    ref = rec("resident", gpu=10.0, epoch_launch=False)
    runs = [ref]
    for strategy, key, mib in (("pinned-graph", "copy_chunk_mib", 8),
                               ("pinned-graph", "copy_chunk_mib", 1),
                               ("double-buffer-graph", "copy_chunk_mib", 8),
                               ("um-prefetch-coarse", "prefetch_chunk_mib", 8)):
        r = rec(strategy, gpu=11.0, copy=1.0, h2d=U8_BYTES, epoch_launch=False)
        r["config"].update({"copy_chunk_mib": None, "prefetch_chunk_mib": None, key: mib})
        if strategy != "double-buffer-graph":
            r["config"].update({"depth": None, "streams": None})
        runs.append(r)
    ref["config"].update({"copy_chunk_mib": None, "prefetch_chunk_mib": None, "depth": None,
                          "streams": None})
    groups = aggregate(runs)
    assert len(groups) == 5 and len(slices(groups)) == 1
    resident = next(g for g in groups if g.key.strategy == "resident")
    for g in groups:
        assert compute_reference(groups, g) is resident, g.key.variant_label
    labels = sorted(g.key.variant_label for g in groups if g.key.strategy == "pinned-graph")
    assert labels == ["pinned-graph", "pinned-graph (1 MiB copy chunks)"]
    (pg,) = [g for g in representative(groups) if g.key.strategy == "pinned-graph"]
    assert dict(pg.key.other)["copy_chunk_mib"] == 8   # the default variant represents it


def test_no_reference_without_per_batch_resident():
    gs = groups_of(rec("resident", gpu=8.0, epoch_launch=True),
                   rec("double-buffer", gpu=11.0, copy=4.0, h2d=U8_BYTES))
    (p,) = overlap_efficiency(list(gs.values()))
    assert p.efficiency is None and p.reason == REFERENCE_MISSING
    f = floor_of(list(gs.values()), gs[("double-buffer", "static", False)], 25e9)
    assert f.compute_ms is None and f.floor_ms is None
    assert REFERENCE_MISSING in f.reasons


def test_floors_by_hand():
    bw = 23.64e9                                   # bytes/s: T(u8 set) = 2.0 ms exactly
    gs = groups_of(rec("resident", gpu=10.0),
                   rec("pinned", gpu=13.0, copy=2.1, h2d=U8_BYTES),
                   rec("double-buffer", gpu=10.5, copy=2.1, h2d=U8_BYTES),
                   rec("zero-copy", gpu=12.0),
                   rec("um", gpu=10.2, um_htod=0),
                   rec("um-prefetch", gpu=10.4, copy=0.3, h2d=U8_BYTES, um_htod=0))
    g = list(gs.values())

    def floor(strategy):
        return floor_of(g, gs[(strategy, "static", False)], LinkRates(bw, bw / 2))

    assert floor("pinned").transfer_ms == pytest.approx(2.0)
    assert (floor("pinned").form, floor("pinned").floor_ms) == ("serial", pytest.approx(12.0))
    assert (floor("double-buffer").form, floor("double-buffer").floor_ms) == \
        ("overlapping", pytest.approx(10.0))                    # max(10, 2)
    # zero-copy reads the whole mapped set although no counter sees it, with SM loads: at the
    # sm-copy-mapped rate, not the copy engine's
    assert floor("zero-copy").transfer_ms == pytest.approx(4.0)
    assert floor("zero-copy").link == SM_MAPPED and floor("pinned").link == COPY_ENGINE
    assert floor_of(g, gs[("zero-copy", "static", False)], bw).reasons == [
        "no measured sm-copy-mapped bulk bandwidth given"]
    # measured/floor compares GPU time with the GPU floor
    assert floor("pinned").gpu_ratio(gs[("pinned", "static", False)]) == pytest.approx(13 / 12)
    # managed memory in static steady state migrates nothing: the floor is the compute
    assert floor("um").transfer_ms == 0.0 and floor("um").floor_ms == pytest.approx(10.0)
    assert floor("um-prefetch").floor_ms == pytest.approx(10.0)
    assert floor("resident").floor_ms == pytest.approx(10.0)
    for s in ("pinned", "double-buffer", "zero-copy", "um", "resident"):
        assert floor(s).compute_ms == 10.0 and floor(s).reasons == []


def test_floor_parts_missing_say_why():
    gs = groups_of(rec("resident", gpu=10.0),
                   rec("pinned", gpu=13.0, copy=2.1, h2d=U8_BYTES),
                   rec("um", gpu=10.2, profile=False),
                   rec("warp-drive", gpu=9.0))
    g = list(gs.values())
    f = floor_of(g, gs[("pinned", "static", False)], None)
    assert f.compute_ms == 10.0 and f.transfer_ms is None and f.floor_ms is None
    assert f.reasons == ["no measured pinned bulk bandwidth given"]
    um = floor_of(g, gs[("um", "static", False)], 25e9)
    assert um.transfer_ms is None and "needs a profiled run" in um.reasons[0]
    odd = floor_of(g, gs[("warp-drive", "static", False)], 25e9)
    assert odd.form is None and odd.floor_ms is None and "transfer form unknown" in odd.reasons[0]


def test_dataset_bytes():
    by_t = {g.key.transfer: g for g in aggregate([rec("zero-copy", gpu=1.0),
                                                  rec("zero-copy", gpu=1.0, transfer="f32")])}
    assert dataset_bytes(by_t["u8"]) == U8_BYTES
    assert dataset_bytes(by_t["f32"]) == 60000 * (784 * 4 + 4)


def test_timing_comes_from_unprofiled_runs_counters_from_profiled(fixtures_dir):
    groups = aggregate(load_records(fixtures_dir / "processes.jsonl"))
    pinned = next(g for g in groups if g.key.strategy == "pinned")
    assert pinned.runs == 11 and len(pinned.timing_records) == 10
    assert not any(r["config"]["profile"] for r in pinned.timing_records)
    assert pinned.timing_profiled is False
    assert [r["config"]["profile"] for r in pinned.counter_records] == [True]
    # the profiled process is 8% slower; it must not move the timing
    unprofiled = aggregate(r for r in load_records(fixtures_dir / "processes.jsonl")
                           if not r["config"]["profile"])
    same = next(g for g in unprofiled if g.key.strategy == "pinned")
    assert pinned.stat("wall_ms") == same.stat("wall_ms")
    # counters exist only in the profiled run, and are taken from it
    assert same.malloc_setup is None and pinned.malloc_setup == 14


def test_only_profiled_runs_are_used_and_flagged():
    gs = groups_of(rec("pinned", gpu=13.0, copy=2.0, h2d=U8_BYTES, profile=True))
    (g,) = gs.values()
    assert g.timing_profiled is True and g.n_processes == 1


def test_summary_csv_names_every_intervals_method_and_coverage(tmp_path):
    """summary.csv gives each interval it prints with its method and coverage: the median's
    (wall, GPU) and the data-movement shift's (wall, GPU)."""
    import csv
    from analysis.stats import MOSES_METHOD
    from analysis.summary_csv import write_csv
    runs = []
    for i in range(10):
        runs.append(rec("resident", gpu=10.0 + 0.001 * i, epoch_launch=False))
        runs.append(rec("pinned", gpu=12.5 + 0.001 * i, copy=2.1, h2d=U8_BYTES))
    path = tmp_path / "summary.csv"
    write_csv(aggregate(runs), path)
    row = next(r for r in csv.DictReader(open(path)) if r["strategy"] == "pinned")
    for prefix in ("ci", "gpu_ms_ci", "data_movement_ci", "data_movement_gpu_ms_ci"):
        assert row[f"{prefix}_method"], prefix
        assert float(row[f"{prefix}_coverage"]) >= 0.95, prefix
    assert row["data_movement_ci_method"] == row["data_movement_gpu_ms_ci_method"] == MOSES_METHOD
    assert float(row["data_movement_gpu_ms_ci_low"]) <= 2.5 <= float(
        row["data_movement_gpu_ms_ci_high"])

"""Aggregation over processes, overlap efficiency and the CSV (analysis/aggregate.py)."""
import csv
import statistics

import pytest

from analysis.aggregate import (REFERENCE_MISSING, aggregate, overlap_efficiency,
                                reference_batch, representative, slices, variant_rank)
from analysis.summary_csv import CSV_COLUMNS, write_csv
from analysis.records import load_records


@pytest.fixture(scope="module")
def repeats(fixtures_dir):
    return aggregate(load_records(fixtures_dir / "repeats.jsonl"))


def test_repeats_form_one_group_despite_different_seeds(repeats):
    assert len(repeats) == 1
    assert repeats[0].runs == 2


def test_median_over_processes_by_hand(repeats):
    # process 1 wall ms: 9.0 | 5.0 5.4 ; process 2: 8.0 | 5.2 6.0  (epoch 1 | steady)
    # per process: 5.2 and 5.6 -> median over processes 5.4; two processes: no interval
    g = repeats[0]
    w = g.stat("wall_ms")
    assert sorted(g.process_values("wall_ms")) == pytest.approx([5.2, 5.6])
    assert w.median == pytest.approx(5.4)
    assert (w.min, w.max, w.n) == (pytest.approx(5.2), pytest.approx(5.6), 2)
    assert w.ci is None and w.unstable is None
    assert g.n_processes == 2
    assert g.epoch1["wall_ms"] == pytest.approx(8.5)
    assert g.median("gpu_ms") == pytest.approx(4.4)     # 4.1 and 4.7
    assert g.median("copy_ms") == pytest.approx(1.025)  # 1.1 and 0.95
    assert g.samples_per_s == pytest.approx(60000 / 0.0054)
    assert g.samples_per_s_interval() is None


def test_pooled_epochs_stay_descriptive(repeats):
    # pooled steady epochs: 5.0 5.2 5.4 6.0 -> median 5.3; numpy linear p25 = 5.0 + .75*.2,
    # p75 = 5.4 + .25*.6 (kept in summary.csv as pooled_epochs_*, never as an interval)
    w = repeats[0].pooled_wall
    assert w.median == pytest.approx(5.3)
    assert w.p25 == pytest.approx(5.15)
    assert w.p75 == pytest.approx(5.55)
    assert (w.min, w.max, w.n) == (5.0, 6.0, 4)


def test_null_counters_stay_none(repeats):
    g = repeats[0]
    assert g.median("um_gpu_faults") is None
    assert g.epoch1["um_htod_bytes"] is None


def test_malloc_counts(repeats):
    g = repeats[0]
    assert g.malloc_setup == 14
    assert g.malloc_per_epoch == [0, 0, 0]   # absent from api_calls = 0 calls


def test_groups_of_main_fixture(fixture_groups):
    assert len(fixture_groups) == 32          # every ok record is its own config
    assert len(slices(fixture_groups)) == 1
    assert reference_batch(fixture_groups) == 256
    rep = representative(fixture_groups)
    dbs = [g for g in rep if g.key.strategy == "double-buffer"]
    assert dbs and all(g.key.depth == 2 and g.key.streams == 1 for g in dbs)
    # depth/streams are ignored for strategies without a pipeline
    assert all(g.key.depth is None for g in fixture_groups
               if g.key.strategy != "double-buffer")


def test_overlap_efficiency_by_hand(fixture_records, fixture_groups):
    def steady(rec, metric):
        return statistics.median(e[metric] for e in rec["epochs"][1:])

    def find(strategy, depth=2):
        return next(r for r in fixture_records if r["status"] == "ok"
                    and r["config"]["strategy"] == strategy
                    and r["config"]["scenario"] == "static"
                    and r["config"]["batch"] == 256 and r["config"]["depth"] == depth)

    db, res = find("double-buffer", 3), find("resident")
    c, x, m = steady(res, "gpu_ms"), steady(db, "copy_ms"), steady(db, "gpu_ms")
    expected = (c + x - m) / min(c, x)
    pts = {(p.group.key.strategy, p.group.key.scenario, p.group.key.batch,
            p.group.key.depth): p for p in overlap_efficiency(fixture_groups)}
    # every configuration that times copies of its own gets a point
    assert sum(k[0] == "double-buffer" for k in pts) == 8
    assert {k[0] for k in pts} == {"resident", "pageable", "pinned", "double-buffer",
                                   "um-prefetch"}
    p = pts[("double-buffer", "static", 256, 3)]
    assert (p.compute_only_ms, p.copy_only_ms, p.measured_ms) == \
        (pytest.approx(c), pytest.approx(x), pytest.approx(m))
    assert p.efficiency == pytest.approx(expected)
    assert p.process_efficiencies == [pytest.approx(expected)]   # one process
    # refresh double-buffer is compared against the STATIC resident reference
    r = pts[("double-buffer", "refresh", 256, 2)]
    assert r.compute_only_ms == pytest.approx(c)


def test_overlap_efficiency_needs_the_per_batch_reference(fixture_records):
    groups = aggregate(r for r in fixture_records if r["config"]["strategy"] != "resident")
    pts = overlap_efficiency(groups)
    assert pts and all(p.efficiency is None and p.reason == REFERENCE_MISSING for p in pts)
    # a resident run with ONE launch per epoch is not the reference of per-batch strategies
    import copy
    single = []
    for r in fixture_records:
        if r["status"] == "ok":
            r = copy.deepcopy(r)
            if r["config"]["strategy"] == "resident":
                r["config"]["epoch_launch"] = True
            single.append(r)
    pts = [p for p in overlap_efficiency(aggregate(single))
           if p.group.key.strategy == "double-buffer"]
    assert pts and all(p.efficiency is None for p in pts)


def test_csv_columns_and_nulls(tmp_path, fixture_groups):
    path = write_csv(fixture_groups, tmp_path / "summary.csv")
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert len(rows) == len(fixture_groups)
    pinned = next(r for r in rows if r["strategy"] == "pinned")
    assert pinned["um_gpu_faults_median"] == ""       # null -> empty, never 0
    assert pinned["depth"] == ""
    assert float(pinned["wall_ms_median"]) > 0
    um = next(r for r in rows if r["strategy"] == "um" and r["scenario"] == "static")
    assert um["um_gpu_faults_median"] == "0" and int(um["epoch1_um_gpu_faults"]) > 0
    db = next(r for r in rows if r["strategy"] == "double-buffer")
    assert 0 < float(db["overlap_efficiency"]) <= 1.2
    # one process per configuration: no interval, stability unknown (empty, never false)
    assert pinned["n_processes"] == "1" and pinned["runs"] == "1"
    assert pinned["ci_low"] == pinned["ci_high"] == pinned["ci_half_pct"] == ""
    assert pinned["unstable"] == ""
    assert pinned["timing_profile"] == "true"          # only profiled runs exist
    assert pinned["epoch_launch"] == "false"
    assert float(pinned["compute_floor_ms"]) > 0
    assert pinned["transfer_floor_ms"] == "" and pinned["floor_ms"] == ""  # no bandwidth


def test_csv_with_processes_and_bandwidth(tmp_path, fixtures_dir):
    groups = aggregate(load_records(fixtures_dir / "processes.jsonl"))
    path = write_csv(groups, tmp_path / "summary.csv", pinned_bw=25e9)
    with open(path, newline="") as fh:
        rows = {(r["strategy"], r["epoch_launch"]): r for r in csv.DictReader(fh)}
    pinned = rows[("pinned", "false")]
    assert pinned["n_processes"] == "10" and pinned["runs"] == "11"
    assert pinned["ci_method"] == "order statistics"
    assert float(pinned["ci_coverage"]) == pytest.approx(1 - 2 * 11 / 1024)
    assert pinned["timing_profile"] == "false" and pinned["counter_runs"] == "1"
    assert float(pinned["ci_low"]) <= float(pinned["wall_ms_median"]) <= float(pinned["ci_high"])
    assert pinned["unstable"] == "false"
    assert rows[("um-prefetch", "false")]["unstable"] == "true"
    assert float(pinned["transfer_floor_ms"]) == pytest.approx(47_280_000 / 25e9 * 1000)
    assert pinned["floor_form"] == "serial"
    assert float(pinned["floor_ms"]) == pytest.approx(
        float(pinned["compute_floor_ms"]) + float(pinned["transfer_floor_ms"]))


def test_failed_records_are_not_aggregated(fixture_records):
    groups = aggregate(fixture_records)
    assert not any(g.key.strategy == "um-advise" for g in groups)


def test_csv_tells_variants_of_one_strategy_apart(tmp_path, fixtures_dir):
    # Two runs that differ only in a strategy's own option (--stage-blocks) are two rows that
    # the CSV alone must tell apart: by the option's column and by the variant label.
    import copy
    base = next(r for r in load_records(fixtures_dir / "processes.jsonl")
                if r["config"]["strategy"] == "pinned")
    records = []
    for blocks in (8, 16):
        r = copy.deepcopy(base)
        r["config"].update(strategy="zero-copy-staged", stage_blocks=blocks)
        records.append(r)
    path = write_csv(aggregate(records), tmp_path / "summary.csv")
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["stage_blocks"] for r in rows) == ["16", "8"]
    assert len({r["variant"] for r in rows}) == 2
    assert all(r["copy_chunk_mib"] == "" and r["prefetch_chunk_mib"] == "" for r in rows)
    assert {r["step"] for r in rows} == {base["config"].get("step") or ""}


def test_process_medians_at_once_equal_one_record_at_a_time(fixture_records):
    from analysis.aggregate import process_median, process_medians
    ok = [r for r in fixture_records if r["status"] == "ok"]
    for metric in ("wall_ms", "gpu_ms", "copy_ms", "um_gpu_faults", "h2d_bytes"):
        assert process_medians(ok, metric) == [process_median(r, metric) for r in ok]
    odd = [{"epochs": [{"wall_ms": 9.0}, {"wall_ms": None}, {"wall_ms": 4.0}]},
           {"epochs": [{"wall_ms": 3.0}]}, {"epochs": [{"x": 1}, {"x": 2}]}]
    assert process_medians(odd, "wall_ms") == [4.0, 3.0, None]
    assert process_medians([], "wall_ms") == []


def test_replicated_and_budgeted_runs_are_other_experiments(fixtures_dir):
    """--replicate K and --device-budget make other experiments: each its own group and slice,
    with its own training set size (throughput counts K x 60000 samples); a record from before
    config.replicate existed is the one-copy run."""
    import copy
    base = load_records(fixtures_dir / "repeats.jsonl")
    assert all("replicate" not in r["config"] for r in base)
    one = copy.deepcopy(base)
    for r in one:
        r["config"]["replicate"] = 1
        r["config"]["device_budget_gib"] = None
    twice = copy.deepcopy(base)
    for r in twice:
        r["config"]["replicate"] = 2
        r["config"]["device_budget_gib"] = 0.5
        r["config"]["dataset"] = dict(r["config"].get("dataset") or {}, train_samples=120000)
    groups = aggregate(base + one + twice)
    assert len(groups) == 2
    old_and_one = next(g for g in groups if g.key.option("replicate") == 1)
    assert old_and_one.runs == 4
    assert old_and_one.train_samples == 60000
    replicated = next(g for g in groups if g.key.option("replicate") == 2)
    assert replicated.key.option("device_budget_gib") == 0.5
    assert replicated.train_samples == 120000
    assert replicated.samples_per_s == pytest.approx(120000 / 0.0054)
    assert len(slices(groups)) == 2
    # the label tells them apart: a table of both would otherwise show one name twice
    assert replicated.key.variant_label.endswith("(2 copies of the set) (device budget 0.5 GiB)")
    assert "copies" not in old_and_one.key.variant_label
    assert "budget" not in old_and_one.key.variant_label


def test_data_parallel_runs_are_other_experiments(fixtures_dir):
    """--gpus N and --emulate-gpus N (N > 1) make other experiments, told apart by N and the
    reduction, and say so in their label; a record from before config.gpus existed, and one with
    --gpus 1, is the one-GPU run."""
    import copy
    base = load_records(fixtures_dir / "repeats.jsonl")
    assert all("gpus" not in r["config"] for r in base)

    def with_shards(gpus: int, emulate: int, reduce: str | None) -> list[dict]:
        out = copy.deepcopy(base)
        for r in out:
            r["config"].update(gpus=gpus, emulate_gpus=emulate, reduce=reduce)
        return out

    groups = aggregate(base + with_shards(1, 1, None) + with_shards(2, 1, "exact")
                       + with_shards(2, 1, "ring") + with_shards(1, 2, "exact"))
    assert len(groups) == 4
    one = next(g for g in groups if g.key.option("gpus", 1) == 1
               and g.key.option("emulate_gpus", 1) == 1)
    assert one.runs == 4
    assert "GPU" not in one.key.variant_label
    ring = next(g for g in groups if g.key.option("reduce") == "ring")
    assert ring.key.variant_label.endswith("(2 GPUs, ring reduction)")
    emulated = next(g for g in groups if g.key.option("emulate_gpus") == 2)
    assert "(2 shards emulated on one GPU)" in emulated.key.variant_label
    assert len(slices(groups)) == 4
    # One process per GPU is another experiment; config.processes "one" keeps the older groups.
    one_process = with_shards(2, 1, "exact")
    per_gpu = with_shards(2, 1, "exact")
    for r in one_process:
        r["config"]["processes"] = "one"
    for r in per_gpu:
        r["config"]["processes"] = "per-gpu"
    groups = aggregate(with_shards(2, 1, "exact") + one_process + per_gpu)
    assert len(groups) == 2
    per = next(g for g in groups if g.key.option("processes") == "per-gpu")
    assert per.key.variant_label.endswith("(2 GPUs, a process each, exact reduction)")


def with_config(records: list[dict], **config) -> list[dict]:
    """Copies of `records` whose config has the given keys set."""
    import copy
    out = copy.deepcopy(records)
    for r in out:
        r["config"].update(config)
    return out


def test_runs_without_a_consumer_are_other_experiments(fixtures_dir):
    """--consumer none (the input pipeline alone) makes another experiment, said in its label;
    a record from before config.consumer existed, and one with train, is the training run."""
    base = load_records(fixtures_dir / "repeats.jsonl")
    assert all("consumer" not in r["config"] for r in base)
    groups = aggregate(base + with_config(base, consumer="train")
                       + with_config(base, consumer="none"))
    assert len(groups) == 2
    trained = next(g for g in groups if g.key.option("consumer") is None)
    assert trained.runs == 2 * len(base) and "consumer" not in trained.key.variant_label
    piped = next(g for g in groups if g.key.option("consumer") == "none")
    assert piped.key.variant_label.endswith("(no consumer: the pipeline alone)")


def test_placed_threads_are_other_experiments(fixtures_dir):
    """--thread-placement apart and shared make other experiments, said in their label; a record
    from before config.thread_placement existed, and one with os, is the scheduler's run."""
    base = load_records(fixtures_dir / "repeats.jsonl")
    assert all("thread_placement" not in r["config"] for r in base)
    groups = aggregate(base + [r for p in ("os", "apart", "shared")
                               for r in with_config(base, thread_placement=p)])
    assert len(groups) == 3
    scheduler = next(g for g in groups if g.key.option("thread_placement") is None)
    assert scheduler.runs == 2 * len(base) and "driver" not in scheduler.key.variant_label
    apart = next(g for g in groups if g.key.option("thread_placement") == "apart")
    assert apart.key.variant_label.endswith("(driver threads on other cores)")
    shared = next(g for g in groups if g.key.option("thread_placement") == "shared")
    assert shared.key.variant_label.endswith("(driver threads on the training thread's core)")
    assert len(slices(groups)) == 3


def test_the_step_fused_on_took_stands_for_the_strategy(fixtures_dir):
    """zero-copy's own step is the layer-by-layer one (--fused on declines the fused step:
    config.fused false, with the reason): it stands for the strategy beside runs that force the
    single-launch step (`--fused single`, the step every one-launch form needs), even where those
    launch the epoch once; a run the user turned off (`--fused off`) is a variant too."""
    import copy
    base = load_records(fixtures_dir / "repeats.jsonl")
    own = copy.deepcopy(base)
    for r in own:
        r["config"].update(strategy="zero-copy", launch_form="auto", epoch_form="per-batch",
                           epoch_launch=False, step="layer-by-layer", fused=False,
                           fused_off_reason="the batch is read in place from mapped host memory")
    forced = copy.deepcopy(base)
    for r in forced:
        r["config"].update(strategy="zero-copy", launch_form="kernel", epoch_form="kernel",
                           epoch_launch=True, step="single-launch", fused=True,
                           fused_off_reason=None)
        r["argv"] = ["memstrat", "train", "--strategy", "zero-copy", "--fused", "single"]
    off = copy.deepcopy(own)
    for r in off:
        r["config"]["fused_off_reason"] = "off in the configuration"
        r["argv"] = ["memstrat", "train", "--strategy", "zero-copy", "--fused=off"]
    groups = aggregate(own + forced)
    assert len(groups) == 2
    (rep,) = representative(groups)
    assert rep.key.step == "layer-by-layer" and rep.key.own_step and rep.key.own_form
    assert variant_rank(rep.key)[:2] == (0, 0)
    assert not next(g for g in groups if g is not rep).key.own_step
    # asked for by name, the step --fused on takes is still the strategy's own
    for r in own:
        r["argv"] = ["memstrat", "train", "--fused", "on"]
    (rep,) = representative(aggregate(own + forced))
    assert rep.key.step == "layer-by-layer"
    # --fused off: the same step and key as --fused on's refusal, but a variant
    (g_off,) = aggregate(off)
    assert not g_off.key.own_step and variant_rank(g_off.key)[:2] != (0, 0)
    # a record without its argv: the reason the configuration gives says it was turned off
    for r in off:
        del r["argv"]
    (g_off,) = aggregate(off)
    assert not g_off.key.own_step


def test_the_strategys_own_launch_form_stands_for_it(fixtures_dir):
    """A strategy run at its own launch form (config.launch_form auto) and, as variants, at forms
    named by --launch-form: the figures and tables show the own form, even where a named form
    launches the epoch once; records that predate the option are the own form."""
    import copy
    base = [r for r in load_records(fixtures_dir / "repeats.jsonl")]
    own = copy.deepcopy(base)
    for r in own:
        r["config"].update(launch_form="auto", epoch_form="graph", epoch_launch=False)
    named = copy.deepcopy(base)
    for r in named:
        r["config"].update(launch_form="kernel", epoch_form="kernel", epoch_launch=True)
        for e in r["epochs"]:
            e["wall_ms"] = e["wall_ms"] / 2
    groups = aggregate(own + named)
    assert len(groups) == 2
    (rep,) = representative(groups)
    assert rep.key.epoch_form == "graph" and rep.key.own_form
    # without the own form, the one-launch form is the variant shown
    (rep,) = representative([g for g in groups if g.key.epoch_form == "kernel"])
    assert rep.key.epoch_form == "kernel" and not rep.key.own_form
    # before the option existed every form was the strategy's own: one launch per epoch first
    old = copy.deepcopy(own + named)
    for r in old:
        del r["config"]["launch_form"]
    (rep,) = representative(aggregate(old))
    assert rep.key.epoch_form == "kernel" and rep.key.own_form

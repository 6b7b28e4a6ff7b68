"""Aggregation over repeats, overlap efficiency and the CSV (analysis/aggregate.py)."""
import csv
import statistics

import pytest

from analysis.aggregate import (CSV_COLUMNS, aggregate, overlap_efficiency,
                                reference_batch, representative, slices, write_csv)
from analysis.records import load_records


@pytest.fixture(scope="module")
def repeats(fixtures_dir):
    return aggregate(load_records(fixtures_dir / "repeats.jsonl"))


def test_repeats_form_one_group_despite_different_seeds(repeats):
    assert len(repeats) == 1
    assert repeats[0].runs == 2


def test_steady_state_median_and_spread_by_hand(repeats):
    # run 1 wall ms: 9.0 | 5.0 5.4 ; run 2: 8.0 | 5.2 6.0  (epoch 1 | steady)
    # pooled steady: 5.0 5.2 5.4 6.0 -> median 5.3; numpy linear p25 = 5.0 + .75*.2,
    # p75 = 5.4 + .25*.6
    w = repeats[0].steady["wall_ms"]
    assert w.median == pytest.approx(5.3)
    assert w.p25 == pytest.approx(5.15)
    assert w.p75 == pytest.approx(5.55)
    assert (w.min, w.max, w.n) == (5.0, 6.0, 4)
    assert repeats[0].epoch1["wall_ms"] == pytest.approx(8.5)
    assert sorted(repeats[0].run_wall_medians) == pytest.approx([5.2, 5.6])
    assert repeats[0].median("gpu_ms") == pytest.approx(4.3)     # 4.0 4.2 4.4 5.0
    assert repeats[0].median("copy_ms") == pytest.approx(1.0)    # 1.0 1.2 0.9 1.0
    assert repeats[0].samples_per_s == pytest.approx(60000 / 0.0053)


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
    expected = max(steady(db, "copy_ms"), steady(res, "compute_ms")) / steady(db, "gpu_ms")
    pts = {(p.group.key.scenario, p.group.key.batch, p.group.key.depth): p
           for p in overlap_efficiency(fixture_groups)}
    assert len(pts) == 8
    p = pts[("static", 256, 3)]
    assert p.compute_source == "resident"
    assert p.efficiency == pytest.approx(expected)


def test_overlap_efficiency_falls_back_without_resident(fixture_records):
    groups = aggregate(r for r in fixture_records if r["config"]["strategy"] != "resident")
    pts = overlap_efficiency(groups)
    assert pts and all(p.compute_source == "own compute_ms" for p in pts)
    p = pts[0]
    assert p.efficiency == pytest.approx(
        max(p.copy_only_ms, p.group.median("compute_ms")) / p.group.median("gpu_ms"))


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
    assert db["overlap_compute_source"] == "resident"


def test_failed_records_are_not_aggregated(fixture_records):
    groups = aggregate(fixture_records)
    assert not any(g.key.strategy == "um-advise" for g in groups)

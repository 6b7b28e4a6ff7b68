"""analysis/cost_model.py: each form's arithmetic on hand values (serial sum, overlap with the
first transfer exposed, in-kernel fault and read terms, prefetch calls per batch, packed block
bytes, chunks), interpolation, "no model" reasons, residuals and the 25% flag, the CLI on the
fixtures, and the report's Transfer primitives / Cost model sections."""
import copy
import csv
import dataclasses
import math
import subprocess
import sys

import pytest

from analysis import cost_model as M
from analysis import report
from analysis.aggregate import REFERENCE_MISSING, aggregate
from analysis.primitives import Curve, Point, PrimitiveTable
from analysis.records import load_records

from conftest import REPO

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
IMAGES_256 = 256 * 784           # one u8 batch of 256 rows: 200704 B
LABELS_256 = 256 * 4
# sm-copy-mapped: 5 us at 4 KiB, 40 GB/s at 4 MB: fixed cost 5 - 4096 / 40e3 = 4.8976 us.
SM_FIXED = 5.0 - 4096 / 40e3


def curve(name, points, status="ok"):
    """A primitive curve from (bytes, median us) points."""
    pts = [Point(b, us, us, us, us, us, b / (us * 1e3), 1) for b, us in points]
    return Curve(name, "GPU", status, "cuda-events", "host-to-device", pts,
                 "no managed memory" if status == "waived" else "")


def table(**curves):
    """PrimitiveTable from name=points keywords (underscores stand for dashes)."""
    return PrimitiveTable({n.replace("_", "-"): curve(n.replace("_", "-"), pts)
                           for n, pts in curves.items()})


SM = [(4096, 5.0), (200704, 10.0), (201728, 12.0), (4_000_000, 100.0)]
FOUR_BATCHES = M.Shape(samples=1024, batch=256, transfer="u8")


# ---- shapes and bytes -------------------------------------------------------------------------

def test_shape_batches_bytes_and_packed_blocks():
    s = M.Shape(1000, 256, "u8")
    assert s.batches == 4 and s.batch_rows() == [256, 256, 256, 232]
    assert M.images(232, s) == 232 * 784 and M.labels(232, s) == 928
    assert M.packed_block(256, s) == 201728                       # 200704 + 1024, no gap
    f32 = M.Shape(1000, 256, "f32")
    assert M.packed_block(256, f32) == 256 * 3136 + 1024
    assert M.images_and_labels(3, f32) == 3 * 3140


def test_chunks_are_whole_batches_as_chunk_plan_cuts_them():
    s = M.Shape(60000, 256, "u8")                                 # default 8 MiB
    assert s.batches_per_chunk(M.PREFETCH_CHUNKS) == 41           # 8388608 // 201728
    units = s.units(M.PREFETCH_CHUNKS)
    assert len(units) == 6 and units[0] == (41 * 256, 41)
    assert units[-1] == (60000 - 5 * 41 * 256, 30)
    assert sum(n for _, n in units) == 235
    assert s.units(None) == [(r, 1) for r in s.batch_rows()]
    assert M.Shape(60000, 256, "u8", prefetch_chunk_mib=1).batches_per_chunk(M.PREFETCH_CHUNKS) == 5
    assert M.Shape(1000, 256, "u8", prefetch_chunk_mib=1024).batches_per_chunk(
        M.PREFETCH_CHUNKS) == 4
    # Copy chunks read their own option, in block strides: f32 b1024's block (3215360 B) is
    # more than 1 MiB, so one batch per copy; records from before the option: one batch too.
    f32 = M.Shape(60000, 1024, "f32", copy_chunk_mib=1, prefetch_chunk_mib=1024)
    assert f32.batches_per_chunk(M.COPY_CHUNKS) == 1 and len(f32.units(M.COPY_CHUNKS)) == 59
    assert f32.batches_per_chunk(M.PREFETCH_CHUNKS) == 59
    assert M.Shape(60000, 256, "u8", copy_chunk_mib=None).batches_per_chunk(M.COPY_CHUNKS) == 1
    assert M.Shape(60000, 256, "u8", copy_chunk_mib=1024).units(M.COPY_CHUNKS) == [(60000, 235)]


def test_a_packed_chunk_is_one_range_of_whole_blocks():
    s = M.Shape(60000, 256, "u8")
    assert M.packed_stride(256, s) == M.packed_block(256, s) == 201728   # no padding
    assert M.packed_chunk(41 * 256, s) == 41 * 201728
    assert M.packed_chunk(29 * 256 + 96, s) == 29 * 201728 + 96 * 788  # the epoch's last chunk
    assert M.packed_chunk(96, s) == M.packed_block(96, s)
    odd = M.Shape(60000, 1007, "u8")                              # 793516 B blocks, stride 793520
    assert M.packed_stride(1007, odd) == 793520
    assert M.packed_chunk(10 * 1007, odd) == 9 * 793520 + 793516     # tails of all but the last
    assert odd.batches_per_chunk(M.COPY_CHUNKS) == 10


# ---- the forms on hand values -----------------------------------------------------------------

def test_overlap_exposes_the_first_transfer_then_takes_the_max():
    assert M.overlap_epoch([1, 1, 1], [2, 0.5, 3]) == 2 + 1 + 3 + 1
    assert M.overlap_epoch([1, 1], [0.1, 0.1]) == pytest.approx(2.1)
    assert M.overlap_epoch([], []) == 0.0
    with pytest.raises(ValueError):
        M.overlap_epoch([1], [1, 2])
    assert M.serial_epoch(10.0, [0.5, 0.25]) == 10.75


def test_serial_copies_add_two_calls_per_batch():
    t = table(pinned_h2d=[(1024, 2.0), (IMAGES_256, 6.0), (10**8, 2000.0)],
              pageable_h2d=[(1024, 12.0), (IMAGES_256, 30.0), (10**8, 9000.0)])
    p = M.predict("pinned", "static", FOUR_BATCHES, 10.0, t)
    assert p.gpu_ms == pytest.approx(10.0 + 4 * (6.0 + 2.0) / 1e3)
    assert p.transfer_ms == pytest.approx(0.032) and p.compute_ms == 10.0
    assert M.predict("pinned", "refresh", FOUR_BATCHES, 10.0, t).gpu_ms == p.gpu_ms
    assert M.predict("pageable", "static", FOUR_BATCHES, 10.0, t).gpu_ms == \
        pytest.approx(10.0 + 4 * 42.0 / 1e3)


def test_double_buffer_overlaps_copies_with_steps():
    t = table(pinned_h2d=[(1024, 2.0), (IMAGES_256, 6.0), (10**8, 2000.0)])
    # steps (2.5 ms) hide every copy but the first (8 us)
    assert M.predict("double-buffer", "static", FOUR_BATCHES, 10.0, t).gpu_ms == \
        pytest.approx(0.008 + 10.0)
    # copies (8 us) longer than steps (2.5 us): the copies set the pace, the last step follows
    p = M.predict("double-buffer", "refresh", FOUR_BATCHES, 0.01, t)
    assert p.gpu_ms == pytest.approx(0.008 + 3 * 0.008 + 0.0025)
    assert p.semantics.form == M.OVERLAP


def test_resident_uploads_the_epoch_before_the_first_batch_in_refresh():
    t = table(pinned_h2d=[(4096, 3.0), (1024 * 784, 20.0)])
    assert M.predict("resident", "static", FOUR_BATCHES, 10.0, t).gpu_ms == 10.0
    p = M.predict("resident", "refresh", FOUR_BATCHES, 10.0, t)
    assert p.gpu_ms == pytest.approx(10.0 + (20.0 + 3.0) / 1e3)


def test_um_faults_each_batch_in_kernel_serially_in_refresh():
    t = table(sm_copy_mapped=SM,
              um_fault_h2d=[(4096, 30.0), (201728, 40.0), (2**24, 2**24 / 8e3)])
    assert t.fixed_cost_us("sm-copy-mapped") == pytest.approx(SM_FIXED)
    assert M.predict("um", "static", FOUR_BATCHES, 10.0, t).gpu_ms == 10.0
    p = M.predict("um", "refresh", FOUR_BATCHES, 10.0, t)
    assert p.gpu_ms == pytest.approx(10.0 + 4 * (40.0 - SM_FIXED) / 1e3)


def test_in_kernel_cost_never_drops_below_the_bytes_at_peak():
    t = table(sm_copy_mapped=SM,
              um_fault_h2d=[(4096, 30.0), (201728, 30.0), (2**24, 2**24 / 8e3)])
    # 30 - 4.8976 us is less than 201728 B at the 8 GB/s peak (25.216 us): the peak wins
    move = M.MODELS["um"].refresh.per_unit[0]
    assert M.move_us(t, move, 201728) == pytest.approx(201728 / 8e3)


@pytest.mark.parametrize("step, reads", [("single-launch", 2), ("layer-by-layer", 1),
                                         ("cublaslt-fused", 1)])
def test_zero_copy_reads_x_as_often_as_its_step(step, reads):
    t = table(sm_copy_mapped=SM)
    shape = M.Shape(1024, 256, "u8", step=step)
    per_batch = reads * (10.0 - SM_FIXED) + (5.0 - SM_FIXED)     # labels: 1 KiB, below range
    assert M.predict("zero-copy", "static", shape, 10.0, t).gpu_ms == \
        pytest.approx(10.0 + 4 * per_batch / 1e3)


def test_zero_copy_without_a_known_step_has_no_model():
    t = table(sm_copy_mapped=SM)
    with pytest.raises(M.NoModel, match="config.step not recorded"):
        M.predict("zero-copy", "static", FOUR_BATCHES, 10.0, t)
    with pytest.raises(M.NoModel, match="add it to X_READS"):
        M.predict("zero-copy", "static", M.Shape(1024, 256, "u8", step="new-path"), 10.0, t)


def test_prefetch_costs_two_calls_per_batch_resident_or_migrating():
    t = table(um_prefetch_resident=[(1024, 7.0), (IMAGES_256, 9.0)],
              um_prefetch_h2d=[(1024, 30.0), (IMAGES_256, 50.0)])
    for name in ("um-prefetch", "um-advise"):
        p = M.predict(name, "static", FOUR_BATCHES, 10.0, t)
        assert p.gpu_ms == pytest.approx(0.016 + 10.0)
        assert p.transfer_ms == pytest.approx(4 * 0.016)
        q = M.predict(name, "refresh", FOUR_BATCHES, 0.1, t)
        assert q.gpu_ms == pytest.approx(0.080 + 3 * 0.080 + 0.025)   # prefetches set the pace


def test_zero_copy_staged_stages_chunks_of_packed_blocks_overlapped():
    t = table(sm_copy_mapped=SM)                                  # 12 us at 201728 B
    # Records from before --copy-chunk reached zero-copy-staged: one staging copy per block.
    per_batch = dataclasses.replace(FOUR_BATCHES, copy_chunk_mib=None)
    p = M.predict("zero-copy-staged", "static", per_batch, 0.001, t)
    assert p.gpu_ms == pytest.approx(0.012 + 3 * 0.012 + 0.00025)
    # 8 MiB (the default) holds all four blocks: one staging copy, before the only chunk's steps.
    q = M.predict("zero-copy-staged", "static", FOUR_BATCHES, 0.001, t)
    assert q.semantics.unit == "chunk"
    chunk_us = 12.0 * (100.0 / 12.0) ** (math.log(4 * 201728 / 201728) / math.log(4e6 / 201728))
    assert q.gpu_ms == pytest.approx(chunk_us / 1e3 + 0.001)
    assert M.predict("zero-copy-staged", "refresh", FOUR_BATCHES, 0.001, t).gpu_ms == q.gpu_ms


def test_coarse_prefetch_moves_chunks_in_refresh_and_nothing_in_static():
    t = table(um_prefetch_h2d=[(4096, 4096 / 20e3), (2**28, 2**28 / 20e3)])   # 20 GB/s flat
    shape = M.Shape(60000, 256, "u8")
    assert M.predict("um-prefetch-coarse", "static", shape, 10.0, t).gpu_ms == 10.0
    p = M.predict("um-prefetch-coarse", "refresh", shape, 10.0, t)
    first_chunk = 41 * 256 * (784 + 4) / 20e3 / 1e3                # ms
    assert p.gpu_ms == pytest.approx(first_chunk + 10.0)
    assert p.transfer_ms == pytest.approx(60000 * 788 / 20e3 / 1e3)


def test_the_kernel_form_waits_for_every_transfer_before_its_one_launch():
    """At the kernel form the epoch's steps are one launch after every batch was acquired: an
    overlapped entry pays C + every transfer; every other form runs the entry as written; a serial
    entry is the same at every form."""
    t = table(um_prefetch_h2d=[(4096, 4096 / 20e3), (2**28, 2**28 / 20e3)])   # 20 GB/s flat
    shape = M.Shape(60000, 256, "u8")
    every = 60000 * 788 / 20e3 / 1e3                                # ms: the whole epoch's bytes
    k = M.predict("um-prefetch-coarse", "refresh", shape, 10.0, t, "kernel")
    assert k.semantics.form == M.SERIAL and "kernel form" in k.semantics.assumption
    assert k.gpu_ms == pytest.approx(10.0 + every)
    assert k.transfer_ms == pytest.approx(every)
    first_chunk = 41 * 256 * (784 + 4) / 20e3 / 1e3
    for form in (None, "per-batch", "kernel-per-chunk", "graph"):
        p = M.predict("um-prefetch-coarse", "refresh", shape, 10.0, t, form)
        assert p.semantics.form == M.OVERLAP
        assert p.gpu_ms == pytest.approx(first_chunk + 10.0)
    pinned = table(pinned_h2d=[(1024, 5.0), (IMAGES_256, 10.0)])
    assert (M.predict("pinned", "static", FOUR_BATCHES, 1.0, pinned, "kernel").gpu_ms
            == M.predict("pinned", "static", FOUR_BATCHES, 1.0, pinned).gpu_ms)


def test_graph_forms_copy_chunks_serially_or_overlapped():
    t = table(pinned_h2d=[(4096, 4096 / 20e3), (2**28, 2**28 / 20e3)])     # 20 GB/s flat
    shape = M.Shape(60000, 256, "u8")                              # 6 copies of 8 MiB or less
    p = M.predict("pinned-graph", "static", shape, 10.0, t)
    assert p.semantics.unit == "chunk" and p.semantics.form == M.SERIAL
    assert p.transfer_ms == pytest.approx(60000 * 788 / 20e3 / 1e3)
    assert p.gpu_ms == pytest.approx(10.0 + p.transfer_ms)
    assert M.predict("pinned-graph", "refresh", shape, 10.0, t).gpu_ms == p.gpu_ms
    q = M.predict("double-buffer-graph", "refresh", shape, 10.0, t)
    first_chunk = 41 * 201728 / 20e3 / 1e3                         # ms, exposed
    assert q.gpu_ms == pytest.approx(first_chunk + 10.0)
    # The copies' fixed cost (10 us) is paid once per copy: 6 of them at 8 MiB, 235 at one batch
    # each (records from before --copy-chunk); the curve is measured at every size they copy.
    sizes = (96 * 788, 201728, 29 * 201728 + 96 * 788, 41 * 201728)
    fixed = table(pinned_h2d=[(n, 10.0 + n / 20e3) for n in sizes])
    per_batch = M.Shape(60000, 256, "u8", copy_chunk_mib=None)
    gap = (M.predict("pinned-graph", "static", per_batch, 10.0, fixed).gpu_ms
           - M.predict("pinned-graph", "static", shape, 10.0, fixed).gpu_ms)
    assert gap == pytest.approx((235 - 6) * 0.010)


def test_costs_come_from_the_interpolated_curve():
    t = table(pinned_h2d=[(1024, 2.0), (4096, 4.0)])
    move = M.Move("pinned-h2d", "x", M.images)
    assert M.move_us(t, move, 2048) == pytest.approx(2.0 * math.sqrt(2))   # log-log midpoint
    assert M.move_us(t, move, 512) == 2.0                                  # below: latency
    assert M.move_us(t, move, 8192) == pytest.approx(4.0 + 4096 / (4096 / 4.0e3) / 1e3)


# ---- no model, never a guess --------------------------------------------------------------------

@pytest.mark.parametrize("strategy, scenario, primitives, reason", [
    ("no-such-strategy", "static", {}, "no entry for no-such-strategy"),
    ("pinned", "stream", {}, "scenario 'stream' is not modelled"),
    ("pinned", "static", {}, "needs primitive pinned-h2d: no record"),
    ("um", "refresh", {"um-fault-h2d": [(4096, 30.0)]}, "needs primitive sm-copy-mapped"),
])
def test_no_model_says_why(strategy, scenario, primitives, reason):
    t = PrimitiveTable({n: curve(n, pts) for n, pts in primitives.items()})
    with pytest.raises(M.NoModel, match=reason):
        M.predict(strategy, scenario, FOUR_BATCHES, 10.0, t)


def test_a_waived_primitive_gives_no_model_with_its_reason():
    t = PrimitiveTable({"pinned-h2d": curve("pinned-h2d", [], status="waived")})
    with pytest.raises(M.NoModel, match=r"pinned-h2d: waived \(no managed memory\)"):
        M.predict("pinned", "static", FOUR_BATCHES, 10.0, t)


def test_every_strategy_entry_names_measured_primitives():
    known = {"pageable-h2d", "pinned-h2d", "pinned-h2d-2streams", "pinned-d2h",
             "sm-copy-mapped", "um-prefetch-h2d", "um-prefetch-resident", "um-fault-h2d",
             "um-host-write"}
    for name, entry in M.MODELS.items():
        for sem in (entry.static, entry.refresh):
            assert sem.form in (M.SERIAL, M.OVERLAP), name
            assert {m.primitive for m in sem.per_unit + sem.per_epoch} <= known, name
            assert sem.assumption, name


# ---- residuals --------------------------------------------------------------------------------

def test_residual_and_the_25_percent_flag():
    assert M.residual(10.0, 8.0) == pytest.approx(0.2)
    assert M.residual(10.0, 12.6) == pytest.approx(-0.26)
    assert M.residual(None, 1.0) is None and M.residual(1.0, None) is None
    assert M.residual(0.0, 1.0) is None
    assert not M.unexplained(0.2) and not M.unexplained(0.25) and not M.unexplained(None)
    assert M.unexplained(0.26) and M.unexplained(-0.26)


@pytest.fixture(scope="module")
def fixture_tables(fixtures_dir):
    return PrimitiveTable.load_all(fixtures_dir / "primitives.jsonl")


def test_compare_takes_c_from_the_reference_and_wall_from_host_ms(fixtures_dir, fixture_tables):
    groups = aggregate(load_records(fixtures_dir / "records.jsonl"))
    by = {(c.group.key.strategy, c.group.key.scenario, c.group.key.batch, c.group.key.depth): c
          for c in M.compare(groups, fixture_tables)}
    ref = by[("resident", "static", 256, None)]
    assert ref.is_reference and ref.gpu_residual == pytest.approx(0.0)
    pinned = by[("pinned", "refresh", 256, None)]
    assert not pinned.is_reference and pinned.reason is None
    assert pinned.prediction.compute_ms == ref.gpu.median
    assert pinned.predicted_wall_ms == pytest.approx(pinned.predicted_gpu_ms + pinned.host_ms)
    assert pinned.host_ms > 10                                    # the refresh rewrite
    assert pinned.gpu_residual == pytest.approx(
        (pinned.gpu.median - pinned.predicted_gpu_ms) / pinned.gpu.median)
    assert all(c.prediction is not None for c in by.values())


def test_compare_gives_reasons_instead_of_guesses(fixtures_dir, fixture_tables):
    recs = load_records(fixtures_dir / "records.jsonl")
    extra = []
    for strategy, batch, gpu in (("no-such-strategy", 256, None), ("pinned", 512, None),
                                 ("pinned", 256, "Other GPU")):
        r = copy.deepcopy(next(x for x in recs if x["config"]["strategy"] == "pinned"))
        r["config"].update(strategy=strategy, batch=batch)
        if gpu:
            r["env"] = dict(r["env"], gpu_name=gpu)
        extra.append(r)
    comparisons = M.compare(aggregate(recs + extra), fixture_tables)
    reasons = {(c.group.key.strategy, c.group.key.batch, c.group.key.gpu): c.reason
               for c in comparisons if c.prediction is None}
    assert "no entry for no-such-strategy" in reasons[("no-such-strategy", 256, "NVIDIA H200")]
    assert reasons[("pinned", 512, "NVIDIA H200")] == REFERENCE_MISSING
    assert reasons[("pinned", 256, "Other GPU")] == "no primitive records for Other GPU"


def test_processes_with_another_step_are_modelled_apart_against_a_reference_of_that_step(
        fixtures_dir, fixture_tables):
    recs = [r for r in load_records(fixtures_dir / "processes.jsonl")
            if r["config"]["strategy"] in ("resident", "pinned")]
    next(r for r in recs if r["config"]["strategy"] == "pinned")["config"]["step"] = "other"
    pinned = [c for c in M.compare(aggregate(recs), fixture_tables)
              if c.group.key.strategy == "pinned" and c.group.key.batch == 256]
    # never pooled: the odd process is a configuration of its own, whose step no resident
    # reference ran, so it gets no model; the others still are modelled
    assert len(pinned) == 2
    other = next(c for c in pinned if c.group.n_processes == 1)
    assert other.prediction is None and other.reason == REFERENCE_MISSING
    assert next(c for c in pinned if c.group.n_processes > 1).prediction is not None


# ---- the CLI and the report -------------------------------------------------------------------

def test_cli_prints_the_table_and_writes_csv_and_parity_plot(fixtures_dir, tmp_path, capsys):
    rc = M.main([str(fixtures_dir / "records.jsonl"), "--primitives",
                 str(fixtures_dir / "primitives.jsonl"), "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "pinned refresh/u8/b256" in out and "resident static/u8/b256 (C)" in out
    assert "unexplained" in out
    with open(tmp_path / "cost_model.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 32 and set(rows[0]) == set(M.CSV_COLUMNS)
    pinned = next(r for r in rows if r["strategy"] == "pinned" and r["scenario"] == "static"
                  and r["batch"] == "256")
    assert float(pinned["predicted_gpu_ms"]) == pytest.approx(
        float(pinned["compute_ms"]) + float(pinned["transfer_ms"]), rel=1e-5)
    assert pinned["form"] == "serial" and pinned["no_model_reason"] == ""
    assert pinned["gpu_unexplained"] in ("true", "false")
    assert (tmp_path / "cost_model_parity.png").read_bytes().startswith(PNG_MAGIC)


def test_cli_as_script_and_bad_input(fixtures_dir, tmp_path, capsys):
    res = subprocess.run([sys.executable, str(REPO / "analysis" / "cost_model.py"),
                          str(fixtures_dir / "processes.jsonl"), "--primitives",
                          str(fixtures_dir / "primitives.jsonl")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    line = next(l for l in res.stdout.splitlines() if l.startswith("um-prefetch static/u8/b256"))
    assert "UNSTABLE" in line and "n=10" in line
    assert M.main([str(fixtures_dir / "records.jsonl"), "--primitives",
                   str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text("\n")
    assert report.main([str(fixtures_dir / "records.jsonl"), "--out", str(tmp_path / "r"),
                        "--primitives", str(tmp_path / "empty.jsonl")]) == 2
    assert "no primitive records" in capsys.readouterr().err


@pytest.fixture(scope="module")
def model_report(fixtures_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("model_report")
    res = report.build_report([fixtures_dir / "records.jsonl"], out,
                              primitives=[fixtures_dir / "primitives.jsonl"])
    return out, res, (out / "report.md").read_text()


def test_report_has_primitives_and_cost_model_sections(model_report):
    out, res, md = model_report
    for text in ("## Transfer primitives", "## Cost model", "### Unexplained (|residual| > 25%)",
                 "| pinned-h2d | cuda-events | host-to-device | 55.1 (at 64 MiB) |",
                 "serial; per batch: pinned-h2d (images), pinned-h2d (labels)",
                 "resident (is C)"):
        assert text in md, text
    unexplained = md.split("### Unexplained")[1].split("##")[0]
    assert "um-prefetch refresh/u8/b256: GPU measured" in unexplained
    names = {p.name for p in res["plots"]}
    assert {"primitives.png", "cost_model_parity.png"} <= names
    assert res["cost_model_csv"] == out / "cost_model.csv"
    html = (out / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(names)


def test_report_floors_take_the_pinned_peak_unless_overridden(model_report, fixtures_dir,
                                                              tmp_path):
    md = model_report[2]
    assert "B = 55.1 GB/s, the pinned-h2d peak" in md
    assert "no measured pinned bulk bandwidth" not in md
    with open(model_report[0] / "summary.csv", newline="") as fh:
        pinned = next(r for r in csv.DictReader(fh) if r["strategy"] == "pinned")
    assert float(pinned["transfer_floor_ms"]) == pytest.approx(
        float(pinned["h2d_bytes_median"]) / 55.15e9 * 1e3, rel=0.01)
    report.build_report([fixtures_dir / "records.jsonl"], tmp_path, pinned_bw=25e9,
                        primitives=[fixtures_dir / "primitives.jsonl"])
    assert "B = 25.0 GB/s, given with --pinned-bandwidth" in (tmp_path / "report.md").read_text()


def test_report_without_primitives_has_neither_section(fixtures_dir, tmp_path):
    res = report.build_report([fixtures_dir / "records.jsonl"], tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "## Transfer primitives" not in md and "## Cost model" not in md
    assert res["cost_model_csv"] is None and not (tmp_path / "cost_model.csv").exists()

"""Loading and validating run records (analysis/records.py)."""
import copy
import json
import random
import re
from pathlib import Path

import pytest

from analysis.records import (RecordError, failed_records, json_type, load_file,
                              load_records, ok_records, read_jsonl, validate_record)


def test_loads_fixture_records(fixtures_dir):
    recs = load_records(fixtures_dir / "records.jsonl")
    assert len(recs) == 33
    assert len(ok_records(recs)) == 32
    assert len(failed_records(recs)) == 1
    assert recs[0]["_source"].endswith("records.jsonl:1")
    assert all(isinstance(r["config"]["hidden"], list) for r in recs)


def test_folder_input_reads_records_jsonl(fixtures_dir):
    # The fixtures folder also holds broken files; a folder means its records.jsonl.
    assert len(load_records(fixtures_dir)) == 33


def test_malformed_json_names_file_and_line(fixtures_dir):
    with pytest.raises(RecordError) as e:
        load_file(fixtures_dir / "malformed.jsonl")
    msg = str(e.value)
    assert "malformed.jsonl:2:" in msg
    assert "not valid JSON" in msg


def test_read_jsonl_yields_each_line_with_its_source(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"a": 1}\n\n[2]\n')
    assert list(read_jsonl(f)) == [(f"{f}:1", {"a": 1}), (f"{f}:3", [2])]
    with pytest.raises(RecordError, match="no such file"):
        list(read_jsonl(tmp_path))                       # a folder is not a record file
    with pytest.raises(RecordError, match="run memstrat first"):
        list(read_jsonl(tmp_path / "missing.jsonl", "run memstrat first"))
    assert [json_type(v) for v in (None, True, 1.5, "s", {}, [])] == [
        "null", "boolean", "number", "string", "object", "array"]


def test_old_schema_version_is_refused_clearly(fixtures_dir):
    with pytest.raises(RecordError) as e:
        load_file(fixtures_dir / "old_schema.jsonl")
    msg = str(e.value)
    assert "old_schema.jsonl:1:" in msg
    assert "schema_version 0 is not supported" in msg
    assert "schema_version 1" in msg


def test_missing_field_is_named(fixtures_dir):
    with pytest.raises(RecordError) as e:
        load_file(fixtures_dir / "missing_field.jsonl")
    assert "missing_field.jsonl:1:" in str(e.value)
    assert "missing required field 'config.batch'" in str(e.value)


@pytest.fixture
def good(fixture_records):
    rec = copy.deepcopy(fixture_records[0])
    rec.pop("_source")
    return rec


def test_wrong_type_is_named(good):
    good["epochs"][1]["wall_ms"] = "fast"
    with pytest.raises(RecordError, match=r"x:7: field 'epochs\[1\]\.wall_ms' is string"):
        validate_record(good, "x:7")


def test_boolean_is_not_a_number(good):
    good["config"]["batch"] = True
    with pytest.raises(RecordError, match="config.batch"):
        validate_record(good, "x:1")


def test_null_allowed_only_where_documented(good):
    good["epochs"][0]["um_gpu_faults"] = None      # documented as nullable
    validate_record(copy.deepcopy(good), "x:1")
    good["epochs"][0]["gpu_ms"] = None             # required number
    with pytest.raises(RecordError, match="'epochs\\[0\\].gpu_ms' is null"):
        validate_record(good, "x:1")


def test_epochs_must_be_numbered(good):
    good["epochs"][1]["epoch"] = 5
    with pytest.raises(RecordError, match="numbered 1..N"):
        validate_record(good, "x:1")


def test_bad_status(good):
    good["status"] = "done"
    with pytest.raises(RecordError, match="status"):
        validate_record(good, "x:1")


def test_failed_record_needs_only_identity_and_config():
    rec = {"schema_version": 1, "run_id": "r", "status": "failed", "error": "boom",
           "config": {"strategy": "um", "hidden": "512,256"}, "env": None}
    out = validate_record(rec, "x:1")
    assert out["epochs"] == [] and out["env"] == {}
    assert out["config"]["hidden"] == [512, 256]


def test_not_an_object():
    with pytest.raises(RecordError, match="must be a JSON object"):
        validate_record([1, 2], "x:1")


def test_blank_lines_skipped(tmp_path, fixtures_dir):
    line = (fixtures_dir / "records.jsonl").read_text().splitlines()[0]
    f = tmp_path / "r.jsonl"
    f.write_text("\n" + line + "\n\n")
    assert len(load_file(f)) == 1


def test_missing_input(tmp_path):
    with pytest.raises(RecordError, match="no such file or folder"):
        load_records(tmp_path / "nope")
    with pytest.raises(RecordError, match="no records.jsonl"):
        load_records(tmp_path)


def test_results_set_folder_reads_its_run_records_only(tmp_path, fixtures_dir):
    # A results set keeps run and transfer-primitive records under records/; a run-record
    # reader (the regression guard, the report) takes the runs and leaves the primitives.
    lines = (fixtures_dir / "records.jsonl").read_text().splitlines()
    records = tmp_path / "set" / "records"
    records.mkdir(parents=True)
    (records / "results.jsonl").write_text("\n".join(lines[:3]) + "\n")
    primitive = {"record": "primitive", "primitive": "pinned-h2d", "config": {}}
    baseline = json.loads(lines[0])
    baseline["config"]["framework"] = "pytorch"
    (records / "primitives.jsonl").write_text(json.dumps(primitive) + "\n"
                                              + json.dumps(baseline) + "\n")
    recs = load_records(tmp_path / "set")
    assert len(recs) == 3
    assert all(r["_source"].startswith(str(records / "results.jsonl")) for r in recs)


# ---- what a crash or a careless copy leaves ------------------------------------------------
def _lines(fixtures_dir, n=None):
    return (fixtures_dir / "records.jsonl").read_text().splitlines()[:n]


def test_torn_last_line_is_skipped_with_a_warning(tmp_path, fixtures_dir, capsys):
    lines = _lines(fixtures_dir, 4)
    f = tmp_path / "records.jsonl"
    f.write_text("\n".join(lines[:3]) + "\n" + lines[3][:200])      # cut mid-record, no newline
    notes = []
    recs = load_records(f, notes)
    assert len(recs) == 3
    assert notes == [f"{f}:4: torn last line, ignored; the matrix runner moves it aside on "
                     "resume"]
    assert f"warning: {f}:4: torn last line, ignored" in capsys.readouterr().err


def test_torn_last_line_cut_inside_a_utf8_character_is_torn_too(tmp_path, fixtures_dir):
    f = tmp_path / "records.jsonl"
    f.write_bytes((_lines(fixtures_dir, 1)[0] + "\n").encode() + '{"error": "é'.encode()[:-1])
    assert len(load_records(f)) == 1


def test_complete_last_line_without_newline_is_read(tmp_path, fixtures_dir):
    f = tmp_path / "records.jsonl"
    f.write_text("\n".join(_lines(fixtures_dir, 2)))
    assert len(load_records(f)) == 2


def test_a_damaged_line_in_the_middle_stays_an_error(tmp_path, fixtures_dir):
    good = _lines(fixtures_dir, 3)
    f = tmp_path / "records.jsonl"
    f.write_text(good[0] + "\n" + good[1][:150] + "\n" + good[2] + "\n")
    with pytest.raises(RecordError, match=r"records.jsonl:2: not valid JSON"):
        load_records(f)


def test_a_damaged_last_line_that_ends_with_a_newline_stays_an_error(tmp_path, fixtures_dir):
    good = _lines(fixtures_dir, 2)
    f = tmp_path / "records.jsonl"
    f.write_text(good[0] + "\n" + good[1][:150] + "\n")      # written whole, not torn
    with pytest.raises(RecordError, match=r"records.jsonl:2: not valid JSON"):
        load_records(f)


def test_a_file_read_twice_counts_each_run_once(fixtures_dir, capsys):
    f = fixtures_dir / "records.jsonl"
    notes = []
    recs = load_records([f, f], notes)
    assert [r["run_id"] for r in recs] == [r["run_id"] for r in load_records(f)]
    assert notes == ["33 duplicate records (same run_id) ignored"]
    assert "warning: 33 duplicate records (same run_id) ignored" in capsys.readouterr().err


def test_a_line_appended_three_times_is_one_run(tmp_path, fixtures_dir):
    line = _lines(fixtures_dir, 1)[0]
    f = tmp_path / "records.jsonl"
    f.write_text((line + "\n") * 3)
    recs = load_records(f)
    assert len(recs) == 1 and recs[0]["_source"] == f"{f}:1"


def test_two_different_records_under_one_run_id_are_an_error(tmp_path, fixtures_dir):
    first, second = _lines(fixtures_dir, 2)
    rec = json.loads(second)
    rec["run_id"] = json.loads(first)["run_id"]
    f = tmp_path / "records.jsonl"
    f.write_text(first + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(RecordError, match=rf"records.jsonl:2: run_id '{rec['run_id']}' also "
                                          rf"names a different record at {f}:1"):
        load_records(f)


def test_unreadable_and_non_utf8_files_are_record_errors(tmp_path, fixtures_dir, monkeypatch):
    f = tmp_path / "records.jsonl"
    f.write_bytes(b"\xff\xfe{}\n")
    with pytest.raises(RecordError, match=r"records.jsonl:1: not UTF-8 text \(byte 0xff"):
        load_records(f)
    f.write_text(_lines(fixtures_dir, 1)[0] + "\n")
    import analysis.jsonl as jsonl

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied", str(f))
    monkeypatch.setattr(jsonl, "open", denied, raising=False)
    with pytest.raises(RecordError, match="records.jsonl: cannot read: Permission denied"):
        load_records(f)


# ---- the schema's bounds, and the compiled validator ----------------------------------------
@pytest.mark.parametrize("field, value, problem", [
    ("wall_ms", -5, "expected a value >= 0"),
    ("wall_ms", 1e308, "expected a value <= 1e+09"),
    ("copy_ms", -0.5, "expected a value >= 0"),
    ("h2d_bytes", 1e308, "expected a value <= 1e+15"),
    ("um_gpu_faults", 1e308, "expected a value <= 1e+12"),
])
def test_times_and_bytes_are_bounded(good, field, value, problem):
    good["epochs"][1][field] = value
    with pytest.raises(RecordError, match=rf"'epochs\[1\]\.{field}' is .*; {re.escape(problem)}"):
        validate_record(good, "x:1")


def test_committed_records_are_within_the_bounds():
    REPO = Path(__file__).resolve().parents[2]     # not `from conftest`: several exist
    files = sorted((REPO / "docs" / "results").rglob("*.jsonl"))
    broken = {"malformed.jsonl", "missing_field.jsonl"}          # broken on purpose
    files += sorted(p for p in (REPO / "tests" / "analysis" / "fixtures").glob("*.jsonl")
                    if p.name not in broken)
    checked = 0
    for path in files:
        for source, rec in read_jsonl(path):
            if isinstance(rec, dict) and rec.get("record") is None \
                    and rec.get("schema_version") == 1:           # runs, the baselines' too
                validate_record(rec, source)
                checked += 1
    assert checked > 1000


def _mutations(good, count, seed=7):
    """`count` copies of `good`, each with one leaf or key changed at random."""
    rng = random.Random(seed)
    values = [-5, -1e-9, 0, 1, 1.5, 2 ** 70, 1e308, -1e308, None, True, "x", "", [], {},
              [1], {"a": 1}, "512,256", "mnist"]
    for _ in range(count):
        rec = copy.deepcopy(good)
        node, key = rec, None
        path = []
        while True:                         # walk down to a random place
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            if not keys:
                break
            key = rng.choice(keys)
            path.append(key)
            if not isinstance(node[key], (dict, list)) or rng.random() < 0.25:
                break
            node = node[key]
        if key is None:
            continue
        if isinstance(node, dict) and rng.random() < 0.15:
            del node[key]
        else:
            node[key] = rng.choice(values)
        yield rec


def test_the_compiled_validator_never_accepts_what_jsonschema_rejects(good):
    pytest.importorskip("jsonschema_rs")
    import analysis.records as records
    strict = records._validator()
    accepted = 0
    for rec in _mutations(good, 800):
        if records._fast_valid(rec):
            assert strict.is_valid(rec), rec
            accepted += 1
    assert 100 < accepted < 700             # the mutations break some records, not all


def test_a_bad_record_among_many_is_still_caught(tmp_path, good):
    lines = []
    for i in range(2000):
        rec = copy.deepcopy(good)
        rec["run_id"] = f"{good['run_id']}-{i}"
        rec["epochs"][1]["wall_ms"] = 1.0 + i
        lines.append(json.dumps(rec))
    bad = json.loads(lines[1234])
    bad["epochs"][2]["stall_ms"] = -3.0
    lines[1234] = json.dumps(bad)
    f = tmp_path / "many.jsonl"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError, match=r"many.jsonl:1235: field 'epochs\[2\]\.stall_ms' is "
                                          r"-3.0; expected a value >= 0"):
        load_records(f)


def test_without_the_compiled_validator_the_same_records_pass_and_fail(good, monkeypatch):
    import analysis.records as records
    monkeypatch.setattr(records, "_fast_validator", lambda: None)
    validate_record(copy.deepcopy(good), "x:1")
    good["epochs"][0]["gpu_ms"] = -1
    with pytest.raises(RecordError, match=r"'epochs\[0\]\.gpu_ms' is -1; expected a value >= 0"):
        validate_record(good, "x:1")


def test_non_finite_numbers_are_named(good):
    good["config"]["lr"] = float("nan")
    with pytest.raises(RecordError, match="field 'config.lr' is not a finite number"):
        validate_record(good, "x:1")

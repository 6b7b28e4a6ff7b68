"""Loading and validating run records (analysis/records.py)."""
import copy
import json

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

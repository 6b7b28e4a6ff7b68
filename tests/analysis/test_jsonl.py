"""analysis/jsonl.py: the fast decoder and the json module read the same records."""
import json

import pytest

import analysis.jsonl as jsonl
from analysis.records import RecordError, load_file


def test_without_orjson_the_same_values_come_back(fixtures_dir, monkeypatch):
    pytest.importorskip("orjson")
    path = fixtures_dir / "records.jsonl"
    fast = list(jsonl.read_lines(path))
    monkeypatch.setattr(jsonl, "orjson", None)
    slow = list(jsonl.read_lines(path))
    assert [(s, v) for s, v, _ in fast] == [(s, v) for s, v, _ in slow]
    assert {strict for _, _, strict in fast} == {True}
    assert {strict for _, _, strict in slow} == {False}


def test_a_line_with_nan_is_read_by_the_json_module_and_named(tmp_path, fixtures_dir):
    rec = json.loads((fixtures_dir / "records.jsonl").read_text().splitlines()[0])
    rec["config"]["lr"] = float("nan")
    f = tmp_path / "nan.jsonl"
    f.write_text(json.dumps(rec) + "\n")               # NaN: not strict JSON
    assert [strict for _, _, strict in jsonl.read_lines(f)] == [False]
    with pytest.raises(RecordError, match=r"nan.jsonl:1: field 'config.lr' is not a finite"):
        load_file(f)

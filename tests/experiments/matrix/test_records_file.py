"""records.jsonl stays whole: an append that fails (a full disk, a short write) leaves no partial
line, and a torn last line left by a crash is set aside by the next runner."""
import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "experiments" / "matrix" / "run_matrix.py"

RECORD = json.dumps({"config": {"run_tag": "a"}, "status": "ok"})


@pytest.fixture
def records_file(matrix_module):
    return matrix_module("records_file")


def _short_then(error, real_write=os.write):
    """An os.write that writes half of the first call's data, then raises `error`."""
    calls = []

    def write(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:len(data) // 2]))
        raise error
    return write, calls


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   OSError(errno.EIO, "Input/output error")])
def test_a_failed_append_leaves_the_file_as_it_was(records_file, tmp_path, monkeypatch, error):
    f = tmp_path / "records.jsonl"
    f.write_text(RECORD + "\n")
    before = f.read_bytes()
    write, calls = _short_then(error)
    monkeypatch.setattr(os, "write", write)
    with pytest.raises(OSError) as raised:
        records_file.append_lines(f, [json.dumps({"big": "x" * 100_000})])
    monkeypatch.undo()
    assert raised.value.errno == error.errno
    assert len(calls) == 2                     # the short write was followed up, then failed
    assert f.read_bytes() == before            # no partial line


def test_a_write_that_makes_no_progress_is_an_error_not_a_loop(records_file, tmp_path,
                                                                monkeypatch):
    f = tmp_path / "records.jsonl"
    monkeypatch.setattr(os, "write", lambda fd, data: 0)
    with pytest.raises(OSError):
        records_file.append_lines(f, [RECORD])
    monkeypatch.undo()
    assert f.read_bytes() == b""


def test_a_failed_fsync_leaves_the_file_as_it_was(records_file, tmp_path, monkeypatch):
    f = tmp_path / "records.jsonl"
    f.write_text(RECORD + "\n")

    def fsync(fd):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError):
        records_file.append_lines(f, [RECORD])
    monkeypatch.undo()
    assert f.read_text() == RECORD + "\n"


@pytest.mark.parametrize("tail, why", [
    (RECORD[:25].encode(), "has no final newline"),              # a cut write
    (RECORD.encode(), "has no final newline"),                   # cut just before its newline
    (b'{"config": {"run_ta\n', "is not a JSON record"),          # a foreign broken line
    (b"\xff\xfe not UTF-8\n", "is not a JSON record"),
    (b"[1, 2]\n", "is not a JSON record"),                       # JSON, but not a record
])
def test_a_torn_last_line_is_moved_aside(records_file, tmp_path, tail, why):
    f = tmp_path / "records.jsonl"
    body = (RECORD + "\n") * 3
    f.write_bytes(body.encode() + tail)
    said = records_file.repair_torn_tail(f)
    assert said and why in said and "records.jsonl.torn" in said
    assert f.read_text() == body
    torn = tmp_path / "records.jsonl.torn"
    assert torn.read_bytes() == tail.rstrip(b"\n") + b"\n"
    # a second torn line is appended to the same file, the first kept
    f.write_text(body + "{")
    records_file.repair_torn_tail(f)
    assert torn.read_text("utf-8", "replace").splitlines()[-1] == "{"
    assert len(torn.read_bytes().splitlines()) == 2


@pytest.mark.parametrize("content", ["", RECORD + "\n", (RECORD + "\n") * 2 + "\n"])
def test_a_whole_file_is_left_alone(records_file, tmp_path, content):
    f = tmp_path / "records.jsonl"
    f.write_text(content)
    assert records_file.repair_torn_tail(f) is None
    assert f.read_text() == content
    assert not (tmp_path / "records.jsonl.torn").exists()
    assert records_file.repair_torn_tail(tmp_path / "absent.jsonl") is None


def test_a_long_torn_line_is_found_from_its_start(records_file, tmp_path):
    f = tmp_path / "records.jsonl"
    long_tail = '{"epochs": [' + ",".join(["1"] * 100_000)     # far more than one read block
    f.write_text(RECORD + "\n" + long_tail)
    records_file.repair_torn_tail(f)
    assert f.read_text() == RECORD + "\n"
    assert (tmp_path / "records.jsonl.torn").read_text() == long_tail + "\n"


def test_the_runner_repairs_a_torn_file_and_the_folder_stays_readable(tmp_path, fake_memstrat):
    out = tmp_path / "out"
    matrix = tmp_path / "m.toml"
    matrix.write_text("[axes]\nstrategy = ['pinned', 'um']\nepochs = 2\n")
    base = [sys.executable, str(RUNNER), str(matrix), "--out", str(out),
            "--memstrat", str(fake_memstrat)]
    assert subprocess.run(base, capture_output=True, timeout=120).returncode == 0
    lines = (out / "records.jsonl").read_text().splitlines()
    # the last record cut in the middle, as a kill during its write leaves it
    (out / "records.jsonl").write_text(lines[0] + "\n" + lines[1][:len(lines[1]) // 2])
    res = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "records.jsonl.torn" in res.stderr and "has no final newline" in res.stderr
    assert "1 recorded, 1 to run" in res.stdout          # the torn record's cell ran again
    recs = [json.loads(l) for l in (out / "records.jsonl").read_text().splitlines()]
    assert sorted(r["config"]["run_tag"] for r in recs) == sorted(
        json.loads(l)["config"]["run_tag"] for l in lines)
    from analysis.records import load_records
    assert len(load_records(out)) == 2                   # the report reads the folder

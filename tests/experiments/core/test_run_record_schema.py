"""The record memstrat writes (experiments/core/record.cpp) against its schema.

tests/cpu/test_record.cpp writes an example record of a finished run, of a failed one and of a
stream-scenario run and keeps the committed copies in tests/experiments/fixtures/ equal to what
to_json() writes; here those copies are checked against docs/schema/run_record.schema.json, and
their shape against a record the binary wrote on an H200 (recorded_run_h200.json; the paths in
its argv shortened). That record predates some options (--prefetch-chunk, the stream scenario):
keys the writer added since are allowed only where the schema marks them newer.
"""
import copy
import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def load(name):
    return json.loads((FIXTURES / name).read_text())


EXAMPLES = ["run_record_ok.json", "run_record_failed.json", "run_record_stream.json",
            "recorded_run_h200.json"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_records_validate(record_errors, name):
    assert record_errors(load(name)) == []


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_key_memstrat_writes_is_declared(undeclared_keys, name):
    # The schema allows unknown keys (readers ignore them), so validation alone would not
    # notice a key the writer added without documenting it.
    assert undeclared_keys(load(name)) == []


def _shape(value):
    """Keys all the way down; the API-call maps (function names) and list lengths left out."""
    if isinstance(value, dict):
        return {k: None if k in ("api_calls", "api_totals") else _shape(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return None


def _key_paths(value, path=""):
    """Every key path of a record ('config.depth', 'epochs[].wall_ms'); API-call maps opaque."""
    out = set()
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}".lstrip(".")
            out.add(p)
            if k not in ("api_calls", "api_totals"):
                out |= _key_paths(v, p)
    elif isinstance(value, list) and value:
        out |= _key_paths(value[0], path + "[]")
    return out


def test_writer_writes_the_keys_the_gpu_binary_wrote(schema_description):
    # The H200 record was written before some options existed; the writer must still write every
    # key that record has, and may write more only where the schema marks the key "Newer"
    # (absent from records written before it existed).
    writer = _key_paths(load("run_record_ok.json"))
    gpu = _key_paths(load("recorded_run_h200.json"))
    assert sorted(gpu - writer) == []
    not_newer = [k for k in sorted(writer - gpu)
                 if "Newer." not in (schema_description(k) or "")]
    assert not_newer == [], "keys the H200 record lacks that the schema does not mark newer"


def test_stream_record_has_the_shape_of_any_other_run():
    # Same keys as a static run: the stream options and figures are null there, never absent.
    assert _shape(load("run_record_stream.json")) == _shape(load("run_record_ok.json"))


def test_config_streams_is_the_copy_streams_option(describe):
    (opt,) = [o for o in describe["train_options"] if o["name"] == "--copy-streams"]
    assert opt["record_key"] == "streams"
    assert "streams" in load("run_record_ok.json")["config"]


def test_failed_record_keeps_what_it_had(record_errors):
    rec = load("run_record_failed.json")
    assert rec["status"] == "failed" and rec["error"]
    assert "summary" not in rec and rec["epochs"] == []
    ok = load("run_record_ok.json")
    del ok["summary"]                        # an ok record must have its summary
    assert any("summary" in e for e in record_errors(ok))


@pytest.mark.parametrize("mutate, where", [
    (lambda r: r["config"].__setitem__("batch", 0), "config/batch"),
    (lambda r: r["epochs"][0].__setitem__("gpu_ms", None), "epochs/0/gpu_ms"),
    (lambda r: r["epochs"][0]["api_calls"].__setitem__("cudaMalloc", -1), "epochs/0/api_calls"),
    (lambda r: r.__setitem__("schema_version", 2), "schema_version"),
    (lambda r: r["env"].__setitem__("pcie_gen", "5"), "env/pcie_gen"),
])
def test_schema_rejects(record_errors, mutate, where):
    rec = copy.deepcopy(load("run_record_ok.json"))
    mutate(rec)
    assert any(e.startswith(where) for e in record_errors(rec)), record_errors(rec)


RANK = {"rank": 0, "gpu_ms": 7.5, "stall_ms": 1.25, "compute_ms": 6.0, "idle_ms": 0.25,
        "reduce_ms": 2.0, "copy_ms": None, "h2d_bytes": 1000, "peer_bytes": 0}


def with_per_gpu(*ranks):
    rec = copy.deepcopy(load("run_record_ok.json"))
    rec["config"].update(gpus=len(ranks), reduce="ring", processes="one")
    for e in rec["epochs"]:
        e["per_gpu"] = [dict(r) for r in ranks]
        e["reduce_ms"] = max(r.get("reduce_ms") or 0.0 for r in ranks)
    return rec


# Several GPUs: every rank's figures in each epoch (tests/cpu/test_record.cpp checks the writer)
def test_per_gpu_figures_validate_and_are_declared(record_errors, undeclared_keys):
    rec = with_per_gpu(RANK, dict(RANK, rank=1, copy_ms=0.5))
    assert record_errors(rec) == [] and undeclared_keys(rec) == []


# A build from before the reduction's own time wrote every rank's figures without it: its records
# still validate (the regression guard reads the older build's records beside the newer's).
def test_per_gpu_figures_without_the_reduction_validate(record_errors):
    older = {k: v for k, v in RANK.items() if k != "reduce_ms"}
    rec = with_per_gpu(older, dict(older, rank=1))
    for e in rec["epochs"]:
        del e["reduce_ms"]
    assert record_errors(rec) == []


@pytest.mark.parametrize("ranks, where", [
    ((RANK,), "epochs/0/per_gpu"),                                  # one rank is not several
    ((RANK, {k: v for k, v in RANK.items() if k != "gpu_ms"}), "epochs/0/per_gpu/1"),
    ((RANK, dict(RANK, rank=1, stall_ms=-1.0)), "epochs/0/per_gpu/1/stall_ms"),
    ((RANK, dict(RANK, rank=1, reduce_ms=None)), "epochs/0/per_gpu/1/reduce_ms"),
    ((RANK, dict(RANK, rank=1, extra=1)), "epochs/0/per_gpu/1"),
])
def test_schema_rejects_bad_per_gpu_figures(record_errors, ranks, where):
    errors = record_errors(with_per_gpu(*ranks))
    assert any(e.startswith(where) for e in errors), errors


def test_analysis_reads_the_examples():
    from analysis.records import validate_record
    ok = validate_record(load("run_record_ok.json"), "ok")
    assert ok["config"]["hidden"] == [256]
    failed = validate_record(load("run_record_failed.json"), "failed")
    assert failed["status"] == "failed"


def test_the_schema_declares_each_key_once():
    # json.loads keeps the last of two equal keys, so a key declared twice (as two branches may
    # each add it) silently replaces the first declaration.
    def refuse_duplicates(pairs):
        keys = [k for k, _ in pairs]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        assert not twice, f"declared more than once in one object: {twice}"
        return dict(pairs)

    schema = Path(__file__).resolve().parents[3] / "docs" / "schema" / "run_record.schema.json"
    json.loads(schema.read_text(), object_pairs_hook=refuse_duplicates)

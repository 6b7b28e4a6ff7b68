"""The regression guard analysis/compare.py on the compare_*.jsonl fixtures."""
import json
import subprocess
import sys

import pytest

from analysis import compare

from conftest import REPO


def run(fixtures_dir, base, new, *extra):
    return compare.main([str(fixtures_dir / base), str(fixtures_dir / new), *extra])


def test_planted_slowdown_is_flagged(fixtures_dir, capsys):
    assert run(fixtures_dir, "compare_base.jsonl", "compare_slow.jsonl") == 1
    out = capsys.readouterr().out
    pinned = next(l for l in out.splitlines() if l.startswith("pinned "))
    assert "REGRESSION" in pinned
    assert "1 regression " in out
    # the other configurations did not move
    assert sum("REGRESSION" in l for l in out.splitlines()) == 1


def test_same_population_passes(fixtures_dir, capsys):
    assert run(fixtures_dir, "compare_base.jsonl", "compare_same.jsonl") == 0
    assert "0 regressions" in capsys.readouterr().out


def test_overlapping_noisy_sets_are_not_flagged(fixtures_dir, capsys, tmp_path):
    out_json = tmp_path / "c.json"
    assert run(fixtures_dir, "compare_noisy_base.jsonl", "compare_noisy_new.jsonl",
               "--json", str(out_json)) == 0
    doc = json.loads(out_json.read_text())
    (c,) = doc["configurations"]
    assert c["ratio"] > 1.10                       # the medians differ by ~15% ...
    assert c["verdict"] == "indistinguishable (intervals overlap)"   # ... but not reliably
    assert c["new"]["ci_low"] <= c["base"]["ci_high"]
    assert c["ratio_ci_low"] < 1.0 < c["ratio_ci_high"]


def test_a_lower_threshold_still_needs_separated_intervals(fixtures_dir):
    assert run(fixtures_dir, "compare_noisy_base.jsonl", "compare_noisy_new.jsonl",
               "--threshold", "0") == 0
    assert run(fixtures_dir, "compare_base.jsonl", "compare_slow.jsonl",
               "--threshold", "0.2") == 0


def test_configurations_in_one_set_are_listed_not_compared(fixtures_dir, capsys):
    assert run(fixtures_dir, "compare_base.jsonl", "compare_same.jsonl", "--json", "-") == 0
    doc = json.loads(capsys.readouterr().out)
    compared = [c["configuration"] for c in doc["configurations"]]
    assert len(compared) == 3
    assert not any(c.startswith(("um ", "zero-copy ")) for c in compared)
    assert [c.split()[0] for c in doc["only_in_base"]] == ["um"]
    assert [c.split()[0] for c in doc["only_in_new"]] == ["zero-copy"]
    assert doc["threshold"] == 0.10 and doc["regressions"] == 0
    for c in doc["configurations"]:
        assert c["base"]["n_processes"] == c["new"]["n_processes"] == 5
        assert c["ratio_ci_low"] <= c["ratio"] <= c["ratio_ci_high"]


def test_single_process_sets_are_not_judged(fixtures_dir, capsys):
    assert run(fixtures_dir, "records.jsonl", "records.jsonl") == 0
    out = capsys.readouterr().out
    assert "not judged: n=1/1, no interval" in out and "(no interval)" in out


@pytest.mark.parametrize("base, new, message", [
    ("nope.jsonl", "compare_base.jsonl", "no such file"),
    ("compare_base.jsonl", "old_schema.jsonl", "schema_version 0 is not supported"),
    ("compare_base.jsonl", "malformed.jsonl", "not valid JSON"),
])
def test_usage_errors_exit_2(fixtures_dir, capsys, base, new, message):
    assert run(fixtures_dir, base, new) == 2
    assert message in capsys.readouterr().err


def test_no_common_configuration_exits_2(fixtures_dir, tmp_path, capsys):
    other = []
    for line in (fixtures_dir / "compare_same.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["config"]["hidden"] = [512]
        other.append(json.dumps(rec))
    (tmp_path / "wide.jsonl").write_text("\n".join(other) + "\n")
    assert compare.main([str(fixtures_dir / "compare_base.jsonl"),
                         str(tmp_path / "wide.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "no configuration with wall_ms in both" in err
    assert "4 only in BASE, 4 only in NEW" in err


def test_cli_as_script(fixtures_dir):
    res = subprocess.run([sys.executable, str(REPO / "analysis" / "compare.py"),
                          str(fixtures_dir / "compare_base.jsonl"),
                          str(fixtures_dir / "compare_slow.jsonl")],
                         capture_output=True, text=True)
    assert res.returncode == 1, res.stderr
    assert "NEW/BASE [95% CI]" in res.stdout
    bad = subprocess.run([sys.executable, str(REPO / "analysis" / "compare.py"), "one"],
                         capture_output=True, text=True)
    assert bad.returncode == 2

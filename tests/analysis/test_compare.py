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
    assert c["ratio"] > 1.10                       # the sets differ by ~15% ...
    assert c["verdict"].startswith("not significantly different (Holm p=")  # ... not reliably
    assert c["p_holm"] >= 0.05 and c["ratio_ci_coverage"] >= 0.95
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
        assert c["base"]["n_processes"] == c["new"]["n_processes"] == 10
        assert c["ratio_ci_low"] <= c["ratio"] <= c["ratio_ci_high"]


def test_single_process_sets_are_not_judged_and_cannot_pass(fixtures_dir, capsys):
    assert run(fixtures_dir, "records.jsonl", "records.jsonl") == 2
    err = capsys.readouterr().err
    assert "not judged: n=1/1, too few processes" in err and "(medians; no interval)" in err
    assert "could not pass Holm's correction" in err


def test_a_guard_too_small_to_flag_anything_exits_2(fixtures_dir, tmp_path, capsys):
    # 3 processes against 3 over 3 configurations: even total separation gives p = 0.1
    base = [json.loads(l) for l in (fixtures_dir / "compare_base.jsonl").read_text().splitlines()]
    slow = [json.loads(l) for l in (fixtures_dir / "compare_slow.jsonl").read_text().splitlines()]
    for name, recs in (("b.jsonl", base), ("s.jsonl", slow)):
        kept, seen = [], {}
        for r in recs:
            k = r["config"]["strategy"]
            seen[k] = seen.get(k, 0) + 1
            if seen[k] <= 3:
                kept.append(json.dumps(r))
        (tmp_path / name).write_text("\n".join(kept) + "\n")
    assert run(tmp_path, "b.jsonl", "s.jsonl") == 2
    assert "run more processes per configuration" in capsys.readouterr().err


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
    # and why: the one field in which the two sets share no value
    assert err.rstrip().endswith("they share no value of hidden: BASE (256,); NEW (512,)"), err


def test_any_epochs_pairs_sets_run_for_different_epoch_counts(fixtures_dir, tmp_path, capsys):
    """A set of 21 epochs a process against one of fewer: different experiments unless
    --any-epochs pairs them; the planted slowdown is then found, and the output says how the
    configurations were paired."""
    longer = []
    for line in (fixtures_dir / "compare_slow.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["config"]["epochs"] += 17
        rec["epochs"] += [dict(rec["epochs"][-1], epoch=rec["epochs"][-1]["epoch"] + 1 + i)
                          for i in range(17)]
        longer.append(json.dumps(rec))
    (tmp_path / "longer.jsonl").write_text("\n".join(longer) + "\n")
    base = str(fixtures_dir / "compare_base.jsonl")
    assert compare.main([base, str(tmp_path / "longer.jsonl")]) == 2
    assert "they share no value of epochs" in capsys.readouterr().err
    assert compare.main([base, str(tmp_path / "longer.jsonl"), "--any-epochs"]) == 1
    out = capsys.readouterr().out
    assert "note: paired whatever the epoch count (BASE 3, NEW 20 epochs a process)" in out, out
    pinned = next(l for l in out.splitlines() if l.startswith("pinned "))
    assert "REGRESSION" in pinned and "/e4" not in pinned and "/e21" not in pinned
    assert sum("REGRESSION" in l for l in out.splitlines()) == 1


def test_disjoint_fields_names_every_field_without_a_common_value():
    base = [compare.GroupKey("G", "pinned", "static", "u8", 256, (256,), "cublas", None, None, 4,
                             (("fused", True),)),
            compare.GroupKey("G", "resident", "static", "u8", 256, (256,), "cublas", None, None,
                             4, (("fused", True),))]
    new = [compare.GroupKey("G", "pinned", "static", "u8", 256, (256,), "cublas", None, None, 21,
                            (("fused", True), ("processes", "per-gpu")))]
    # strategy overlaps (pinned), epochs does not, processes is absent (None) from BASE
    assert compare.disjoint_fields(base, new) == ["epochs: BASE 4; NEW 21",
                                                  "processes: BASE None; NEW per-gpu"]
    assert compare.disjoint_fields(base, base) == []


def test_cli_as_script(fixtures_dir):
    res = subprocess.run([sys.executable, str(REPO / "analysis" / "compare.py"),
                          str(fixtures_dir / "compare_base.jsonl"),
                          str(fixtures_dir / "compare_slow.jsonl")],
                         capture_output=True, text=True)
    assert res.returncode == 1, res.stderr
    assert "NEW/BASE [interval]" in res.stdout
    bad = subprocess.run([sys.executable, str(REPO / "analysis" / "compare.py"), "one"],
                         capture_output=True, text=True)
    assert bad.returncode == 2


def _on_gpu(fixtures_dir, name, gpu, slower=1.0, tag=""):
    """The fixture's records as if run on `gpu` (each its own run), `slower` times the time."""
    out = []
    for line in (fixtures_dir / name).read_text().splitlines():
        rec = json.loads(line)
        rec["env"]["gpu_name"] = gpu
        rec["run_id"] += tag
        for ep in rec["epochs"]:
            ep["wall_ms"] *= slower
        out.append(json.dumps(rec))
    return out


def test_a_set_that_adds_another_gpu_is_refused_not_hidden(fixtures_dir, tmp_path, capsys):
    # BASE on the H200; NEW = the H200 unchanged + an A100 three times slower. Matched without
    # the GPU, one of the two would silently stand for both: "0 regressions", exit 0.
    new = tmp_path / "new.jsonl"
    new.write_text("\n".join(_on_gpu(fixtures_dir, "compare_same.jsonl", "NVIDIA H200")
                             + _on_gpu(fixtures_dir, "compare_same.jsonl", "NVIDIA A100", 3.0,
                                       "-a100")) + "\n")
    assert compare.main([str(fixtures_dir / "compare_base.jsonl"), str(new)]) == 2
    err = capsys.readouterr().err
    assert "BASE ran on NVIDIA H200 and NEW on 2 GPUs (NVIDIA A100, NVIDIA H200)" in err
    assert "split the records by env.gpu_name" in err


def test_sets_of_the_same_gpus_are_compared_gpu_by_gpu(fixtures_dir, tmp_path, capsys):
    base, new = tmp_path / "base.jsonl", tmp_path / "new.jsonl"
    base.write_text("\n".join(_on_gpu(fixtures_dir, "compare_base.jsonl", "NVIDIA H200")
                              + _on_gpu(fixtures_dir, "compare_base.jsonl", "NVIDIA A100", 1.0,
                                        "-a100")) + "\n")
    new.write_text("\n".join(_on_gpu(fixtures_dir, "compare_same.jsonl", "NVIDIA H200")
                             + _on_gpu(fixtures_dir, "compare_same.jsonl", "NVIDIA A100", 3.0,
                                       "-a100")) + "\n")
    assert compare.main([str(base), str(new), "--json", "-"]) == 1
    doc = json.loads(capsys.readouterr().out)
    flagged = sorted(c["configuration"].split(":")[0] for c in doc["configurations"]
                     if c["verdict"] == "REGRESSION")
    assert flagged == ["NVIDIA A100"] * 3 and len(doc["configurations"]) == 6


def test_one_gpu_against_another_is_matched_with_a_note(fixtures_dir, tmp_path, capsys):
    new = tmp_path / "new.jsonl"
    new.write_text("\n".join(_on_gpu(fixtures_dir, "compare_same.jsonl", "NVIDIA A100",
                                     3.0)) + "\n")
    assert compare.main([str(fixtures_dir / "compare_base.jsonl"), str(new)]) == 1
    out = capsys.readouterr().out
    assert "note: BASE ran on NVIDIA H200, NEW on NVIDIA A100" in out
    assert "3 regressions" in out


def test_records_read_twice_are_one_process_each(fixtures_dir, tmp_path, capsys):
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text((fixtures_dir / "compare_same.jsonl").read_text() * 2)
    assert run(fixtures_dir, "compare_base.jsonl", str(doubled), "--json", "-") == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert {c["new"]["n_processes"] for c in doc["configurations"]} == {10}
    assert "40 duplicate records (same run_id) ignored" in captured.err


def test_a_torn_last_line_does_not_block_the_comparison(fixtures_dir, tmp_path, capsys):
    folder = tmp_path / "new"
    folder.mkdir()
    text = (fixtures_dir / "compare_same.jsonl").read_text()
    (folder / "records.jsonl").write_text(text + text.splitlines()[0][:300])
    assert run(fixtures_dir, "compare_base.jsonl", str(folder)) == 0
    assert "records.jsonl:41: torn last line, ignored" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["/nonexistent/x.json", "{tmp}"])
def test_an_unwritable_json_file_is_a_usage_error_not_a_verdict(fixtures_dir, tmp_path, capsys,
                                                              target):
    target = target.format(tmp=tmp_path)              # a folder
    assert run(fixtures_dir, "compare_base.jsonl", "compare_same.jsonl", "--json", target) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --json {target}: ") and "Traceback" not in err


def test_unreadable_inputs_exit_2_with_a_message(fixtures_dir, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "latin1.jsonl").write_bytes(b'{"error": "caf\xe9"}\n')
    for bad, message in ((tmp_path / "empty", "no records.jsonl"),
                         (tmp_path / "latin1.jsonl", "latin1.jsonl:1: not UTF-8 text")):
        assert compare.main([str(bad), str(fixtures_dir / "compare_base.jsonl")]) == 2
        assert message in capsys.readouterr().err


def test_seven_processes_a_side_can_flag_one_of_34_configurations(fixtures_dir, tmp_path):
    # the guard's own size: 34 configurations x 7 processes; one 15% slower must be flagged
    base, new = [], []
    for c in range(34):
        for r in range(7):
            for side, out, factor in (("b", base, 1.0), ("n", new, 1.15 if c == 5 else 1.0)):
                rec = json.loads((fixtures_dir / "compare_base.jsonl").read_text().splitlines()[0])
                rec["run_id"] = f"{side}-{c}-{r}"
                rec["config"]["hidden"] = [64 + c]
                for ep in rec["epochs"]:
                    ep["wall_ms"] = 5.0 * (1 + 0.001 * r) * factor
                out.append(json.dumps(rec))
    (tmp_path / "b.jsonl").write_text("\n".join(base) + "\n")
    (tmp_path / "n.jsonl").write_text("\n".join(new) + "\n")
    assert compare.main([str(tmp_path / "b.jsonl"), str(tmp_path / "n.jsonl")]) == 1


def test_labels_name_the_varying_options_a_configuration_sets():
    """An option that varies across the compared configurations is named where a configuration
    sets it and left out where it does not (None), so labels stay apart and readable."""
    from analysis.aggregate import GroupKey
    common = dict(gpu="", scenario="static", transfer="u8", batch=256, hidden=(256,),
                  gemm="cublas", depth=None, streams=None, epochs=21)
    plain = GroupKey(strategy="pinned", other=(("advise", None), ("step", "single-launch")),
                     **common)
    hinted = GroupKey(strategy="um-advise", other=(("advise", "read-mostly"),
                                                   ("step", "single-launch")), **common)
    assert compare.label(plain, ["advise", "step"]) == \
        "pinned static/u8/b256/h256/cublas/e21 [step=single-launch]"
    assert compare.label(hinted, ["advise", "step"]).endswith(
        "[advise=read-mostly, step=single-launch]")
    assert compare.label(plain, ["advise"]) == "pinned static/u8/b256/h256/cublas/e21"

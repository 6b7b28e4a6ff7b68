"""analysis/results_readme.py: a results set's README.md and manifest.json come from its records."""
import json
import shutil

from analysis import results_readme as R


def make_set(tmp_path, fixtures_dir):
    root = tmp_path / "set"
    (root / "records").mkdir(parents=True)
    shutil.copy(fixtures_dir / "processes.jsonl", root / "records" / "results.jsonl")
    return root


def test_readme_and_manifest_name_commit_gpu_files_and_stage_times(tmp_path, fixtures_dir):
    root = make_set(tmp_path, fixtures_dir)
    assert R.main([str(root), "--stage-seconds", "matrix=540,report=20"]) == 0
    m = json.loads((root / "manifest.json").read_text())
    assert m["gpu"] == "NVIDIA H200" and m["commit"] and m["stage_seconds"] == {
        "matrix": 540, "report": 20}
    text = (root / "README.md").read_text()
    assert m["commit"] in text and "records/results.jsonl" in text and "9 min 20 s" in text
    # a later sitting adds its stages and keeps the earlier ones
    assert R.main([str(root), "--stage-seconds", "baselines=60"]) == 0
    assert json.loads((root / "manifest.json").read_text())["stage_seconds"] == {
        "matrix": 540, "report": 20, "baselines": 60}


def test_a_set_of_several_commits_is_refused(tmp_path, fixtures_dir, capsys):
    root = make_set(tmp_path, fixtures_dir)
    lines = (root / "records" / "results.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["env"]["git_sha"] = "0123456789ab"
    rec["run_id"] += "-other"                    # another run, of another build
    (root / "records" / "other.jsonl").write_text(json.dumps(rec) + "\n")
    assert R.main([str(root)]) == 2
    assert "several commits" in capsys.readouterr().err
    assert not (root / "manifest.json").exists()


def test_bad_stage_seconds_and_an_empty_set_are_usage_errors(tmp_path, fixtures_dir, capsys):
    root = make_set(tmp_path, fixtures_dir)
    assert R.main([str(root), "--stage-seconds", "matrix=ten"]) == 2
    assert R.main([str(tmp_path / "nothing")]) == 2
    assert "no records" in capsys.readouterr().err


def test_a_records_file_copied_into_the_set_counts_its_runs_once(tmp_path, fixtures_dir, capsys):
    root = make_set(tmp_path, fixtures_dir)
    shutil.copy(root / "records" / "results.jsonl", root / "records" / "copy.jsonl")
    n = len((root / "records" / "results.jsonl").read_text().splitlines())
    assert R.main([str(root)]) == 0
    contents = json.loads((root / "manifest.json").read_text())["records"]
    counts = sorted(sum(kinds.values()) for kinds in contents.values())
    assert counts == [0, n]                       # the first file read holds them
    assert f"{n} duplicate records (same run_id) ignored" in capsys.readouterr().err


def test_unreadable_manifest_records_or_folder_exit_2(tmp_path, fixtures_dir, capsys):
    root = make_set(tmp_path, fixtures_dir)
    (root / "manifest.json").write_bytes(b'{"note": "caf\xe9"}')
    assert R.main([str(root)]) == 2
    assert "manifest.json: cannot read" in capsys.readouterr().err
    (root / "manifest.json").unlink()
    (root / "records" / "more.jsonl").write_bytes(b"\xff\n")
    assert R.main([str(root)]) == 2
    assert "more.jsonl:1: not UTF-8 text" in capsys.readouterr().err
    (root / "records" / "more.jsonl").unlink()
    (root / "README.md").mkdir()                  # cannot be written
    assert R.main([str(root)]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "README.md" in err


def test_a_baseline_that_names_another_commit_makes_a_set_of_several(tmp_path, fixtures_dir,
                                                                     capsys):
    root = make_set(tmp_path, fixtures_dir)
    rec = json.loads((root / "records" / "results.jsonl").read_text().splitlines()[0])
    rec["config"]["framework"] = "pytorch"
    rec["env"].update(git_sha="0123456789ab", git_dirty=True)
    rec["run_id"] += "-torch"
    (root / "baselines" / "records").mkdir(parents=True)
    (root / "baselines" / "records" / "pipelines.jsonl").write_text(json.dumps(rec) + "\n")
    assert R.main([str(root)]) == 2
    err = capsys.readouterr().err
    assert "several commits" in err and "0123456789ab in baselines/records/pipelines.jsonl" in err


def test_expect_commit_guards_a_resumed_set(tmp_path, fixtures_dir, capsys):
    root = make_set(tmp_path, fixtures_dir)
    commit = json.loads((root / "records" / "results.jsonl").read_text().splitlines()[0])[
        "env"]["git_sha"]
    assert R.main([str(root), "--expect-commit", commit]) == 0
    assert R.main([str(root), "--expect-commit", commit + "0" * (40 - len(commit))]) == 0
    assert R.main([str(root), "--expect-commit", "fedcba987654"]) == 2
    err = capsys.readouterr().err
    assert f"holds records of commit {commit}" in err and "--out DIR" in err
    assert not (root / "manifest.json").exists()        # a check writes nothing
    assert R.main([str(tmp_path / "fresh"), "--expect-commit", "fedcba987654"]) == 0


def test_a_multi_gpu_set_names_what_it_holds_and_no_report_of_the_matrix(tmp_path, fixtures_dir):
    """The scaling stage's set: no records/results.jsonl, so no report.md and no compare.py line;
    its records described, and the generated files it does hold named."""
    root = tmp_path / "set-x2"
    (root / "records").mkdir(parents=True)
    (root / "baselines").mkdir()
    shutil.copy(fixtures_dir / "processes.jsonl", root / "records" / "scaling.jsonl")
    (root / "scaling_check.md").write_text("# check\n")
    (root / "baselines" / "vs_data_parallel.md").write_text("# table\n")
    assert R.main([str(root)]) == 0
    text = (root / "README.md").read_text()
    assert "| `records/scaling.jsonl` | data-parallel training on one GPU and two" in text
    assert ("Generated from the records: `scaling_check.md` (the N-GPU scaling model against "
            "the measured runs) and `baselines/*.md`.") in text
    assert "report.md" not in text and "summary.csv" not in text and "compare.py" not in text
    assert "# all of it, on a machine of as many GPUs" in text


def test_a_one_gpu_set_names_its_report_and_the_regression_guard(tmp_path, fixtures_dir):
    root = make_set(tmp_path, fixtures_dir)
    for name in ("report.md", "summary.csv", "cost_model.csv"):
        (root / name).write_text("x\n")
    (root / "plots").mkdir()
    assert R.main([str(root)]) == 0
    text = (root / "README.md").read_text()
    assert ("Generated from the records: `report.md` / `report.html` (tables, figures, the cost "
            "model), `summary.csv` (one row per configuration), `plots/`, and "
            "`cost_model.csv`.") in text
    assert "scaling_check.md" not in text and "baselines/*.md" not in text
    assert "python3 analysis/compare.py docs/results/<gpu>/records/results.jsonl" in text
    assert "# all of it, on your GPU" in text


HOST = {"cpu_model": "Intel(R) Xeon(R) Processor", "cpu_count": 16,
        "host_memory_bytes": 135148564480}


def make_set_on(tmp_path, fixtures_dir, host=HOST, folder=None):
    """make_set with every record's env naming `host` (the fixture's records predate it); into
    `folder`/records.jsonl (a matrix runner's folder) when given."""
    lines = (fixtures_dir / "processes.jsonl").read_text().splitlines()
    recs = [json.loads(l) for l in lines if l.strip()]
    for r in recs:
        r["env"].update(host)
    if folder is not None:
        folder.mkdir()
        (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        return folder
    root = tmp_path / "set"
    (root / "records").mkdir(parents=True)
    (root / "records" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return root


# One set = one machine: the host's CPUs move the per-batch launch forms' timings (two H200
# machines of different hosts differ there), so records of two machines are never one set.
def test_a_set_of_several_machines_is_refused(tmp_path, fixtures_dir, capsys):
    root = make_set_on(tmp_path, fixtures_dir)
    assert R.main([str(root)]) == 0
    m = json.loads((root / "manifest.json").read_text())["machine"]
    assert set(m) == {"cpu_model", "cpu_count", "host_memory_bytes"}
    assert f"{m['cpu_count']} CPUs" in (root / "README.md").read_text()
    rec = json.loads((root / "records" / "results.jsonl").read_text().splitlines()[0])
    rec["env"]["cpu_count"] = 2 * rec["env"]["cpu_count"]
    rec["run_id"] += "-other"                    # another run, on another host
    (root / "records" / "other.jsonl").write_text(json.dumps(rec) + "\n")
    assert R.main([str(root)]) == 2
    err = capsys.readouterr().err
    assert "several machines" in err and f"{2 * m['cpu_count']} CPUs, 126 GiB: 1 records" in err


def test_expect_machine_compares_the_records_with_this_host(tmp_path, fixtures_dir, capsys,
                                                            monkeypatch):
    root = make_set_on(tmp_path, fixtures_dir)
    rec = json.loads((root / "records" / "results.jsonl").read_text().splitlines()[0])
    env = rec["env"]
    here = (env["cpu_model"], env["cpu_count"], env["host_memory_bytes"])
    monkeypatch.setattr(R, "this_machine", lambda: here)
    assert R.main([str(root), "--expect-machine"]) == 0
    monkeypatch.setattr(R, "this_machine", lambda: (here[0], here[1] * 2, here[2]))
    assert R.main([str(root), "--expect-machine"]) == 2
    assert "another machine" in capsys.readouterr().err
    sha = env["git_sha"]
    assert R.main([str(root), "--expect-commit", sha, "--expect-machine"]) == 2
    monkeypatch.setattr(R, "this_machine", lambda: here)
    assert R.main([str(root), "--expect-commit", sha, "--expect-machine"]) == 0
    assert R.main([str(root), "--expect-commit", "fedcba987654", "--expect-machine"]) == 2
    assert not (root / "manifest.json").exists(), "a check writes nothing"


def test_a_matrix_runners_folder_is_checked_too(tmp_path, fixtures_dir, monkeypatch):
    out = make_set_on(tmp_path, fixtures_dir, folder=tmp_path / "work")
    monkeypatch.setattr(R, "this_machine", lambda: ("another CPU", 1, 1 << 30))
    assert R.main([str(out), "--expect-machine"]) == 2
    monkeypatch.setattr(R, "this_machine", lambda: tuple(HOST.values()))
    assert R.main([str(out), "--expect-machine"]) == 0


def test_records_that_do_not_name_their_host_are_not_refused(tmp_path, fixtures_dir,
                                                             monkeypatch):
    root = make_set(tmp_path, fixtures_dir)          # records older than env.cpu_count
    monkeypatch.setattr(R, "this_machine", lambda: tuple(HOST.values()))
    assert R.main([str(root), "--expect-machine"]) == 0
    assert R.main([str(root)]) == 0
    assert json.loads((root / "manifest.json").read_text())["machine"] is None


def test_this_machine_reads_the_host_as_memstrat_does():
    m = R.this_machine()
    assert m is not None and m[1] >= 1 and m[2] > 0

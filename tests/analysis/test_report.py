"""The report (analysis/report.py) builds from the fixtures."""
import json
import subprocess
import sys

import pytest

from analysis import report
from analysis.plots import PLOTS

from conftest import REPO


@pytest.fixture(scope="module")
def built(fixtures_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    res = report.build_report([fixtures_dir / "records.jsonl"], out)
    return out, res


def test_outputs_exist(built):
    out, res = built
    for name in ("report.md", "report.html", "summary.csv"):
        assert (out / name).stat().st_size > 0
    assert sorted(p.name for p in res["plots"]) == sorted(f"{n}.png" for n in PLOTS)


def test_markdown_states_environment_and_ranking(built):
    md = (built[0] / "report.md").read_text()
    for text in ("NVIDIA H200", "cc 9.0", "13.0 / 13.0", "gen 5 x16", "4f3a9c1e2b7d",
                 "node-1", "## Environment", "Ranking by median ms/epoch"):
        assert text in md, text
    # one process per configuration: listed by median (resident fastest, pageable
    # slowest) but never ranked, and every row says why
    static = md.split("### static data")[1].split("###")[0]
    rows = [l for l in static.splitlines() if l.startswith("| none |")]
    assert len(rows) == 7
    assert rows[0].startswith("| none | resident |")
    assert "pageable" in rows[-1]
    assert all("n=1, no interval" in r and "1 (profiler on)" in r for r in rows)
    assert not any(l.startswith("| 1 ") for l in static.splitlines())
    assert "fewer than 3 processes, not tested, so no order is claimed" in static
    assert "Every configuration has fewer than 3 processes (n=1, no interval)" in md
    # refresh ranking exists too, and the failed strategy is called out
    assert "### refresh" in md
    assert "Not ranked, every run failed: um-advise" in md
    assert "## Failed runs (1)" in md and "cudaErrorInvalidDevice" in md


def test_markdown_notes_null_values(built):
    md = (built[0] / "report.md").read_text()
    assert "## Null and unavailable values" in md
    assert "null for resident, pageable, pinned, double-buffer, zero-copy" in md
    assert "never as 0" in md


def test_html_is_self_contained(built):
    html = (built[0] / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(PLOTS)
    assert 'src="plots/' not in html
    assert "NVIDIA H200" in html and "<table>" in html


def test_cli_as_script(fixtures_dir, tmp_path):
    res = subprocess.run([sys.executable, str(REPO / "analysis" / "report.py"),
                          str(fixtures_dir / "records.jsonl"), "--out", str(tmp_path)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "report.html").exists()


def test_cli_reports_bad_records(fixtures_dir, tmp_path, capsys):
    rc = report.main([str(fixtures_dir / "old_schema.jsonl"), "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "old_schema.jsonl:1:" in err and "schema_version 0 is not supported" in err


def test_two_configuration_sets_get_separate_figures(fixtures_dir, tmp_path):
    lines = (fixtures_dir / "records.jsonl").read_text().splitlines()
    other = []
    for line in lines[:8]:
        rec = json.loads(line)
        rec["config"]["hidden"] = [512, 256]
        rec["run_id"] += "-h512x256"            # another run
        other.append(json.dumps(rec))
    f = tmp_path / "mixed.jsonl"
    f.write_text("\n".join(lines + other) + "\n")
    res = report.build_report([f], tmp_path / "out")
    names = {p.name for p in res["plots"]}
    assert "ms_per_epoch_1.png" in names and "ms_per_epoch_2.png" in names
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Configuration set 1" in md and "hidden 512x256" in md


@pytest.fixture(scope="module")
def processes_report(fixtures_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("processes")
    report.build_report([fixtures_dir / "processes.jsonl"], out, pinned_bw=25e9)
    return (out / "report.md").read_text(), out


def test_ranking_comes_from_tests(processes_report):
    md, _ = processes_report
    static = md.split("### static data")[1].split("###")[0]
    ranked = [l.split(" | ")[:2] for l in static.splitlines() if l.startswith("| ")
              and not l.startswith(("| rank", "|---"))]
    assert ranked == [["| 1", "resident (one launch per epoch)"],
                      ["| 2 (tie)", "double-buffer (depth 2, 1 copy stream)"],
                      ["| 2 (tie)", "um-prefetch"],
                      ["| 4", "pinned"],
                      ["| none", "pageable"]]
    assert ("Rank 2 (tie): double-buffer (depth 2, 1 copy stream), um-prefetch: as many "
            "strategies are significantly faster than each") in static
    um = next(l for l in static.splitlines() if "| um-prefetch |" in l)
    assert "UNSTABLE" in um and "10 (profiler off)" in um and "±" in um
    pageable = next(l for l in static.splitlines() if "| pageable |" in l)
    assert "n=1, no interval" in pageable and "not assessed (n<6)" in pageable
    assert "profiler ON" not in static


def test_report_states_profiler_and_floors(processes_report):
    md, out = processes_report
    assert "Timing comes from runs with the CUPTI profiler off in every configuration" in md
    assert "1 configuration is UNSTABLE" in md
    assert "no measured pinned bulk bandwidth" not in md     # bandwidth was given
    rows = [l for l in md.split("## All configurations")[1].splitlines()
            if l.startswith("| pinned |")]
    assert rows and "10 (profiler off) | 1 |" in rows[0]
    import csv
    with open(out / "summary.csv", newline="") as fh:
        pinned = next(r for r in csv.DictReader(fh) if r["strategy"] == "pinned")
    assert float(pinned["floor_ms"]) > float(pinned["compute_floor_ms"]) > 0


def test_without_bandwidth_the_report_says_why(built):
    md = (built[0] / "report.md").read_text()
    assert "Transfer floor and floor: not drawn, no measured pinned bulk bandwidth given" in md


def test_single_process_records_still_report(tmp_path, fixtures_dir):
    # one process per configuration (the main fixture): no interval, so nothing is ranked
    rc = report.main([str(fixtures_dir / "records.jsonl"), "--out", str(tmp_path)])
    assert rc == 0
    md = (tmp_path / "report.md").read_text()
    assert "n=1, no interval" in md
    ranking = md.split("## Ranking")[1].split("## Figures")[0]
    ranks = [l.split(" | ")[0] for l in ranking.splitlines()
             if l.startswith("| ") and not l.startswith(("| rank", "|---"))]
    assert ranks and set(ranks) == {"| none"}


def test_cli_rejects_bad_bandwidth(fixtures_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        report.main([str(fixtures_dir / "records.jsonl"), "--out", str(tmp_path),
                     "--pinned-bandwidth", "0"])
    assert e.value.code == 2


def test_a_file_given_twice_does_not_double_n(fixtures_dir, tmp_path, capsys):
    f = str(fixtures_dir / "processes.jsonl")
    assert report.main([f, f, "--out", str(tmp_path), "--pinned-bandwidth", "25"]) == 0
    md = (tmp_path / "report.md").read_text()
    rows = [l for l in md.split("## All configurations")[1].splitlines()
            if l.startswith("| pinned |")]
    assert "| 10 (profiler off) |" in rows[0]
    n = sum(1 for line in open(f) if line.strip())
    assert f"Reading the records: {n} duplicate records (same run_id) ignored." in md
    assert f"warning: {n} duplicate records (same run_id) ignored" in capsys.readouterr().err


def test_a_torn_last_line_does_not_block_the_report(fixtures_dir, tmp_path, capsys):
    folder = tmp_path / "results"
    folder.mkdir()
    text = (fixtures_dir / "records.jsonl").read_text()
    (folder / "records.jsonl").write_text(text + text.splitlines()[1][:500])
    assert report.main([str(folder), "--out", str(tmp_path / "out")]) == 0
    note = f"{folder / 'records.jsonl'}:34: torn last line, ignored; the matrix runner moves it " \
           "aside on resume"
    assert note in capsys.readouterr().err
    assert note in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize("out, problem", [
    ("/proc/x", "cannot"),
    ("{tmp}/a-file", "exists and is not a folder"),
    ("{tmp}/a-file/sub", "is not a writable folder"),
])
def test_an_out_that_cannot_be_written_exits_2(fixtures_dir, tmp_path, capsys, out, problem):
    (tmp_path / "a-file").write_text("x")
    out = out.format(tmp=tmp_path)
    assert report.main([str(fixtures_dir / "records.jsonl"), "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and problem in err and "Traceback" not in err


def test_inputs_that_cannot_be_used_exit_2(fixtures_dir, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "latin1.jsonl").write_bytes(b'{"error": "caf\xe9"}\n')
    first, second = (fixtures_dir / "records.jsonl").read_text().splitlines()[:2]
    clash = json.loads(second)
    clash["run_id"] = json.loads(first)["run_id"]
    (tmp_path / "clash.jsonl").write_text(first + "\n" + json.dumps(clash) + "\n")
    for bad, problem in (("missing.jsonl", "no such file or folder"),
                         ("empty", "no records.jsonl"),
                         ("latin1.jsonl", "latin1.jsonl:1: not UTF-8 text (byte 0xe9"),
                         ("clash.jsonl", "clash.jsonl:2: run_id")):
        assert report.main([str(tmp_path / bad), "--out", str(tmp_path / "out")]) == 2
        assert problem in capsys.readouterr().err
    assert not (tmp_path / "out").exists()

"""The report (analysis/report.py) builds from the fixtures."""
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
    import json
    lines = (fixtures_dir / "records.jsonl").read_text().splitlines()
    other = []
    for line in lines[:8]:
        rec = json.loads(line)
        rec["config"]["hidden"] = [512, 256]
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

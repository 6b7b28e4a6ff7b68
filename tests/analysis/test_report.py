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
    # static/u8 at batch 256: resident is the fastest, pageable the slowest
    static = md.split("### static data")[1].split("###")[0]
    rows = [l for l in static.splitlines() if l.startswith("| ") and l[2].isdigit()]
    assert rows[0].startswith("| 1 | resident |")
    assert "pageable" in rows[-1]
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

"""analysis/bench_report.py: the synthetic records it times report.py on are valid, distinct runs
spread over a few hundred configurations."""
from analysis import bench_report
from analysis.aggregate import aggregate
from analysis.records import load_records


def test_synthetic_records_are_distinct_valid_runs(tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    count = 2 * len(bench_report.templates()) + 10
    configurations = bench_report.write_records(path, count, seed=1)
    records = load_records(path)
    assert len(records) == count                      # nothing dropped as a duplicate
    assert "duplicate" not in capsys.readouterr().err
    assert 300 <= configurations == len(aggregate(records)) <= 1000

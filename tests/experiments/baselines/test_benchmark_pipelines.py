"""experiments/baselines/benchmark_pipelines.py without a GPU: the plan (every variant x measure
x augmentation, >= 10 processes each at batch 256 by default, one shuffled order, the estimate
printed), option errors, and the table rebuilt from records of fake runs."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "experiments" / "baselines"))
import benchmark_pipelines as bp  # noqa: E402


def test_dry_run_plans_every_configuration_ten_times(data, no_processes, capsys):
    assert no_processes(bp.main, ["--dry-run", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "plan: estimated" in out and "batch 256" in out
    tags = [ln.split(". ", 1)[1] for ln in out.splitlines() if ". pipelines-" in ln]
    # 4 variants x 3 measures, less the DataLoader's step, x light, heavy
    assert len(tags) == 11 * 2 * 10 and len(set(tags)) == len(tags)
    configs = {t.rsplit("-r", 1)[0] for t in tags}
    assert "pipelines-gpu-resident-compile-heavy-step" in configs
    assert "pipelines-dataloader-prefetch-graph-light-step" not in configs
    assert tags[:11 * 2] != sorted(tags[:11 * 2])   # shuffled, first processes first
    assert all(t.endswith("-r0") for t in tags[:22])


def test_option_errors_exit_2(data, no_processes, capsys):
    for bad in (["--variants", "eager"], ["--measures", "all"], ["--repeats", "0"]):
        assert no_processes(bp.main, ["--dry-run", "--data", str(data), *bad]) == 2
    assert no_processes(bp.main, ["--data", str(data), "--epochs", "1"]) == 2
    assert "--epochs >= 2" in capsys.readouterr().err


def fake_record(strategy: str, measure: str, walls: list[float], tag: str) -> dict:
    return {"schema_version": 1, "status": "ok", "run_id": tag,
            "config": {"strategy": strategy, "augment": "light", "batch": 256, "measure": measure,
                       "scenario": "stream", "run_tag": tag,
                       "dataset": {"train_samples": 60000}},
            "epochs": [{"epoch": i + 1, "wall_ms": w} for i, w in enumerate(walls)]}


def test_table_from_records_keeps_the_measures_apart(tmp_path, capsys):
    recs = []
    for r in range(5):
        recs.append(fake_record("pytorch-gpu-resident-graph", "step", [99.0, 20.0 + r, 20.0 + r],
                                f"pipelines-gpu-resident-graph-light-step-r{r}"))
        recs.append(fake_record("pytorch-gpu-resident-graph", "epoch", [99.0, 30.0, 30.0],
                                f"pipelines-gpu-resident-graph-light-epoch-r{r}"))
    text = bp.report(recs)
    rows = [ln for ln in text.splitlines() if ln.startswith("| light")]
    assert len(rows) == 2
    assert "| step |" in rows[0] and "22.00" in rows[0]      # median over processes of 20..24
    assert "| epoch |" in rows[1] and "30.00" in rows[1] and "2.00 M" in rows[1]
    js = tmp_path / "r.jsonl"
    js.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert bp.main(["--from-records", str(js)]) == 0
    assert "| light | 256 | gpu-resident-graph | step |" in capsys.readouterr().out

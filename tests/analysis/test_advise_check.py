"""analysis/advise_check.py over the sweeps of a results set: every hidden width and every device
budget is a family of its own, checked with that width's compute-only reference and that
budget."""
import copy
import json
import shutil
from pathlib import Path

import pytest

from analysis import advise_check as AC

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TEMPLATE = json.loads((REPO / "tests/experiments/fixtures/run_record_ok.json").read_text())


def run_record(strategy, hidden, gpu_ms, process, budget=None):
    rec = copy.deepcopy(TEMPLATE)
    rec["run_id"] = f"{strategy}-h{hidden}-{budget}-{process}"
    cfg = rec["config"]
    cfg.update(strategy=strategy, batch=256, hidden=[hidden], epoch_form="per-batch",
               epoch_launch=False, run_tag=rec["run_id"])
    if budget is not None:
        cfg.update(device_budget_gib=budget)
    for e in rec["epochs"]:
        e["gpu_ms"] = gpu_ms * (1 + 0.001 * process)
    return rec


def write_set(root: Path, runs) -> Path:
    (root / "records").mkdir(parents=True)
    with open(root / "records" / "results.jsonl", "w") as fh:
        for strategy, hidden, ms, budget in runs:
            for p in range(10):
                fh.write(json.dumps(run_record(strategy, hidden, ms, p, budget)) + "\n")
    shutil.copy(FIXTURES / "primitives.jsonl", root / "records" / "primitives.jsonl")
    return root


def test_each_width_and_budget_is_a_family_with_its_own_reference_and_budget(tmp_path):
    runs = [("resident", 256, 6.0, None), ("pinned", 256, 12.0, None),
            ("resident", 4096, 60.0, None), ("pinned", 4096, 61.0, None),
            ("resident", 256, 6.0, 0.02), ("pinned", 256, 12.0, 0.02)]
    checks = {c.label: c for c in AC.check(write_set(tmp_path, runs))}
    assert set(checks) == {"NVIDIA H200 static/u8/b256 per-batch",
                           "NVIDIA H200 static/u8/b256/h4096 per-batch",
                           "NVIDIA H200 static/u8/b256/budget 0.02 GiB per-batch"}
    wide = checks["NVIDIA H200 static/u8/b256/h4096 per-batch"]
    assert wide.advice.compute_ms == pytest.approx(60.0 * 1.0045, rel=1e-3)  # its own width's C
    assert wide.advice.budget_bytes is None
    budget = checks["NVIDIA H200 static/u8/b256/budget 0.02 GiB per-batch"]
    assert budget.advice.budget_bytes == pytest.approx(0.02 * (1 << 30))
    # 0.02 GiB holds no copy of MNIST: the advice leaves resident out, the measurement did not
    resident = next(o for o in budget.advice.options if o.strategy == "resident")
    assert not resident.fits and budget.recommended == "pinned"
    assert budget.winner == "resident" and budget.agrees is False

"""experiments/baselines/benchmark_stream.py without a GPU: its options and plan, and the ratio
table built from records (memstrat's stream record as the writer makes it,
tests/experiments/fixtures/run_record_stream.json, and DataLoader records of the same shape as
pytorch_dataloader.py writes: config.strategy "pytorch-dataloader", its loader settings)."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "experiments" / "baselines"))
import benchmark_stream as bs  # noqa: E402

TEMPLATE = json.loads((REPO / "tests/experiments/fixtures/run_record_stream.json").read_text())


def rec(strategy, augment, workers, ms, wait=0.0, first=0.5, status="ok", **loader):
    r = copy.deepcopy(TEMPLATE)
    r["status"] = status
    r["config"].update(strategy=strategy, augment=augment, workers=workers, **loader)
    for e in r["epochs"]:
        e.update(wall_ms=ms, input_wait_ms=wait + first, input_wait_first_ms=first)
    r["summary"]["wall_ms_median"] = ms
    return r


def dl(augment, workers, ms, pin=True, fetch="batch", wait=0.0):
    return rec("pytorch-dataloader", augment, workers, ms, wait=wait, pin_memory=pin,
               fetch=fetch, persistent_workers=workers > 0)


@pytest.fixture
def records():
    return [
        # light: memstrat's best is double-buffer at every worker count
        rec("pinned", "light", 1, 30.0, wait=15.0), rec("double-buffer", "light", 1, 28.0,
                                                        wait=14.0),
        rec("pinned", "light", 4, 16.0), rec("double-buffer", "light", 4, 14.0),
        dl("light", 0, 900.0, wait=600.0), dl("light", 0, 950.0, pin=False, wait=600.0),
        dl("light", 1, 700.0, wait=400.0), dl("light", 1, 650.0, pin=False, wait=400.0),
        dl("light", 4, 210.0, wait=20.0), dl("light", 4, 240.0, pin=False),
        # heavy: one strategy, a second process of it, and a failed run that must not count
        rec("pinned", "heavy", 4, 100.0, wait=80.0), rec("pinned", "heavy", 4, 110.0, wait=90.0),
        rec("pinned", "heavy", 4, 1.0, status="failed"),
        dl("heavy", 4, 2000.0, wait=1800.0),
        # another scenario is not part of the comparison
        dict(rec("pinned", "light", 1, 5.0), config=dict(TEMPLATE["config"],
                                                         scenario="static")),
    ]


def test_entries_are_one_per_configuration(records):
    es = {(e.side, e.augment, e.workers, e.setting): e for e in bs.entries(records)}
    assert len(es) == 4 + 6 + 1 + 1
    heavy = es[("memstrat", "heavy", 4, "pinned")]
    assert heavy.processes == 2 and heavy.ms == 105.0      # the median of the two processes
    # starvation leaves the first batch's wait out: 85 ms of 105
    assert heavy.starvation == pytest.approx(((80 / 100) + (90 / 110)) / 2)
    assert es[("dataloader", "light", 1, "pin_memory off, fetch batch")].ms == 650.0


def test_ratio_table(records):
    md = bs.ratio_markdown(bs.entries(records))
    light = md.split("### --augment heavy")[0]
    rows = {int(l.split("|")[1]): [c.strip() for c in l.split("|")[1:-1]]
            for l in light.splitlines() if l.startswith("| ") and l[2].isdigit()}
    assert set(rows) == {0, 1, 4}
    # 0 workers: the DataLoader alone
    assert rows[0][1] == "-" and rows[0][4] == "pin_memory on, fetch batch" and rows[0][7] == "-"
    # 1 worker: double-buffer 28 ms vs the DataLoader's best (pin_memory off) 650 ms
    assert rows[1][1:4] == ["double-buffer", "28.00", "50.0%"]
    assert rows[1][4:7] == ["pin_memory off, fetch batch", "650.00", "61.5%"]
    assert rows[1][7] == f"{650 / 28:.2f}x"
    assert rows[4][7] == f"{210 / 14:.2f}x"
    assert "memstrat double-buffer with 4 workers, 14.00 ms/epoch" in light
    assert "DataLoader / memstrat = 15.00x" in light
    heavy = md.split("### --augment heavy")[1]
    assert f"{2000 / 105:.2f}x" in heavy


def test_from_records_writes_the_table(records, tmp_path):
    src = tmp_path / "records.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "table.md"
    assert bs.main(["--from-records", str(src), "--out-md", str(out)]) == bs.EXIT_OK
    text = out.read_text()
    assert "### --augment light" in text and "### --augment heavy" in text
    assert "NVIDIA H200" in text


def test_plan_and_options(capsys):
    a = bs.build_parser().parse_args([])
    plan = bs.make_plan(a)
    assert plan.workers == [0, 1, 2, 4, 8] and plan.augments == ["light", "heavy"]
    assert "resident" not in plan.strategies and len(plan.strategies) == 9
    # memstrat has no "0 workers"; the DataLoader runs every worker count, pin on and off
    assert plan.counts(1) == (9 * 4 * 2, 5 * 2 * 2)
    assert plan.counts(3) == (3 * 9 * 4 * 2, 3 * 5 * 2 * 2)
    assert bs.main(["--dry-run", "--quick"]) == bs.EXIT_OK
    assert "4 memstrat + 2 DataLoader runs" in capsys.readouterr().out
    for bad in (["--workers", "1,-2"], ["--augments", "medium"], ["--strategies", "resident"],
                ["--pin-memory", "maybe"]):
        with pytest.raises(SystemExit) as e:
            bs.build_parser().parse_args(bad)
        assert e.value.code == 2
    a = bs.build_parser().parse_args(["--epochs", "1"])
    with pytest.raises(ValueError, match="warm-up"):
        bs.make_plan(a)

"""The report's Environment section (analysis/environment.py) on clocks.jsonl: five processes
whose GPU state make_fixtures.CLOCK_CASES sets (idle start, steady, power cap with a falling
clock, thermal slowdown, no NVML), and on the older records of records.jsonl, which have none
of the NVML keys."""
import copy
import json

import pytest

from analysis import report
from analysis.environment import (CLOCK_CHANGE, clock_coverage, clock_warnings,
                                  environment_rows)
from analysis.records import load_records


@pytest.fixture(scope="module")
def clock_runs(fixtures_dir):
    return load_records(fixtures_dir / "clocks.jsonl")


def run(start_sm, end_sm, start_reasons=(), end_reasons=(), tag="r"):
    """A run reduced to what the clock checks read."""
    return {"config": {"run_tag": tag},
            "env": {"sm_clock_mhz": start_sm, "clock_event_reasons": list(start_reasons)},
            "env_end": {"sm_clock_mhz": end_sm, "clock_event_reasons": list(end_reasons)}}


def test_held_clocks_and_a_clock_that_moved_are_warned_with_counts(clock_runs):
    held, changed = clock_warnings(clock_runs)
    assert held.startswith("2 of 5 timed runs had a clock-event reason other than gpu_idle")
    assert "(hw_thermal: 1, sw_power_cap: 1, sw_thermal: 1)" in held
    assert "double-buffer_static_u8_b256" in held and "zero-copy_static_u8_b256" in held
    assert "resident" not in held           # gpu_idle alone is not a warning
    assert changed.startswith("1 of 3 compared timed runs ended with an SM clock more than 5%")
    assert "1980 -> 1755 MHz" in changed and "double-buffer" in changed
    assert "pinned" not in changed           # 1980 -> 1965 is within 5%


def test_coverage_says_which_runs_were_not_compared(clock_runs):
    text = clock_coverage(clock_runs)
    assert "compared for 3; not for 1 read with the GPU idle" in text
    assert "and 1 without a clock" in text


@pytest.mark.parametrize("start, end, flagged", [
    (1980, 1980, False),
    (2000, 2100, False),                      # exactly +5%: not more than
    (2000, 1899, True),                       # -5.05%
    (1800, 1980, True),                       # +10%: a clock that rose differs too
])
def test_the_clock_change_threshold(start, end, flagged):
    assert CLOCK_CHANGE == 0.05
    assert bool(clock_warnings([run(start, end)])) == flagged


def test_an_idle_snapshot_is_never_compared():
    # 345 MHz is the idle clock: the run's clock was never read, so nothing can be said.
    assert clock_warnings([run(345, 1980, start_reasons=["gpu_idle"])]) == []
    assert clock_warnings([run(1980, 900, end_reasons=["gpu_idle"])]) == []
    assert "not for 2 read with the GPU idle" in clock_coverage(
        [run(345, 1980, start_reasons=["gpu_idle"]), run(1980, 900, end_reasons=["gpu_idle"])])


def test_a_reason_at_the_start_alone_is_warned():
    (held,) = clock_warnings([run(1410, 1410, start_reasons=["gpu_idle", "hw_slowdown"])])
    assert "1 of 1 timed runs" in held and "(hw_slowdown: 1)" in held


def test_older_records_have_nothing_to_warn(fixture_records):
    ok = [r for r in fixture_records if r["status"] == "ok"]
    assert clock_warnings(ok) == []
    assert clock_coverage(ok) is None
    rows = dict(environment_rows(fixture_records)[0])
    for label in ("SM clock", "CPU", "CPU affinity", "GPU NUMA node",
                  "Clock-event reasons other than idle"):
        assert rows[label] == "n/a (not in the records)", label


def test_table_shows_cpu_affinity_numa_and_clocks(clock_runs):
    rows, notes = environment_rows(clock_runs)
    rows = dict(rows)
    assert rows["CPU"] == "AMD EPYC 9654 96-Core Processor (192 online)"
    assert rows["CPU affinity"] == "0-15 (16 CPUs)"
    assert rows["GPU NUMA node"] == "0"
    assert rows["PCIe link"] == "gen 5 x16 (max gen 5 x16)"
    assert rows["Persistence mode"] == "on"
    assert rows["SM clock"] == "start 345-1980 MHz, end 1755-1980 MHz"
    assert rows["GPU power"] == "start 76.5-90.5 W, end 90.5-700 W"
    assert rows["Clock-event reasons other than idle"] == \
        "hw_thermal (1 run), sw_power_cap (1 run), sw_thermal (1 run)"
    assert notes == []


def test_runs_pinned_to_other_cpus_are_noted(clock_runs):
    other = copy.deepcopy(clock_runs)
    other[0]["env"].update(cpu_affinity="16-31", gpu_numa_node=1)
    notes = environment_rows(other)[1]
    assert any("more than one CPU affinity: 16-31 (16 CPUs), 0-15" in n for n in notes)
    assert any("more than one GPU NUMA node" in n for n in notes)


def test_report_warns_only_about_timed_runs(fixtures_dir, tmp_path):
    # A profiled run of pinned (its timing comes from the unprofiled one) with a hardware
    # slowdown: counters only, so it changes no warning.
    lines = (fixtures_dir / "clocks.jsonl").read_text().splitlines()
    pinned = next(json.loads(l) for l in lines if '"strategy":"pinned"' in l)
    pinned["config"]["profile"] = True
    pinned["run_id"] += "-profiled"
    pinned["env_end"]["clock_event_reasons"] = ["hw_slowdown"]
    f = tmp_path / "clocks.jsonl"
    f.write_text("\n".join(lines + [json.dumps(pinned)]) + "\n")
    report.build_report([f], tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    env = md.split("## Environment")[1].split("## How to read")[0]
    assert "**Warning:** 2 of 5 timed runs had a clock-event reason other than gpu_idle" in env
    assert "**Warning:** 1 of 3 compared timed runs ended with an SM clock" in env
    assert "hw_slowdown" in env                  # the table lists every run's reasons
    assert "hw_slowdown: 1" not in env           # the warning counts timed runs only
    assert "| CPU affinity | 0-15 (16 CPUs) |" in env

"""analysis/drift.py: a machine whose host slows while it works, planted in synthetic records."""
import datetime

import numpy as np

from analysis import drift
from analysis.aggregate import aggregate

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0)


def record(strategy, minute, boot, gpu, host, rng, epochs=21, setup=80.0):
    eps = []
    for e in range(epochs):
        g = gpu * (1 + 0.002 * rng.standard_normal())
        h = host * (1 + 0.002 * rng.standard_normal())
        eps.append({"epoch": e + 1, "wall_ms": g + h, "gpu_ms": g, "host_ms": h})
    return {
        "schema_version": 1, "status": "ok", "run_id": f"{strategy}-{boot}-{minute}",
        "started_at": (T0 + datetime.timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "env": {"boot_id": boot, "gpu_name": "GPU X"},
        "config": {"strategy": strategy, "scenario": "refresh", "transfer": "u8", "batch": 256,
                   "hidden": [256], "epochs": epochs, "gemm": "cublas", "profile": False,
                   "seed": 1, "run_tag": f"{strategy}-{minute}", "epoch_form": "per-batch"},
        "epochs": eps, "setup": {"ms": setup * (1 + 0.002 * rng.standard_normal())},
    }


def plant(host_per_minute, boots=("a", "b"), strategies=("pinned", "pageable", "resident"),
          seed=0):
    """Each strategy 8 processes per machine at shuffled minutes 0..29; host work grows by
    host_per_minute (a share) per minute of the machine's busy time, GPU time never."""
    rng = np.random.default_rng(seed)
    out = []
    for boot in boots:
        minutes = rng.permutation(np.arange(30))
        for i, s in enumerate(strategies):
            for m in minutes[i * 8:(i + 1) * 8]:
                host = 3.0 * (1 + host_per_minute * m)
                out.append(record(s, int(m), boot, gpu=5.0 + i, host=host, rng=rng))
    return out


def by_metric(drifts):
    return {d.metric: d for d in drifts}


def test_a_host_that_slows_with_busy_time_drifts_and_the_gpu_does_not():
    d = by_metric(drift.measure(aggregate(plant(0.003))))   # +9% over 30 minutes
    assert d["host_ms"].drifts and d["host_ms"].rho > 0.5
    assert not d["gpu_ms"].drifts
    assert d["host_ms"].machines == 2 and d["host_ms"].configurations == 3
    first, last = d["host_ms"].bands[0], d["host_ms"].bands[-1]
    assert first[0] == 0 and last[0] == 25 and last[2] - first[2] > 0.05


def test_a_steady_machine_does_not_drift():
    d = by_metric(drift.measure(aggregate(plant(0.0))))
    assert not any(x.drifts for x in d.values())


def test_busy_time_starts_again_on_each_machine():
    a = record("pinned", 0, "a", 5, 3, np.random.default_rng(0))
    b = record("pinned", 40, "b", 5, 3, np.random.default_rng(0))
    c = record("pinned", 47, "b", 5, 3, np.random.default_rng(0))
    minutes = drift.busy_minutes([a, b, c])
    assert [minutes[id(r)] for r in (a, b, c)] == [0.0, 0.0, 7.0]
    assert drift.busy_minutes([{"started_at": "2026-01-01T00:00:00Z"}]) == {}


def test_a_part_that_is_a_small_share_of_the_epoch_is_left_out():
    recs = plant(0.003)
    for r in recs:
        for e in r["epochs"]:
            e["host_ms"] *= 0.01                       # 0.03 ms of a ~5 ms epoch
    d = by_metric(drift.measure(aggregate(recs)))
    assert "host_ms" not in d


def test_the_table_has_one_column_per_band():
    headers, rows = drift.table(drift.measure(aggregate(plant(0.003))))
    assert headers[:9] == ["part", "processes", "machines: Holm p", "boots' medians",
                           "busy time: rho", "Holm p", "drifts", "set-up time: rho", "Holm p"]
    assert headers[9] == "0-5 min" and len(headers) == 9 + 6
    assert [r[0] for r in rows] == ["epoch (wall clock)", "GPU time", "host work"]
    assert all(len(r) == len(headers) for r in rows)


def test_the_docs_block_renders_the_table_or_says_why_not():
    from types import SimpleNamespace
    from analysis.block_generators_drift import drift_block
    text = drift_block(SimpleNamespace(groups=aggregate(plant(0.003))), None)
    assert text.startswith("No part of the epoch differs between the machines (boots) that ran "
                           "the set. Parts that drift with the machine's busy time: epoch "
                           "(wall clock), host work. No part follows its process's own set-up "
                           "time.")
    assert "| host work | 48 |" in text and "2 machine boot(s)" in text
    old = plant(0.003)
    for r in old:
        del r["env"]["boot_id"]                         # records older than the key
    text = drift_block(SimpleNamespace(groups=aggregate(old)), None)
    assert text.startswith("Not measured in this results set") and "|" not in text


def test_a_process_whose_own_host_is_slow_is_found_by_its_set_up_time():
    """No drift with busy time; each process has a host factor that slows its set-up and its
    host work alike (where its memory landed, say), GPU time untouched."""
    rng = np.random.default_rng(7)
    recs = []
    for i, s in enumerate(("pinned", "pageable", "resident")):
        for m in rng.permutation(np.arange(30))[:10]:
            f = 1 + 0.15 * rng.random()
            recs.append(record(s, int(m), "a", gpu=5.0 + i, host=3.0 * f, rng=rng, setup=80 * f))
    d = by_metric(drift.measure(aggregate(recs)))
    assert d["host_ms"].follows_setup and d["host_ms"].setup_rho > 0.5
    assert not d["host_ms"].drifts and not d["gpu_ms"].follows_setup
    assert drift.summary(list(d.values())).endswith(
        "Parts that follow their process's own set-up time: epoch (wall clock), host work.")
    for r in recs:
        del r["setup"]                       # records without it: no set-up test
    d = by_metric(drift.measure(aggregate(recs)))
    assert d["host_ms"].setup_rho is None and d["host_ms"].setup_p is None


def test_a_slow_boot_is_found_between_machines_and_not_as_a_process_factor():
    """Boot b runs the host 12% slower, set-up included (another tenant's load, say); no drift
    and no per-process factor. The machines test finds host work; the set-up test, within a
    boot, does not (pooled over boots it would: slow set-up and slow epochs share the boot)."""
    recs = plant(0.0, boots=("a", "b"), seed=3)
    for r in recs:
        if r["env"]["boot_id"] == "b":
            r["setup"]["ms"] *= 1.12
            for e in r["epochs"]:
                e["host_ms"] *= 1.12
                e["wall_ms"] = e["gpu_ms"] + e["host_ms"]
    d = by_metric(drift.measure(aggregate(recs)))
    host = d["host_ms"]
    assert host.differs_by_machine and not d["gpu_ms"].differs_by_machine
    assert not host.follows_setup and not host.drifts
    (na, lo), (nb, hi) = host.levels                  # boot a first: it started first
    assert na == nb == 24 and hi - lo > 0.08
    assert drift.summary(list(d.values())).startswith(
        "Parts of the epoch that differ between the machines (boots) that ran the set: epoch "
        "(wall clock), host work. No part drifts")
    headers, rows = drift.table([host])
    assert rows[0][headers.index("boots' medians")].endswith("(2 boots)")


def test_one_boot_has_no_machines_test():
    d = by_metric(drift.measure(aggregate(plant(0.003, boots=("a",)))))
    assert d["host_ms"].machine_p is None and d["host_ms"].levels[0][0] == 24
    headers, rows = drift.table([d["host_ms"]])
    assert rows[0][headers.index("machines: Holm p")] == "n/a"
    assert rows[0][headers.index("boots' medians")].endswith("(1 boot)")

"""experiments/baselines/benchmark_data_parallel.py without a GPU: the plan (every variant at
every GPU count, 10 processes each by default, one shuffled order, the estimate printed), each
variant's command, the refusals (NVLink multicast not off, bad options), and the tables rebuilt
from records of fake runs."""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "experiments" / "baselines"))
import benchmark_data_parallel as bd  # noqa: E402

NVLS_OFF = {"NCCL_NVLS_ENABLE": "0"}


def test_dry_run_plans_every_variant_ten_times_in_one_shuffled_order(data, no_processes, capsys,
                                                                    tmp_path):
    argv = ["--dry-run", "--data", str(data), "--out-dir", str(tmp_path), "--gpus-list", "2,4"]
    assert no_processes(lambda a: bd.main(a, NVLS_OFF), argv) == 0
    out = capsys.readouterr().out
    assert "plan: estimated" in out and "batch 256 per GPU" in out
    tags = [ln.split(". ", 1)[1] for ln in out.splitlines() if ". dp-" in ln]
    assert len(tags) == 6 * 2 * 10 and len(set(tags)) == len(tags)
    assert {t.rsplit("-r", 1)[0] for t in tags} == {f"dp-{v}-g{n}" for v in bd.VARIANTS
                                                     for n in (2, 4)}
    assert all(t.endswith("-r0") for t in tags[:12]) and tags[:12] != sorted(tags[:12])


def test_nvlink_multicast_must_be_off_before_anything_starts(data, no_processes, capsys):
    for env in ({}, {"NCCL_NVLS_ENABLE": "1"}):
        assert no_processes(lambda a: bd.main(a, env), ["--data", str(data)]) == 2
        assert "set NCCL_NVLS_ENABLE=0" in capsys.readouterr().err


def test_option_errors_exit_2(data, no_processes, tmp_path):
    for bad in (["--variants", "ddp"], ["--gpus-list", "1"], ["--gpus-list", "16"],
                ["--repeats", "0"], ["--epochs", "1"], ["--batch", "0"]):
        assert no_processes(lambda a: bd.main(a, NVLS_OFF),
                            ["--dry-run", "--data", str(data), "--out-dir", str(tmp_path),
                             *bad]) == 2, bad


def test_each_variant_runs_the_same_training_its_own_way():
    a = bd.build_parser().parse_args(["--batch", "128", "--epochs", "5"])
    for v in bd.VARIANTS:
        args = bd.run_args(a, v, 4)
        for flag, value in (("--gpus", "4"), ("--batch", "128"), ("--epochs", "5"),
                            ("--transfer", "u8")):
            assert args[args.index(flag) + 1] == value, (v, flag)
    per_gpu = bd.run_args(a, "memstrat-per-gpu", 2)
    assert per_gpu[:2] == ["--strategy", "resident"] and "--no-profile" in per_gpu
    assert per_gpu[per_gpu.index("--processes") + 1] == "per-gpu" and "--reduce" not in per_gpu
    ring = bd.run_args(a, "memstrat-per-gpu-ring", 2)
    assert ring[ring.index("--reduce") + 1] == "ring"
    assert "--processes" not in bd.run_args(a, "memstrat-one-process", 2)
    ddp = bd.run_args(a, "pytorch-ddp-graph", 2)
    assert ddp[ddp.index("--step") + 1] == "graph" and "--strategy" not in ddp
    assert bd.VARIANTS["jax-data-parallel"][0] == "jax_data_parallel.py"


def test_records_are_keyed_by_their_run_tag():
    assert bd.key_of({"config": {"run_tag": "dp-pytorch-ddp-graph-g4-r7"}}) == (
        "pytorch-ddp-graph", 4)
    assert bd.key_of({"config": {"run_tag": "dp-memstrat-per-gpu-g2-r0"}}) == (
        "memstrat-per-gpu", 2)
    for tag in ("dp-ddp-g2-r0", "pipelines-memstrat-resident-light-epoch-r0",
                "dp-memstrat-per-gpu-2-r0", "dp-memstrat-per-gpu-gx-r0", None):
        assert bd.key_of({"config": {"run_tag": tag}}) is None, tag


def fake_record(strategy: str, walls: list[float], tag: str, batch: int = 256) -> dict:
    return {"schema_version": 1, "status": "ok", "run_id": tag,
            "config": {"strategy": strategy, "batch": batch, "gpus": 2, "run_tag": tag,
                       "dataset": {"train_samples": 60000}},
            "epochs": [{"epoch": i + 1, "wall_ms": w} for i, w in enumerate(walls)]}


def test_every_variant_is_tested_against_memstrat_per_gpu(tmp_path, capsys):
    recs = []
    for r in range(10):
        recs.append(fake_record("resident", [99.0, 11.0 + r / 10, 11.0],
                                f"dp-memstrat-per-gpu-g2-r{r}"))
        recs.append(fake_record("jax-data-parallel-jit", [99.0, 9.0 + r / 10, 9.0],
                                f"dp-jax-data-parallel-g2-r{r}"))
        recs.append(fake_record("pytorch-ddp-graph", [99.0, 11.0 + r / 10, 11.0],
                                f"dp-pytorch-ddp-graph-g2-r{r}"))
    text = bd.report(recs)
    assert "| 2 | 256 | memstrat-per-gpu | 11." in text
    # the legend says how the intervals are made and what they cover
    assert "order-statistic interval (exact coverage at least 95%" in text
    rows = [ln for ln in text.split("## Each variant against memstrat-per-gpu")[1].splitlines()
            if ln.startswith("| 2 |")]
    assert len(rows) == 2
    jax = next(r for r in rows if "jax-data-parallel" in r)
    assert "0.82x" in jax and "jax-data-parallel faster" in jax
    ddp = next(r for r in rows if "pytorch-ddp-graph" in r)
    assert "not separated" in ddp            # equal samples: neither is called faster
    js = tmp_path / "r.jsonl"
    js.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert bd.main(["--from-records", str(js)], {}) == 0   # reading needs no GPU setting
    assert "| 2 | 256 | pytorch-ddp-graph |" in capsys.readouterr().out

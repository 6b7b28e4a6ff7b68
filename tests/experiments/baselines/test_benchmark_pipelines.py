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


def test_dry_run_plans_every_configuration_ten_times(data, no_processes, capsys, tmp_path):
    assert no_processes(bp.main, ["--dry-run", "--data", str(data),
                                  "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "plan: estimated" in out and "batch 256" in out
    tags = [ln.split(". ", 1)[1] for ln in out.splitlines() if ". pipelines-" in ln]
    # 6 variants x 3 measures, less the DataLoaders' steps, dataloader's pipeline and
    # gpu-resident-compile's (gpu-resident-graph's code), x light, heavy
    assert len(tags) == 14 * 2 * 10 and len(set(tags)) == len(tags)
    configs = {t.rsplit("-r", 1)[0] for t in tags}
    assert "pipelines-gpu-resident-compile-heavy-step" in configs
    assert "pipelines-memstrat-resident-heavy-epoch" in configs
    assert "pipelines-dataloader-prefetch-graph-light-step" not in configs
    assert "pipelines-memstrat-resident-light-pipeline" in configs
    assert "pipelines-dataloader-heavy-epoch" in configs
    assert not {"pipelines-dataloader-light-step", "pipelines-dataloader-light-pipeline",
                "pipelines-gpu-resident-compile-light-pipeline"} & configs
    assert "pipelines-gpu-resident-graph-light-pipeline" in configs
    assert tags[:14 * 2] != sorted(tags[:14 * 2])   # shuffled, first processes first
    assert all(t.endswith("-r0") for t in tags[:28])


def test_the_dataloader_variants_run_the_loader_as_the_stream_comparison_does():
    a = bp.build_parser().parse_args(["--workers", "6"])
    plain = bp.script_args(a, "dataloader", "heavy", "epoch")
    assert "--measure" not in plain                 # pytorch_dataloader.py times the epoch
    for args in (plain, bp.script_args(a, "dataloader-prefetch-graph", "heavy", "epoch")):
        assert args[args.index("--workers") + 1] == "6"
        assert args[args.index("--fetch") + 1] == "batch"
        assert args[args.index("--pin-memory") + 1] == "on"
        assert args[args.index("--persistent-workers") + 1] == "on"
        assert args[args.index("--transfer") + 1] == "u8"
        assert args[args.index("--augment") + 1] == "heavy"
    assert plain[plain.index("--non-blocking") + 1] == "on"
    assert "--workers" not in bp.script_args(a, "gpu-resident-graph", "light", "step")
    jax = bp.script_args(a, "jax-gpu-resident", "light", "pipeline")
    assert "--transfer" not in jax and jax[jax.index("--measure") + 1] == "pipeline"


def test_memstrat_runs_resident_with_gpu_augmentation_and_its_step_batch_by_batch():
    a = bp.build_parser().parse_args(["--batch", "128", "--epochs", "5"])
    epoch = bp.memstrat_args(a, "heavy", "epoch")
    assert epoch[epoch.index("--scenario") + 1] == "stream"
    assert epoch[epoch.index("--augment") + 1] == "heavy"
    assert epoch[epoch.index("--augment-device") + 1] == "gpu"
    assert epoch[epoch.index("--batch") + 1] == "128" and "u8" in epoch
    assert "--consumer" not in epoch
    step = bp.memstrat_args(a, "heavy", "step")
    assert step[step.index("--scenario") + 1] == "static"
    assert step[step.index("--launch-form") + 1] == "per-batch"
    pipeline = bp.memstrat_args(a, "heavy", "pipeline")
    assert pipeline == epoch + ["--consumer", "none"]
    # timed with the profiler off, like every published timing
    assert all("--no-profile" in args for args in (epoch, step, pipeline))


def test_records_are_keyed_by_their_run_tag():
    rec = {"config": {"run_tag": "pipelines-jax-gpu-resident-heavy-epoch-r7"}}
    assert bp.key_of(rec) == ("jax-gpu-resident", "heavy", "epoch")
    for tag in ("pipelines-eager-light-epoch-r0", "stream-pinned-light-epoch-r0",
                "pipelines-dataloader-prefetch-graph-light-step-r0", None):
        assert bp.key_of({"config": {"run_tag": tag}}) is None


def test_resume_runs_only_what_has_no_ok_record(data, no_processes, capsys, tmp_path):
    plan = ["--data", str(data), "--out-dir", str(tmp_path), "--variants", "jax-gpu-resident",
            "--measures", "epoch", "--augments", "light", "--repeats", "3"]
    recs = [fake_record("jax-gpu-resident-jit", "epoch", [99.0, 13.0, 13.0],
                        "pipelines-jax-gpu-resident-light-epoch-r1")]
    failed = fake_record("jax-gpu-resident-jit", "epoch", [99.0, 13.0, 13.0],
                         "pipelines-jax-gpu-resident-light-epoch-r2")
    failed["status"] = "failed"
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                    for r in recs + [failed]))
    # without --resume a file that holds runs is refused: a second plan would mix into it
    assert no_processes(bp.main, ["--dry-run", *plan]) == 2
    assert "--resume continues that plan" in capsys.readouterr().err
    assert no_processes(bp.main, ["--dry-run", "--resume", *plan]) == 0
    out = capsys.readouterr().out
    tags = [ln.split(". ", 1)[1] for ln in out.splitlines() if ". pipelines-" in ln]
    assert sorted(tags) == ["pipelines-jax-gpu-resident-light-epoch-r0",
                            "pipelines-jax-gpu-resident-light-epoch-r2"]   # the failed one again
    assert "resuming: 1 of 3 runs" in out and "(2 to run)" in out


def test_resume_refuses_a_records_file_of_another_plan(data, no_processes, capsys, tmp_path):
    plan = ["--data", str(data), "--out-dir", str(tmp_path), "--variants", "jax-gpu-resident",
            "--measures", "epoch", "--augments", "light", "--repeats", "3"]
    rec = fake_record("jax-gpu-resident-jit", "epoch", [99.0, 13.0, 13.0],
                      "pipelines-jax-gpu-resident-light-epoch-r1")
    (tmp_path / "records.jsonl").write_text(json.dumps(rec) + "\n")
    # the same plan at another batch, or with runs this plan does not have: refused
    assert no_processes(bp.main, ["--dry-run", "--resume", "--batch", "128", *plan]) == 2
    assert "records of another plan" in capsys.readouterr().err
    assert no_processes(bp.main, ["--dry-run", "--resume", *plan[:-1], "1"]) == 2
    assert "which this plan does not have" in capsys.readouterr().err
    assert no_processes(bp.main, ["--dry-run", "--resume", *plan]) == 0


def test_option_errors_exit_2(data, no_processes, capsys, tmp_path):
    for bad in (["--variants", "eager"], ["--measures", "all"], ["--repeats", "0"],
                ["--variants", "dataloader-prefetch-graph", "--measures", "step"]):
        assert no_processes(bp.main, ["--dry-run", "--data", str(data),
                                      "--out-dir", str(tmp_path), *bad]) == 2
    assert no_processes(bp.main, ["--data", str(data), "--epochs", "1"]) == 2
    assert "--epochs >= 2" in capsys.readouterr().err


def fake_record(strategy: str, measure: str, walls: list[float], tag: str) -> dict:
    return {"schema_version": 1, "status": "ok", "run_id": tag,
            "config": {"strategy": strategy, "augment": "light", "batch": 256, "measure": measure,
                       "scenario": "stream", "run_tag": tag, "epochs": 21,
                       "dataset": {"train_samples": 60000}},
            "epochs": [{"epoch": i + 1, "wall_ms": w} for i, w in enumerate(walls)]}


def test_each_variant_is_tested_against_memstrat_at_the_same_measure():
    recs = []
    for r in range(10):
        recs.append(fake_record("resident", "epoch", [99.0, 10.0 + r / 10, 10.0],
                                f"pipelines-memstrat-resident-light-epoch-r{r}"))
        recs.append(fake_record("jax-gpu-resident-jit", "epoch", [99.0, 13.0 + r / 10, 13.0],
                                f"pipelines-jax-gpu-resident-light-epoch-r{r}"))
        recs.append(fake_record("pytorch-gpu-resident-graph", "epoch", [99.0, 10.0 + r / 10, 10.0],
                                f"pipelines-gpu-resident-graph-light-epoch-r{r}"))
        recs.append(fake_record("pytorch-gpu-resident-graph", "step", [99.0, 5.0, 5.0],
                                f"pipelines-gpu-resident-graph-light-step-r{r}"))
    text = bp.report(recs)
    rows = [ln for ln in text.split("## Each variant against memstrat-resident")[1].splitlines()
            if ln.startswith("| light")]
    assert len(rows) == 2                      # no memstrat step: the step row is not compared
    assert "order-statistic interval (exact coverage at least 95%" in text  # method, coverage
    jax = next(r for r in rows if "jax-gpu-resident" in r)
    assert "| epoch |" in jax and "memstrat faster" in jax and "1.3" in jax
    graph = next(r for r in rows if "gpu-resident-graph" in r)
    assert "not separated" in graph            # equal samples: neither is called faster


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

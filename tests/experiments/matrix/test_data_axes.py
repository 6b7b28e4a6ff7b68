"""run_matrix.py's data-path and scale axes (augment_device, replicate, device_budget, gpus,
reduce, emulate_gpus, processes) and um-advise's advise: values checked against `memstrat
describe`, passed only where they differ from memstrat's default (keys of other matrices
unchanged), reduce and processes only on several GPUs, advise only for the strategy that reads
it, cells memstrat declares it cannot run listed apart, and several-GPU cells refused where they
cannot run (a worker per GPU, a Slurm task per GPU, NVLink multicast not off)."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "experiments" / "matrix" / "run_matrix.py"


def write(tmp_path, text, name="m"):
    p = tmp_path / f"{name}.toml"
    p.write_text(f'name = "{name}"\n' + text)
    return p


def runner(args, env=None, timeout=120):
    return subprocess.run([sys.executable, str(RUNNER), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_defaults_are_not_passed_and_keys_stay_what_they_were(run_matrix, describe, tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = "resident"
replicate = [1, 4]
device_budget = ["none", 1.5]
emulate_gpus = [1, 2]
"""), describe)
    keys = {c.key: c for c in m.cells}
    assert len(keys) == 8
    plain = keys["resident_static_u8_b256_h256_e10_cublas_seed1_r0"]
    assert (plain.replicate, plain.device_budget, plain.emulate_gpus) == (None, None, None)
    assert not {"--replicate", "--device-budget", "--emulate-gpus"} & set(plain.train_args())
    c = keys["resident_static_u8_b256_h256_e10_cublas_rep4_budget1.5g_emu2_seed1_r0"]
    args = c.train_args()
    for flag, value in (("--replicate", "4"), ("--device-budget", "1.5"),
                        ("--emulate-gpus", "2")):
        assert args[args.index(flag) + 1] == value
    stub = c.config_stub()
    assert (stub["replicate"], stub["device_budget_gib"], stub["emulate_gpus"]) == (4, 1.5, 2)
    assert "replicate" not in plain.config_stub()


@pytest.mark.parametrize("axis, default, other, key", [
    ("reduce", "exact", "ring", "reduce-ring"), ("processes", "one", "per-gpu", "procs-per-gpu")])
def test_the_axes_of_several_gpus_collapse_on_one(run_matrix, describe, tmp_path, axis, default,
                                                  other, key):
    m = run_matrix.load_matrix(write(tmp_path, f"""
[axes]
strategy = "pinned"
gpus = [1, 2]
{axis} = ["{default}", "{other}"]
"""), describe)
    assert {(c.gpus, getattr(c, axis)) for c in m.cells} == {(None, None), (2, None), (2, other)}
    assert len(m.cells) == 3
    assert m.collapsed == 1
    c = next(c for c in m.cells if getattr(c, axis) == other)
    assert c.train_args()[-4:] == ["--gpus", "2", f"--{axis}", other]
    assert c.key.endswith(f"_gpus2_{key}_seed1_r0")
    assert c.config_stub()[axis] == other
    plain = next(c for c in m.cells if c.gpus == 2 and getattr(c, axis) is None)
    assert f"--{axis}" not in plain.train_args() and key.split("-")[0] not in plain.key


def test_cells_memstrat_declares_it_cannot_run_are_listed_apart(run_matrix, describe, tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = ["resident", "pinned", "double-buffer"]
scenario = ["static", "refresh"]
augment_device = ["host", "gpu"]
gpus = [1, 2]
"""), describe)
    why = {c.key: w for c, w in m.not_runnable}
    run = {(c.strategy, c.scenario, c.augment_device, c.gpus) for c in m.cells}
    # --augment-device gpu: in refresh (and stream) only, by describe: resident from the set it
    # keeps, the copying strategies after the copy
    assert {(s, sc) for s, sc, a, g in run if a == "gpu"} == {
        (s, "refresh") for s in ("resident", "pinned", "double-buffer")}
    assert any("resident takes --augment-device gpu in refresh, stream only, not in static"
               in w for w in why.values())
    assert any("pinned takes --augment-device gpu in refresh, stream only, not in static"
               in w for w in why.values())
    # a strategy across several GPUs takes it in no scenario
    other = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = "host-shared"
scenario = "refresh"
augment_device = "gpu"
"""), describe)
    assert not other.cells
    assert "host-shared takes --augment-device gpu in no scenario, not in refresh" in \
        {w for _, w in other.not_runnable}
    # --gpus 2: every strategy in static and refresh, by describe, augmented on the host only
    assert {(s, sc, a) for s, sc, a, g in run if g == 2} == {
        (s, sc, None) for s in ("resident", "pinned", "double-buffer")
        for sc in ("static", "refresh")}
    assert any(w.startswith("several GPUs augment on the host") for w in why.values())


@pytest.mark.parametrize("value, message", [
    ('"1"', 'a number of GiB or "none"'), ("0", "must be > 0"), ("-2.5", "must be > 0"),
    ("true", 'a number of GiB or "none"'), ("nan", 'a number of GiB or "none"'),
])
def test_a_bad_device_budget_is_refused(run_matrix, describe, tmp_path, value, message):
    path = write(tmp_path, f"[axes]\nstrategy = 'resident'\ndevice_budget = [{value}]\n")
    with pytest.raises(run_matrix.MatrixError, match=message):
        run_matrix.load_matrix(path, describe)


@pytest.mark.parametrize("axis, value, message", [
    ("replicate", 0, "expected a positive integer"), ("replicate", 5000, "must be <= 4096"),
    ("gpus", 9, "must be <= 8"), ("emulate_gpus", '"2"', "expected a positive integer"),
    ("reduce", '"tree"', "'tree' is not one of exact, ring"),
    ("augment_device", '"cpu"', "'cpu' is not one of host, gpu"),
    ("processes", '"every"', "'every' is not one of one, per-gpu"),
])
def test_bad_values_are_refused_by_describe(run_matrix, describe, tmp_path, axis, value, message):
    path = write(tmp_path, f"[axes]\nstrategy = 'resident'\n{axis} = [{value}]\n")
    with pytest.raises(run_matrix.MatrixError, match=message):
        run_matrix.load_matrix(path, describe)


SEVERAL = """
[axes]
strategy = "resident"
epochs = 2
gpus = [1, 2]
"""


def test_several_gpu_cells_need_multicast_off_and_every_gpu(tmp_path, fake_memstrat):
    path = write(tmp_path, SEVERAL)
    env = {k: v for k, v in os.environ.items() if k != "NCCL_NVLS_ENABLE"}
    res = runner([path, "--out", tmp_path / "a", "--memstrat", fake_memstrat], env=env)
    assert res.returncode == 2 and "set NCCL_NVLS_ENABLE=0" in res.stderr, res.stderr
    assert not (tmp_path / "a" / "records.jsonl").exists()
    env["NCCL_NVLS_ENABLE"] = "1"
    res = runner([path, "--out", tmp_path / "a", "--memstrat", fake_memstrat], env=env)
    assert res.returncode == 2 and "1 cells train on several GPUs" in res.stderr, res.stderr
    env["NCCL_NVLS_ENABLE"] = "0"
    res = runner([path, "--out", tmp_path / "b", "--memstrat", fake_memstrat, "--gpus", "0,1"],
                 env=env)
    assert res.returncode == 2 and "gives each worker one GPU" in res.stderr, res.stderr
    # under Slurm each array's tasks are granted the GPUs its cells train on, multicast off
    env.pop("NCCL_NVLS_ENABLE")                   # set on the GPU node by the script itself
    res = runner([path, "--out", tmp_path / "c", "--memstrat", fake_memstrat,
                  "--slurm", tmp_path / "job.sh"], env=env)
    assert res.returncode == 0, res.stderr
    one, two = (tmp_path / "job.sh").read_text(), (tmp_path / "job.gpus2.sh").read_text()
    assert "#SBATCH --gres=gpu:1\n" in one and "#SBATCH --array=0-0%1" in one
    assert "NCCL_NVLS_ENABLE" not in one and "_gpus2" not in one
    assert "#SBATCH --gres=gpu:2\n" in two and "#SBATCH --nodes=1" in two
    assert "\nexport NCCL_NVLS_ENABLE=0\n" in two and "_gpus2" in two
    assert two.index("export NCCL_NVLS_ENABLE=0") < two.index("exec ")
    assert "# Submit with: sbatch " + str(tmp_path / "job.gpus2.sh") in two
    assert "job.gpus2.sh: a Slurm array of 1 tasks on 2 GPUs" in res.stdout
    for script in ("job.sh", "job.gpus2.sh"):
        assert subprocess.run(["bash", "-n", str(tmp_path / script)]).returncode == 0
    # a dry run lists them anywhere
    res = runner([path, "--out", tmp_path / "d", "--memstrat", fake_memstrat, "--dry-run"],
                 env=env)
    assert res.returncode == 0 and "--gpus 2 --run-tag" in res.stdout, res.stderr


def test_records_carry_the_axes(tmp_path, fake_memstrat):
    path = write(tmp_path, SEVERAL + "replicate = [1, 3]\n")
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    res = runner([path, "--out", tmp_path / "out", "--memstrat", fake_memstrat], env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    recs = [json.loads(line) for line in (tmp_path / "out" / "records.jsonl").open()]
    got = sorted((r["config"]["gpus"], r["config"]["replicate"], r["config"]["reduce"])
                 for r in recs)
    assert got == [(1, 1, None), (1, 3, None), (2, 1, "exact"), (2, 3, "exact")]


def test_the_advise_axis_is_um_advises_own_and_collapses_elsewhere(run_matrix, describe,
                                                                    tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = ["um-advise", "um-prefetch"]
advise = ["read-mostly,preferred-device,accessed-by", "none", "read-mostly,accessed-by"]
"""), describe)
    keys = {c.key: c for c in m.cells}
    # um-advise: one cell per hint set; um-prefetch does not read --advise: one cell, no flag
    assert sorted(keys) == [
        "um-advise_static_u8_b256_h256_e10_cublas_advise-none_seed1_r0",
        "um-advise_static_u8_b256_h256_e10_cublas_advise-read-mostly+accessed-by_seed1_r0",
        "um-advise_static_u8_b256_h256_e10_cublas_seed1_r0",
        "um-prefetch_static_u8_b256_h256_e10_cublas_seed1_r0"]
    assert m.collapsed == 2
    default = keys["um-advise_static_u8_b256_h256_e10_cublas_seed1_r0"]
    assert default.advise is None and "--advise" not in default.train_args()
    assert "advise" not in default.config_stub()
    pair = keys["um-advise_static_u8_b256_h256_e10_cublas_advise-read-mostly+accessed-by_seed1_r0"]
    args = pair.train_args()
    assert args[args.index("--advise") + 1] == "read-mostly,accessed-by"
    assert pair.config_stub()["advise"] == "read-mostly,accessed-by"
    assert "--advise" not in keys["um-prefetch_static_u8_b256_h256_e10_cublas_seed1_r0"].train_args()


@pytest.mark.parametrize("value, says", [("read-mostly,sideways", "unknown sideways"),
                                         ("", "no hint"), (3, "not a string")])
def test_an_advise_value_memstrat_would_refuse_is_refused_with_the_axis(run_matrix, describe,
                                                                        tmp_path, value, says):
    with pytest.raises(run_matrix.MatrixError, match=f"axes.advise.*{says}"):
        run_matrix.load_matrix(write(tmp_path, f"""
[axes]
strategy = "um-advise"
advise = [{json.dumps(value)}]
"""), describe)


def test_the_thread_placement_axis_runs_static_on_one_gpu_only(run_matrix, describe, tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = "um-prefetch"
scenario = ["static", "refresh"]
thread_placement = ["os", "apart", "shared"]
gpus = [1, 2]
"""), describe)
    keys = {c.key: c for c in m.cells}
    apart = keys["um-prefetch_static_u8_b256_h256_e10_cublas_threads-apart_seed1_r0"]
    assert apart.train_args()[-2:] == ["--thread-placement", "apart"]
    assert apart.config_stub()["thread_placement"] == "apart"
    # os is memstrat's default: neither passed nor in the key
    plain = keys["um-prefetch_static_u8_b256_h256_e10_cublas_seed1_r0"]
    assert plain.thread_placement is None and "--thread-placement" not in plain.train_args()
    placed = {(c.scenario, c.gpus, c.thread_placement) for c in m.cells if c.thread_placement}
    assert placed == {("static", None, "apart"), ("static", None, "shared")}
    # refresh and several GPUs with placed threads: listed apart, with memstrat's reason
    assert len(m.not_runnable) == 6
    assert all("runs in static on one GPU, not in" in w for _, w in m.not_runnable)
    # The rule is describe's (thread_placement_runs), not the runner's: a memstrat that placed
    # the refresh scenario's threads too would be asked to run those cells.
    wider = copy.deepcopy(describe)
    wider["thread_placement_runs"]["scenarios"] = ["static", "refresh"]
    m = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = "um-prefetch"
scenario = ["static", "refresh"]
thread_placement = ["apart"]
gpus = [1, 2]
""", "wider"), wider)
    assert {(c.scenario, c.gpus) for c in m.cells} == {("static", None), ("refresh", None)}
    assert [w for _, w in m.not_runnable] == [
        "--thread-placement apart runs in static, refresh on one GPU, not in static on several GPUs",
        "--thread-placement apart runs in static, refresh on one GPU, not in refresh on several GPUs"]
    with pytest.raises(run_matrix.MatrixError, match="'near' is not one of os, apart, shared"):
        run_matrix.load_matrix(write(tmp_path, "[axes]\nstrategy = 'um'\nthread_placement = "
                                     "'near'\n", "bad"), describe)

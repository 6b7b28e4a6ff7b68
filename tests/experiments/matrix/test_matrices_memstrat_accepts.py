"""Every several-GPU configuration of the published matrices is one memstrat itself accepts.

The runner checks a matrix against `memstrat describe` (options, ranges, the launch forms and
the several-GPU scenarios each strategy has), and fake_memstrat.py mirrors the launch-form
decisions; the refusals of a data-parallel run's combination of options (say --graphs on with
several GPUs in one process) are the binary's alone. A matrix whose cells memstrat refuses
spends a GPU machine's time on records of nothing, so each distinct several-GPU configuration is
handed to the real binary here: with no GPU visible it must get past every argument check and
stop at the device (exit 3), never at a refusal (exit 2). Needs the memstrat binary (MEMSTRAT_BIN
or build/memstrat) and MNIST (MEMSTRAT_DATA: memstrat reads it before it looks for a device);
skipped with the reason otherwise."""
import concurrent.futures
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
MATRICES = REPO / "experiments" / "matrix" / "matrices"


# memstrat with no GPU visible: it checks its arguments and reads MNIST, then stops at the device
NO_GPU = {"NCCL_NVLS_ENABLE": "0", "CUDA_VISIBLE_DEVICES": ""}


@pytest.fixture(scope="module")
def binary(memstrat_binary, mnist_dir) -> Path:
    """memstrat, where MNIST is there to read (memstrat reads it before it looks for a device)."""
    return memstrat_binary


def several_gpu_configurations(run_matrix, describe) -> dict[tuple[str, ...], str]:
    """{a configuration's `memstrat train` arguments: the matrix and cell it comes from}."""
    found: dict[tuple[str, ...], str] = {}
    for path in sorted(MATRICES.glob("*.toml")):
        for cell in run_matrix.load_matrix(path, describe).cells:
            if (cell.gpus or 1) > 1:
                found.setdefault(tuple(cell.train_args()), f"{path.name}: {cell.key}")
    return found


def test_memstrat_accepts_every_several_gpu_configuration_of_the_published_matrices(
        run_matrix, describe, binary, tmp_path):
    configurations = several_gpu_configurations(run_matrix, describe)
    assert len(configurations) > 100  # gpus, guard_gpus, scaling, scaling4
    env = {**os.environ, **NO_GPU}

    def run(item):
        (args, where), i = item
        r = subprocess.run([str(binary), "train", *args, "--json", str(tmp_path / f"{i}.json")],
                           env=env, capture_output=True, text=True, timeout=120)
        return where, args, r.returncode, r.stderr

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        outcomes = list(pool.map(run, zip(configurations.items(), range(len(configurations)))))
    refused = [f"{where}\n  memstrat train {' '.join(args)}\n  exit {rc}: {err.strip()[-400:]}"
               for where, args, rc, err in outcomes
               if rc != 3 or "no usable CUDA device" not in err]
    assert not refused, f"{len(refused)} of {len(outcomes)} refused:\n" + "\n".join(refused[:10])


# The check can fail: the one-process form refuses a --graphs on that the per-gpu form takes.
def test_the_check_sees_a_refused_combination(binary, tmp_path):
    env = {**os.environ, **NO_GPU}
    base = ["train", "--strategy", "resident", "--gpus", "2", "--reduce", "ring", "--epochs", "3",
            "--json", str(tmp_path / "r.json")]
    one = subprocess.run([str(binary), *base, "--graphs", "on"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert one.returncode == 2 and "--graphs on with --gpus N > 1" in one.stderr
    per_gpu = subprocess.run([str(binary), *base, "--graphs", "on", "--processes", "per-gpu"],
                             env=env, capture_output=True, text=True, timeout=120)
    assert per_gpu.returncode == 3 and "no usable CUDA device" in per_gpu.stderr, per_gpu.stderr

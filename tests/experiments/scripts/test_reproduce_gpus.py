"""reproduce.sh on a machine of several GPUs (a stand-in memstrat that reports two): the results
set is named per GPU count, NVLink multicast is off in every stage (NCCL_NVLS_ENABLE=0 exported
when unset), and a run that asks for it on (NCCL_NVLS_ENABLE set to anything else) is refused
before any stage runs."""
import os
import subprocess

import pytest
from script_support import reproduce_tree

FAKE_MEMSTRAT = """#!/bin/sh
case "$1" in
  info) echo "device 0 of $FAKE_GPUS: NVIDIA Test GPU" ;;
  --version) echo "memstrat 0.1.0"; echo "commit 0123456789ab" ;;
  *) echo "fake memstrat: $*" >&2; exit 9 ;;
esac
"""


@pytest.fixture
def fake_repo(tmp_path):
    return reproduce_tree(tmp_path, FAKE_MEMSTRAT)


def run(repo, gpus, nvls, stages="primitives"):
    env = {k: v for k, v in os.environ.items() if k != "NCCL_NVLS_ENABLE"}
    env["FAKE_GPUS"] = str(gpus)
    if nvls is not None:
        env["NCCL_NVLS_ENABLE"] = nvls
    return subprocess.run(["bash", str(repo / "experiments/scripts/reproduce.sh"), "--stages",
                           stages], capture_output=True, text=True, env=env, check=False,
                          timeout=60)


@pytest.mark.parametrize("stages", ["primitives", "data", "matrix", "timelines"])
@pytest.mark.parametrize("nvls", ["1", "2"])
def test_several_gpus_refuse_nvlink_multicast_asked_on_in_every_stage(fake_repo, nvls, stages):
    r = run(fake_repo, 2, nvls, stages)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "this machine has 2 GPUs" in r.stderr and "export NCCL_NVLS_ENABLE=0" in r.stderr
    assert f"NCCL_NVLS_ENABLE is '{nvls}'" in r.stderr
    assert "stage" not in r.stdout


@pytest.mark.parametrize("nvls", [None, "", "0"])
def test_several_gpus_run_with_nvlink_multicast_off_unless_asked_otherwise(fake_repo, nvls):
    r = run(fake_repo, 2, nvls)
    # past the check: stopped at the first Python step, which this tree does not hold
    assert "this machine has 2 GPUs" not in r.stderr, r.stdout + r.stderr
    assert "stages: primitives; NCCL_NVLS_ENABLE=0" in r.stdout, r.stdout + r.stderr


def test_one_gpu_leaves_nccl_alone(fake_repo):
    for nvls in (None, "1"):
        r = run(fake_repo, 1, nvls)
        assert "this machine has" not in r.stderr, r.stdout + r.stderr
        line = next(ln for ln in r.stdout.splitlines() if "stages:" in ln)
        asked = "" if nvls is None else "; NCCL_NVLS_ENABLE=1"
        assert line.endswith("stages: primitives" + asked)


def test_a_set_per_gpu_count(fake_repo):
    r = run(fake_repo, 2, "0")
    assert "results set: docs/results/nvidia-test-gpu-x2;" in r.stdout, r.stdout + r.stderr
    r = run(fake_repo, 1, None)  # one GPU: no NCCL, no refusal, the plain name
    assert "results set: docs/results/nvidia-test-gpu;" in r.stdout, r.stdout + r.stderr

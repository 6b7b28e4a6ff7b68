"""reproduce.sh on a machine of several GPUs (a stand-in memstrat that reports two): the results
set is named per GPU count, and the primitives stage, which measures NCCL there, refuses to start
without NCCL_NVLS_ENABLE=0 before any stage runs."""
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


def run(repo, gpus, nvls):
    env = {k: v for k, v in os.environ.items() if k != "NCCL_NVLS_ENABLE"}
    env["FAKE_GPUS"] = str(gpus)
    if nvls is not None:
        env["NCCL_NVLS_ENABLE"] = nvls
    return subprocess.run(["bash", str(repo / "experiments/scripts/reproduce.sh"), "--stages",
                           "primitives"], capture_output=True, text=True, env=env, check=False,
                          timeout=60)


@pytest.mark.parametrize("nvls", [None, "1"])
def test_several_gpus_refuse_the_primitives_stage_without_nvlink_multicast_off(fake_repo, nvls):
    r = run(fake_repo, 2, nvls)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "this machine has 2 GPUs" in r.stderr and "export NCCL_NVLS_ENABLE=0" in r.stderr
    assert "stage" not in r.stdout


def test_a_set_per_gpu_count(fake_repo):
    r = run(fake_repo, 2, "0")
    assert "results set: docs/results/nvidia-test-gpu-x2;" in r.stdout, r.stdout + r.stderr
    r = run(fake_repo, 1, None)  # one GPU: no NCCL, no refusal, the plain name
    assert "results set: docs/results/nvidia-test-gpu;" in r.stdout, r.stdout + r.stderr

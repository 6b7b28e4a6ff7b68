"""reproduce.sh --stages report reads records only: it runs without a GPU or a build, on the set
named by --out or on every set under docs/results/, and refuses a folder that is not a set. The
analysis scripts are stand-ins that log their arguments (the report itself has its own tests)."""
import json
import shutil
import subprocess

import pytest
from script_support import SCRIPTS

STAND_IN = """import sys
with open(__file__.rsplit("/", 2)[0] + "/calls.txt", "a") as f:
    f.write(__file__.rsplit("/", 1)[1] + " " + " ".join(sys.argv[1:]) + "\\n")
"""


@pytest.fixture
def tree(tmp_path):
    """reproduce.sh, stand-in analysis scripts and two results sets; no build/memstrat."""
    (tmp_path / "experiments/scripts").mkdir(parents=True)
    shutil.copy(SCRIPTS / "reproduce.sh", tmp_path / "experiments/scripts")
    (tmp_path / "analysis").mkdir()
    for name in ("report.py", "results_readme.py", "docs_blocks.py"):
        (tmp_path / "analysis" / name).write_text(STAND_IN)
    for name, gpu, kind in (("gpu-a", "GPU A", "results"), ("gpu-b-x2", "GPU B", "scaling")):
        rec = tmp_path / "docs/results" / name / "records"
        rec.mkdir(parents=True)
        (rec / f"{kind}.jsonl").write_text(json.dumps({"env": {"gpu_name": gpu}}) + "\n")
    (tmp_path / "docs/results/not-a-set").mkdir()
    return tmp_path


def run(tree, *args):
    return subprocess.run(["bash", "experiments/scripts/reproduce.sh", "--stages", "report",
                           *args], cwd=tree, capture_output=True, text=True, timeout=60,
                          check=False)


def calls(tree):
    return (tree / "calls.txt").read_text().splitlines()


def test_the_named_set_is_reported_without_a_gpu_or_a_build(tree):
    r = run(tree, "--out", "docs/results/gpu-a")
    assert r.returncode == 0, r.stderr
    assert "report on docs/results/gpu-a (GPU A), from its records only" in r.stdout
    c = calls(tree)
    assert c[0].startswith("report.py docs/results/gpu-a/records/results.jsonl")
    assert "--title memstrat results: GPU A --out docs/results/gpu-a" in c[0]
    assert c[1].startswith("results_readme.py docs/results/gpu-a --command")
    assert c[2] == "docs_blocks.py "


def test_every_set_is_reported_when_none_is_named(tree):
    r = run(tree)
    assert r.returncode == 0, r.stderr
    c = calls(tree)
    # the multi-GPU set has no matrix records: its README and manifest only, no report.py
    assert [x.split(" ")[0] for x in c] == ["report.py", "results_readme.py", "docs_blocks.py",
                                            "results_readme.py", "docs_blocks.py"]
    assert c[3].startswith("results_readme.py docs/results/gpu-b-x2 ")


def test_a_folder_without_records_is_refused(tree):
    r = run(tree, "--out", "docs/results/not-a-set")
    assert r.returncode == 2
    assert "holds no records/: not a results set" in r.stderr
    assert not (tree / "calls.txt").exists()


def test_a_set_whose_records_name_no_gpu_is_refused(tree):
    (tree / "docs/results/gpu-a/records/results.jsonl").write_text('{"env": {}}\nnot json\n')
    r = run(tree, "--out", "docs/results/gpu-a")
    assert r.returncode == 2 and "names its GPU" in r.stderr


def test_no_set_at_all_is_refused(tree):
    shutil.rmtree(tree / "docs/results")
    r = run(tree)
    assert r.returncode == 2 and "no results set under docs/results/" in r.stderr


def test_the_readme_gets_each_stages_seconds_summed_over_sittings(tree):
    work = tree / "results/reproduce/gpu-a"
    work.mkdir(parents=True)
    (work / "stage_seconds.log").write_text(
        "build 80\ndata 1\nmatrix 545 interrupted\ndata 1\nmatrix 540 interrupted\nmatrix 300\n")
    assert run(tree, "--out", "docs/results/gpu-a").returncode == 0
    readme = [c for c in calls(tree) if c.startswith("results_readme.py")][0]
    assert "--stage-seconds build=80,data=2,matrix=1385," in readme


def test_a_stage_stopped_half_way_leaves_its_seconds_in_the_ledger(tmp_path):
    """The data stage fails at once here (no get_mnist.py): the seconds it ran are kept, marked
    interrupted, so that a later sitting's report counts them."""
    from script_support import reproduce_tree
    fake = ('#!/bin/sh\ncase "$1" in\n  info) echo "device 0 of 1: NVIDIA Test GPU" ;;\n'
            '  --version) echo "memstrat 0.1.0"; echo "commit 0123456789ab" ;;\nesac\n')
    repo = reproduce_tree(tmp_path, fake)
    r = subprocess.run(["bash", "experiments/scripts/reproduce.sh", "--stages", "data"],
                       cwd=repo, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode != 0
    ledger = (repo / "results/reproduce/nvidia-test-gpu/stage_seconds.log").read_text().split()
    assert ledger[0] == "data" and ledger[1].isdigit() and ledger[2] == "interrupted"

"""reproduce.sh's stage list, its multi-GPU set and its scaling stage, end to end with stand-ins:
a memstrat that reports 1..N GPUs, and a python3 first on PATH that logs every command and
writes what the real scripts would (the matrix runner's records and order, the data-parallel
benchmark's records and table, scaling_check's lines and exit status). What is checked is what
the script runs, in which order, with which options and NCCL_NVLS_ENABLE, and where the results
set's files land."""
import os
import re
import subprocess
import sys

import pytest
from script_support import reproduce_tree, write_command

FAKE_MEMSTRAT = """#!/bin/sh
case "$1" in
  info) echo "device 0 of $FAKE_GPUS: NVIDIA Test GPU" ;;
  --version) echo "memstrat 0.1.0"; echo "commit 0123456789ab" ;;
  primitives)
    echo "nvls=${NCCL_NVLS_ENABLE-unset} memstrat $*" >> "$FAKE_LOG"
    while [ $# -gt 0 ]; do
      [ "$1" = --json ] && echo '{"record": "primitive"}' >> "$2"; shift
    done ;;
  *) echo "fake memstrat: $*" >&2; exit 9 ;;
esac
"""
FAKE_BUILD = """#!/bin/sh
echo "nvls=${NCCL_NVLS_ENABLE-unset} build $*" >> "$FAKE_LOG"
"""
FAKE_PYTHON = """#!{python}
import os, pathlib, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write("nvls=%s python %s\\n" % (os.environ.get("NCCL_NVLS_ENABLE", "unset"), " ".join(args)))
def opt(name):
    return args[args.index(name) + 1]
script = args[0] if args else ""
if script == "-c":                                   # `python3 -c "import torch"`: no torch
    sys.exit(1)
if script.endswith("run_matrix.py"):
    out = pathlib.Path(opt("--out"))
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "records.jsonl", "a") as f:
        f.write('{{"matrix": "%s"}}\\n' % pathlib.Path(args[1]).stem)
    (out / "manifest.json").write_text("{{}}")
elif script.endswith("benchmark_data_parallel.py"):
    out = pathlib.Path(opt("--out-dir"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "records.jsonl").write_text('{{"gpus_list": "%s"}}\\n' % opt("--gpus-list"))
    (out / "benchmark_data_parallel.md").write_text("# memstrat beside DDP and JAX\\n")
elif script.endswith("scaling_check.py"):
    print("NVIDIA Test GPU: resident x2 (per-gpu processes, --reduce ring): agrees")
    print("1/1 checked configurations agree within 15%; 0 not checked")
    sys.exit(int(os.environ.get("FAKE_CHECK_RC", "0")))
"""


@pytest.fixture
def tree(tmp_path):
    repo = reproduce_tree(tmp_path / "repo", FAKE_MEMSTRAT)
    write_command(repo / "experiments/scripts/build.sh", FAKE_BUILD)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_command(bin_dir / "python3", FAKE_PYTHON.format(python=sys.executable))
    data = tmp_path / "mnist"            # what the data stage decompresses
    data.mkdir()
    subprocess.run(["sh", "-c", f"echo idx | gzip > '{data}/t10k-labels-idx1-ubyte.gz'"],
                   check=True)
    return repo, bin_dir, data, tmp_path / "log"


def run(tree, gpus, stages=None, check_rc=0, nvls=None):
    repo, bin_dir, data, log = tree
    env = {k: v for k, v in os.environ.items() if k != "NCCL_NVLS_ENABLE"}
    env.update(FAKE_GPUS=str(gpus), FAKE_LOG=str(log), FAKE_CHECK_RC=str(check_rc),
               MEMSTRAT_DATA=str(data), PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    if nvls is not None:
        env["NCCL_NVLS_ENABLE"] = nvls
    argv = ["bash", str(repo / "experiments/scripts/reproduce.sh")]
    if stages:
        argv += ["--stages", stages]
    if log.exists():
        log.unlink()
    r = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=120,
                       cwd=repo)
    commands = log.read_text().splitlines() if log.exists() else []
    return r, commands


def index(commands, pattern):
    """The position of the first command matching `pattern` (a regular expression)."""
    for i, c in enumerate(commands):
        if re.search(pattern, c):
            return i
    raise AssertionError(f"no command matches {pattern!r}:\n" + "\n".join(commands))


def test_the_help_lists_every_stage_in_the_order_they_run(tree):
    repo = tree[0]
    script = repo / "experiments/scripts/reproduce.sh"
    r = subprocess.run(["bash", str(script), "--stages", "nonsense"], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 2
    stages = r.stderr.split("stages: ", 1)[1].split()
    assert (stages.index("pipelines") + 1 == stages.index("scaling") == stages.index("gpus") - 1
            == stages.index("report") - 2)
    help_text = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True,
                               check=True).stdout
    listed = re.findall(r"^  ([a-z]+) {2,}", help_text.split("Stages, in order", 1)[1],
                        flags=re.M)
    assert listed == stages
    # the loop that runs them goes in the same order
    loop = re.search(r"^for s in (.*); do\n  has_stage", script.read_text(), flags=re.M)
    assert loop.group(1).split() == stages[2:]   # build and data run before the GPUs' stages


def test_two_gpus_default_to_the_multi_gpu_set_and_its_stages(tree):
    repo = tree[0]
    r, commands = run(tree, 2)
    assert r.returncode == 0, r.stdout + r.stderr
    out = repo / "docs/results/nvidia-test-gpu-x2"
    assert "results set: docs/results/nvidia-test-gpu-x2;" in r.stdout
    assert "stages: build data primitives scaling gpus report; NCCL_NVLS_ENABLE=0" in r.stdout
    # in order: the primitives (one GPU, then both), the matrix, the benchmark, the check
    order = [index(commands, p) for p in (
        r" build", r"get_mnist\.py", r"memstrat primitives --json",
        r"memstrat primitives --gpus 2 --max-size 1GiB", r"run_matrix\.py .*scaling\.toml",
        r"benchmark_data_parallel\.py", r"scaling_check\.py", r"run_matrix\.py .*gpus\.toml",
        r"results_readme\.py .*--command",
        r"docs_blocks\.py")]
    assert order == sorted(order), commands
    for stage in ("matrix", "compute", "budget", "spread", "stream", "timelines", "baselines",
                  "pipelines"):
        assert f"stage {stage}" not in r.stdout
    # every command after the GPUs are counted runs with NVLink multicast off
    assert all(c.startswith("nvls=0 ") for c in commands[index(commands, "get_mnist"):]), commands
    bench = commands[index(commands, r"benchmark_data_parallel\.py")]
    assert re.search(r"--memstrat \S+/build/memstrat --out-dir results/reproduce/"
                     r"nvidia-test-gpu-x2/data_parallel --gpus-list 2 --resume$", bench), bench
    check = commands[index(commands, r"scaling_check\.py")]
    assert check.endswith(f"analysis/scaling_check.py {out.relative_to(repo)}/records/"
                          f"scaling.jsonl --primitives {out.relative_to(repo)}/records/"
                          "primitives_gpus.jsonl"), check
    # the set's files
    assert (out / "records/scaling.jsonl").read_text() == '{"matrix": "scaling"}\n'
    assert (out / "records/scaling.order.json").is_file()
    assert (out / "records/gpus.jsonl").read_text() == '{"matrix": "gpus"}\n'
    assert (out / "baselines/records/data_parallel.jsonl").read_text() == '{"gpus_list": "2"}\n'
    assert (out / "baselines/vs_data_parallel.md").read_text().startswith("# memstrat beside")
    md = (out / "scaling_check.md").read_text()
    assert "NVIDIA Test GPU, 2 GPUs" in md and "every checked configuration agrees" in md
    assert ("$ python3 analysis/scaling_check.py records/scaling.jsonl "
            "--primitives records/primitives_gpus.jsonl\n") in md
    assert not any("scaling4" in c for c in commands), "2 GPUs: no runs at 4"
    assert "1/1 checked configurations agree within 15%" in md and md.rstrip().endswith("```")
    # the report stage: no matrix records, so report.py is left out, and said so
    assert not any("report.py" in c for c in commands), commands
    assert "report.py is left out" in r.stdout
    readme = commands[index(commands, r"results_readme\.py .*--command")]
    assert re.search(r"--stage-seconds build=\d+,data=\d+,primitives=\d+,scaling=\d+,gpus=\d+,$",
                     readme)


@pytest.mark.parametrize("gpus, counts", [(4, "2,3,4"), (10, "2,3,4,5,6,7,8")])
def test_more_gpus_benchmark_every_count_and_train_at_two_and_four(tree, gpus, counts):
    repo = tree[0]
    out = f"docs/results/nvidia-test-gpu-x{gpus}"
    (repo / out / "records").mkdir(parents=True)
    (repo / out / "records/primitives_gpus.jsonl").write_text('{"record": "multi-gpu-primitive"}\n')
    r, commands = run(tree, gpus, "scaling")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"results set: {out};" in r.stdout
    # the primitives at each count the matrices train on and the machine's own count is not:
    # measured before any run, so a failure is early
    measured = [c for c in commands if "memstrat primitives" in c]
    at = [2] if gpus == 4 else [2, 4]
    assert len(measured) == len(at), commands
    for n, c in zip(at, measured):
        assert re.search(rf"memstrat primitives --gpus {n} --json \S+/primitives_gpus{n}\.jsonl$", c)
        assert commands.index(c) < index(commands, r"run_matrix\.py")
        assert (repo / out / f"records/primitives_gpus{n}.jsonl").is_file()
    # scaling.toml (1 and 2 GPUs), then scaling4.toml (4 GPUs), each into its own records file
    assert index(commands, r"run_matrix\.py .*scaling\.toml") < index(commands, r"run_matrix\.py .*scaling4\.toml")
    assert (repo / out / "records/scaling4.jsonl").read_text() == '{"matrix": "scaling4"}\n'
    assert f"--gpus-list {counts} --resume" in commands[index(commands, "benchmark_data_parallel")]
    four = f"{out}/records/primitives_gpus.jsonl" if gpus == 4 else f"{out}/records/primitives_gpus4.jsonl"
    assert commands[index(commands, "scaling_check")].endswith(
        f"analysis/scaling_check.py {out}/records/scaling.jsonl {out}/records/scaling4.jsonl "
        f"--primitives {out}/records/primitives_gpus2.jsonl --primitives {four}")
    md = (repo / out / "scaling_check.md").read_text()
    assert ("$ python3 analysis/scaling_check.py records/scaling.jsonl records/scaling4.jsonl "
            f"--primitives records/primitives_gpus2.jsonl --primitives {four.split(out + '/')[1]}\n") in md


def test_four_gpus_without_their_primitives_stop_before_any_run(tree):
    r, commands = run(tree, 4, "scaling")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "primitives_gpus.jsonl, which the primitives stage writes" in r.stderr
    assert not any(re.search("run_matrix|benchmark_data_parallel|memstrat primitives", c)
                   for c in commands), commands


def test_two_gpus_without_the_primitives_at_two_stop_before_any_run(tree):
    r, commands = run(tree, 2, "scaling")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "run it first (--stages primitives,scaling)" in r.stderr
    assert not any("run_matrix" in c or "benchmark_data_parallel" in c for c in commands), commands


def test_one_gpu_skips_the_several_gpu_stages_and_keeps_its_set(tree):
    repo = tree[0]
    r, commands = run(tree, 1, "scaling,gpus,report")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "results set: docs/results/nvidia-test-gpu;" in r.stdout
    assert "this machine has 1 GPU; the scaling stage trains on 2 GPUs" in r.stdout
    assert "stage scaling skipped" in r.stdout
    assert "this machine has 1 GPU; the gpus stage trains on 2" in r.stdout
    assert "stage gpus skipped" in r.stdout
    assert not any(re.search("run_matrix|benchmark_data_parallel|scaling_check|memstrat", c)
                   for c in commands), commands
    assert all(c.startswith("nvls=unset ") for c in commands), commands
    # a stage that measured nothing has no time in the set's README
    readme = commands[index(commands, r"results_readme\.py .*--command")]
    assert "scaling=" not in readme and "gpus=" not in readme, readme
    assert not (repo / "docs/results/nvidia-test-gpu/scaling_check.md").exists()


def test_one_gpu_defaults_to_every_stage_but_the_several_gpu_ones(tree):
    r, _ = run(tree, 1)      # stops at the first matrix stage's missing parts: the list is enough
    assert ("stages: build data primitives matrix compute budget spread stream timelines "
            "baselines pipelines report\n") in r.stdout, r.stdout + r.stderr


def test_a_disagreeing_check_is_published_and_bad_input_fails_the_stage(tree):
    repo, _, _, _ = tree
    out = repo / "docs/results/nvidia-test-gpu-x2"
    (out / "records").mkdir(parents=True)
    (out / "records/primitives_gpus.jsonl").write_text('{"record": "multi-gpu-primitive"}\n')
    r, _ = run(tree, 2, "scaling", check_rc=1)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the model disagrees with at least one configuration" in r.stdout
    assert "disagrees with the model (a finding, not a failure)" in (
        out / "scaling_check.md").read_text()
    (out / "scaling_check.md").unlink()
    r, _ = run(tree, 2, "scaling", check_rc=2)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "stage scaling done" not in r.stdout
    assert not (out / "scaling_check.md").exists()


def test_the_report_stage_runs_report_py_where_the_matrix_records_are(tree):
    repo = tree[0]
    records = repo / "docs/results/nvidia-test-gpu/records"
    records.mkdir(parents=True)
    (records / "results.jsonl").write_text("{}\n")
    r, commands = run(tree, 1, "report")
    assert r.returncode == 0, r.stdout + r.stderr
    report = commands[index(commands, r"analysis/report\.py")]
    assert "docs/results/nvidia-test-gpu/records/results.jsonl" in report
    assert "--out docs/results/nvidia-test-gpu" in report
    assert "left out" not in r.stdout

"""The pinned Python packages: check_requirements.py compares installed versions with the pins,
install_deps.sh reinstalls when one differs, reproduce.sh refuses its baselines stage without
torch at the pinned version. Installed versions are faked with dist-info folders first on
PYTHONPATH, pip and apt with stand-ins: nothing is installed."""
import os
import subprocess
import sys

import pytest

from script_support import REPO, SCRIPTS, env_with, fake_distributions, write_command

ANALYSIS = REPO / "analysis" / "requirements.txt"
STATS = REPO / "analysis" / "requirements-stats.txt"
BASELINES = REPO / "experiments" / "baselines" / "requirements.txt"
NCCL = REPO / "experiments" / "scripts" / "requirements-nccl.txt"


def pins_of(check_requirements, path):
    return {p.name: p.version for p in check_requirements.read_pins(path)}


def test_reads_exact_pins_and_follows_includes(check_requirements, tmp_path):
    (tmp_path / "base.txt").write_text("# comment\n\nnumpy==2.4.6  # inline\nJSON-Schema==4.26.0\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "req.txt").write_text("-r ../base.txt\ntorch==2.11.0\n")
    pins = check_requirements.read_pins(tmp_path / "sub" / "req.txt")
    assert [(p.name, p.version) for p in pins] == [
        ("numpy", "2.4.6"), ("JSON-Schema", "4.26.0"), ("torch", "2.11.0")]
    assert pins[2].source.endswith("req.txt:2")
    for bad in ("numpy>=2.4", "numpy", "numpy==2.*", "-e .", "numpy==2.4.6; python_version<'3'"):
        (tmp_path / "bad.txt").write_text(bad + "\n")
        with pytest.raises(check_requirements.RequirementsError, match="bad.txt:1"):
            check_requirements.read_pins(tmp_path / "bad.txt")


def test_the_baselines_pin_torch_and_the_analysis_statistics_pins(check_requirements):
    baselines, analysis = pins_of(check_requirements, BASELINES), pins_of(check_requirements, ANALYSIS)
    stats = pins_of(check_requirements, STATS)
    assert baselines["torch"] == "2.11.0"
    assert {k: v for k, v in baselines.items() if k != "torch"} == stats
    # analysis/ pins the statistics' packages at the same versions, and the figures' and tests'
    assert {k: v for k, v in analysis.items() if k in stats} == stats
    assert set(analysis) - set(stats) == {"matplotlib", "pytest"}
    assert {"numpy", "scipy"} <= set(stats)


# The baselines' pins leave matplotlib out: every script of experiments/baselines/ and the scaling
# stage's check must import without it, or that stage would fail on a machine with only its pins.
BASELINE_SCRIPTS = sorted((REPO / "experiments" / "baselines").glob("*.py")) + [
    REPO / "analysis" / "scaling_check.py"]


@pytest.mark.parametrize("script", BASELINE_SCRIPTS, ids=lambda p: p.name)
def test_the_baselines_import_without_matplotlib(script):
    probe = (
        "import importlib.util, sys\n"
        "sys.modules['matplotlib'] = None  # any import of it raises ImportError\n"
        f"sys.path[:0] = [{str(REPO)!r}, {str(script.parent)!r}]\n"
        f"spec = importlib.util.spec_from_file_location('probe', {str(script)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['probe'] = m\n"
        "spec.loader.exec_module(m)\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-2000:]


def run_check(requirements, site):
    return subprocess.run([sys.executable, str(SCRIPTS / "check_requirements.py"), str(requirements)],
                          capture_output=True, text=True, env=env_with(PYTHONPATH=site), check=False)


# The committed baseline records were made with numpy 2.5.2 against the pinned 2.4.6: importing
# is not enough, the version is compared.
def test_a_version_that_differs_is_found(check_requirements, tmp_path):
    pins = pins_of(check_requirements, BASELINES)
    site = fake_distributions(tmp_path / "site", dict(pins, numpy="2.5.2", torch="2.11.0+cu130"))
    r = run_check(BASELINES, site)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"numpy=={pins['numpy']}" in r.stdout and "2.5.2 installed" in r.stdout
    assert "torch" not in r.stdout.replace("baselines/requirements.txt", "")  # +cu130 meets ==2.11.0
    assert "-m pip install -r" in r.stdout
    site2 = fake_distributions(tmp_path / "site2", dict(pins, torch="2.11.0+cu130"))
    r = run_check(BASELINES, site2)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_missing_file_is_a_usage_error(tmp_path):
    r = run_check(tmp_path / "nope.txt", tmp_path)
    assert r.returncode == 2 and "cannot read" in r.stderr


def stand_ins(tmp_path, nvcc_release=None):
    """PATH with pip (through python3), apt-get, sudo and nvcc replaced by loggers; nvcc prints
    the version line of `nvcc_release` ("13.0") where given."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(parents=True)
    log = tmp_path / "calls.log"
    write_command(bin_ / "python3", f"""#!/bin/sh
if [ "$1" = -m ] && [ "$2" = pip ] && [ "$3" = install ]; then echo "pip $*" >> "{log}"; exit 0; fi
exec "{sys.executable}" "$@"
""")
    for tool in ("apt-get", "sudo", "nvcc"):
        write_command(bin_ / tool, f'#!/bin/sh\necho "{tool} $*" >> "{log}"\n')
    if nvcc_release:
        write_command(bin_ / "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release "
                      f"{nvcc_release}, V{nvcc_release}.88'\n")
    return bin_, log


def run_install_deps(tmp_path, versions, nvcc_release=None):
    bin_, log = stand_ins(tmp_path, nvcc_release)
    site = fake_distributions(tmp_path / "site", versions)
    r = subprocess.run(["bash", str(SCRIPTS / "install_deps.sh")], capture_output=True, text=True,
                       env=env_with(PATH=f"{bin_}:{os.environ['PATH']}", PYTHONPATH=site),
                       check=False)
    calls = log.read_text().splitlines() if log.exists() else []
    return r, [c for c in calls if c.startswith("pip")]


def test_install_deps_reinstalls_when_a_pinned_version_differs(check_requirements, tmp_path):
    pins = pins_of(check_requirements, ANALYSIS)
    r, pip = run_install_deps(tmp_path, dict(pins, numpy="2.5.2"))
    assert pip and "-r" in pip[0] and pip[0].endswith("analysis/requirements.txt"), r.stdout + r.stderr
    # The stand-in pip installed nothing, so the pins are still not met: said, and a failure.
    assert r.returncode == 1
    assert "still not met" in r.stderr and "2.5.2 installed" in r.stderr


def test_install_deps_leaves_pip_alone_when_every_pin_is_met(check_requirements, tmp_path):
    r, pip = run_install_deps(tmp_path, pins_of(check_requirements, ANALYSIS))
    assert r.returncode == 0, r.stdout + r.stderr
    assert pip == []


def test_install_deps_installs_the_pinned_nccl_wheel_on_cuda_13(check_requirements, tmp_path):
    pins = pins_of(check_requirements, ANALYSIS)
    nccl = pins_of(check_requirements, NCCL)
    assert list(nccl) == ["nvidia-nccl-cu13"]
    r, pip = run_install_deps(tmp_path, dict(pins, **{"nvidia-nccl-cu13": "2.28.3"}), "13.0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(pip) == 1 and pip[0].endswith("experiments/scripts/requirements-nccl.txt"), pip


def test_install_deps_leaves_a_met_nccl_pin_alone(check_requirements, tmp_path):
    versions = dict(pins_of(check_requirements, ANALYSIS), **pins_of(check_requirements, NCCL))
    r, pip = run_install_deps(tmp_path / "a", versions, "13.0")
    assert r.returncode == 0 and pip == [], r.stdout + r.stderr
    # Another toolkit: the cu13 wheel is not installed, and the message says how to get NCCL.
    r, pip = run_install_deps(tmp_path / "b", pins_of(check_requirements, ANALYSIS), "12.8")
    assert r.returncode == 0 and pip == [], r.stdout + r.stderr
    assert "NCCL_ROOT" in r.stdout


@pytest.mark.parametrize("stage", ["baselines", "pipelines", "scaling"])
def test_reproduce_refuses_the_baselines_stage_without_the_pinned_torch(check_requirements,
                                                                        tmp_path, stage):
    versions = dict(pins_of(check_requirements, BASELINES), torch="2.10.0")
    site = fake_distributions(tmp_path / "site", versions)
    r = subprocess.run(["bash", str(SCRIPTS / "reproduce.sh"), "--stages", f"matrix,{stage}"],
                       capture_output=True, text=True, env=env_with(PYTHONPATH=site), check=False,
                       timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "torch==2.11.0" in r.stderr and "2.10.0 installed" in r.stderr
    assert "pip install -r experiments/baselines/requirements.txt" in r.stderr
    assert "--stages matrix" in r.stderr
    assert "stage" not in r.stdout  # refused before any stage ran

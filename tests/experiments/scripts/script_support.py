"""What the tests of experiments/scripts/ share: the Python scripts as modules (experiments/ is
not a package), fake installed distributions, and stand-in commands on PATH."""
import importlib.util
import os
import shutil
import stat
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = REPO / "experiments" / "scripts"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def fake_distributions(where: Path, versions: dict) -> Path:
    """A folder of NAME-VERSION.dist-info entries; put first on PYTHONPATH, it is what
    importlib.metadata finds for those names, whatever else is installed."""
    where.mkdir(parents=True, exist_ok=True)
    for name, version in versions.items():
        d = where / f"{name.replace('-', '_')}-{version}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return where


def write_command(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def env_with(**extra):
    env = dict(os.environ)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def reproduce_tree(root: Path, fake_memstrat: str) -> Path:
    """A tree with experiments/scripts/reproduce.sh and a stand-in build/memstrat (the shell
    script `fake_memstrat`) only: no analysis/ and no get_mnist.py, so a run that got past
    reproduce.sh's checks stops at its first Python step."""
    (root / "experiments/scripts").mkdir(parents=True)
    shutil.copy(SCRIPTS / "reproduce.sh", root / "experiments/scripts")
    (root / "build").mkdir()
    ms = root / "build/memstrat"
    ms.write_text(fake_memstrat)
    ms.chmod(0o755)
    return root

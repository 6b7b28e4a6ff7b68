"""Fixtures for the matrix runner tests: the runner as a module and a stand-in memstrat."""
import importlib.util
import os
import stat
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FAKE_MEMSTRAT = Path(__file__).resolve().parent / "fake_memstrat.py"


def _load_run_matrix():
    spec = importlib.util.spec_from_file_location(
        "run_matrix", REPO / "experiments" / "matrix" / "run_matrix.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["run_matrix"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def run_matrix():
    """experiments/matrix/run_matrix.py as a module (experiments/ is not a package)."""
    return _load_run_matrix()


@pytest.fixture(scope="session")
def fake_memstrat():
    """Path of the executable fake memstrat (the exec bit may be lost in a checkout)."""
    mode = FAKE_MEMSTRAT.stat().st_mode
    if not mode & stat.S_IXUSR:
        os.chmod(FAKE_MEMSTRAT, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return FAKE_MEMSTRAT


@pytest.fixture(scope="session")
def matrix_module(run_matrix):
    """name -> a module of experiments/matrix/ (on sys.path once run_matrix is loaded)."""
    import importlib
    return importlib.import_module

"""Fixtures for the tests of experiments/scripts/: its Python scripts as modules."""
import pytest

from script_support import load_script


@pytest.fixture(scope="session")
def nsys_counts():
    return load_script("nsys_counts")


@pytest.fixture(scope="session")
def check_requirements():
    return load_script("check_requirements")


@pytest.fixture(scope="session")
def sanitizer_findings():
    return load_script("sanitizer_findings")

"""Shared fixtures for the analysis/ tests."""
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir():
    return FIXTURES


@pytest.fixture(scope="session")
def fixture_records():
    from analysis.records import load_records
    return load_records(FIXTURES / "records.jsonl")


@pytest.fixture(scope="session")
def fixture_groups(fixture_records):
    from analysis.aggregate import aggregate
    return aggregate(fixture_records)

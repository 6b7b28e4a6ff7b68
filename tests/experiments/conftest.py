"""What the tests of experiments/ share: the committed fixtures and the record schema."""
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCHEMA = REPO / "docs" / "schema" / "run_record.schema.json"


@pytest.fixture(scope="session")
def record_validator():
    """A validator for docs/schema/run_record.schema.json (draft 2020-12)."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="session")
def describe():
    """`memstrat describe --json` as the binary answers it (tests/cpu/test_cli.cpp keeps this
    copy equal to the binary's answer)."""
    return json.loads((FIXTURES / "describe.json").read_text())


@pytest.fixture(scope="session")
def record_errors(record_validator):
    """record -> every schema violation as 'path: message' ([] when it validates)."""
    def errors(record):
        return ["/".join(map(str, e.absolute_path)) + ": " + e.message
                for e in record_validator.iter_errors(record)]
    return errors

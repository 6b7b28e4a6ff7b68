"""What the tests of experiments/ share: the committed fixtures, the record schema, the memstrat
binary and MNIST."""
import json
import os
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
def memstrat_binary() -> Path:
    """The built memstrat ($MEMSTRAT_BIN, else build/memstrat); the test is skipped without it."""
    p = Path(os.environ.get("MEMSTRAT_BIN") or REPO / "build" / "memstrat")
    if not (p.is_file() and os.access(p, os.X_OK)):
        pytest.skip(f"no memstrat binary at {p} (build it, or set MEMSTRAT_BIN)")
    return p


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    """The MNIST directory $MEMSTRAT_DATA names; the test is skipped without it."""
    data = os.environ.get("MEMSTRAT_DATA")
    if not data or not Path(data).is_dir():
        pytest.skip("MEMSTRAT_DATA does not name the MNIST directory")
    return Path(data)


@pytest.fixture(scope="session")
def describe():
    """`memstrat describe --json` as the binary answers it (tests/cpu/test_cli.cpp keeps this
    copy equal to the binary's answer)."""
    return json.loads((FIXTURES / "describe.json").read_text())


@pytest.fixture(scope="session")
def all_strategies(describe):
    """The strategies a matrix's `strategy = "all"` expands to: describe's, less the data paths
    across GPUs that are another strategy's on one GPU (one_gpu_as: the peer-fanout and host-shared forms)."""
    return [s for s in describe["strategies"] if not s.get("one_gpu_as")]


@pytest.fixture(scope="session")
def record_errors(record_validator):
    """record -> every schema violation as 'path: message' ([] when it validates)."""
    def errors(record):
        return ["/".join(map(str, e.absolute_path)) + ": " + e.message
                for e in record_validator.iter_errors(record)]
    return errors


def _schema_node(schema, sub):
    """`sub` with a local $ref ("#/$defs/epoch") followed."""
    return schema["$defs"][sub["$ref"].split("/")[-1]] if "$ref" in sub else sub


def _undeclared(schema, sub, value, path=""):
    sub = _schema_node(schema, sub)
    out = []
    if isinstance(value, dict) and "properties" in sub:
        for k, v in value.items():
            if k not in sub["properties"]:
                out.append(f"{path}.{k}".lstrip("."))
            else:
                out += _undeclared(schema, sub["properties"][k], v, f"{path}.{k}")
    elif isinstance(value, list) and isinstance(sub.get("items"), dict):
        for i, v in enumerate(value):
            out += _undeclared(schema, sub["items"], v, f"{path}[{i}]")
    return out


@pytest.fixture(scope="session")
def undeclared_keys(record_validator):
    """record -> the paths of its keys the schema does not list ('config.colour'). The schema
    allows unknown keys (readers ignore them), so validation alone would not notice a key a
    writer added without documenting it."""
    schema = record_validator.schema
    return lambda record: _undeclared(schema, schema, record)


@pytest.fixture(scope="session")
def schema_description(record_validator):
    """key path ('config.prefetch_chunk_mib', 'epochs[].idle_ms') -> the schema's description
    of that key, or None when the schema does not list it."""
    schema = record_validator.schema

    def description(path):
        sub = schema
        for part in path.split("."):
            name, is_list = (part[:-2], True) if part.endswith("[]") else (part, False)
            props = _schema_node(schema, sub).get("properties", {})
            if name not in props:
                return None
            sub = props[name]
            if is_list:
                sub = _schema_node(schema, sub).get("items", {})
        return sub.get("description") or _schema_node(schema, sub).get("description")
    return description

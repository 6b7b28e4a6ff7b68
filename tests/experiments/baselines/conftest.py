"""What the benchmark tests share: a data directory for runs whose stand-ins read no data, and
a guard that fails the test when any process is started."""
import pytest


@pytest.fixture
def data(tmp_path):
    """--data: the stand-ins read no data; the benchmarks only need the directory to exist."""
    d = tmp_path / "mnist"
    d.mkdir()
    return d


@pytest.fixture
def no_processes(monkeypatch):
    """Starting any process (memstrat, python, `memstrat list`, the torch check) fails the
    test; returns main(argv)'s exit code, argparse's usage errors included."""
    import process_runs

    def refuse(*_a, **_k):
        raise AssertionError("a process was started")
    monkeypatch.setattr(process_runs.subprocess, "run", refuse)

    def exit_code(main, argv):
        try:
            return main(argv)
        except SystemExit as e:
            return e.code
    return exit_code

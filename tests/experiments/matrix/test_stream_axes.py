"""run_matrix.py's stream-scenario axes (workers, prefetch, augment): their values and
ranges come from `memstrat describe`, only stream cells pass them (the other scenarios
collapse them, keys unchanged), and stream.toml expands to the sweep it documents."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "experiments" / "matrix" / "run_matrix.py"


def write(tmp_path, text):
    p = tmp_path / "m.toml"
    p.write_text(text)
    return p


def test_stream_matrix_expands_to_the_documented_sweep(run_matrix, describe):
    m = run_matrix.load_matrix(REPO / "experiments/matrix/matrices/stream.toml", describe)
    host = [c for c in m.cells if c.augment_device in (None, "host")]
    gpu = [c for c in m.cells if c.augment_device == "gpu"]
    # one strategy per hand-off kind (docs/strategies.md): ordinary, pinned on the compute
    # stream, pinned on a copy stream, mapped in place, managed prefetched
    assert {c.strategy for c in host} == {"pageable", "pinned", "double-buffer", "zero-copy",
                                          "um-prefetch"}
    assert {c.workers for c in host} == {1, 2, 4, 8, 16}
    # on the GPU: the copying strategies at 4 and 16 workers (they gather), and the strategies
    # that gather on the GPU once each (no host worker), resident among them
    assert {(c.strategy, c.workers) for c in gpu} == \
        {(s, w) for s in ("pageable", "pinned", "double-buffer") for w in (4, 16)} | \
        {(s, 4) for s in ("resident", "zero-copy", "um-prefetch")}
    assert {c.augment for c in m.cells} == {"light", "heavy"}
    assert {(c.scenario, c.prefetch, c.batch, c.transfer) for c in m.cells} == \
        {("stream", 32, 256, "u8")}
    configs = 5 * 5 * 2 + (3 * 2 + 3) * 2
    # every configuration is published at batch 256: 10 processes each, 20 steady epochs
    assert len(m.cells) == 10 * configs                  # no profiler
    assert sum(c.augment == "light" for c in m.cells) == 10 * configs // 2
    assert {c.profile for c in m.cells} == {False}
    assert {c.epochs for c in m.cells} == {21}
    keys = {c.key for c in m.cells}
    assert len(keys) == len(m.cells)
    assert "um-prefetch_stream_u8_b256_h256_e21_cublas_w16p32-heavy_noprofile_seed1_r9" in keys
    assert all("aug-gpu" in c.key for c in gpu)
    # the count the file's comments state
    text = (REPO / "experiments/matrix/matrices/stream.toml").read_text()
    assert f"{len(m.cells)} processes" in text and f"({len(m.cells)} runs)" in text
    assert f"{len(gpu)} GPU-augmented" in text


def test_only_stream_cells_pass_the_pipeline_options(run_matrix, describe, tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, """
[axes]
strategy = ["pinned", "double-buffer"]
scenario = ["static", "stream"]
workers = [1, 2]
augment = ["none", "heavy"]
"""), describe)
    static = [c for c in m.cells if c.scenario == "static"]
    stream = [c for c in m.cells if c.scenario == "stream"]
    assert len(static) == 2 and len(stream) == 2 * 2 * 2
    assert m.collapsed == 2 * (2 * 2 - 1)
    for c in static:
        assert (c.workers, c.prefetch, c.augment) == (None, None, None)
        assert not {"--workers", "--prefetch", "--augment"} & set(c.train_args())
    # the key of a non-stream cell is what it was before these axes existed
    assert "pinned_static_u8_b256_h256_e10_cublas_seed1_r0" in {c.key for c in static}
    default_prefetch = next(o["default"] for o in describe["train_options"]
                            if o["name"] == "--prefetch")
    for c in stream:
        args = c.train_args()
        assert args[args.index("--workers") + 1] == str(c.workers)
        assert args[args.index("--prefetch") + 1] == str(default_prefetch)
        assert args[args.index("--augment") + 1] == c.augment
        assert f"_w{c.workers}p{default_prefetch}-{c.augment}_" in c.key
        assert c.config_stub()["workers"] == c.workers


def test_stream_cells_default_to_the_options_defaults(run_matrix, describe, tmp_path):
    m = run_matrix.load_matrix(write(tmp_path, "[axes]\nstrategy = 'pinned'\n"
                                               "scenario = 'stream'\n"), describe)
    (c,) = m.cells
    default = {o["name"]: o["default"] for o in describe["train_options"]}
    assert (c.workers, c.prefetch, c.augment) == \
        (default["--workers"], default["--prefetch"], default["--augment"])


@pytest.mark.parametrize("text, message", [
    ("workers = 0", "expected a positive integer, got 0"),
    ("workers = 257", "workers must be <= 256"),
    ("prefetch = 2000", "prefetch must be <= 1024"),
    ("augment = 'medium'", "'medium' is not one of none, light, heavy"),
])
def test_stream_axis_errors(run_matrix, describe, tmp_path, text, message):
    path = write(tmp_path, f"[axes]\nstrategy = 'pinned'\nscenario = 'stream'\n{text}\n")
    with pytest.raises(run_matrix.MatrixError, match=message):
        run_matrix.load_matrix(path, describe)


def test_pipeline_options_are_axes_not_extra_arguments(run_matrix, describe, tmp_path):
    path = write(tmp_path, "[axes]\nstrategy = 'pinned'\nscenario = 'stream'\n")
    with pytest.raises(run_matrix.MatrixError, match="use the axes"):
        run_matrix.load_matrix(path, describe, extra_args=("--workers=3",))
    # without stream cells memstrat refuses --workers in every cell: refused before any runs
    static = write(tmp_path, "[axes]\nstrategy = 'pinned'\n")
    with pytest.raises(run_matrix.MatrixError, match="memstrat refuses them in the other"):
        run_matrix.load_matrix(static, describe, extra_args=("--workers", "3"))


def test_stream_dry_run(tmp_path, fake_memstrat):
    res = subprocess.run([sys.executable, str(RUNNER),
                          str(REPO / "experiments/matrix/matrices/stream.toml"),
                          "--out", str(tmp_path / "out"), "--memstrat", str(fake_memstrat),
                          "--dry-run"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "680 cells" in res.stdout
    assert "--workers 16 --prefetch 32 --augment heavy" in res.stdout

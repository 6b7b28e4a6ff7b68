"""The PyTorch anchor of `memstrat primitives --gpus N` (experiments/baselines/
pytorch_multi_gpu_primitives.py and its torch-free part, multi_gpu_record.py).

    python3 -m pytest -q tests/experiments/baselines/test_multi_gpu_primitives.py

Everywhere: the size parser and its refusals, nccl-tests' bandwidths checked by hand, the spread
and the record, and the exit codes and messages of bad options, which must come before torch is
imported (the script is also run with torch made unimportable). Where torch is installed: the
patterns and the check that the measurements are verified with. On 2 or more CUDA GPUs with
NCCL: a short run of every pattern, its records and rates.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BASELINES = REPO / "experiments" / "baselines"
SCRIPT = BASELINES / "pytorch_multi_gpu_primitives.py"
sys.path.insert(0, str(BASELINES))
import multi_gpu_record as mr  # noqa: E402
import pytorch_multi_gpu_primitives as mp  # noqa: E402
from memstrat_inputs import UsageError  # noqa: E402

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
# runs the script with `import torch` failing, as where torch is not installed
NO_TORCH = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")


def cli(*args: str, nvls: str | None = "0", torch: bool = False, timeout: int = 60):
    env = {k: v for k, v in os.environ.items() if k != "NCCL_NVLS_ENABLE"}
    if nvls is not None:
        env["NCCL_NVLS_ENABLE"] = nvls
    cmd = [sys.executable, str(SCRIPT)] if torch else [sys.executable, "-c", NO_TORCH, str(SCRIPT)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=timeout,
                          check=False)


# ---------------------------------------------------------------------------------------------
# sizes

@pytest.mark.parametrize("text, expected", [
    ("4096", 4096), ("4K", 4 * KiB), ("4KiB", 4 * KiB), ("4kib", 4 * KiB), ("64K", 64 * KiB),
    ("256M", 256 * MiB), ("256MiB", 256 * MiB), ("1GiB", GiB), ("1g", GiB), ("512B", 512),
    (" 8KiB ", 8 * KiB)])
def test_parse_size_reads_bytes_and_binary_units(text, expected):
    assert mr.parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "K", "4.5K", "4KB", "4 MiB x", "-4096", "0x1000", "4T",
                                  "1e6", "1234567890123456"])
def test_parse_size_refuses_what_is_not_a_size(text):
    with pytest.raises(UsageError, match="--min-size .* is not a size.*4KiB"):
        mr.parse_size(text, "--min-size")


def test_size_sweep_is_the_powers_of_two_between_the_bounds():
    sizes = mr.size_sweep(4 * KiB, GiB)
    assert len(sizes) == 19 and sizes[0] == 4096 and sizes[-1] == GiB
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))
    assert mr.size_sweep(16, 16) == [16]
    assert mr.size_sweep(16, 64) == [16, 32, 64]


@pytest.mark.parametrize("lo, hi, message", [
    (3000, GiB, r"--min-size 2.93 KiB is not a power of two; use 2 KiB or 4 KiB"),
    (4 * KiB, 3 * MiB, r"--max-size 3 MiB is not a power of two; use 2 MiB or 4 MiB"),
    (4 * MiB, MiB, r"--min-size 4 MiB is larger than --max-size 1 MiB; swap them"),
    (8, 4 * KiB, r"--min-size 8 B is below the smallest transfer, 16 B"),
    (0, 4 * KiB, r"--min-size 0 B is below")])
def test_size_sweep_refuses_with_the_option_and_a_way_out(lo, hi, message):
    with pytest.raises(UsageError, match=message):
        mr.size_sweep(lo, hi)


# ---------------------------------------------------------------------------------------------
# nccl-tests' bandwidths (doc/PERFORMANCE.md; src/all_reduce.cu, all_gather.cu, broadcast.cu)

@pytest.mark.parametrize("pattern, n, factor", [
    ("nccl-all-reduce", 2, 1.0), ("nccl-all-reduce", 4, 1.5), ("nccl-all-reduce", 8, 1.75),
    ("nccl-all-gather", 2, 0.5), ("nccl-all-gather", 4, 0.75), ("nccl-all-gather", 8, 0.875),
    ("nccl-broadcast", 2, 1.0), ("nccl-broadcast", 8, 1.0)])
def test_busbw_factor_is_nccl_tests(pattern, n, factor):
    assert mr.busbw_factor(pattern, n) == pytest.approx(factor, abs=1e-15)


@pytest.mark.parametrize("pattern", ["h2d-alone", "h2d-all", "d2d-ce"])
def test_copies_have_no_busbw(pattern):
    assert mr.busbw_factor(pattern, 4) is None


def test_an_all_reduce_worked_by_hand():
    """8 ranks, 1 GiB in 5 ms: algbw 1073741824 B / 5000 us = 214.748 GB/s, busbw x 7/4."""
    r = mr.result_entry(GiB, [5000.0] * 3, factor=mr.busbw_factor("nccl-all-reduce", 8))
    assert r["algbw_gbps"] == pytest.approx(214.7483648)
    assert r["busbw_gbps"] == pytest.approx(375.8096384)
    assert r["per_gpu_gbps"] is None


@pytest.mark.parametrize("pattern, size, n, expected", [
    ("nccl-all-reduce", 4096, 4, (1024, 4096)), ("nccl-broadcast", 16, 8, (4, 16)),
    ("nccl-all-gather", 4096, 4, (256, 4096)),   # size = the gathered output, as nccl-tests
    ("nccl-all-gather", 4096, 3, (341, 4092)),   # rounded down to whole floats per rank
    ("nccl-all-gather", 16, 8, (0, 0))])         # below 4 N bytes: nothing per rank
def test_collective_count(pattern, size, n, expected):
    assert mr.collective_count(pattern, size, n) == expected


# ---------------------------------------------------------------------------------------------
# spread, result, summary, record

def test_result_entry_spread_and_rates():
    r = mr.result_entry(10**6, [50.0, 10.0, 40.0, 20.0, 30.0], moved=2 * 10**6,
                        per_gpu_us=[[10.0, 20.0, 30.0], [20.0, 40.0, 60.0]])
    assert (r["median_us"], r["p25_us"], r["p75_us"], r["min_us"], r["max_us"]) == \
        (30.0, 20.0, 40.0, 10.0, 50.0)
    assert r["samples_us"] == [50.0, 10.0, 40.0, 20.0, 30.0]  # in the order taken
    assert r["algbw_gbps"] == pytest.approx(2e6 / 30 / 1e3)   # the moved bytes / median
    assert r["per_gpu_gbps"] == pytest.approx([50.0, 25.0])   # bytes / each one's median
    assert r["busbw_gbps"] is None and r["bytes"] == 10**6


def test_spread_interpolates_like_memstrat():
    s = mr.spread_us([4.0, 1.0, 3.0, 2.0])
    assert (s["median_us"], s["p25_us"], s["p75_us"]) == (2.5, 1.75, 3.25)


def test_summary_takes_the_peak_algbw_and_its_size():
    results = [mr.result_entry(b, [us], factor=f) for b, us, f in
               [(4096, 10.0, 1.5), (8192, 10.0, 1.5), (16384, 40.0, 1.5)]]
    s = mr.summarize(results)
    assert s == {"peak_algbw_gbps": pytest.approx(0.8192), "peak_busbw_gbps":
                 pytest.approx(1.2288), "peak_bytes": 8192}
    assert mr.summarize([mr.result_entry(4096, [1.0])])["peak_busbw_gbps"] is None
    assert mr.summarize([]) == {"peak_algbw_gbps": None, "peak_busbw_gbps": None,
                                "peak_bytes": None}


def options(**kw):
    a = mp.parse_cli(["--min-size", "4KiB", "--max-size", "16KiB"], {"NCCL_NVLS_ENABLE": "0"})
    a.gpus = 4
    vars(a).update(kw)
    return a


@pytest.mark.parametrize("pattern, src, dst, both, timed_by, in_place", [
    ("h2d-alone", None, 2, False, "cuda-events", False),
    ("h2d-all", None, None, False, "steady-clock", False),
    ("d2d-ce", 0, 3, False, "cuda-events", False),
    ("d2d-ce-both", 0, 3, True, "steady-clock", False),
    ("nccl-all-reduce", None, None, False, "steady-clock", True),
    ("nccl-all-gather", None, None, False, "steady-clock", False),
    ("nccl-broadcast", 0, None, False, "steady-clock", True)])
def test_config(pattern, src, dst, both, timed_by, in_place):
    c = mr.make_config(pattern, options(), src, dst, both)
    assert c == {"pattern": pattern, "gpus": 4, "src": src, "dst": dst, "both_ways": both,
                 "sizes": [4096, 8192, 16384], "warmup": 2, "samples": 9, "timed_by": timed_by,
                 "in_place": in_place, "iters": 20 if pattern.startswith("nccl") else None}


def test_record_has_the_documented_keys_and_is_strict_json():
    run = {"started_at": "2025-01-01T00:00:00Z", "argv": ["x"],
           "env": {"gpu_names": ["A", "B"], "torch": "2.11.0", "cuda": "13.0", "nccl": "2.27.3",
                   "nccl_settings": {"NCCL_NVLS_ENABLE": "0"}, "git_sha": None}}
    results = [mr.result_entry(4096, [2.0, 3.0, 4.0], factor=0.5)]
    rec = mr.build_record(run, mr.make_config("nccl-all-gather", options()), results, [])
    assert list(rec) == ["schema_version", "record", "implementation", "run_id", "started_at",
                         "status", "error", "argv", "env", "config", "results", "summary"]
    assert (rec["schema_version"], rec["record"], rec["implementation"]) == \
        (1, "multi-gpu-primitive", "pytorch")
    assert rec["status"] == "ok" and rec["error"] is None
    assert list(rec["results"][0]) == ["bytes", "median_us", "p25_us", "p75_us", "min_us",
                                       "max_us", "samples_us", "algbw_gbps", "busbw_gbps",
                                       "per_gpu_gbps"]
    assert json.loads(json.dumps(rec, allow_nan=False)) == rec
    bad = mr.build_record(run, rec["config"], results, ["x wrong", "y wrong"])
    assert bad["status"] == "failed" and bad["error"] == "x wrong; y wrong"


def test_each_record_of_a_run_has_its_own_run_id_and_a_set_reads_them_all():
    # a results set refuses two different records under one run_id
    from analysis.records import drop_duplicates
    run = {"started_at": "2025-01-01T00:00:00Z", "argv": ["x"], "env": {}}
    results = [mr.result_entry(4096, [2.0, 3.0, 4.0], factor=0.5)]
    recs = [mr.build_record(run, mr.make_config(p, options()), results, [])
            for p in ("nccl-all-reduce", "nccl-all-gather", "nccl-broadcast")]
    assert len({r["run_id"] for r in recs}) == 3
    assert {r["started_at"] for r in recs} == {"2025-01-01T00:00:00Z"}
    assert drop_duplicates(recs) == recs


def test_environment_pieces():
    assert mr.nccl_settings({"NCCL_NVLS_ENABLE": "0", "NCCL_DEBUG": "WARN", "PATH": "/bin",
                             "XNCCL_A": "1"}) == {"NCCL_DEBUG": "WARN", "NCCL_NVLS_ENABLE": "0"}
    assert mr.nvls_refusal({"NCCL_NVLS_ENABLE": "0"}) is None
    for env, now in (({}, "it is not set"), ({"NCCL_NVLS_ENABLE": "1"}, "set to '1'"),
                     ({"NCCL_NVLS_ENABLE": ""}, "set to ''")):
        assert "export NCCL_NVLS_ENABLE=0" in mr.nvls_refusal(env) and now in \
            mr.nvls_refusal(env)
    assert mr.format_nccl_version((2, 27, 3)) == "2.27.3"
    assert mr.format_nccl_version(22703) == "2.27.3"  # NCCL_VERSION_CODE since 2.9
    assert mr.format_nccl_version(2708) == "2.7.8"    # before
    assert mr.format_nccl_version(None) is None


# ---------------------------------------------------------------------------------------------
# options and exit codes

def test_parse_cli_checks_and_normalises():
    env = {"NCCL_NVLS_ENABLE": "0"}
    a = mp.parse_cli(["--patterns", "d2d-ce, h2d-all,d2d-ce", "--max-size", "64K"], env)
    assert a.patterns == ["d2d-ce", "h2d-all"] and a.sizes == [4096, 8192, 16384, 32768, 65536]
    assert a.gpus is None and (a.samples, a.warmup, a.iters) == (9, 2, 20)
    assert mp.parse_cli([], env).patterns == list(mr.PATTERNS)
    assert mp.parse_cli([], env).sizes[-1] == GiB
    for argv, message in ((["--gpus", "1"], "--gpus 1: .* 2 or more"),
                          (["--patterns", "h2d"], "unknown h2d; choose from h2d-alone"),
                          (["--patterns", ","], r"unknown \(none given\)"),
                          (["--samples", "0"], "--samples 0: must be at least 1"),
                          (["--warmup", "-1"], "--warmup -1: must be at least 0"),
                          (["--iters", "0"], "--iters 0: must be at least 1"),
                          (["--json", "/no/such/dir/r.jsonl"], "directory does not exist")):
        with pytest.raises(UsageError, match=message):
            mp.parse_cli(argv, env)
    with pytest.raises(UsageError, match="NCCL_NVLS_ENABLE=0"):
        mp.parse_cli([], {})


def test_copy_jobs_cover_every_gpu_and_pair():
    jobs = list(mp.copy_jobs(3, list(mr.PATTERNS)))
    alone = [j for j in jobs if j[0] == "h2d-alone"]
    assert [(j[1], j[2]) for j in alone] == [(None, 0), (None, 1), (None, 2)]
    (h2d_all,) = [j for j in jobs if j[0] == "h2d-all"]
    assert h2d_all[4] == [(g, g, None, None) for g in range(3)] and h2d_all[5:] == (3, True)
    one_way = [(j[1], j[2]) for j in jobs if j[0] == "d2d-ce" and not j[3]]
    assert one_way == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    both = [j for j in jobs if j[0] == "d2d-ce-both" and j[3]]
    assert [(j[1], j[2]) for j in both] == [(0, 1), (0, 2), (1, 2)]
    assert both[0][4] == [(0, 1, 0, 1), (1, 0, 1, 0)] and both[0][5:] == (2, True)
    assert list(mp.copy_jobs(3, ["nccl-broadcast"])) == []


def test_importing_the_script_imports_no_torch():
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(BASELINES)!r})"
                        "; import pytorch_multi_gpu_primitives; print('torch' in sys.modules)"],
                       capture_output=True, text=True, check=False, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


def test_help_shows_the_options_and_an_example():
    r = cli("--help")
    assert r.returncode == 0
    for text in ("NCCL_NVLS_ENABLE=0 python3 experiments/baselines/pytorch_multi_gpu_primitives.py",
                 "--gpus N", "--patterns LIST", "--min-size SIZE", "--max-size SIZE",
                 "--samples K", "--warmup K", "--iters K", "--json FILE", "--quiet", "busbw"):
        assert text in r.stdout, text


@pytest.mark.parametrize("args, nvls, message", [
    (["--min-size", "3000"], "0", "--min-size 2.93 KiB is not a power of two"),
    (["--max-size", "6K"], "0", "--max-size 6 KiB is not a power of two; use 4 KiB or 8 KiB"),
    (["--min-size", "4MiB", "--max-size", "1MiB"], "0", "larger than --max-size 1 MiB; swap"),
    (["--min-size", "4.5K"], "0", "--min-size '4.5K' is not a size"),
    (["--gpus", "1"], "0", "--gpus 1: this measures several GPUs"),
    (["--gpus", "0"], "0", "--gpus 0: this measures several GPUs"),
    (["--patterns", "h2d,d2d-ce"], "0", "--patterns: unknown h2d"),
    (["--samples", "0"], "0", "--samples 0"),
    ([], None, "export NCCL_NVLS_ENABLE=0 (it is not set)"),
    ([], "1", "export NCCL_NVLS_ENABLE=0 (it is set to '1')"),
    (["--bogus"], "0", "unrecognized arguments: --bogus"),
    (["--gpus", "two"], "0", "invalid int value")])
def test_bad_input_exits_2_before_torch(args, nvls, message):
    r = cli(*args, nvls=nvls)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and r.stdout == ""


def test_without_torch_a_good_command_exits_3():
    r = cli("--gpus", "2", "--max-size", "64K")
    assert r.returncode == 3 and "PyTorch is not installed" in r.stderr


def test_fewer_than_two_gpus_exits_3(tmp_path):
    """With the torch that is installed here (if any): no torch, no CUDA or one GPU is exit 3,
    and no record is written."""
    try:
        import torch
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        gpus = None
    if gpus is not None and gpus >= 2:
        pytest.skip(f"{gpus} GPUs here: the script would run (the GPU test covers it)")
    out = tmp_path / "r.jsonl"
    r = cli("--max-size", "64K", "--json", str(out), torch=True)
    expected = {None: "PyTorch is not installed", 0: "torch.cuda.is_available() is False",
                1: "1 GPU visible; this needs at least 2"}[gpus]
    assert r.returncode == 3 and expected in r.stderr, r.stderr
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# with torch: the patterns and the check (on the CPU)

@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_byte_pattern_prefixes_and_seeds(torch):
    a, b = mp.byte_pattern(torch, 4096, 1, "cpu"), mp.byte_pattern(torch, 1024, 1, "cpu")
    assert a.dtype == torch.uint8 and a.numel() == 4096 and torch.equal(a[:1024], b)
    assert not torch.equal(a, mp.byte_pattern(torch, 4096, 2, "cpu"))
    words = a.view(torch.int32)
    assert words.unique().numel() == words.numel()  # every word differs: a shift shows


def test_float_pattern_sums_exactly(torch):
    x = [mp.float_pattern(torch, 10**5, r, "cpu") for r in range(8)]
    assert all(t.dtype == torch.float32 and t.min() >= 0 and t.max() <= 1020 for t in x)
    assert torch.equal(x[3], x[3].round()) and not torch.equal(x[0], x[1])
    total = sum(x)
    assert torch.equal(total.double(), sum(t.double() for t in x))


def test_mismatch_reports_the_wrong_elements(torch):
    e = mp.byte_pattern(torch, 64, 0, "cpu")
    assert mp.mismatch(torch, e.clone(), e, "h2d") is None
    got = e.clone()
    got[9] ^= 1
    got[40] ^= 1
    msg = mp.mismatch(torch, got, e, "host -> cuda:1 at 64 B")
    assert msg.startswith("host -> cuda:1 at 64 B: 2 of 64 elements differ (first at 9: got ")
    assert f"expected {int(e[9])})" in msg


# ---------------------------------------------------------------------------------------------
# on 2 or more GPUs: a short run of every pattern

def gpus_or_skip() -> int:
    t = pytest.importorskip("torch")
    if not t.cuda.is_available() or t.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs (torch.cuda.device_count() < 2)")
    if not (t.distributed.is_available() and t.distributed.is_nccl_available()):
        pytest.skip("this PyTorch has no NCCL")
    return 2


def test_every_pattern_on_two_gpus(tmp_path):
    n = gpus_or_skip()
    out = tmp_path / "r.jsonl"
    r = cli("--gpus", str(n), "--min-size", "4KiB", "--max-size", "1MiB", "--samples", "3",
            "--warmup", "1", "--iters", "5", "--json", str(out), torch=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = [(x["config"]["pattern"], x["config"]["src"], x["config"]["dst"],
              x["config"]["both_ways"]) for x in recs]
    assert kinds == [("h2d-alone", None, 0, False), ("h2d-alone", None, 1, False),
                     ("h2d-all", None, None, False), ("d2d-ce", 0, 1, False),
                     ("d2d-ce", 1, 0, False), ("d2d-ce-both", 0, 1, True),
                     ("nccl-all-reduce", None, None, False), ("nccl-all-gather", None, None, False),
                     ("nccl-broadcast", 0, None, False)]
    assert len({x["run_id"] for x in recs}) == len(recs)
    assert len({x["started_at"] for x in recs}) == 1
    sizes = [4 * KiB << i for i in range(9)]
    for x in recs:
        c, p = x["config"], x["config"]["pattern"]
        assert x["status"] == "ok" and x["error"] is None, x["error"]
        assert x["env"]["nccl_settings"]["NCCL_NVLS_ENABLE"] == "0"
        assert len(x["env"]["gpu_names"]) == 2
        assert c["gpus"] == 2 and c["sizes"] == sizes and c["samples"] == 3
        assert [e["bytes"] for e in x["results"]] == sizes
        factor = mr.busbw_factor(p, 2)
        for e in x["results"]:
            assert len(e["samples_us"]) == 3 and e["min_us"] <= e["median_us"] <= e["max_us"]
            assert e["min_us"] > 0 and e["algbw_gbps"] > 0
            if factor is None:
                assert e["busbw_gbps"] is None
            else:
                assert e["busbw_gbps"] == pytest.approx(e["algbw_gbps"] * factor)
            per = e["per_gpu_gbps"]
            assert (per is None) == (p not in ("h2d-all",) and not c["both_ways"])
            assert per is None or (len(per) == 2 and min(per) > 0)
        assert x["summary"]["peak_algbw_gbps"] == max(e["algbw_gbps"] for e in x["results"])

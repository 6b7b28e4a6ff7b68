"""nsys_counts.py (called by nsys_run --compare): nsys's CUDA API counts against a record's."""
import json
import subprocess
import sys

from script_support import FIXTURES, REPO, SCRIPTS, env_with, write_command

NSYS_CSV = FIXTURES / "nsys_cuda_api_sum_resident.csv"
RECORD = FIXTURES / "record_resident_api_totals.jsonl"


def test_the_table_is_read_past_nsys_notes_with_suffixes_stripped(nsys_counts):
    calls = nsys_counts.read_nsys_csv(NSYS_CSV)
    assert calls["cudaMalloc"] == 22
    assert calls["cudaLaunchKernelExC"] == 450      # _v11060 stripped, as memstrat names it
    assert calls["cudaGetDeviceProperties"] == 1


# The run's buffers are freed after its record is made: nsys counts those frees (and a final
# synchronisation), the record cannot. That is not a difference.
def test_the_teardown_after_the_record_is_not_a_difference(nsys_counts):
    rec = json.loads(RECORD.read_text())
    counts, totals = nsys_counts.record_counts(rec)
    assert totals
    rows = {r.name: r for r in nsys_counts.compare(counts, nsys_counts.read_nsys_csv(NSYS_CSV),
                                                   totals)}
    assert {n for n, r in rows.items() if r.verdict == "teardown"} == {
        "cudaFree", "cudaFreeHost", "cudaDeviceSynchronize"}
    assert not [n for n, r in rows.items() if r.verdict == "differs"]
    assert (rows["cudaFree"].record, rows["cudaFree"].nsys) == (2, 24)


def test_real_differences_are_still_found(nsys_counts):
    rec = json.loads(RECORD.read_text())
    counts, totals = nsys_counts.record_counts(rec)
    nsys = nsys_counts.read_nsys_csv(NSYS_CSV)

    def differing(**changed):
        calls = dict(nsys, **changed)
        return {r.name for r in nsys_counts.compare(counts, calls, totals)
                if r.verdict == "differs"}

    assert differing() == set()
    assert differing(cudaMemcpyAsync=49) == {"cudaMemcpyAsync"}
    assert differing(cudaMalloc=23) == {"cudaMalloc"}
    assert differing(cudaFree=1) == {"cudaFree"}            # fewer than the record: not teardown
    assert differing(cudaFree=2 + 23) == {"cudaFree"}       # more frees than allocations
    assert differing(cudaFreeHost=8) == {"cudaFreeHost"}
    assert differing(cudaStreamSynchronize=37) == {"cudaStreamSynchronize"}


def test_a_record_without_totals_compares_its_allocations_only(nsys_counts):
    counts = {"cudaMalloc": 22, "cudaMallocHost": 7, "cudaFree": 1}
    rows = nsys_counts.compare(counts, nsys_counts.read_nsys_csv(NSYS_CSV), totals=False)
    assert [r.name for r in rows] == list(nsys_counts.ALLOCATIONS)
    assert all(r.verdict == "" for r in rows)
    rec = {"setup": {"api_calls": {"cudaMalloc": 20}}, "epochs": [{"api_calls": {"cudaMalloc": 2}}]}
    assert nsys_counts.record_counts(rec) == ({"cudaMalloc": 22}, False)


def run_counts(*args):
    return subprocess.run([sys.executable, str(SCRIPTS / "nsys_counts.py"), *map(str, args)],
                          capture_output=True, text=True, check=False)


def test_the_command_exits_0_1_2(tmp_path):
    out = tmp_path / "calls.csv"
    r = run_counts(NSYS_CSV, out, "--compare", RECORD)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "after the record: teardown" in r.stdout
    assert out.read_text().splitlines()[0] == "name,calls"
    changed = tmp_path / "changed.jsonl"
    rec = json.loads(RECORD.read_text())
    rec["api_totals"]["cudaMemcpyAsync"] = 47
    changed.write_text(json.dumps(rec) + "\n")
    r = run_counts(NSYS_CSV, out, "--compare", changed)
    assert r.returncode == 1
    assert "1 function(s) differ" in r.stderr and "cudaMemcpyAsync" in r.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    r = run_counts(NSYS_CSV, out, "--compare", empty)
    assert r.returncode == 2 and "no record" in r.stderr
    r = run_counts(RECORD, out)
    assert r.returncode == 2 and "header" in r.stderr


def test_nsys_run_compare_end_to_end_with_a_stand_in_nsys(tmp_path):
    """nsys_run with NSYS= a stand-in that writes the canned report: the whole --compare path
    of the shell script, without a GPU or Nsight Systems."""
    fake = write_command(tmp_path / "nsys", f"""#!/usr/bin/env bash
case "$1" in
  --version) echo "NVIDIA Nsight Systems version 0000.0 (stand-in)" ;;
  profile) while [ "$1" != -o ]; do shift; done; out="$2"; shift 2; "$@"; rc=$?
           touch "$out.nsys-rep"; exit $rc ;;
  stats) while [ "$1" != --output ]; do shift; done; cp "{NSYS_CSV}" "$2_cuda_api_sum.csv" ;;
esac
""")
    out = tmp_path / "rep" / "run"
    cmd = ["bash", str(REPO / "experiments" / "scripts" / "nsys_run"), "-o", str(out),
           "--compare", str(RECORD), "--", "true"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env_with(NSYS=fake), check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "differ" not in r.stdout + r.stderr
    assert (tmp_path / "rep" / "run_api_calls.csv").exists()

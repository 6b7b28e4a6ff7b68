"""sanitizer_findings.py (called by gpu_checks.sh sanitizegpus): NCCL's kernel probe apart from real findings."""
import subprocess
import sys

from script_support import FIXTURES, SCRIPTS

# compute-sanitizer memcheck's reports from a two-GPU run on an H200 (NCCL's pip wheel): the probe
# is reported twice per skipped kernel, once naming ncclInitKernelsForDevice and once from the runtime.
PROBE = (FIXTURES / "sanitizer_memcheck_nccl_probe.txt").read_text()
# memcheck's reports of NCCL's peer mapping from a one-process two-GPU run on 2 H200s: p2pMap
# enables peer access for each connection and clears the "already enabled" error 704 it gets.
PEER_MAP = (FIXTURES / "sanitizer_memcheck_nccl_peer_map.txt").read_text()
OUR_704 = """========= Program hit cudaErrorPeerAccessAlreadyEnabled (error 704) due to "peer access is already enabled" on CUDA API call to cudaGetLastError.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: memstrat::PeerSet::enable_peer_access(int, int) in peer_set.cpp:40 [0x51a2] in memstrat
=========
"""
OUR_READ = """========= Invalid __global__ read of size 4 bytes
=========     at gather_batch_u8(const unsigned char *, const int *, float *, int, int)+0x1b0 in batch.cu:41
=========     by thread (3,0,0) in block (12,0,0)
=========     Address 0x7f5c2a000400 is out of bounds
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cudaLaunchKernel [0x4d3a1] in libcudart.so.12
=========
"""
OUR_209 = """========= Program hit cudaErrorNoKernelImageForDevice (error 209) due to "no kernel image is available for execution on the device" on CUDA API call to cudaLaunchKernel.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: memstrat::kernels::launch_forward(...) in forward.cu:88 [0x51a2] in memstrat
=========
"""


def with_summary(text, errors):
    body = "\n".join(l for l in text.splitlines() if "ERROR SUMMARY" not in l)
    return f"{body}\n========= ERROR SUMMARY: {errors} error{'s' if errors != 1 else ''}\n"


def test_nccl_kernel_probe_alone_is_clean(sanitizer_findings):
    s = sanitizer_findings.sort_output(PROBE)
    assert (s.nccl_probe, len(s.others), s.summary_total) == (3, 0, 3)
    assert s.clean


def test_a_memory_error_of_the_program_is_a_finding(sanitizer_findings):
    s = sanitizer_findings.sort_output(with_summary(PROBE + OUR_READ, 4))
    assert (s.nccl_probe, len(s.others)) == (3, 1)
    assert "Invalid __global__ read" in s.others[0] and "batch.cu:41" in s.others[0]
    assert not s.clean


# Error 209 is allowed only under NCCL's probe: the same error from the program's own launch is a finding.
def test_error_209_outside_nccl_is_a_finding(sanitizer_findings):
    s = sanitizer_findings.sort_output(with_summary(PROBE + OUR_209, 4))
    assert (s.nccl_probe, len(s.others)) == (3, 1)
    assert not s.clean


def test_reports_the_tool_did_not_print_are_not_taken_as_clean(sanitizer_findings):
    text = PROBE.replace("========= ERROR SUMMARY: 3 errors",
                         "========= ERROR SUMMARY: 13 errors\n"
                         "========= ERROR SUMMARY: 10 errors were not printed. Use --print-limit "
                         "option to adjust the number of printed errors")
    s = sanitizer_findings.sort_output(text)
    assert (s.summary_total, s.not_printed, s.others) == (13, 10, [])
    assert not s.clean
    assert "not printed" in sanitizer_findings.describe(s)


def test_a_summary_the_printed_reports_do_not_add_up_to_is_not_clean(sanitizer_findings):
    s = sanitizer_findings.sort_output(with_summary(PROBE, 5))
    assert not s.clean
    assert "do not add up" in sanitizer_findings.describe(s)


# --target-processes all with one process per GPU: each process has its banner and summary.
def test_the_summaries_of_every_process_add_up(sanitizer_findings):
    s = sanitizer_findings.sort_output(PROBE + "memstrat: rank 1 done\n" + PROBE)
    assert (s.nccl_probe, s.summary_total, s.others) == (6, 6, [])
    assert s.clean


def test_program_output_between_reports_ends_a_report(sanitizer_findings):
    lines = PROBE.splitlines()
    lines.insert(4, "epoch 1/2  loss 0.4113")
    s = sanitizer_findings.sort_output("\n".join(lines))
    # the first report is cut short but still names ncclInitKernelsForDevice; the stray frames
    # after the program's line belong to no report
    assert (s.nccl_probe, s.others) == (3, [])


def test_racecheck_without_hazards_is_clean(sanitizer_findings):
    text = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
    s = sanitizer_findings.sort_output(text)
    assert s.clean and s.summary_total == 0


def run(text, *args):
    return subprocess.run([sys.executable, str(SCRIPTS / "sanitizer_findings.py"), *args],
                          input=text, capture_output=True, text=True, timeout=60)


def test_exit_status_and_findings_file(tmp_path):
    ok = run(PROBE)
    assert ok.returncode == 0, ok.stderr
    assert "3 NCCL kernel probe" in ok.stdout and "0 other" in ok.stdout
    findings = tmp_path / "findings.txt"
    bad = run(with_summary(PROBE + OUR_READ, 4), "--findings", str(findings))
    assert bad.returncode == 1
    assert "1 other" in bad.stdout
    assert "batch.cu:41" in findings.read_text() and "ncclInitKernelsForDevice" not in findings.read_text()


def test_input_that_is_not_sanitizer_output_is_refused():
    r = run("memstrat: error: no GPU\n")
    assert r.returncode == 2
    assert "COMPUTE-SANITIZER" in r.stderr


# NCCL's peer mapping within one process is expected; the same error raised by anything but
# NCCL's p2pMap is a finding.
def test_nccl_peer_mapping_alone_is_clean(sanitizer_findings):
    s = sanitizer_findings.sort_output(PEER_MAP)
    assert (s.nccl_peer_map, s.nccl_probe, len(s.others), s.summary_total) == (2, 0, 0, 2)
    assert s.clean


def test_error_704_outside_nccl_is_a_finding(sanitizer_findings):
    s = sanitizer_findings.sort_output(with_summary(PEER_MAP + OUR_704, 3))
    assert (s.nccl_peer_map, len(s.others)) == (2, 1)
    assert "peer_set.cpp" in s.others[0] and not s.clean


def test_the_line_counts_both_of_nccls_expected_errors(tmp_path):
    r = run(with_summary(PROBE + PEER_MAP, 5))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 NCCL kernel probe" in r.stdout and "2 NCCL peer mapping" in r.stdout
    assert "0 other" in r.stdout

"""analysis/timeline.py on synthetic traces laid out as common/profiler/trace_export.cpp writes
them (docs/profiling.md, "The trace file"): a host process with the profiler windows, the
NVTX ranges of the memstrat domain and the CUDA API calls of the main thread; a GPU process
with kernels and memcpys per stream (tid = stream * 100 + lane), prefetch migrations under
the prefetching stream (tid = stream * 100 + 50), and the page-fault counter.

The numbers are H200-like, not measurements: MNIST (60000 samples, 235 batches of 256, the
last one 96), u8 transfers of 200,704 B of pixels + 1,024 B of labels per batch at ~45 GB/s,
a ~24 us MLP step (eleven kernels, 21 us of them busy), a host that enqueues a batch in
~14 us and so runs ahead of the GPU until the epoch's final cudaStreamSynchronize, and the
loss/accuracy read back (DtoH) at the end of each epoch.
"""
import json
import math
from pathlib import Path

import pytest

from analysis import timeline as T

HOST, GPU = 1, 10
THREAD = 48213                       # the main thread's id (tid of its NVTX track)
API_TID = THREAD + (1 << 24)
N_TRAIN, BATCH = 60000, 256
STEP = (  # (kernel, µs) of one MLP step: forward, loss, backward, update
    ("void memstrat::kernels::normalize_u8<256>(unsigned char const*, float*, int)", 1.4),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize64x64x32_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas", 4.1),
    ("void memstrat::kernels::bias_relu<float>(float*, float const*, int, int)", 1.1),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize64x32x32_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas", 2.2),
    ("void memstrat::kernels::softmax_xent<10>(float const*, int const*, float*, float*, int)",
     1.6),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize64x32x32_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas", 2.0),
    ("void memstrat::kernels::relu_backward<float>(float*, float const*, int)", 1.0),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas", 3.6),
    ("void memstrat::kernels::bias_grad<float>(float const*, float*, int, int)", 0.9),
    ("void memstrat::kernels::sgd_momentum<float>(float*, float*, float const*, float, "
     "float, int)", 1.9),
    ("void memstrat::kernels::sgd_momentum<float>(float*, float*, float const*, float, "
     "float, int)", 1.2),
)
STEP_US = sum(d for _, d in STEP) + 0.25 * len(STEP)       # with launch gaps on the GPU


class TraceBuilder:
    """Events as ChromeTrace writes them (metadata first, then X events, then counters)."""

    def __init__(self, strategy: str):
        self.meta, self.events, self.corr = [], [], 1000
        self.process(HOST, "host: memstrat (pid 48213)", 0)
        self.thread(HOST, 0, "profiler windows", 0)
        self.thread(HOST, THREAD, f"thread {THREAD} - NVTX", 1)
        self.thread(HOST, API_TID, f"thread {THREAD} - CUDA API", 2)
        self.process(GPU, "GPU 0", 1)
        self.strategy = strategy
        self.gpu_batch_starts: dict[int, list[float]] = {}

    def process(self, pid, name, order):
        self.meta += [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": name}},
                      {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                       "args": {"sort_index": order}}]

    def thread(self, pid, tid, name, order):
        self.meta += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": name}},
                      {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": order}}]

    def stream(self, stream: int, name: str):
        self.thread(GPU, stream * 100, f"stream {stream} ({name})", stream * 100)

    def x(self, name, cat, pid, tid, ts, dur, args=None):
        start, end = round(ts, 3), round(ts + dur, 3)     # ns resolution, as CUPTI's
        e = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": start,
             "dur": round(end - start, 3), "cat": cat}
        if args is not None:
            e["args"] = args
        self.events.append(e)

    def nvtx(self, name, phase, ts, dur):
        self.x(name, phase, HOST, THREAD, ts, dur, {"domain": "memstrat", "colour": "#90CAF9"})

    def api(self, name, ts, dur, **args):
        self.x(name, "cuda_api", HOST, API_TID, ts, dur, args or None)

    def kernel(self, name, stream, ts, dur, grid="235,1,1", block="256,1,1"):
        self.corr += 1
        self.x(name, "kernel", GPU, stream * 100, ts, dur,
               {"stream": stream, "correlation": self.corr, "grid": grid, "block": block})

    def memcpy(self, kind, stream, ts, nbytes, gbps, src="pinned", dst="device", lane=0):
        self.corr += 1
        dur = nbytes / (gbps * 1e3) + 1.2
        self.x(f"Memcpy {kind}", "memcpy", GPU, stream * 100 + lane, ts, dur,
               {"kind": kind, "bytes": nbytes, "src": src, "dst": dst, "async": True,
                "stream": stream, "correlation": self.corr, "GB/s": nbytes / (dur * 1e3)})
        return ts + dur

    def write(self, path: Path, other=None) -> Path:
        doc = {"displayTimeUnit": "ms",
               "otherData": other or {"generator": "memstrat CuptiProfiler",
                                      "clock": "CUPTI timestamps; ts 0 = 1723001 ns",
                                      "nvtx_ranges": sum(1 for e in self.events
                                                         if e["pid"] == HOST)},
               "traceEvents": self.meta + self.events}
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path


def batch_rows(b: int) -> int:
    return min(BATCH, N_TRAIN - b * BATCH)


def per_batch_trace(tmp_path: Path, strategy: str = "double-buffer", epochs: int = 3) -> tuple:
    """double-buffer (copy stream, depth 2) or um-prefetch (prefetch stream, migrations), one
    launch per batch. Returns (path, builder)."""
    tb = TraceBuilder(strategy)
    compute, side = 13, 14 if strategy == "double-buffer" else 15
    tb.stream(compute, "compute")
    tb.stream(side, "copy 0" if strategy == "double-buffer" else "prefetch")
    if strategy != "double-buffer":
        tb.thread(GPU, side * 100 + 50, f"stream {side} (prefetch) - prefetch migrations",
                  side * 100 + 50)
    n = math.ceil(N_TRAIN / BATCH)
    t = 0.0
    run_start = t
    tb.x("setup", "window", HOST, 0, t, 1800.0)
    tb.nvtx("setup", "setup", t + 5, 1790.0)
    t += 1850.0
    gpu_free = t
    for e in range(1, epochs + 1):
        e0 = t
        tb.api("cudaStreamSynchronize", e0 + 1, 2.0)
        tb.nvtx("host-prep", "host-prep", e0 + 4, 6.0)
        host = e0 + 12.0
        compute_free = max(gpu_free, host + 8)
        side_free = compute_free
        starts, done = [], []             # GPU start and end of each batch's step
        for b in range(n):
            rows = batch_rows(b)
            hb = host
            tb.nvtx(f"batch {b}", "batch", hb, 13.6)
            tb.nvtx("h2d" if strategy == "double-buffer" else "prefetch",
                    "h2d" if strategy == "double-buffer" else "prefetch", hb + 0.4, 3.1)
            nbytes = rows * 784
            if strategy == "double-buffer":
                tb.api("cudaMemcpyAsync", hb + 0.6, 2.2)
                tb.api("cudaMemcpyAsync", hb + 2.9, 0.5)
                # depth 2: batch b's buffer is free once batch b - 2's step is done
                c = max(side_free, hb + 4.0, done[b - 2] if b >= 2 else 0.0)
                c = tb.memcpy("HtoD", side, c, nbytes, 45.0)
                ready = tb.memcpy("HtoD", side, c, rows * 4, 45.0)
            else:
                tb.api("cudaMemPrefetchAsync", hb + 0.6, 2.6, bytes=nbytes, stream=side)
                # issued while batch b - 1 computes
                c = max(side_free, hb + 4.0, starts[b - 1] if b >= 1 else 0.0)
                for chunk in range(0, nbytes, 65536):
                    size = min(65536, nbytes - chunk)
                    dur = size / 18e3 + 0.9
                    tb.x("UM HtoD", "um_migration", GPU, side * 100 + 50, c, dur,
                         {"bytes": size, "cause": "prefetch", "address": 0x7f0000000000
                          + b * BATCH * 784 + chunk})
                    c += dur
                ready = c
            side_free = ready
            tb.nvtx("forward", "forward", hb + 3.8, 3.4)
            tb.nvtx("backward", "backward", hb + 7.4, 3.3)
            tb.nvtx("update", "update", hb + 10.9, 2.4)
            k = max(compute_free, ready + 0.8)
            starts.append(k)
            for name, d in STEP:
                d = d * rows / BATCH if "gemm" not in name else d
                tb.kernel(name, compute, k, d)
                k += d + 0.25
            compute_free = k
            done.append(k)
            host += 14.0
        tb.api("cudaStreamSynchronize", host, compute_free - host + 1.0)
        end = max(host, compute_free) + 1.5
        tb.memcpy("DtoH", compute, end, N_TRAIN * 4, 40.0, src="device", dst="pinned")
        end = tb.memcpy("DtoH", compute, end + 8.0, N_TRAIN * 4, 40.0, src="device",
                        dst="pinned") + 3.0
        tb.nvtx(f"epoch {e}", "epoch", e0, end - e0)
        tb.x(f"epoch {e}", "window", HOST, 0, e0, end - e0 + 40.0)
        tb.gpu_batch_starts[e] = starts
        gpu_free = end
        t = end + 2100.0                  # flush between windows, then the next epoch
    tb.nvtx(f"memstrat {strategy}", "run", run_start, t - run_start)
    tb.events.append({"ph": "C", "name": "UM GPU page faults per 100 us", "pid": GPU, "tid": 0,
                      "ts": 100.0, "args": {"faults": 12}})
    return tb.write(tmp_path / f"{strategy}.json"), tb


def chunk_trace(tmp_path: Path) -> Path:
    """zero-copy-staged: one staging kernel on the stage stream and one step launch per
    chunk of 41 batches (8 MiB), NVTX 'batches i-j (one launch)'."""
    tb = TraceBuilder("zero-copy-staged")
    tb.stream(13, "compute")
    tb.stream(16, "stage")
    n = math.ceil(N_TRAIN / BATCH)
    per_chunk = 41
    t = 0.0
    tb.x("setup", "window", HOST, 0, t, 900.0)
    t = 1000.0
    for e in (1, 2):
        e0 = t
        host, compute_free, stage_free = e0 + 10, e0 + 20, e0 + 15
        done = []
        for first in range(0, n, per_chunk):
            last = min(n, first + per_chunk) - 1
            rows = sum(batch_rows(b) for b in range(first, last + 1))
            tb.nvtx(f"batches {first}-{last} (one launch)", "batch", host, 9.0)
            tb.nvtx("h2d", "h2d", host + 0.5, 2.0)
            stage = rows * 788 / 47.9e3
            # a ring of two chunk slots: chunk c is staged once chunk c - 2's steps are done
            c = len(done)
            stage_free = max(stage_free, done[c - 2] if c >= 2 else 0.0)
            tb.kernel("void memstrat::stage_chunk<16>(uint4 const*, uint4*, long)", 16,
                      stage_free, stage, grid="528,1,1")
            ready = stage_free + stage
            stage_free = ready
            k = max(compute_free, ready + 1.0)
            dur = STEP_US * (last - first + 1)
            tb.kernel("void memstrat::train_steps_chunk<256, 10>(memstrat::StepArgs)", 13, k,
                      dur, grid="132,1,1")
            compute_free = k + dur
            done.append(compute_free)
            host += 10.0
        end = compute_free + 2.0
        tb.nvtx(f"epoch {e}", "epoch", e0, end - e0)
        tb.x(f"epoch {e}", "window", HOST, 0, e0, end - e0 + 30)
        t = end + 2000.0
    tb.nvtx("memstrat zero-copy-staged", "run", 0.0, t)
    return tb.write(tmp_path / "zero-copy-staged.json")


def assert_valid_trace(path: Path) -> None:
    """What validate_trace_events() (tests/support/trace_checks.h) checks of X events: keys
    present, durations >= 0, slices of one track nested or disjoint."""
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ms"
    tracks: dict[tuple, list] = {}
    for e in doc["traceEvents"]:
        assert {"ph", "name", "pid", "tid"} <= set(e)
        if e["ph"] == "X":
            assert e["dur"] >= 0
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for key, spans in tracks.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for a, b in spans:
            while stack and stack[-1][1] <= a + 1e-6:
                stack.pop()
            assert not stack or b <= stack[-1][1] + 1e-6, f"partial overlap on {key}"
            stack.append((a, b))


# --------------------------------------------------------------------------------------
def test_the_synthetic_traces_keep_the_trace_format(tmp_path):
    for strategy in ("double-buffer", "um-prefetch"):
        assert_valid_trace(per_batch_trace(tmp_path, strategy)[0])
    assert_valid_trace(chunk_trace(tmp_path))


def test_window_of_a_per_batch_trace_finds_every_batch_on_the_compute_stream(tmp_path):
    path, tb = per_batch_trace(tmp_path)
    trace = T.load_trace(path)
    assert trace.strategy() == "double-buffer"
    w = T.choose_window(trace)
    assert w.epoch == 2                          # the middle one of the steady epochs 2, 3
    assert (w.batches, w.unit, w.detected) == (235, "batch", True)
    assert w.labels[116] == "batch 116"
    assert w.starts == pytest.approx(tb.gpu_batch_starts[2])
    assert (w.first, w.count) == (116, 3)
    assert w.t0 == pytest.approx(tb.gpu_batch_starts[2][116])
    assert w.t1 == pytest.approx(tb.gpu_batch_starts[2][119])
    w = T.choose_window(trace, epoch=3, count=4, first=0)
    assert (w.epoch, w.first, w.count) == (3, 0, 4)
    assert w.t0 == pytest.approx(tb.gpu_batch_starts[3][0])


def test_rows_are_the_streams_and_the_nvtx_levels_with_work_in_the_window(tmp_path):
    path, _ = per_batch_trace(tmp_path)
    trace = T.load_trace(path)
    w = T.choose_window(trace)
    gpu = T.gpu_rows(trace, w)
    assert [r.label for r in gpu] == ["stream 13 (compute)", "stream 14 (copy 0)"]
    kinds = {k for r in gpu for _, k in r.slices}
    assert kinds == {"kernel", "memcpy-HtoD"}             # the epoch-end DtoH is outside
    host = T.host_rows(trace, w)
    assert [r.label for r in host] == [f"host thread {THREAD}: batch",
                                       f"host thread {THREAD}: h2d / forward / backward / update",
                                       f"host thread {THREAD}: CUDA API"]
    assert {s.name for s, _ in host[2].slices} == {"cudaMemcpyAsync"}
    # the host runs ahead: its batch ranges in the window are later batches than the GPU's
    names = [s.name for s, _ in host[0].slices]
    assert all(int(n.split()[1]) > 119 for n in names)


def test_unified_memory_prefetch_draws_its_migration_row(tmp_path):
    path, tb = per_batch_trace(tmp_path, "um-prefetch")
    trace = T.load_trace(path)
    w = T.choose_window(trace, count=2)
    labels = [r.label for r in T.gpu_rows(trace, w)]
    assert "stream 15 (prefetch) - prefetch migrations" in labels
    assert {k for r in T.gpu_rows(trace, w) for _, k in r.slices} == {"kernel", "um-HtoD"}
    assert w.detected and w.starts == pytest.approx(tb.gpu_batch_starts[2])


def test_one_launch_per_chunk_makes_the_launch_the_unit(tmp_path):
    trace = T.load_trace(chunk_trace(tmp_path))
    w = T.choose_window(trace)
    assert (w.epoch, w.batches, w.unit, w.detected) == (2, 235, "launch", True)
    assert w.labels == ["batches 0-40", "batches 41-81", "batches 82-122", "batches 123-163",
                        "batches 164-204", "batches 205-234"]
    assert (w.first, w.count) == (1, 3)
    rows = T.gpu_rows(trace, w)
    assert [r.label for r in rows] == ["stream 13 (compute)", "stream 16 (stage)"]
    assert {k for r in rows for _, k in r.slices} == {"kernel", "kernel-other"}


def test_one_launch_per_epoch_estimates_the_batch_starts(tmp_path):
    doc = json.loads(chunk_trace(tmp_path).read_text())
    for e in doc["traceEvents"]:            # the epoch's batches in one range
        if e.get("name", "").startswith("batches "):
            e["name"] = "batches 0-234 (one launch)"
    path = tmp_path / "kernel.json"
    path.write_text(json.dumps(doc))
    w = T.choose_window(T.load_trace(path))
    assert (w.unit, w.detected, len(w.starts), w.batches) == ("batch", False, 235, 235)
    assert w.starts == sorted(w.starts)


def test_plot_writes_png_svg_pdf_and_is_byte_stable(tmp_path):
    path, _ = per_batch_trace(tmp_path)
    a = T.plot_timeline(path, tmp_path / "a" / "timeline.png")
    b = T.plot_timeline(path, tmp_path / "b" / "timeline.png")
    assert a.name == "timeline.png"
    for ext in ("png", "svg", "pdf"):
        fa, fb = a.with_suffix("." + ext), b.with_suffix("." + ext)
        assert fa.stat().st_size > 5_000
        assert fa.read_bytes() == fb.read_bytes(), ext


def test_short_kernel_names():
    assert T.short_name(STEP[0][0]) == "normalize_u8"
    assert T.short_name("void memstrat::kernels::sgd_momentum<float>(float*, float)") == \
        "sgd_momentum"
    assert T.short_name(STEP[1][0]) == STEP[1][0]


def test_cli(tmp_path, capsys):
    path, _ = per_batch_trace(tmp_path, epochs=2)
    chunk = chunk_trace(tmp_path)
    out = tmp_path / "fig"
    assert T.main([str(path), "--out", str(out), "--batches", "4"]) == 0
    for ext in ("png", "svg", "pdf"):
        assert (out / f"timeline_double-buffer.{ext}").exists()
    assert T.main([str(chunk), "--out", str(out), "--name", "zcs", "--epoch", "1"]) == 0
    assert (out / "zcs.pdf").exists()
    assert T.main([str(path), "--out", str(out), "--epoch", "7"]) == 2
    assert "no epoch 7" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": []}')
    assert T.main([str(bad), "--out", str(out)]) == 2
    assert "no slices" in capsys.readouterr().err


def test_a_trace_without_gpu_work_is_refused(tmp_path):
    tb = TraceBuilder("pinned")
    tb.x("epoch 1", "window", HOST, 0, 0.0, 100.0)
    tb.nvtx("batch 0", "batch", 1.0, 5.0)
    with pytest.raises(T.TraceError, match="no GPU work"):
        T.choose_window(T.load_trace(tb.write(tmp_path / "t.json")))


def test_a_trace_without_nvtx_still_draws_with_estimated_batches(tmp_path, monkeypatch):
    path, tb = per_batch_trace(tmp_path, epochs=2)
    doc = json.loads(path.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not (e.get("pid") == HOST and e.get("tid") == THREAD)]
    bare = tmp_path / "no-nvtx.json"
    bare.write_text(json.dumps(doc))
    trace = T.load_trace(bare)
    w = T.choose_window(trace)
    assert (w.batches, w.detected) == (None, False)
    assert w.starts == pytest.approx(tb.gpu_batch_starts[2])
    titles = []
    monkeypatch.setattr(T, "_finish", lambda fig, p, title, subtitle, *a, **k:
                        titles.append(subtitle) or p)
    T.plot_timeline(trace, tmp_path / "t.png")
    assert "no NVTX batch ranges" in titles[0]


def test_an_out_that_cannot_be_written_is_a_message_and_exit_2(tmp_path, capsys):
    trace = per_batch_trace(tmp_path)[0]
    assert T.main([str(trace), "--out", "/proc/no-such-folder"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out /proc/no-such-folder: cannot write") and "Traceback" not in err

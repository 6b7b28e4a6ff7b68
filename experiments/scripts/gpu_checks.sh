#!/usr/bin/env bash
# gpu_checks.sh STAGE...: the GPU tests and the measurements behind docs/results, on a machine
# with an NVIDIA GPU. Builds once, then runs the named stages; everything they write lands in
# $OUT/gpu_checks/ (OUT defaults to ./gpu-checks-out) and is packed into $OUT/gpu_checks.tgz, one
# file to copy off the machine. MNIST comes from $MEMSTRAT_DATA, else <repo>/data/mnist
# (experiments/scripts/get_mnist.py). Stages:
#   build     configure + build (Release, native arch)
#   gputest   every GoogleTest (cpu + gpu labels); CT_R=regex runs only the matching tests
#   accuracy  default config (resident, 10 epochs) -> test accuracy
#   quick     every strategy once, batch 256 u8 static, 4 epochs
#   sweep     ms/epoch for batch 8/64/256/1024 x resident/pageable/pinned (u8, static)
#   grid      all strategies x u8/f32 x static/refresh x batch 256/1024 (+ double-buffer depths)
#   mallocs   cudaMalloc per epoch: built-in counters for 1/5/20 epochs and nsys cuda_api_sum
#   fused     single-launch step vs cuBLASLt-fused vs layer-by-layer (--fused on|lt|off)
#   epochlaunch resident, batch 8/64/256: the epoch in one launch vs one launch per batch
#   stepbench build/step_bench per batch size (STEPBENCH_BATCHES, default "8 64 256"; one launch
#             per step, several steps per launch, phase stamps); with NCU=1 also an ncu
#             source-level profile of batch 8 and 256
#   overhead  --profile vs --no-profile
#   tf32      resident/double-buffer with --tf32
#   fullmatrix experiments/matrix/matrices/full.toml + report
#   kernels   per-kernel GPU time via nsys (resident, batch 256 and 8)
#   sanitize  compute-sanitizer memcheck/racecheck/synccheck/initcheck on every strategy (short runs;
#             SAN_SCENARIO=stream: 4 workers, 2 slots, SAN_AUGMENT (default light); resident is
#             refused there, exit 2)
#   sanitizegpus compute-sanitizer (SAN_TOOLS, default memcheck racecheck synccheck initcheck) on
#             one configuration per several-GPU family at --gpus 2, static, short runs: the per-GPU
#             copies (double-buffer, also with --reduce ring), the portable pinned set
#             (host-shared), the peer pull (peer-fanout), the set on every GPU (resident), the
#             managed set (um-shared-prefetch, where this memstrat has it), one process per GPU
#             (resident --processes per-gpu); says so and does nothing below 2 GPUs. NCCL's own
#             kernel probe (API error 209 at communicator creation) and its peer mapping between
#             the GPUs of one process (API error 704, cleared) are set apart, not findings
#             (experiments/scripts/sanitizer_findings.py)
#   stream    every strategy in the stream scenario: light/heavy/none x 1 and 8 workers
#   streammatrix experiments/matrix/matrices/stream.toml + report
#   streambench experiments/baselines/benchmark_stream.py (memstrat vs PyTorch's DataLoader;
#             STREAM_BENCH_ARGS adds options, e.g. --quick)
#   matrix    experiments/matrix/matrices/quick.toml end to end + report, with a kill/restart check
#   (matrix writes report_quick.tgz)
#   torch     PyTorch baseline + side-by-side benchmark
#   pygpu     the pytest files whose tests need a GPU (PyTorch/JAX baselines, guard, timeline),
#             PyTorch's and JAX's in processes of their own (a CUDA device-side assert ends
#             every later CUDA call of its process)
#   multigpu  the data-parallel and multi-GPU primitive tests (skip below 2 GPUs), --gpus 2
#             beside --emulate-gpus 2 (the same loss curve, bitwise, with --reduce exact) and
#             `primitives --gpus 2` up to 1 GiB (the final table)
# NVLink multicast stays off in every stage (NCCL_NVLS_ENABLE=0; memstrat refuses several GPUs
# without it).
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
FINAL_OUT="${OUT:-$REPO/gpu-checks-out}"
OUT="$FINAL_OUT/gpu_checks"
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
MS=build/memstrat
DATA="${MEMSTRAT_DATA:-$REPO/data/mnist}"
J="$OUT/runs.jsonl"
log() { echo "[$(date +%H:%M:%S)] $*"; }

stage_build() {
  log "build"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMEMSTRAT_CUDA_ARCH=native >"$OUT/build.log" 2>&1 &&
    cmake --build build -j"$(nproc)" -- -k >>"$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -40; }
  [ -x $MS ] || return 1
  $MS info | tee "$OUT/info.txt"
}

stage_gputest() {
  log "gputest"
  ctest --test-dir build --output-on-failure -j1 --timeout 600 ${CT_R:+-R "$CT_R"} >"$OUT/ctest.log" 2>&1
  local rc=$?
  grep -E "tests passed|Skipped|Failed|\*\*\*" "$OUT/ctest.log" | tail -25
  return $rc
}

train() { $MS train --data "$DATA" "$@"; }

stage_accuracy() {
  log "accuracy: default config"
  train --strategy resident --epochs 10 --json "$J" --run-tag accuracy --loss-curve "$OUT/curve_resident.csv" | tee "$OUT/accuracy.txt" | tail -16
}

stage_quick() {
  log "quick: every strategy once (batch 256, u8, static, 4 epochs, profiler on)"
  for s in $($MS list | awk '{print $1}'); do
    train --strategy $s --epochs 4 --quiet --json "$J" --run-tag "quick-$s" 2>&1 | tail -3
  done
}

stage_sweep() {
  log "sweep: batch x {resident,pageable,pinned}"
  for b in 8 64 256 1024; do
    for s in resident pageable pinned; do
      e=6; [ "$b" = 8 ] && e=4
      train --strategy $s --batch $b --epochs $e --quiet --json "$J" --run-tag "sweep-$s-$b" | grep summary
    done
  done
}

stage_grid() {
  log "grid: strategies x transfer x scenario x batch"
  for b in 256 1024; do for t in u8 f32; do for sc in static refresh; do
    for s in $($MS list | awk '{print $1}'); do
      train --strategy $s --batch $b --transfer $t --scenario $sc --epochs 6 --quiet --json "$J" \
            --run-tag "grid-$s-$b-$t-$sc" | grep summary
    done
    for d in 3 4; do
      train --strategy double-buffer --depth $d --batch $b --transfer $t --scenario $sc --epochs 6 --quiet \
            --json "$J" --run-tag "grid-db$d-$b-$t-$sc" | grep summary
    done
  done; done; done
}

stage_mallocs() {
  log "mallocs: built-in counts vs nsys"
  for s in $($MS list | awk '{print $1}'); do
    for e in 1 5 20; do
      train --strategy $s --epochs $e --quiet --json "$OUT/mallocs.jsonl" --run-tag "mallocs-$s-$e" >/dev/null || echo "FAILED $s $e"
    done
  done
  for s in resident pinned um-prefetch; do for e in 1 5; do
    experiments/scripts/nsys_run -o "$OUT/nsys-$s-$e" -- $MS train --data "$DATA" --strategy $s --epochs $e --quiet \
      --json "$OUT/mallocs_nsys.jsonl" --run-tag "nsys-$s-$e" >"$OUT/nsys-$s-$e.log" 2>&1 || tail -5 "$OUT/nsys-$s-$e.log"
  done; done
  rm -f "$OUT"/*.nsys-rep "$OUT"/*.sqlite "$OUT"/*.qdstrm
}

stage_fused() {
  log "fused: single-launch vs cuBLASLt-fused vs layer-by-layer (resident, u8, static)"
  for b in 8 64 256 1024; do for h in 256 1024; do
    [ "$b" = 8 ] && [ "$h" = 1024 ] && continue
    e=6; [ "$b" = 8 ] && e=4
    fs="on lt off"; [ $((b * h)) -gt 262144 ] && fs="on single lt off"  # where `on` picks lt
    for f in $fs; do
      train --strategy resident --batch $b --hidden $h --epochs $e --fused $f --quiet --json "$J" \
            --run-tag "fused-b$b-h$h-$f" | grep summary
    done
  done; done
}

stage_epochlaunch() {
  log "epochlaunch: resident u8 static, --epoch-launch on vs off"
  for b in 8 64 256; do
    e=6; [ "$b" = 8 ] && e=4
    for o in on off; do
      train --strategy resident --batch $b --epochs $e --epoch-launch $o --quiet --json "$J" \
            --run-tag "epochlaunch-b$b-$o" | grep summary
    done
  done
}

stage_stepbench() {
  log "stepbench: single-launch step per batch size (u8, hidden 256)"
  for b in ${STEPBENCH_BATCHES:-8 64 256}; do build/step_bench --batch $b --steps 1000 | tee -a "$OUT/step_bench.txt"; done
  [ "${NCU:-0}" = 1 ] || return 0
  for b in 8 256; do
    ncu --set full --import-source yes -k regex:fused_step_kernel --launch-skip 30 --launch-count 1 -f \
      -o "$OUT/ncu_b$b" build/step_bench --batch $b --reps 40 --steps 0 >"$OUT/ncu_b$b.log" 2>&1 || tail -3 "$OUT/ncu_b$b.log"
    ncu -i "$OUT/ncu_b$b.ncu-rep" --page details --csv >"$OUT/ncu_b${b}_details.csv" 2>&1
    ncu -i "$OUT/ncu_b$b.ncu-rep" --page source --csv --print-source cuda,sass >"$OUT/ncu_b${b}_source.csv" 2>&1 ||
      ncu -i "$OUT/ncu_b$b.ncu-rep" --page source --csv >"$OUT/ncu_b${b}_source.csv" 2>&1
    gzip -f "$OUT/ncu_b${b}_source.csv"; rm -f "$OUT/ncu_b$b.ncu-rep"
  done
}

stage_overhead() {
  log "overhead: --profile vs --no-profile"
  for s in resident pinned double-buffer um-prefetch; do for b in 8 256; do
    e=6; [ "$b" = 8 ] && e=4
    for p in on off; do
      flag=--profile; [ $p = off ] && flag=--no-profile
      train --strategy $s --batch $b --epochs $e $flag --quiet --json "$J" --run-tag "overhead-$s-b$b-$p" | grep summary
    done
  done; done
}

stage_tf32() {
  log "tf32: TF32 tensor-core GEMMs (--tf32), resident and double-buffer"
  for b in 8 256 1024; do
    e=6; [ "$b" = 8 ] && e=4
    train --strategy resident --batch $b --epochs $e --tf32 --quiet --json "$J" --run-tag "tf32-resident-b$b" | grep summary
  done
  train --strategy double-buffer --transfer f32 --batch 1024 --epochs 6 --tf32 --quiet --json "$J" --run-tag "tf32-double-buffer-f32-b1024" | grep summary
}

# matrix_and_report NAME: experiments/matrix/matrices/NAME.toml from scratch into results/NAME,
# its report into reports/NAME; both, and the logs, copied into $OUT.
matrix_and_report() {
  local name="$1"
  rm -rf "results/$name"
  python3 experiments/matrix/run_matrix.py "experiments/matrix/matrices/$name.toml" --out "results/$name" \
    --memstrat $MS --extra-args="--data=$DATA" >"$OUT/${name}_matrix.log" 2>&1 || tail -5 "$OUT/${name}_matrix.log"
  tail -2 "$OUT/${name}_matrix.log"
  python3 analysis/report.py "results/$name" --out "reports/$name" >"$OUT/report_$name.log" 2>&1 ||
    tail -5 "$OUT/report_$name.log"
  cp -r "reports/$name" "$OUT/report_$name" && cp "results/$name/records.jsonl" "$OUT/${name}_records.jsonl"
}

stage_fullmatrix() {
  log "full matrix"
  matrix_and_report full
}

stage_nsysall() {
  log "nsysall: built-in API counts vs nsys cuda_api_sum, every strategy (two runs of one command)"
  : >"$OUT/nsys_compare.txt"
  for s in $($MS list | awk '{print $1}'); do
    train --strategy $s --epochs 2 --quiet --json "$OUT/builtin.jsonl" --run-tag "builtin-$s" >/dev/null
    experiments/scripts/nsys_run -o "$OUT/n-$s" -- $MS train --data "$DATA" --strategy $s --epochs 2 --quiet >"$OUT/n-$s.log" 2>&1
    python3 - "$OUT/builtin.jsonl" "$OUT/n-${s}_api_calls.csv" "$s" <<'PY' | tee -a "$OUT/nsys_compare.txt"
import csv, json, sys
rec = [json.loads(l) for l in open(sys.argv[1])][-1]
tot = rec["api_totals"]
ns = {r[0]: int(r[1]) for r in csv.reader(open(sys.argv[2])) if r and r[0] != "name"}
keys = ["cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged", "cudaMallocAsync",
        "cudaMemcpyAsync", "cudaMemPrefetchAsync", "cudaMemAdvise", "cudaGraphLaunch", "cudaStreamSynchronize"]
diff = [k for k in keys if tot.get(k, 0) != ns.get(k, 0)]
print(f"{sys.argv[3]:<14}" + " ".join(f"{k}={tot.get(k,0)}/{ns.get(k,0)}" for k in keys if tot.get(k,0) or ns.get(k,0))
      + ("  MATCH" if not diff else f"  DIFFER: {diff}"))
PY
  done
  rm -f "$OUT"/n-*.nsys-rep "$OUT"/n-*.sqlite
}

stage_trace() {
  log "trace: --trace of double-buffer (f32, batch 1024): validate + copy/compute overlap"
  train --strategy double-buffer --transfer f32 --batch 1024 --epochs 2 --quiet --trace "$OUT/trace_db.json" >/dev/null
  python3 - "$OUT/trace_db.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
bad = [e for e in ev if not {"ph", "name", "pid", "tid"} <= e.keys() or (e["ph"] != "M" and "ts" not in e)
       or (e["ph"] == "X" and not isinstance(e.get("dur"), (int, float)))]
def spans(cat):
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("ph") == "X" and e.get("cat") == cat)
mem, ker = spans("memcpy"), spans("kernel")
ov, j = 0.0, 0
for a, b in mem:
    for c, d in ker:
        if c >= b: break
        if d > a: ov += min(b, d) - max(a, c)
cats = sorted({e.get("cat") for e in ev if e.get("ph") == "X"})
print(f"trace: {len(ev)} events, {len(bad)} malformed, categories {cats}; memcpy {len(mem)} ({sum(b-a for a,b in mem)/1e3:.2f} ms), "
      f"kernels {len(ker)}; memcpy time overlapped by kernels: {ov/1e3:.2f} ms")
PY
  gzip -f "$OUT/trace_db.json"
}

stage_kernels() {
  log "kernels: per-kernel GPU time (nsys cuda_gpu_kern_sum), resident batch 256 and 8"
  for b in 256 8; do
    e=3; experiments/scripts/nsys_run -o "$OUT/k$b" -- $MS train --data "$DATA" --batch $b --epochs $e --quiet --no-profile >/dev/null 2>"$OUT/k$b.err" || tail -3 "$OUT/k$b.err"
    NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
    LD_LIBRARY_PATH="$REPO/.nsyslibs:${LD_LIBRARY_PATH:-}" "${NSYS:-nsys}" stats --force-export=true --report cuda_gpu_kern_sum --format csv "$OUT/k$b.nsys-rep" 2>>"$OUT/k$b.err" \
      | python3 -c "
import csv,sys
rows=[r for r in csv.reader(sys.stdin) if r]
h=[i for i,r in enumerate(rows) if r and r[0].startswith('Time')]
if not h: sys.exit(print('no kernel summary'))
rows=rows[h[0]:]; hdr=rows[0]; ix=hdr.index('Instances'); iavg=hdr.index('Avg (ns)'); it=hdr.index('Total Time (ns)'); iname=hdr.index('Name')
print('batch $b: instances  avg_us  total_ms  name')
for r in rows[1:25]: print(f'{r[ix]:>10} {float(r[iavg])/1e3:8.2f} {float(r[it])/1e6:9.2f}  {r[iname][:90]}')"
  done
  rm -f "$OUT"/k*.nsys-rep "$OUT"/k*.sqlite
}

stage_sanitize() {
  log "sanitize"
  local args="--data $DATA --train-samples 1024 --test-samples 256 --epochs 2 --batch 256 --quiet --scenario ${SAN_SCENARIO:-refresh}"
  [ "${SAN_SCENARIO:-}" = stream ] && args="$args --workers 4 --prefetch 2 --augment ${SAN_AUGMENT:-light}"
  : >"$OUT/sanitize.txt"
  for tool in memcheck racecheck synccheck initcheck; do
    for s in $($MS list | awk '{print $1}') double-buffer:3 double-buffer:4:2; do
      IFS=: read -r name depth streams <<<"$s"
      extra=""; [ -n "$depth" ] && extra="--depth $depth --copy-streams ${streams:-1}"
      r=$(compute-sanitizer --tool $tool --error-exitcode 99 $MS train --strategy $name $args $extra --no-profile 2>&1)
      rc=$?
      summary=$(echo "$r" | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | tail -1)
      echo "$tool $s rc=$rc $summary" | tee -a "$OUT/sanitize.txt"
      if [ $rc -ne 0 ]; then echo "$r" | grep -E "=========" | head -20 >>"$OUT/sanitize_findings.txt"; fi
    done
  done
}

stage_sanitizegpus() {
  log "sanitizegpus"
  local gpus; gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "$gpus" -lt 2 ]; then
    echo "sanitizegpus: needs 2 GPUs, this machine shows $gpus; nothing run"
    return 0
  fi
  local args="--data $DATA --train-samples 1024 --test-samples 256 --epochs 2 --batch 256 --quiet --gpus 2 --no-profile"
  local have=" $($MS list | awk '{print $1}' | tr '\n' ' ') " rc=0 tool c code r summary
  local families=("double-buffer" "double-buffer --reduce ring" "host-shared" "peer-fanout" "resident"
                  "um-shared-prefetch" "resident --processes per-gpu")
  : >"$OUT/sanitize_gpus.txt"
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
    for c in "${families[@]}"; do
      local parts; read -r -a parts <<<"$c"
      case "$have" in *" ${parts[0]} "*) ;; *)
        echo "$tool $c: not a strategy of this memstrat; not run" | tee -a "$OUT/sanitize_gpus.txt"; continue ;;
      esac
      # NCCL's kernel probe at communicator creation (error 209) and its peer mapping between the
      # GPUs of one process (error 704, peer access already enabled) are reported as API errors
      # that NCCL expects and clears; sanitizer_findings.py sets those apart and fails on anything
      # else.
      r=$(compute-sanitizer --tool "$tool" --target-processes all --error-exitcode 99 --print-limit 100000 \
          $MS train --strategy "${parts[@]}" $args 2>&1)
      code=$?
      echo "== $tool $c" >>"$OUT/sanitize_gpus_findings.txt"
      summary=$(echo "$r" | python3 experiments/scripts/sanitizer_findings.py --findings "$OUT/sanitize_gpus_findings.txt")
      sorted=$?
      echo "$tool $c rc=$code: $summary" | tee -a "$OUT/sanitize_gpus.txt"
      # 99: the tool reported something (sorted above); any other non-zero status: the run failed
      if [ $sorted -ne 0 ] || { [ $code -ne 0 ] && [ $code -ne 99 ]; }; then
        rc=1
        echo "$r" | grep -E "memstrat:" | head -10 >>"$OUT/sanitize_gpus_findings.txt"
      fi
    done
  done
  return $rc
}

stage_matrix() {
  log "matrix: quick.toml end to end, killed once mid-run and restarted"
  rm -rf results/quick
  timeout -s KILL 45 python3 experiments/matrix/run_matrix.py experiments/matrix/matrices/quick.toml --out results/quick \
    --memstrat $MS --extra-args="--data=$DATA" >"$OUT/matrix1.log" 2>&1
  n1=$(grep -c . results/quick/records.jsonl 2>/dev/null || echo 0)
  echo "killed after 45 s with $n1 records"
  python3 experiments/matrix/run_matrix.py experiments/matrix/matrices/quick.toml --out results/quick \
    --memstrat $MS --extra-args="--data=$DATA" >"$OUT/matrix2.log" 2>&1 || tail -5 "$OUT/matrix2.log"
  python3 - <<'PY'
import json, collections
rows=[json.loads(l) for l in open("results/quick/records.jsonl") if l.strip()]
tags=collections.Counter(r["config"].get("run_tag") for r in rows if r.get("status")=="ok")
print(f"records: {len(rows)}, ok: {sum(tags.values())}, distinct cells: {len(tags)}, duplicated cells: {sum(1 for t,c in tags.items() if c>1)}, failed: {sum(1 for r in rows if r.get('status')!='ok')}")
PY
  tail -2 "$OUT/matrix2.log"
  python3 analysis/report.py results/quick --out reports/quick >"$OUT/report.log" 2>&1 || tail -5 "$OUT/report.log"
  (cd reports && tar czf "$OUT/report_quick.tgz" quick) && cp results/quick/records.jsonl "$OUT/quick_records.jsonl"
}

stage_stream() {
  log "stream: every strategy x light/heavy/none x 1 and 8 workers (2 slots per worker)"
  for a in light heavy none; do for w in 1 8; do
    for s in $($MS list | awk '{print $1}'); do
      echo "$s $a w=$w: $(train --strategy $s --scenario stream --augment $a --workers $w --prefetch $((2 * w)) \
        --epochs 4 --no-profile --quiet --json "$J" --run-tag "stream-$s-$a-w$w" 2>&1 | grep -E "summary|memstrat:" | tail -1)"
    done
  done; done
}

stage_streammatrix() {
  log "stream matrix"
  matrix_and_report stream
}

stage_streambench() {
  log "streambench: memstrat stream scenario vs PyTorch DataLoader, same GPU"
  python3 experiments/baselines/benchmark_stream.py --memstrat $MS --data "$DATA" --out-dir results/vs_dataloader \
    --out-md "$OUT/vs_dataloader.md" --out-jsonl "$OUT/vs_dataloader.jsonl" ${STREAM_BENCH_ARGS:-} 2>&1 | tail -45
}

stage_torch() {
  log "torch: memstrat vs PyTorch eager, same GPU"
  python3 experiments/baselines/benchmark_vs_pytorch.py --memstrat $MS --data "$DATA" --out-dir results/vs_pytorch \
    --out-md "$OUT/vs_pytorch.md" --out-jsonl "$OUT/vs_pytorch.jsonl" ${TORCH_ARGS:-} 2>&1 | tail -45
}

stage_pygpu() {
  log "pygpu: pytest files with GPU tests"
  local rc=0
  python3 -m pytest -q -rs -p no:cacheprovider tests/experiments/baselines -k "not jax and not jr" \
    tests/experiments/scripts/test_guard.py tests/analysis/test_timeline.py >"$OUT/pytest_torch.log" 2>&1 || rc=1
  tail -3 "$OUT/pytest_torch.log"
  python3 -m pytest -q -rs -p no:cacheprovider tests/experiments/baselines -k "jax or jr" \
    >"$OUT/pytest_jax.log" 2>&1 || rc=1
  tail -3 "$OUT/pytest_jax.log"
  return $rc
}

stage_multigpu() {
  log "multigpu: data-parallel tests, --gpus 2 against --emulate-gpus 2"
  local rc=0
  for t in test_data_parallel test_rank_sum test_multi_gpu_primitives; do
    build/$t >"$OUT/$t.log" 2>&1 || rc=1
    grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]" "$OUT/$t.log"
  done
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    for s in resident pinned; do
      train --strategy $s --gpus 2 --epochs 3 --quiet --loss-curve "$OUT/dp_${s}_gpus2.csv" --json "$J" &&
        train --strategy $s --emulate-gpus 2 --epochs 3 --quiet --loss-curve "$OUT/dp_${s}_emu2.csv" --json "$J" &&
        cmp "$OUT/dp_${s}_gpus2.csv" "$OUT/dp_${s}_emu2.csv" && log "$s: --gpus 2 = --emulate-gpus 2, bitwise" || rc=1
    done
    $MS primitives --gpus 2 --max-size 1GiB --json "$OUT/primitives_gpus2.jsonl" \
      >"$OUT/primitives_gpus2.log" 2>&1 || rc=1
    sed -n '/^case /,$p' "$OUT/primitives_gpus2.log"
  fi
  return $rc
}

for st in "$@"; do
  "stage_$st" || echo "STAGE $st FAILED"
done

finish() { tar czf "$FINAL_OUT/gpu_checks.tgz" -C "$FINAL_OUT" gpu_checks && rm -rf "$OUT"; }
trap finish EXIT
if [ -s "$J" ]; then
  python3 analysis/report.py "$J" --out "$OUT/report" >"$OUT/report.log" 2>&1 || tail -5 "$OUT/report.log"
  echo "report of the runs: $OUT/report/report.md (inside gpu_checks.tgz)"
fi

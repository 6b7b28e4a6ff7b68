#!/usr/bin/env bash
# reproduce.sh: regenerate every published number on this machine's GPUs, in one command.
#
#   bash experiments/scripts/reproduce.sh                 # default stages, into docs/results/<set>/
#   bash experiments/scripts/reproduce.sh --stages matrix,report
#   bash experiments/scripts/reproduce.sh --out /tmp/set  # anywhere else
#
# Results sets: one per GPU model and GPU count. A machine of one GPU writes the one-GPU set,
# docs/results/<gpu>/ (e.g. docs/results/nvidia-h200/), and its default stages are all but
# scaling. A machine of N >= 2 GPUs writes the multi-GPU set, docs/results/<gpu>-x<N>/ (e.g.
# docs/results/nvidia-h100-80gb-hbm3-x2/), and its default stages are build, data, primitives,
# scaling, gpus and report: the one-GPU stages belong to the one-GPU set, measured on a machine of one
# GPU. Stages named with --stages run on any machine; there the one-GPU stages run on GPU 0 and
# write into the -x<N> set too (--out DIR writes anywhere else).
#
# Stages, in order (default: see above):
#   build       configure + build memstrat (Release, this GPU's architecture)
#   data        MNIST verified by SHA-256 (experiments/scripts/get_mnist.py) and a decompressed
#               copy for the runs (a process starts ~0.2 s faster; same bytes)
#   primitives  `memstrat primitives`: every transfer primitive against size (4 KiB..256 MiB);
#               on a machine of N >= 2 GPUs also `memstrat primitives --gpus N` (4 KiB..1 GiB:
#               host->device alone and all at once, device->device, NCCL collectives) into
#               records/primitives_gpus.jsonl and, where torch imports, its PyTorch anchor
#               (experiments/baselines/pytorch_multi_gpu_primitives.py) into
#               baselines/records/multi_gpu_primitives.jsonl, set side by side in
#               multi_gpu_primitives.md (analysis/multi_gpu_primitives.py)
#   matrix      experiments/matrix/matrices/results.toml: every strategy x u8/f32 x static/refresh
#               x batch 64/256/1024, 21 epochs, as separate processes in a seeded shuffled order
#               (timing with the profiler off; one profiled process per configuration for the
#               counters); at batch 256 every launch form each strategy allows, 10 processes
#               each; at 64 and 1024 each strategy's own form, 5 (static) / 3 (refresh).
#               2,206 processes, about 80 minutes on an H200
#   compute     experiments/matrix/matrices/compute.toml: compute per byte, the hidden-width
#               sweep (--hidden 64, 1024, 4096, 1024,1024; 256 is the matrix stage's), every
#               strategy at its own form x u8/f32 x static/refresh at batch 256, the stream
#               scenario's five strategies (16 workers, light), resident at every form as the
#               references, 10 processes of 21 epochs per configuration: 2,540 processes, about
#               70 minutes; records/compute.jsonl (README's decision guide and crossover blocks
#               read it)
#   budget      experiments/matrix/matrices/budget.toml: data larger than the device budget,
#               MNIST x 11 (--replicate 11) under --device-budget none .. 0.06 GiB (data-to-budget
#               ratios 0.5 to 8), every strategy where it fits, resident at every form as the
#               references, 10 processes of 21 epochs: 690 processes, about 40 minutes;
#               records/budget.jsonl
#   spread      experiments/matrix/matrices/spread.toml: the configurations whose run-to-run
#               spread docs/strategies.md explains, with the conditions that change it (and
#               um-advise at each of its hints), 10 processes of 21 epochs per configuration:
#               310 processes, about 8 minutes; spread/records/spread.jsonl
#   stream      experiments/matrix/matrices/stream.toml: the stream scenario (host workers,
#               and the augmentation on the GPU), 10 processes of 21 epochs per configuration:
#               680 processes, about 57 minutes
#   timelines   one traced run per strategy family (batch 256, u8, static, 3 epochs, the launch
#               form auto picks: resident, pinned-graph, double-buffer, double-buffer-graph,
#               zero-copy-staged, um-prefetch-coarse): traces/<strategy>.json.gz and the
#               timeline figure of 3 batches of its steady epoch, plots/timeline_<strategy>.*
#               (analysis/timeline.py; docs/profiling.md shows them)
#   baselines   PyTorch: the plain training loop (experiments/baselines/benchmark_vs_pytorch.py)
#               and the DataLoader pipeline (experiments/baselines/benchmark_stream.py), end to
#               end and as pipeline throughput (no step on either side), 10 processes per
#               configuration (about 50 minutes on an H200 by the scripts' estimates), resumed
#               where stopped (both scripts' --resume); needs the pins of
#               experiments/baselines/requirements.txt (torch), checked first:
#               python3 -m pip install -r experiments/baselines/requirements.txt
#   pipelines   memstrat's resident with GPU augmentation beside the plain DataLoader with an
#               eager step and the strongest PyTorch pipelines (DataLoader + side-stream
#               prefetch + CUDA-graphed step; data resident on the GPU with a CUDA-graphed or
#               torch.compile'd step) and JAX (jit + lax.scan), light and heavy, batch 256, each
#               measure (pipeline, step, epoch) apart, 10 processes each in one shuffled order
#               (experiments/baselines/benchmark_pipelines.py; the JAX variant where jax
#               imports): 280 processes, about 92 minutes estimated on an H100;
#               baselines/records/pipelines.jsonl and baselines/vs_fast_pipelines.md (README's
#               PyTorch block reads them)
#   scaling     only on a machine of N >= 2 GPUs (on one it says so and does nothing):
#               experiments/matrix/matrices/scaling.toml (weak scaling: six strategies x u8/f32
#               at 256 rows per GPU on one GPU and on two with --reduce exact and ring; strong
#               scaling: one GPU at the same global batch, 512; weak at 1024 rows per GPU with
#               --hidden 1024, three strategies; one process per GPU, 7 processes of 21 epochs
#               each: 399 processes, about 25 minutes on two H100s) into
#               records/scaling.jsonl; on a machine of 4 or more, the same runs at 4 GPUs
#               (experiments/matrix/matrices/scaling4.toml: weak at 256 and at 1024 rows per GPU,
#               strong at 128 rows per GPU, the global batch of 512: 294 processes) into
#               records/scaling4.jsonl; memstrat --gpus N beside PyTorch DDP and JAX for every N
#               from 2 to the machine's GPUs (at most 8), 10 processes each, resumed where
#               stopped (experiments/baselines/benchmark_data_parallel.py --resume: about 12
#               minutes per N, its estimate on two H100s) into
#               baselines/records/data_parallel.jsonl and baselines/vs_data_parallel.md; then the
#               N-GPU scaling model held to the matrix's runs, and the strong-scaling speedups
#               (analysis/scaling_check.py) into
#               scaling_check.md, with the primitives at each count the matrices train on (2;
#               4 on a machine of 4 or more): the primitives stage's records/primitives_gpus.jsonl
#               at the machine's own count, measured here into records/primitives_gpusN.jsonl
#               at a smaller one. Needs torch, like baselines
#   gpus        only on a machine of N >= 2 GPUs (on one it says so and does nothing):
#               experiments/matrix/matrices/gpus.toml, every data path on 2 GPUs in one
#               process (each strategy's per-GPU copies, host-shared, peer-fanout, um-shared and
#               its hints, resident on every GPU as the upper bound), u8, static and refresh,
#               ring all-reduce, 10 unprofiled and 6 profiled processes of 21 epochs: 608
#               processes, about 30 minutes on two H200s; records/gpus.jsonl (the gpus-table
#               doc block reads it)
#   report      analysis/report.py (report.md/html, summary.csv, plots, cost model) where the set
#               holds the matrix stage's records/results.jsonl (a multi-GPU set does not: left
#               out, and said so), the results set's README.md and manifest.json, and the
#               generated numbers of README.md and docs/ (analysis/docs_blocks.py). Alone
#               (--stages report) it reads records only and runs on any machine, with no GPU
#               and no build: on the set named by --out, or on every set under docs/results/
#
# Every stage can be rerun on its own and resumes: the matrix runner skips the processes that
# already have a record, so a run stopped half-way (or split over several sittings) continues
# where it was. The results set holds records/*.jsonl (the matrix, the stream scenario, the
# primitives, the scaling and gpus matrices), spread/records/ and baselines/records/ (kept apart: their
# processes repeat configurations of the matrix under other conditions), the report and plots
# generated from the records, README.md and manifest.json (commit, GPU, driver, dates, command,
# the time each stage took). The work directory (logs, temporary files) is
# results/reproduce/<set>/ and is not part of the results set. The matrix, compute and stream
# stages take an hour or more each: run them in several sittings (the stages resume) or a few
# stages at a time (--stages).
# Lowering `epochs` or `repeats` of results.toml, compute.toml or stream.toml breaks what their
# batch-256 rows must have (10 processes, 20 steady epochs each: docs/methodology.md,
# "Statistics over processes").
#
# Environment: MEMSTRAT_DATA, the MNIST directory (default data/mnist, filled by the data stage).
# MEMSTRAT_GIT_SHA [MEMSTRAT_GIT_DIRTY=0|1]: the commit every record names, for a copy of the
# tree without its own git history (the build and the PyTorch baselines read them; default: the
# checkout's git metadata). results_readme.py refuses a set whose records name several commits
# (memstrat's and the baselines') or several machines (CPU model, CPU count, memory: the host
# moves the per-batch launch forms' timings), and before any run this script refuses to add
# records of another commit or another machine to a set (or a stage's work folder) that holds
# some: resume a set with a build of its own commit, on a machine like its own.
#
# On a machine of N >= 2 GPUs every stage runs with NCCL_NVLS_ENABLE=0 (NVLink multicast off: its
# reductions may differ from call to call, and memstrat, the matrix runner and the anchors refuse
# several GPUs without it): exported when unset, refused when set otherwise (checked once the
# build stage is done and the GPUs are counted, before any other stage).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
ALL_STAGES="build data primitives matrix compute budget spread stream timelines baselines pipelines scaling gpus report"
# The defaults (the header's "Results sets"), picked once the GPUs are counted; both begin with
# build, so until then STAGES holds every stage, which asks what either default asks (torch).
ONE_GPU_STAGES="build data primitives matrix compute budget spread stream timelines baselines pipelines report"
MULTI_GPU_STAGES="build data primitives scaling gpus report"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
STAGES="$ALL_STAGES"
STAGES_GIVEN=0
OUT_DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --stages) STAGES="${2//,/ }"; STAGES_GIVEN=1; shift 2 ;;
    --out) OUT_DIR="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "reproduce: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for s in $STAGES; do
  case " $ALL_STAGES " in *" $s "*) ;; *) echo "reproduce: unknown stage '$s'; stages: $ALL_STAGES" >&2; exit 2 ;; esac
done

export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
MS="$REPO/build/memstrat"
PY=python3
log() { echo "[$(date +%H:%M:%S)] reproduce: $*"; }
has_stage() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# The baselines need torch (and what analysis/ pins) at the pinned versions: checked before any
# stage runs, so that hours of matrix runs never end in "No module named 'torch'". torch is a
# large download, so it is never installed here.
if { has_stage baselines || has_stage pipelines || has_stage scaling; } &&
    ! $PY experiments/scripts/check_requirements.py --quiet experiments/baselines/requirements.txt >&2; then
  others="$(echo $STAGES | sed 's/ *baselines//; s/ *pipelines//; s/ *scaling//; s/^ *//; s/ /,/g')"
  echo "reproduce: the baselines, pipelines and scaling stages need the packages above at their pinned versions;" \
    "install them as shown${others:+, or leave the stage out: --stages $others}" >&2
  exit 2
fi

# ---- build first: everything after needs the binary, the GPU's name and the data ----------
T0=$(date +%s)
declare -A STAGE_SECONDS=()
STAGE_SKIPPED=0
# The stages' seconds over every sitting: a stage stopped half-way (time up, Ctrl-C, a failure)
# and resumed later counts each sitting's part. One line "STAGE SECONDS [interrupted]" per stage
# and sitting, in the work directory's stage_seconds.log (LEDGER, known once the GPU is: until
# then lines wait in PENDING); the report stage passes the sums to the set's README.
LEDGER=""
PENDING=()
RUNNING_STAGE=""
RUNNING_T=0
ledger_add() {
  if [ -n "$LEDGER" ]; then echo "$*" >> "$LEDGER"; else PENDING+=("$*"); fi
}
ledger_open() {
  LEDGER="$1"
  local line
  for line in ${PENDING[@]+"${PENDING[@]}"}; do echo "$line" >> "$LEDGER"; done
  PENDING=()
}
ledger_sums() {  # "matrix=4210,stream=3120," from the ledger (empty without one)
  [ -n "$LEDGER" ] && [ -f "$LEDGER" ] || return 0
  awk 'NF >= 2 && $2 ~ /^[0-9]+$/ { s[$1] += $2; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
       END { for (i = 1; i <= n; i++) printf "%s=%d,", order[i], s[order[i]] }' "$LEDGER"
}
on_exit() {
  if [ -n "$RUNNING_STAGE" ]; then
    ledger_add "$RUNNING_STAGE" "$(( $(date +%s) - RUNNING_T ))" interrupted
  fi
}
trap on_exit EXIT
# timed NAME CMD...: run a stage, remember its seconds (none for a stage that sets STAGE_SKIPPED:
# it measured nothing on this machine, and the set's README lists the time of each stage)
timed() {
  local name="$1" t=$(date +%s); shift
  log "stage $name"
  STAGE_SKIPPED=0
  RUNNING_STAGE="$name"; RUNNING_T=$t
  "$@"
  RUNNING_STAGE=""
  if [ "$STAGE_SKIPPED" = 1 ]; then log "stage $name skipped"; return 0; fi
  STAGE_SECONDS[$name]=$(( $(date +%s) - t ))
  [ "$name" = report ] || ledger_add "$name" "${STAGE_SECONDS[$name]}"
  log "stage $name done in ${STAGE_SECONDS[$name]} s"
}

stage_build() { bash experiments/scripts/build.sh build -DMEMSTRAT_BUILD_TESTS=OFF; }
has_stage build && timed build stage_build
# The report stage alone reads records only: it runs on any machine, with a GPU or without, on the
# set named by --out, or on every set under docs/results/ when none is named.
REPORT_ONLY=0
[ "$(echo $STAGES)" = report ] && REPORT_ONLY=1
if [ "$REPORT_ONLY" = 1 ] && [ -z "$OUT_DIR" ]; then
  sets=()
  for d in docs/results/*/; do [ -d "$d/records" ] && sets+=("${d%/}"); done
  [ ${#sets[@]} -gt 0 ] || { echo "reproduce: no results set under docs/results/ to report on" >&2; exit 2; }
  for d in "${sets[@]}"; do bash "$REPO/experiments/scripts/reproduce.sh" --stages report --out "$d" || exit $?; done
  exit 0
fi
if [ "$REPORT_ONLY" = 1 ]; then
  [ -d "$OUT_DIR/records" ] || { echo "reproduce: $OUT_DIR holds no records/: not a results set" >&2; exit 2; }
  GPU_NAME="$($PY - "$OUT_DIR" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/records/*.jsonl")):
    for line in open(f, errors="replace"):
        try:
            name = (json.loads(line).get("env") or {}).get("gpu_name")
        except ValueError:
            continue
        if name:
            print(name)
            sys.exit(0)
sys.exit(1)
PY
)" || { echo "reproduce: no record in $OUT_DIR/records/ names its GPU" >&2; exit 2; }
  RECORDS="$OUT_DIR/records"
  # the stage times of a set measured here are in its work directory, named as the set
  [ -f "results/reproduce/$(basename "$OUT_DIR")/stage_seconds.log" ] &&
    ledger_open "results/reproduce/$(basename "$OUT_DIR")/stage_seconds.log"
  log "report on $OUT_DIR ($GPU_NAME), from its records only"
fi
if [ "$REPORT_ONLY" = 0 ]; then
[ -x "$MS" ] || { echo "reproduce: $MS is missing; run the build stage" >&2; exit 2; }
if ! "$MS" info >/dev/null 2>&1; then
  echo "reproduce: no usable GPU here ('$MS info' says why); nothing to measure" >&2
  "$MS" info >&2 || true
  exit 3
fi
GPU_NAME="$("$MS" info | sed -n 's/^device 0 of [0-9]*: //p')"
GPUS="$("$MS" info | sed -n 's/^device 0 of \([0-9]*\): .*/\1/p')"
SLUG="$(echo "$GPU_NAME" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')"
GPUS="${GPUS:-1}"
# A machine of several GPUs has a results set of its own, the multi-GPU set: its primitives differ
# and its scaling stage runs there; the one-GPU stages, when named, run on GPU 0 as anywhere.
if [ "$GPUS" -gt 1 ]; then
  SLUG="$SLUG-x$GPUS"
  [ "$STAGES_GIVEN" = 1 ] || STAGES="$MULTI_GPU_STAGES"
  # NVLink multicast off in every stage (the header says why): set here unless asked otherwise
  if [ -z "${NCCL_NVLS_ENABLE:-}" ]; then
    export NCCL_NVLS_ENABLE=0
  elif [ "$NCCL_NVLS_ENABLE" != 0 ]; then
    echo "reproduce: this machine has $GPUS GPUs and NCCL_NVLS_ENABLE is '$NCCL_NVLS_ENABLE':" \
      "every stage here runs with NVLink multicast off (its reductions may differ from call to" \
      "call); unset it or export NCCL_NVLS_ENABLE=0" >&2
    exit 2
  fi
else
  [ "$STAGES_GIVEN" = 1 ] || STAGES="$ONE_GPU_STAGES"
fi
OUT_DIR="${OUT_DIR:-docs/results/$SLUG}"
WORK="results/reproduce/$SLUG"
mkdir -p "$OUT_DIR/records" "$WORK"
ledger_open "$WORK/stage_seconds.log"
RECORDS="$OUT_DIR/records"
log "GPU: $GPU_NAME; results set: $OUT_DIR; work directory: $WORK"
log "stages: $STAGES${NCCL_NVLS_ENABLE:+; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE}"
# A set holds one commit's records: a stage resumed by a build of another commit would mix two
# (results_readme.py refuses such a set only after the runs). Checked before any run.
VERSION="$("$MS" --version)"
COMMIT="$(printf '%s\n' "$VERSION" | sed -n 's/^commit \([0-9a-fA-F]*\).*/\1/p')"
# One machine too: the host moves the timings of the launch forms it issues batch by batch (two
# H200 machines of different hosts differ there), so the set and the stages' work folders must
# have run where this runs.
for s in primitives matrix compute budget spread stream timelines baselines pipelines scaling gpus; do
  if has_stage "$s"; then
    $PY analysis/results_readme.py "$OUT_DIR" --expect-commit "${COMMIT:-unknown}" --expect-machine || exit 2
    for w in "$WORK"/*/; do
      [ -f "$w/records.jsonl" ] || continue
      $PY analysis/results_readme.py "$w" --expect-commit "${COMMIT:-unknown}" --expect-machine || exit 2
    done
    break
  fi
done
# What the records will say about the tree is what the build says (env.git_dirty comes from it,
# and MEMSTRAT_GIT_SHA/MEMSTRAT_GIT_DIRTY when given); the checkout is only looked at when they
# are not given, for changes the build cannot know of.
if printf '%s\n' "$VERSION" | grep -q "built with uncommitted changes"; then
  log "warning: this build of ${COMMIT:-an unknown commit} was made with uncommitted changes; every record says so (env.git_dirty)"
elif [ -z "${MEMSTRAT_GIT_SHA:-}" ] && git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1 \
    && [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no)" ]; then
  log "warning: the working tree has uncommitted changes that the build of ${COMMIT:-an unknown commit} does not record (records name it as built); commit them and rebuild (stage build) before publishing"
fi
fi  # REPORT_ONLY = 0

stage_data() {
  $PY experiments/scripts/get_mnist.py ${MEMSTRAT_DATA:+--data "$MEMSTRAT_DATA"}
  local src="${MEMSTRAT_DATA:-$REPO/data/mnist}" raw="$REPO/data/mnist-raw"
  mkdir -p "$raw"
  for f in "$src"/*.gz; do
    local out="$raw/$(basename "$f" .gz)"
    [ -s "$out" ] && [ "$out" -nt "$f" ] || gunzip -c "$f" > "$out"
  done
  [ -f "$src/DATASET" ] && cp "$src/DATASET" "$raw/" || true
}
has_stage data && timed data stage_data
if [ -f "$REPO/data/mnist-raw/train-images-idx3-ubyte" ]; then
  export MEMSTRAT_DATA="$REPO/data/mnist-raw"
fi

stage_primitives() {
  : > "$WORK/primitives.jsonl"
  "$MS" primitives --json "$WORK/primitives.jsonl"
  cp "$WORK/primitives.jsonl" "$RECORDS/primitives.jsonl"
  [ "${GPUS:-1}" -gt 1 ] || return 0
  : > "$WORK/primitives_gpus.jsonl"
  "$MS" primitives --gpus "$GPUS" --max-size 1GiB --json "$WORK/primitives_gpus.jsonl"
  cp "$WORK/primitives_gpus.jsonl" "$RECORDS/primitives_gpus.jsonl"
  if $PY -c "import torch" 2>/dev/null; then
    mkdir -p "$OUT_DIR/baselines/records"
    : > "$WORK/multi_gpu_primitives.jsonl"
    $PY experiments/baselines/pytorch_multi_gpu_primitives.py --gpus "$GPUS" --max-size 1GiB \
        --json "$WORK/multi_gpu_primitives.jsonl"
    cp "$WORK/multi_gpu_primitives.jsonl" "$OUT_DIR/baselines/records/multi_gpu_primitives.jsonl"
    $PY analysis/multi_gpu_primitives.py "$RECORDS/primitives_gpus.jsonl" \
        "$OUT_DIR/baselines/records/multi_gpu_primitives.jsonl" --out-md "$OUT_DIR/multi_gpu_primitives.md"
  else
    log "torch does not import: the PyTorch side of the multi-GPU primitives is left out"
  fi
}

# run_matrix NAME DEST: experiments/matrix/matrices/NAME.toml into the work directory, then its
# records (and the order they ran in) into DEST, a records/ folder of the results set.
run_matrix() {
  local name="$1" dest="$2"
  mkdir -p "$WORK/$name" "$dest"
  # the set's records go first, so a rerun continues instead of starting over
  if [ -f "$dest/$name.jsonl" ] && [ ! -f "$WORK/$name/records.jsonl" ]; then
    cp "$dest/$name.jsonl" "$WORK/$name/records.jsonl"
  fi
  $PY experiments/matrix/run_matrix.py "experiments/matrix/matrices/$name.toml" \
      --out "$WORK/$name" --memstrat "$MS"
  cp "$WORK/$name/records.jsonl" "$dest/$name.jsonl"
  cp "$WORK/$name/manifest.json" "$dest/$name.order.json"
}
stage_matrix() { run_matrix results "$RECORDS"; }
stage_compute() { run_matrix compute "$RECORDS"; }
stage_budget() { run_matrix budget "$RECORDS"; }
stage_spread() { run_matrix spread "$OUT_DIR/spread/records"; }
stage_stream() { run_matrix stream "$RECORDS"; }

TIMELINE_STRATEGIES="resident pinned-graph double-buffer double-buffer-graph zero-copy-staged um-prefetch-coarse"
stage_timelines() {
  mkdir -p "$OUT_DIR/traces" "$OUT_DIR/plots"
  for s in $TIMELINE_STRATEGIES; do
    "$MS" train --strategy "$s" --epochs 3 --quiet --run-tag "timeline-$s" \
        --trace "$WORK/trace_$s.json" >/dev/null
    gzip -c "$WORK/trace_$s.json" > "$OUT_DIR/traces/$s.json.gz"
    $PY analysis/timeline.py "$WORK/trace_$s.json" --out "$OUT_DIR/plots" --name "timeline_$s"
  done
}

stage_baselines() {
  local dest="$OUT_DIR/baselines"
  mkdir -p "$dest/records"
  # --resume: a stage stopped half-way (or split over sittings) runs only what is missing; the
  # work folders' records.jsonl are checked for this commit and machine like the others
  $PY experiments/baselines/benchmark_vs_pytorch.py --memstrat "$MS" --reproduce --resume \
      --out-dir "$WORK/vs_pytorch" --out-md "$dest/vs_pytorch.md"
  cp "$WORK/vs_pytorch/records.jsonl" "$dest/records/vs_pytorch.jsonl"
  # end to end, then the pipelines alone (pipeline throughput: no step on either side), one file
  # (the two measures' run tags differ: each resumes its own runs)
  for measure in epoch pipeline; do
    $PY experiments/baselines/benchmark_stream.py --memstrat "$MS" --reproduce --measure "$measure" \
        --resume --out-dir "$WORK/vs_dataloader" --out-md "$WORK/vs_dataloader/$measure.md"
  done
  $PY experiments/baselines/benchmark_stream.py --from-records "$WORK/vs_dataloader/records.jsonl" \
      --out-md "$dest/vs_dataloader.md" >/dev/null
  cp "$WORK/vs_dataloader/records.jsonl" "$dest/records/vs_dataloader.jsonl"
}

stage_pipelines() {
  local dest="$OUT_DIR/baselines"
  mkdir -p "$dest/records"
  # --resume: a stage stopped half-way (or split over sittings) runs only what is missing
  $PY experiments/baselines/benchmark_pipelines.py --memstrat "$MS" --out-dir "$WORK/pipelines" \
      --resume
  cp "$WORK/pipelines/records.jsonl" "$dest/records/pipelines.jsonl"
  cp "$WORK/pipelines/benchmark_pipelines.md" "$dest/vs_fast_pipelines.md"
}

# scaling_check_md RC RECORDS... -- PRIMITIVES...: the set's scaling_check.md from the check's
# output (its lines as text; they are not Markdown) and its exit status (0 every configuration
# agrees, 1 one not), naming the record and primitives files it read.
scaling_check_md() {
  local rc="$1" verdict files="" prims="" f
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do files="$files ${1#"$OUT_DIR"/}"; shift; done
  shift
  for f in "$@"; do prims="$prims --primitives ${f#"$OUT_DIR"/}"; done
  verdict="every checked configuration agrees with the model"
  [ "$rc" = 0 ] || verdict="at least one configuration disagrees with the model (a finding, not a failure)"
  {
    echo "# The N-GPU scaling model against measured runs: $GPU_NAME, $GPUS GPUs"
    echo
    echo "analysis/scaling_check.py (docs/methodology.md, \"Several GPUs\") over${files},"
    echo "every data-parallel configuration against its one-GPU run, with the collectives and"
    echo "host->device rates measured at each GPU count; $verdict:"
    echo
    echo '```text'
    echo "\$ python3 analysis/scaling_check.py${files}${prims}"
    cat "$WORK/scaling_check.txt"
    echo '```'
  } > "$OUT_DIR/scaling_check.md"
}

stage_scaling() {
  if [ "$GPUS" -lt 2 ]; then
    log "scaling: this machine has $GPUS GPU; the scaling stage trains on 2 GPUs beside 1" \
      "(and writes the multi-GPU set): run it on a machine of 2 or more"
    STAGE_SKIPPED=1
    return 0
  fi
  # The counts the matrices train on: 2 (scaling.toml), and 4 (scaling4.toml) on a machine of 4 or
  # more. The check holds the runs at n GPUs to the primitives at n: the primitives stage's where
  # n is the machine's count (looked for before any run), measured here, first, where it is
  # smaller (GPUs 0..n-1, where the matrix trains; the default sizes, up to 256 MiB, hold its
  # gradients and batches).
  local counts="2" n p prims=() files=("$RECORDS/scaling.jsonl")
  [ "$GPUS" -ge 4 ] && counts="2 4"
  p="$RECORDS/primitives_gpus.jsonl"
  if [[ " $counts " == *" $GPUS "* ]] && [ ! -s "$p" ]; then
    echo "reproduce: the scaling stage checks its runs against $p, which the primitives" \
      "stage writes: run it first (--stages primitives,scaling)" >&2
    return 2
  fi
  for n in $counts; do
    p="$RECORDS/primitives_gpus.jsonl"
    if [ "$GPUS" -gt "$n" ]; then
      p="$RECORDS/primitives_gpus$n.jsonl"
      : > "$WORK/primitives_gpus$n.jsonl"
      "$MS" primitives --gpus "$n" --json "$WORK/primitives_gpus$n.jsonl"
      cp "$WORK/primitives_gpus$n.jsonl" "$p"
    fi
    prims+=("$p")
  done
  run_matrix scaling "$RECORDS"
  if [ "$GPUS" -ge 4 ]; then
    run_matrix scaling4 "$RECORDS"
    files+=("$RECORDS/scaling4.jsonl")
  fi
  local dest="$OUT_DIR/baselines" most=$(( GPUS < 8 ? GPUS : 8 ))
  mkdir -p "$dest/records"
  # --resume: a stage stopped half-way (or split over sittings) runs only what is missing
  $PY experiments/baselines/benchmark_data_parallel.py --memstrat "$MS" --out-dir "$WORK/data_parallel" \
      --gpus-list "$(seq -s, 2 "$most")" --resume
  cp "$WORK/data_parallel/records.jsonl" "$dest/records/data_parallel.jsonl"
  cp "$WORK/data_parallel/benchmark_data_parallel.md" "$dest/vs_data_parallel.md"
  # exit 1 is the check's finding (a configuration the model misses), published like the rest
  local rc=0
  $PY analysis/scaling_check.py "${files[@]}" $(for p in "${prims[@]}"; do printf -- '--primitives %s ' "$p"; done) \
      > "$WORK/scaling_check.txt" || rc=$?
  [ "$rc" -le 1 ] || return "$rc"
  scaling_check_md "$rc" "${files[@]}" -- "${prims[@]}"
  [ "$rc" = 0 ] || log "scaling: the model disagrees with at least one configuration ($OUT_DIR/scaling_check.md says which)"
}

stage_gpus() {
  if [ "$GPUS" -lt 2 ]; then
    log "gpus: this machine has $GPUS GPU; the gpus stage trains on 2 (and writes the" \
      "multi-GPU set): run it on a machine of 2 or more"
    STAGE_SKIPPED=1
    return 0
  fi
  run_matrix gpus "$RECORDS"
}

stage_report() {
  local inputs=("$RECORDS/results.jsonl") extra=()
  [ -f "$RECORDS/stream.jsonl" ] && inputs+=("$RECORDS/stream.jsonl")
  [ -f "$RECORDS/compute.jsonl" ] && inputs+=("$RECORDS/compute.jsonl")
  [ -f "$RECORDS/budget.jsonl" ] && inputs+=("$RECORDS/budget.jsonl")
  [ -f "$RECORDS/primitives.jsonl" ] && extra+=(--primitives "$RECORDS/primitives.jsonl")
  # report.py's tables and figures are the matrix's: a set without them (the multi-GPU set, whose
  # own tables the scaling stage writes) gets its README.md and manifest.json only
  if [ -f "$RECORDS/results.jsonl" ]; then
    $PY analysis/report.py "${inputs[@]}" "${extra[@]}" \
        --title "memstrat results: $GPU_NAME" --out "$OUT_DIR"
  else
    log "report: $RECORDS/results.jsonl (the matrix stage's) is absent: report.py is left out;" \
      "the set's README.md and manifest.json are written"
  fi
  $PY analysis/results_readme.py "$OUT_DIR" --command "bash experiments/scripts/reproduce.sh" \
      --stage-seconds "$(ledger_sums)"
  $PY analysis/docs_blocks.py
}

for s in primitives matrix compute budget spread stream timelines baselines pipelines scaling gpus report; do
  has_stage "$s" && timed "$s" "stage_$s"
done
log "all stages done in $(( $(date +%s) - T0 )) s: $OUT_DIR"
# (an if, not `&&`: the script's status is the loop's last command's, and a stage left out is no
# failure)
for k in $ALL_STAGES; do
  if [ -n "${STAGE_SECONDS[$k]:-}" ]; then printf '  %-11s %6s s\n' "$k" "${STAGE_SECONDS[$k]}"; fi
done

#!/usr/bin/env bash
# main_job.sh: the README's first command. On a fresh machine with a GPU: installs the
# dependencies, builds, provides MNIST (verified by SHA-256), trains briefly with every strategy
# the GPU supports, runs the quick experiment matrix and builds its report.
#   MAIN_JOB_EPOCHS (default 3), MAIN_JOB_MATRIX (default experiments/matrix/matrices/quick.toml; "none" skips it)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
bash experiments/scripts/install_deps.sh
bash experiments/scripts/build.sh build
python3 experiments/scripts/get_mnist.py
MS=build/memstrat
EPOCHS="${MAIN_JOB_EPOCHS:-3}"
if ! $MS info; then
  echo "main_job: no usable GPU here: built and data verified, nothing to measure." >&2
  exit 3
fi
mkdir -p results/main
OUT=results/main/strategies.jsonl
: > "$OUT"
echo
echo "== one short run per strategy ($EPOCHS epochs, batch 256, u8, static) =="
for s in $($MS list | awk '{print $1}'); do
  $MS train --strategy "$s" --epochs "$EPOCHS" --quiet --json "$OUT" || echo "  ($s: not run, see above)"
done
python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r.get("status") == "ok"]
print(f"\n{'strategy':<15}{'median ms/epoch':>16}{'epoch 1 ms':>12}{'stall ms':>10}{'test acc %':>11}")
for r in sorted(rows, key=lambda r: r["summary"]["wall_ms_median"]):
    ep = r["epochs"][1:] or r["epochs"]
    stall = sorted(e["stall_ms"] for e in ep)[len(ep) // 2]
    print(f"{r['config']['strategy']:<15}{r['summary']['wall_ms_median']:>16.2f}"
          f"{r['summary']['epoch1_wall_ms']:>12.2f}{stall:>10.2f}{100*r['final']['test_acc']:>11.2f}")
if rows:
    print(f"GPU: {rows[0]['env']['gpu_name']}, driver {rows[0]['env']['driver_version']}, git {rows[0]['env']['git_sha']}")
PY
MATRIX="${MAIN_JOB_MATRIX:-experiments/matrix/matrices/quick.toml}"
if [ "$MATRIX" != none ]; then
  echo
  echo "== experiment matrix $MATRIX =="
  python3 experiments/matrix/run_matrix.py "$MATRIX" --out results/quick --memstrat "$MS"
  python3 analysis/report.py results/quick --out reports/quick
  echo "report: reports/quick/report.html (and report.md)"
fi

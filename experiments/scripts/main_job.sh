#!/usr/bin/env bash
# main_job.sh: the README's first command. On a fresh machine with a GPU: installs the
# dependencies, builds, provides MNIST (verified by SHA-256; MEMSTRAT_DATA names a directory that
# already holds it), trains briefly with every strategy the GPU supports and reports on those
# runs, then runs the quick experiment matrix and builds its report.
#   MAIN_JOB_EPOCHS (default 3), MAIN_JOB_MATRIX (default experiments/matrix/matrices/quick.toml; "none" skips it)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
bash experiments/scripts/install_deps.sh
bash experiments/scripts/build.sh build
python3 experiments/scripts/get_mnist.py  # into $MEMSTRAT_DATA, else data/mnist
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
python3 analysis/report.py "$OUT" --out reports/main --title "memstrat: one short run per strategy"
echo "summary of these runs: reports/main/report.md (and report.html)"
MATRIX="${MAIN_JOB_MATRIX:-experiments/matrix/matrices/quick.toml}"
if [ "$MATRIX" != none ]; then
  echo
  echo "== experiment matrix $MATRIX =="
  python3 experiments/matrix/run_matrix.py "$MATRIX" --out results/quick --memstrat "$MS"
  python3 analysis/report.py results/quick --out reports/quick
  echo "report: reports/quick/report.html (and report.md)"
fi

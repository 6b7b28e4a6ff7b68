#!/usr/bin/env bash
# guard.sh: the regression guard (docs/methodology.md, "Regression guard") on this machine's GPU,
# in one command.
#
#   bash experiments/scripts/guard.sh                       # against docs/results/<this GPU>/
#   bash experiments/scripts/guard.sh --base-memstrat OLD/build/memstrat   # against another build
#   bash experiments/scripts/guard.sh --out results/guard --memstrat build/memstrat
#   bash experiments/scripts/guard.sh --matrix M.toml ...  # another matrix (tests use a small one)
#
# Runs experiments/matrix/matrices/guard.toml (the results set's batch-256 configurations in
# static, and in refresh and stream those that cover each kind of buffer, each as several
# processes in a seeded shuffled order) with MEMSTRAT into
# OUT/new, then `analysis/compare.py BASE OUT/new`. BASE is the committed results set of this
# GPU model (docs/results/<gpu-slug>/, the default), or, with --base-memstrat, the same matrix
# run on this machine with another build (the commit a change starts from) into OUT/base: the
# way to guard a change on a GPU model that has no committed set. The two runs then alternate
# half by half (base, new, base, new: the matrix's repeats split in two sittings each), so that
# a drift of the machine lands on both sides. Each run resumes where it stopped.
#
# Exit status: compare.py's (0 no regression, 1 a configuration more than 10% slower and
# significantly so, 2 usage error); 3 when there is no GPU.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
MS="$REPO/build/memstrat"
BASE_MS=""
OUT="results/guard"
MATRIX=experiments/matrix/matrices/guard.toml
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --memstrat) MS="$2"; shift 2 ;;
    --base-memstrat) BASE_MS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --matrix) MATRIX="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "guard: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for b in "$MS" ${BASE_MS:+"$BASE_MS"}; do
  [ -x "$b" ] || { echo "guard: $b is not an executable memstrat (build it first)" >&2; exit 2; }
done
if ! "$MS" info >/dev/null 2>&1; then
  echo "guard: no usable GPU here ('$MS info' says why)" >&2
  exit 3
fi
GPU_NAME="$("$MS" info | sed -n 's/^device 0 of [0-9]*: //p')"
SLUG="$(echo "$GPU_NAME" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')"
run() {  # run BIN DEST [--only KEY...]: the guard matrix with BIN into DEST
  local bin="$1" dest="$2"; shift 2
  python3 experiments/matrix/run_matrix.py "$MATRIX" --out "$dest" --memstrat "$bin" "$@"
}
if [ -n "$BASE_MS" ]; then
  BASE="$OUT/base"
  # Alternate the two builds by halves of the repeats: the first half of every configuration's
  # processes with each build, then the second half with each.
  keys="$(python3 experiments/matrix/run_matrix.py "$MATRIX" --out "$OUT/new" --memstrat "$MS" \
    --dry-run | sed -n 's/^\[ *[0-9]*\/[0-9]*\] *[a-z]* *\([^ ]*\)$/\1/p')"
  n="$(echo "$keys" | grep -c .)"
  # awk reads all of its input: head would close the pipe early and, under pipefail, a SIGPIPE
  # of the writer would end the script.
  first="$(echo "$keys" | awk -v n=$(( n / 2 )) 'NR <= n { printf "--only=%s ", $0 }')"
  for half in first rest; do
    for side in base new; do
      bin="$MS"; [ "$side" = base ] && bin="$BASE_MS"
      if [ "$half" = first ]; then
        # shellcheck disable=SC2086
        run "$bin" "$OUT/$side" $first
      else
        run "$bin" "$OUT/$side"
      fi
    done
  done
else
  BASE="docs/results/$SLUG"
  [ -d "$BASE" ] || { echo "guard: no committed results set for $GPU_NAME ($BASE); guard" \
    "against a build of the commit the change starts from: --base-memstrat PATH" >&2; exit 2; }
  run "$MS" "$OUT/new"
fi
python3 analysis/compare.py "$BASE" "$OUT/new"

#!/usr/bin/env bash
# Runs a ladder plan in pieces of at most PIECE each, committing-ready after every piece: the
# plan starts in WORK (or continues there), trains for at most PIECE (a killed run resumes
# from its checkpoint), and every finished run's result.json (with its validation-spread.json)
# and the plan are copied to DEST (scripts/ladder_results.sh) for committing. A fresh WORK on
# a new machine starts from the runs already in DEST, so nothing committed trains again. The
# ladder prints what is due (runs, steps, training FLOPs) before it trains.
#
#   bash scripts/study_ladder_pieces.sh PLAN WORK DEST [PIECE]    # PIECE: 55m
#   e.g. JOBS=2 bash scripts/study_ladder_pieces.sh assets/ladder/cpu-sotu.json \
#          /work/ladder-sotu results/ladder-cpu-sotu
# env: BIN (target/release/orthoformer), JOBS (runs at once, 2). Exit 0: finished or the piece
# ran out (call again to continue); anything else: the ladder's own error.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n '2,13p' "$0"; exit 2; }
plan=$1; work=$2; dest=$3; piece=${4:-55m}
bin=${BIN:-target/release/orthoformer}
[ -f "$plan" ] || { echo "error: no plan at $plan" >&2; exit 2; }
if [ ! -f "$work/ladder.json" ]; then
  # Start it (the plan is copied and the data checked before the first step) and interrupt it
  # at once, as Ctrl-C does, so that the committed runs go in before anything trains.
  timeout -s INT 20 "$bin" ladder --plan "$plan" --out "$work" --jobs 1 >/dev/null 2>&1 || true
  if [ ! -f "$work/ladder.json" ]; then
    echo "error: the ladder did not start in $work: run the ladder command by hand to see why" >&2
    exit 2
  fi
  if [ -d "$dest" ]; then
    (cd "$dest" && find . -name result.json) | while read -r rel; do
      d=$(dirname "$rel")
      rm -rf "${work:?}/$d"
      mkdir -p "$work/$d"
      cp "$dest/$rel" "$work/$rel"
      [ ! -f "$dest/$d/validation-spread.json" ] || cp "$dest/$d/validation-spread.json" "$work/$d/"
    done
  fi
fi
rc=0
timeout "$piece" "$bin" ladder --resume --out "$work" --jobs "${JOBS:-2}" || rc=$?
bash scripts/ladder_results.sh "$work" "$dest"
# 124: the piece ran out of time (continue with another call); 0: the ladder is finished.
[ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || exit "$rc"

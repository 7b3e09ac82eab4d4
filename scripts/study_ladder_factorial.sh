#!/usr/bin/env bash
# The size-by-depth factorial on GCIDE (assets/ladder/cpu-factorial.json): widths 64 and 96 x
# depths 2 and 3, softmax, frozen orthogonal and the scale-matched control (orthogonal-trained:
# trainable Q/K started at the frozen draw), 3 seeds, rates 0.002-0.016 bracketed by the
# ladder. It separates size from depth (the pilot's only 3-layer rung was its largest); the
# pilot's runs of the same plan settings (softmax and orthogonal at w64-l2 and w96-l3) are
# reused, not trained again.
#
#   bash scripts/study_ladder_factorial.sh [WORK] [PIECE]   # WORK: /work/ladder-factorial, PIECE: 55m
#
# Runs one piece of at most PIECE (timeout; a killed run resumes from its checkpoint), then
# copies the plan and every finished run's result.json to results/ladder-cpu-factorial
# (scripts/ladder_results.sh) for committing; call it again to continue. The ladder prints the
# cost of what is due before it trains: 144 runs, 281,556 steps, 3.4e15 training FLOPs by the
# library's count before any rate is added; the pilot's runs cover 45 of them (48 once its
# frozen orthogonal runs at 0.016 on w96-l3 are in results/), leaving 2.4e15 FLOPs and the
# rates the ladder adds. The pilot's 2.1e15 took about 8 hours of two cores: about 9 hours
# here at --jobs 2, in pieces.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/work/ladder-factorial}
piece=${2:-55m}
bin=${BIN:-target/release/orthoformer}
if [ ! -f "$work/ladder.json" ]; then
  # Start it (the plan is copied and the data checked before the first step) and interrupt it
  # at once, as Ctrl-C does: the pilot's results go in before anything trains for long.
  timeout -s INT 20 "$bin" ladder --plan assets/ladder/cpu-factorial.json --out "$work" \
    --jobs 1 >/dev/null 2>&1 || true
  if [ ! -f "$work/ladder.json" ]; then
    echo "error: the ladder did not start in $work: run the ladder command by hand to see why" >&2
    exit 2
  fi
  # A run the pilot finished replaces whatever the interrupted start left of it.
  # The runs of both plans: the factorial's grid (its "lrs") at the rungs and variants they share.
  for rung in w64-l2 w96-l3; do
    for r in results/ladder-cpu-pilot/"$rung"/seed-*/lr-{0.002,0.004,0.008,0.016}/{softmax,orthogonal}/result.json; do
      [ -f "$r" ] || continue
      rel=${r#results/ladder-cpu-pilot/}
      rm -rf "$work/$(dirname "$rel")"
      mkdir -p "$work/$(dirname "$rel")"
      cp "$r" "$work/$rel"
      sp="$(dirname "$r")/validation-spread.json"
      [ ! -f "$sp" ] || cp "$sp" "$work/$(dirname "$rel")/"
    done
  done
  # This plan's runs finished in earlier pieces and committed (a new machine starts with an
  # empty WORK): not trained again.
  if [ -d results/ladder-cpu-factorial ]; then
    (cd results/ladder-cpu-factorial && find . -name result.json) | while read -r rel; do
      rm -rf "$work/$(dirname "$rel")"
      mkdir -p "$work/$(dirname "$rel")"
      cp "results/ladder-cpu-factorial/$rel" "$work/$rel"
      sp="results/ladder-cpu-factorial/$(dirname "$rel")/validation-spread.json"
      [ ! -f "$sp" ] || cp "$sp" "$work/$(dirname "$rel")/"
    done
  fi
fi
rc=0
timeout "$piece" "$bin" ladder --resume --out "$work" --jobs "${JOBS:-2}" || rc=$?
bash scripts/ladder_results.sh "$work" results/ladder-cpu-factorial
# 124: the piece ran out of time (continue with another call); 0: the ladder is finished.
[ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || exit "$rc"

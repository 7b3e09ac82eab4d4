#!/usr/bin/env bash
# Which frozen form. Four comparisons of frozen Q/K on paired seeds (every
# block trains the same seeds, so seed s sees the same batches in every block and runs pair
# across blocks), each a `orthoformer compare` folder under OUT:
#
#   base          softmax, orthogonal (qr)                      at N_HEAD heads, width WIDTH
#   draw-gaussian orthogonal with --frozen-method gaussian      (i.i.d. N(0, 1/C): equal scale,
#                 not orthogonal) against base's orthogonal
#   heads-H       softmax, orthogonal at H heads of HEADS       (width WIDTH; H = N_HEAD is base)
#   layers-first  orthogonal frozen in the first half of the layers (--frozen-layers first:L/2)
#   layers-last   orthogonal frozen in the last half            (--frozen-layers last:L/2)
#   freeze        softmax with --freeze-qk-after STEPS/10       (Q/K trained for the first 10%
#                 of the steps, then frozen) against base's softmax and orthogonal
#
# then scripts/frozen_form_table.py writes OUT/frozen_form.md and OUT/frozen_form.json: each
# variant's final validation loss and its paired difference from softmax (and, for the draw,
# from orthogonal), with 95% Student t intervals over the seeds.
#
#   bash scripts/study_frozen_form.sh OUT
#
# Settings (environment):
#   BIN        the orthoformer binary                   [target/release/orthoformer]
#   DATA       compare --data: a text, or a token folder such as data/gcide-bpe8k
#              [the embedded TinyShakespeare, one token per character]
#   STEPS      optimizer steps                          [the recipe's, 2000]
#   SEEDS      paired seeds (SEED, SEED+1, ...)         [3]; SEED [0]
#   HEADS      head counts of the heads block ("" skips it) [1 2 4 8]
#   N_HEAD     heads of every other block               [4]
#   WIDTH      model width                              [128]
#   LAYERS     the model's layers (the recipe's: 4); the halves are LAYERS/2   [4]
#   FREEZE_AT  step Q/K freeze at in the freeze block   [STEPS/10, at least 1]
#   BATCH, EVAL_EVERY, EVAL_ITERS  compare's flags      [the recipe's]
#   EXTRA      more `compare` flags, e.g. "--lr 2e-3"
#   THREADS    RAYON_NUM_THREADS                        [1]; JOBS: compare --jobs; NICE [10]
#
# A quick end-to-end run on 2 cores (minutes):
#   STEPS=20 SEEDS=2 HEADS="1 4" EVAL_EVERY=10 EVAL_ITERS=2 BATCH=4 \
#       bash scripts/study_frozen_form.sh runs/frozen-form-quick
#
# Safe to stop and start again: a block with summary.json is done, one with plan.json
# continues with `compare --resume`.
set -euo pipefail
OUT=${1:?usage: study_frozen_form.sh OUT}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${BIN:-$HERE/../target/release/orthoformer}
DATA=${DATA:-}
SEEDS=${SEEDS:-3}
SEED=${SEED:-0}
HEADS=${HEADS-1 2 4 8}  # HEADS="" skips the heads block
N_HEAD=${N_HEAD:-4}
WIDTH=${WIDTH:-128}
LAYERS=${LAYERS:-4}
export RAYON_NUM_THREADS=${THREADS:-1}
mkdir -p "$OUT"

common=(--width "$WIDTH" --seed "$SEED" --seeds "$SEEDS")
[[ -n $DATA ]] && common+=(--data "$DATA")
[[ -n ${STEPS:-} ]] && common+=(--steps "$STEPS")
[[ -n ${BATCH:-} ]] && common+=(--batch "$BATCH")
[[ -n ${EVAL_EVERY:-} ]] && common+=(--eval-every "$EVAL_EVERY")
[[ -n ${EVAL_ITERS:-} ]] && common+=(--eval-iters "$EVAL_ITERS")
[[ -n ${JOBS:-} ]] && common+=(--jobs "$JOBS")
# shellcheck disable=SC2206 # EXTRA is a list of flags, split on spaces on purpose.
extra=(${EXTRA:-})
steps=${STEPS:-2000}
freeze_at=${FREEZE_AT:-$((steps / 10 > 0 ? steps / 10 : 1))}
half=$((LAYERS / 2))
if ((half < 1)); then
    echo "error: LAYERS=$LAYERS has no half to freeze: use a model of at least 2 layers" >&2
    exit 2
fi

# One block: `compare` into OUT/NAME with the shared flags and these, or its continuation.
block() {
    local name=$1 dir=$OUT/$1
    shift
    if [[ -f $dir/summary.json ]]; then
        echo "done $name (kept)"
        return
    fi
    if [[ -f $dir/plan.json ]]; then
        nice -n "${NICE:-10}" "$BIN" compare --resume --out "$dir" \
            ${DATA:+--data "$DATA"} >"$dir.txt"
    else
        nice -n "${NICE:-10}" "$BIN" compare "${common[@]}" "$@" "${extra[@]}" \
            --out "$dir" >"$dir.txt"
    fi
    echo "done $name"
}

block base --attention softmax,orthogonal --n-head "$N_HEAD"
block draw-gaussian --attention orthogonal --frozen-method gaussian --n-head "$N_HEAD"
for h in $HEADS; do
    [[ $h == "$N_HEAD" ]] && continue # the base block
    block "heads-$h" --attention softmax,orthogonal --n-head "$h"
done
block layers-first --attention orthogonal --frozen-layers "first:$half" --n-head "$N_HEAD"
block layers-last --attention orthogonal --frozen-layers "last:$half" --n-head "$N_HEAD"
block freeze --attention softmax --freeze-qk-after "$freeze_at" --n-head "$N_HEAD"

python3 "$HERE/frozen_form_table.py" --heads "$HEADS" --n-head "$N_HEAD" "$OUT"

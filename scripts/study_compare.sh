#!/usr/bin/env bash
# The study of docs/RESULTS.md: `orthoformer compare` on nanoGPT's CPU recipe.
#
#   bash scripts/study_compare.sh [BIN] [OUT]     # BIN: target/release/orthoformer, OUT: runs/study
#
# Every block is one `orthoformer compare` folder. The script is safe to stop (Ctrl-C, kill,
# a reboot) and to start again: a block whose folder holds a plan is continued with --resume
# (finished runs kept, a run cut short continues from its last checkpoint, bit for bit), a
# finished block is only summarised again. The 5000-step block also runs in two chunks
# (--stop-at 2500, then --resume) to exercise the chunked path. Runs under `nice -n 10`
# because the machine is shared.
set -euo pipefail
BIN=${1:-target/release/orthoformer}
OUT=${2:-runs/study}
mkdir -p "$OUT"

# compare NAME [--stop-at N] -- FLAGS...: start the block, or continue it.
block() {
    local name=$1
    shift
    local stop=()
    if [[ $1 == --stop-at ]]; then
        stop=(--stop-at "$2")
        shift 2
    fi
    shift # --
    if [[ -f $OUT/$name/plan.json ]]; then
        nice -n ${NICE:-10} "$BIN" compare --resume --out "$OUT/$name" "${stop[@]}" >"$OUT/$name.txt"
    else
        nice -n ${NICE:-10} "$BIN" compare "$@" --out "$OUT/$name" "${stop[@]}" >"$OUT/$name.txt"
    fi
    cat "$OUT/$name.txt"
}

ALL=softmax,orthogonal,linear,orthogonal-linear,orthogonal-tied,identity-q,orthogonal-hadamard

# 1. All seven variants, the recipe as published (2000 steps), 3 seeds.
block recipe-all -- --recipe nanogpt-cpu --attention $ALL --seeds 3 --eval-every 100

# 2. Softmax and the two dense/structured frozen variants at 5000 steps (the cosine
#    schedule stretched to 5000), 3 seeds, in two chunks.
block steps5000 --stop-at 2500 -- --recipe nanogpt-cpu --steps 5000 \
    --attention softmax,orthogonal,orthogonal-hadamard --seeds 3 --eval-every 100
block steps5000 -- unused

# 3. Scale: width 64, 256, 384 at context 64 and context 256 at width 128 (4 heads, the
#    recipe's other settings, 2000 steps), softmax vs orthogonal, 2 seeds. Width 128 at
#    context 64 is block 1 (its seeds 0 and 1).
for w in 64 256 384; do
    block width$w -- --recipe nanogpt-cpu --width $w --attention softmax,orthogonal --seeds 2 \
        --eval-every 100
done
block context256 -- --recipe nanogpt-cpu --context 256 --attention softmax,orthogonal \
    --seeds 2 --eval-every 100

#!/usr/bin/env bash
# Issue 30's reduced study (docs/RESULTS.md, "Tuned, at context 256, a smoke-sized run"):
# softmax vs frozen orthogonal Q/K at width 128 and context 256 (nanoGPT's CPU recipe model),
# every variant at its own best peak learning rate of 1e-3 and 3e-3 (`compare --lr-sweep`,
# chosen on the held-out tail of the training split), 2 paired seeds, but only 150 steps of
# batch 4 (warm-up 15, cosine to a tenth of each rate); then (POSITION=rope) frozen orthogonal
# with rotary positions on the same seeds. Tiny because the machine is 2 cores shared by 5
# agents: the recipe's batch 12 ran at 5.8 s per step at context 256 here (load average 16).
#
#   bash scripts/study_tuned.sh [BIN] [OUT]     # BIN: target/release/orthoformer, OUT: runs/tuned
#
# Safe to stop and start again, as scripts/study_compare.sh: each block runs in two chunks
# (--stop-at 75, then --resume), under `nice -n 10`.
set -euo pipefail
BIN=${1:-target/release/orthoformer}
OUT=${2:-runs/tuned}
mkdir -p "$OUT"

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

COMMON=(--recipe nanogpt-cpu --steps 150 --batch 4 --warmup 15 --lr-sweep 1e-3,3e-3 --seeds 2
    --eval-every 75 --eval-iters 5 --context 256)
if [[ ${POSITION:-} != rope ]]; then
    block ctx256 --stop-at 75 -- "${COMMON[@]}" --attention softmax,orthogonal
    block ctx256 -- unused
else
    block rope-ctx256 --stop-at 75 -- "${COMMON[@]}" --position rope --attention orthogonal
    block rope-ctx256 -- unused
fi

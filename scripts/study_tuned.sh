#!/usr/bin/env bash
# Tuned comparison (docs/RESULTS.md, "Tuned softmax vs orthogonal at context 256"): softmax
# vs frozen orthogonal Q/K at width 128 and context 256 (nanoGPT's CPU recipe model, its budget
# of 2000 steps of batch 12), every variant at its own best peak learning rate of 1e-3 and
# 3e-3 (`compare --lr-sweep`, chosen on the held-out tail of the training split, never on the
# validation split it reports), 2 paired seeds; then (POSITION=rope) frozen orthogonal with
# rotary positions on the same seeds. WIDTH=384 runs the width sweep's widest point instead
# (width 384, context 64) at 3e-4 and 1e-3: the rate it used and the one below. SMOKE=1 is
# the earlier smoke-sized run (150 steps of batch 4, warm-up 15), from a session where the
# machine was shared by 5 agents. Item 3's context blocks: CONTEXT=C runs width 128 at context
# C (rates 1e-3 and 3e-3, as at 256); WIDTH=W CONTEXT=C runs width W at context C (rates 3e-4
# and 1e-3, as at width 384). SEEDS=N sets the paired seeds of those two (default 2), and
# FIRST_SEED=S starts them at seed S (the folder gets `-seedS`: one more seed of a block).
# RATES=a,b replaces a context block's rates (width 256 at contexts 256 and 512 use
# RATES=1e-3,3e-3: at context 128 both variants chose the top of 3e-4,1e-3 in every seed);
# a folder that already has a plan.json resumes with the rates it was started with.
# POSITION=rope ATTENTION=softmax runs softmax with rotary positions at context 256.
#
#   bash scripts/study_tuned.sh [BIN] [OUT]     # BIN: target/release/orthoformer, OUT: runs/tuned
#   WIDTH=384 bash scripts/study_tuned.sh [BIN] [OUT]      # writes OUT/width384
#   POSITION=rope bash scripts/study_tuned.sh [BIN] [OUT]  # writes OUT/rope-ctx256
#   SEEDS=3 CONTEXT=128 bash scripts/study_tuned.sh [BIN] [OUT]        # writes OUT/ctx128
#   WIDTH=256 CONTEXT=128 bash scripts/study_tuned.sh [BIN] [OUT]      # writes OUT/width256-ctx128
#   CONTEXT=256 FIRST_SEED=2 SEEDS=1 bash scripts/study_tuned.sh [BIN] [OUT]   # OUT/ctx256-seed2
#   RATES=1e-3,3e-3 WIDTH=256 CONTEXT=256 FIRST_SEED=0 SEEDS=1 bash scripts/study_tuned.sh [BIN] [OUT]
#       # OUT/width256-ctx256-seed0
#   POSITION=rope ATTENTION=softmax bash scripts/study_tuned.sh [BIN] [OUT]  # OUT/rope-softmax-ctx256
#
# Safe to stop and start again, as scripts/study_compare.sh: each block runs in two chunks
# (--stop-at half the steps, then --resume), under `nice -n 10`, on one rayon thread
# (THREADS=2 NICE=0 for a quiet run).
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

export RAYON_NUM_THREADS=${THREADS:-1}
if [[ ${SMOKE:-} == 1 ]]; then
    COMMON=(--recipe nanogpt-cpu --steps 150 --batch 4 --warmup 15 --eval-every 75 --eval-iters 5)
    HALF=75
else
    COMMON=(--recipe nanogpt-cpu --eval-every 100)
    HALF=1000
fi
if [[ -n ${CONTEXT:-} ]]; then
    if [[ -n ${WIDTH:-} ]]; then
        name=width$WIDTH-ctx$CONTEXT
        COMMON+=(--lr-sweep "${RATES:-3e-4,1e-3}" --width "$WIDTH")
    else
        name=ctx$CONTEXT
        COMMON+=(--lr-sweep "${RATES:-1e-3,3e-3}")
    fi
    COMMON+=(--seeds "${SEEDS:-2}" --context "$CONTEXT")
    if [[ -n ${FIRST_SEED:-} ]]; then
        name=$name-seed$FIRST_SEED
        COMMON+=(--seed "$FIRST_SEED")
    fi
    block "$name" --stop-at $HALF -- "${COMMON[@]}" --attention softmax,orthogonal
    block "$name" -- unused
    exit 0
fi
if [[ -n ${WIDTH:-} ]]; then
    COMMON+=(--lr-sweep 3e-4,1e-3 --seeds 2 --width "$WIDTH")
    block width$WIDTH --stop-at $HALF -- "${COMMON[@]}" --attention softmax,orthogonal
    block width$WIDTH -- unused
    exit 0
fi
COMMON+=(--lr-sweep 1e-3,3e-3 --seeds 2 --context 256)
if [[ ${POSITION:-} != rope ]]; then
    block ctx256 --stop-at $HALF -- "${COMMON[@]}" --attention softmax,orthogonal
    block ctx256 -- unused
elif [[ ${ATTENTION:-orthogonal} == orthogonal ]]; then
    block rope-ctx256 --stop-at $HALF -- "${COMMON[@]}" --position rope --attention orthogonal
    block rope-ctx256 -- unused
else
    block rope-$ATTENTION-ctx256 --stop-at $HALF -- "${COMMON[@]}" --position rope --attention "$ATTENTION"
    block rope-$ATTENTION-ctx256 -- unused
fi

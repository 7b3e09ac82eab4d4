#!/usr/bin/env bash
# The context sweep (docs/RESULTS.md, "Context 64 to 512"): softmax vs frozen orthogonal Q/K on
# nanoGPT's CPU recipe model (width 128) at contexts 128, 256 and 512, the recipe's budget
# (2000 steps of batch 12, lr 1e-3), paired seeds. Context 64 is the study's block 1
# (scripts/study_compare.sh, 3 seeds); context 256 seeds 0-1 are its block 4, so this adds
# seed 2 there.
#
#   bash scripts/study_context.sh [BIN] [OUT]     # BIN: target/release/orthoformer, OUT: runs/context
#
# Safe to stop and start again (each block continues with --resume). One rayon thread and
# `nice -n 10` by default, so the machine stays usable: THREADS=2 NICE=0 for a quiet run.
# BLOCKS="ctx256-seed2 ctx512" runs only those blocks (e.g. two processes at once, one
# thread each, on disjoint blocks).
set -euo pipefail
BIN=${1:-target/release/orthoformer}
OUT=${2:-runs/context}
mkdir -p "$OUT"
export RAYON_NUM_THREADS=${THREADS:-1}

block() {
    local name=$1
    shift
    if [[ -n ${BLOCKS:-} && " $BLOCKS " != *" $name "* ]]; then
        return
    fi
    if [[ -f $OUT/$name/plan.json ]]; then
        nice -n ${NICE:-10} "$BIN" compare --resume --out "$OUT/$name" >"$OUT/$name.txt"
    else
        nice -n ${NICE:-10} "$BIN" compare "$@" --out "$OUT/$name" >"$OUT/$name.txt"
    fi
    tail -n 6 "$OUT/$name.txt"
}

C=(--recipe nanogpt-cpu --attention softmax,orthogonal --eval-every 100)
block ctx128 "${C[@]}" --context 128 --seeds 3
block ctx256-seed2 "${C[@]}" --context 256 --seed 2 --seeds 1
# Rotary positions at contexts 64 and 128: does RoPE move the context at which frozen Q/K stop
# being within 1% of softmax? (Context 256 with RoPE: docs/RESULTS.md's rope-softmax/rope-ortho.)
block rope-ctx64 "${C[@]}" --position rope --context 64 --seeds 3
block rope-ctx128 "${C[@]}" --position rope --context 128 --seeds 2
# A learned per-head temperature on the frozen scores at contexts 64 and 128: does it move the
# 1% point? (Paired with the softmax runs of the study's block 1 and of ctx128, same seeds.)
block temp-ctx64 --recipe nanogpt-cpu --attention orthogonal --temperature learned --eval-every 100 --context 64 --seeds 3
block temp-ctx128 --recipe nanogpt-cpu --attention orthogonal --temperature learned --eval-every 100 --context 128 --seeds 3
# Context 512 as one block per seed, so two processes can share a 2-core machine.
block ctx512 "${C[@]}" --context 512 --seed 0 --seeds 1
block ctx512-seed1 "${C[@]}" --context 512 --seed 1 --seeds 1
# Third seeds of the two-seed blocks: BLOCKS="rope-ctx128-seed2 ctx512-seed2".
block rope-ctx128-seed2 "${C[@]}" --position rope --context 128 --seed 2 --seeds 1
block ctx512-seed2 "${C[@]}" --context 512 --seed 2 --seeds 1

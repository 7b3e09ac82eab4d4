#!/usr/bin/env bash
# LoRA on rotated bases: SmolLM2-135M folded and unrotated (`plain`, the
# control every rotated base shares), Hadamard-rotated, Haar-rotated and R1+R2-rotated, each
# fine-tuned on TinyShakespeare in full and with LoRA at several ranks, the same batches for
# every base at a seed. Writes one JSON report per run under $OUT and the table of
# scripts/lora_table.py. Resumable: a run whose report exists is skipped.
#
#   scripts/lora_rotated.sh                       # the issue's grid: ranks 2 8 32, seeds 0 1 2
#   DEVICE=cuda STEPS=1000 scripts/lora_rotated.sh
#
# Knobs (environment): MODEL, OUT, STEPS, CONTEXT, BATCH, LR (LoRA), FULL_LR, SEEDS, RANKS,
# EVAL_EVERY, VAL_WINDOWS, DEVICE, PYTHON, BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=${OUT:-runs/lora}
STEPS=${STEPS:-200}
CONTEXT=${CONTEXT:-128}
BATCH=${BATCH:-8}
LR=${LR:-1e-3}
FULL_LR=${FULL_LR:-1e-4}
SEEDS=${SEEDS:-"0 1 2"}
RANKS=${RANKS:-"2 8 32"}
EVAL_EVERY=${EVAL_EVERY:-50}
VAL_WINDOWS=${VAL_WINDOWS:-32}
DEVICE=${DEVICE:-cpu}
PYTHON=${PYTHON:-python3}
BIN=${BIN:-target/release/orthoformer}
DATA=data/tinyshakespeare.txt

[ -f "$MODEL" ] || scripts/fetch_smollm2.sh
[ -x "$BIN" ] || cargo build --release
mkdir -p "$OUT"
# The bases: every one folded, so they differ only by the rotation.
[ -d "$OUT/plain" ] || "$BIN" align --weights --model "$MODEL" --model-b "$MODEL" --out "$OUT/plain"
[ -d "$OUT/hadamard" ] || "$BIN" rotate --model "$MODEL" --rotation hadamard --out "$OUT/hadamard" --check
[ -d "$OUT/random" ] || "$BIN" rotate --model "$MODEL" --rotation random --out "$OUT/random" --check
[ -d "$OUT/r1r2" ] || "$BIN" rotate --model "$MODEL" --rotation hadamard --rotate-heads --out "$OUT/r1r2" --check

common=(--data "$DATA" --steps "$STEPS" --context "$CONTEXT" --batch "$BATCH" --eval-every "$EVAL_EVERY"
    --val-windows "$VAL_WINDOWS" --device "$DEVICE")
for seed in $SEEDS; do
    for base in plain hadamard random r1r2; do
        report="$OUT/$base-full-s$seed.json"
        [ -f "$report" ] || "$PYTHON" -m orthoformer.finetune --model "$OUT/$base" "${common[@]}" \
            --modes full --lr "$FULL_LR" --seed "$seed" --out "$report"
        for r in $RANKS; do
            report="$OUT/$base-lora$r-s$seed.json"
            [ -f "$report" ] || "$PYTHON" -m orthoformer.finetune --model "$OUT/$base" "${common[@]}" \
                --modes lora --lora-rank "$r" --lora-alpha "$((2 * r))" --lr "$LR" --seed "$seed" --out "$report"
        done
    done
done
"$PYTHON" scripts/lora_table.py "$OUT" | tee "$OUT/table.md"

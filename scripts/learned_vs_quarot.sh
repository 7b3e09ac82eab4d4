#!/usr/bin/env bash
# Learned rotations (SpinQuant: python -m orthoformer.learn_rotation) against QuaRot's random
# Hadamard ones, as llama.cpp users would meet them: both rotated models quantised by the same
# `orthoformer quantize --method gptq` to each GGUF type, every file scored by llama-perplexity
# (built natively: scripts/build_llamacpp.sh) on each held-out text, and the learned file
# compared with the QuaRot file window by window (scripts/ppl_paired.py: mean difference in
# nats per token with a 95% t interval; negative = learned is better).
#
# usage: scripts/learned_vs_quarot.sh QUAROT_FOLDER OUTDIR CALIB.txt TEXT [TEXT...]
#   QUAROT_FOLDER a Hugging Face folder rotated by QuaRot's R1 and R2, e.g.
#                 `orthoformer rotate --model SmolLM2-135M-Instruct.Q4_1.gguf --rotate-heads
#                 --seed 0 --out quarot` (learning starts there, as SpinQuant's does)
#   CALIB.txt     calibration text for learning and for GPTQ (disjoint from every TEXT)
#   env: BIN (orthoformer binary, default target/release/orthoformer), PY (python with the
#        orthoformer package and torch, default python3), TYPES ("q4_0 q4_k_m"), CTX (256),
#        CHUNKS (200), CALIB (4096 tokens), THREADS (2), LEARN (extra learn_rotation flags,
#        default "--steps 32 --batch 4 --lr 0.3 --bits 4 --symmetric")
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,20p' "$0"; exit 2; }
SRC=$1; OUT=$2; CAL=$3; shift 3; TEXTS=("$@")
BIN=${BIN:-target/release/orthoformer}; PY=${PY:-python3}
TYPES=${TYPES:-"q4_0 q4_k_m"}; CTX=${CTX:-256}; CHUNKS=${CHUNKS:-200}; CALIB=${CALIB:-4096}
THREADS=${THREADS:-2}; LEARN=${LEARN:-"--steps 32 --batch 4 --lr 0.3 --bits 4 --symmetric"}
LC=$(scripts/build_llamacpp.sh --print-dir)/bin
[ -x "$LC/llama-perplexity" ] || { echo "llama.cpp is not built: run scripts/build_llamacpp.sh" >&2; exit 2; }
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$LC${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# shellcheck disable=SC2086 # LEARN is a list of flags
[ -s "$OUT/learned.json" ] || "$PY" -m orthoformer.learn_rotation --model "$SRC" --data "$CAL" \
    --out "$OUT/learned" --calib-tokens "$CALIB" --context "$CTX" $LEARN > "$OUT/learned.json"
for ty in $TYPES; do
    for m in quarot learned; do
        src=$SRC; [ $m = learned ] && src=$OUT/learned
        f=$OUT/$m-$ty.gguf
        [ -s "$f" ] || "$BIN" quantize --model "$src" --method gptq --data "$CAL" --calib-tokens "$CALIB" \
            --context "$CTX" --out "$f" --gguf-type "$ty" --json > "$OUT/$m-$ty.json"
        for x in "${TEXTS[@]}"; do
            log="$OUT/ppl-$m-$ty-$(basename "$x" .txt).log"
            [ -s "$log" ] && grep -q 'Final estimate' "$log" && continue
            "$LC/llama-perplexity" -m "$f" -f "$x" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
                > "$log" 2>&1 || echo "llama-perplexity failed on $f (see $log)" >&2
        done
    done
done
{
printf '| type | text | QuaRot ppl | learned ppl | Δ nats/token [95%%] | windows |\n|---|---|---|---|---|---|\n'
for ty in $TYPES; do
    for x in "${TEXTS[@]}"; do
        t=$(basename "$x" .txt)
        python3 scripts/ppl_paired.py "$OUT/ppl-quarot-$ty-$t.log" "$OUT/ppl-learned-$ty-$t.log" --json \
            | python3 -c "import json,sys; d=json.load(sys.stdin); r=list(d['files'].values())[0]; lo,hi=r['ci95']; print(f\"| $ty | $t | {r['ppl_baseline']:.2f} | {r['ppl']:.2f} | {r['diff_nats']:+.4f} [{lo:+.4f}, {hi:+.4f}] | {r['chunks']} |\")" \
            || echo "| $ty | $t | failed | | | |"
    done
done
} | tee "$OUT/table.md"

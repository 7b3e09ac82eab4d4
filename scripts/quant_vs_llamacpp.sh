#!/usr/bin/env bash
# The question a llama.cpp user asks (issue 28 item 5): from the same F32 source, is the tool's
# rotated GPTQ 4-bit file better than llama-quantize's own at the same size? Every file's
# perplexity is measured by llama-perplexity (built natively: scripts/build_llamacpp.sh) in the
# same run, on the same texts, with the same context.
#
# Files (all from SRC):
#   llama.cpp   llama-quantize Q4_0 and Q4_K_S, each without and with an importance matrix
#               (llama-imatrix on the calibration text)
#   orthoformer quantize --method gptq --rotate hadamard --rotate-heads (R1+R2, folded into
#               the weights, so llama.cpp runs the file) --gguf-type q4_0 and q4_k; and the
#               same without rotation; calibration on the same text as the imatrix
# Calibration text: the last CALIB tokens of the first text; perplexity: the first TOKENS bytes'
# worth of each text (llama-perplexity's chunks of CTX, scoring the second half of each).
#
# usage: scripts/quant_vs_llamacpp.sh SRC.gguf OUTDIR TEXT [TEXT...]
#   SRC.gguf  an F32 or F16 Llama GGUF (from the Q4_1 file:
#             llama-quantize --allow-requantize Q4_1.gguf f32.gguf F32)
#   env: BIN (orthoformer binary, default target/release/orthoformer), CTX (256),
#        CHUNKS (perplexity chunks per text, 16), CALIB (calibration tokens, 4096), SEED (0),
#        THREADS (2)
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,24p' "$0"; exit 2; }
SRC=$1; OUT=$2; shift 2; TEXTS=("$@")
BIN=${BIN:-target/release/orthoformer}
CTX=${CTX:-256}; CHUNKS=${CHUNKS:-16}; CALIB=${CALIB:-4096}; SEED=${SEED:-0}; THREADS=${THREADS:-2}
LC=$(scripts/build_llamacpp.sh --print-dir)/bin
[ -x "$LC/llama-perplexity" ] || { echo "llama.cpp is not built: run scripts/build_llamacpp.sh" >&2; exit 2; }
mkdir -p "$OUT"
CAL="$OUT/calibration.txt"
# About CALIB tokens (4 bytes each, generously) from the end of the first text.
tail -c $((CALIB * 5)) "${TEXTS[0]}" > "$CAL"

"$LC/llama-imatrix" -m "$SRC" -f "$CAL" -o "$OUT/imatrix.gguf" -c "$CTX" -t "$THREADS" \
    > "$OUT/imatrix.log" 2>&1
for t in Q4_0 Q4_K_S; do
    "$LC/llama-quantize" "$SRC" "$OUT/llamacpp-$t.gguf" "$t" "$THREADS" > "$OUT/q-$t.log" 2>&1
    "$LC/llama-quantize" --imatrix "$OUT/imatrix.gguf" "$SRC" "$OUT/llamacpp-$t-imatrix.gguf" \
        "$t" "$THREADS" > "$OUT/q-$t-imatrix.log" 2>&1
done
for t in q4_0 q4_k; do
    for rot in none hadamard; do
        heads=(); [ "$rot" = none ] || heads=(--rotate-heads)
        "$BIN" quantize --model "$SRC" --method gptq --rotate "$rot" "${heads[@]}" \
            --seed "$SEED" --data "$CAL" --calib-tokens "$CALIB" --context "$CTX" \
            --out "$OUT/orthoformer-$t-gptq-$rot.gguf" --gguf-type "$t" --json \
            > "$OUT/orthoformer-$t-gptq-$rot.json"
    done
done

{
printf '| file | MiB |'; for x in "${TEXTS[@]}"; do printf ' ppl %s |' "$(basename "$x")"; done; echo
printf '|---|---|'; for _ in "${TEXTS[@]}"; do printf -- '---|'; done; echo
for f in "$SRC" "$OUT"/llamacpp-*.gguf "$OUT"/orthoformer-*.gguf; do
    mib=$(python3 -c "import os,sys; print(f'{os.path.getsize(sys.argv[1])/2**20:.1f}')" "$f")
    printf '| %s | %s |' "$(basename "$f")" "$mib"
    for x in "${TEXTS[@]}"; do
        log="$OUT/ppl-$(basename "$f" .gguf)-$(basename "$x" .txt).log"
        "$LC/llama-perplexity" -m "$f" -f "$x" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
            > "$log" 2>&1 || true
        ppl=$(grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' "$log" | sed 's/Final estimate: PPL = //')
        printf ' %s |' "${ppl:-failed (see $log)}"
    done
    echo
done
} | tee "$OUT/table.md"

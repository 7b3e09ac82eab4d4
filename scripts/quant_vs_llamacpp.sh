#!/usr/bin/env bash
# The llama.cpp user's question: from the same source, is the tool's best
# 4-bit file better than llama-quantize's best, Q4_K_M with an importance matrix, at equal or
# smaller size, on held-out text? Every file is scored by llama-perplexity (built natively:
# scripts/build_llamacpp.sh) in the same run, on the same texts and windows, and compared with
# llama.cpp's Q4_K_M + imatrix window by window (scripts/ppl_paired.py: mean difference in
# nats per token with a 95% t interval over the windows).
#
# Files (all from SRC):
#   llama.cpp    llama-quantize Q4_K_M without and with --imatrix, Q4_0 with --imatrix
#                (llama-imatrix on the calibration text, -c CTX)
#   orthoformer  quantize --gguf-type q4_k_m (the same per-tensor types) with --method imatrix
#                (our port of llama.cpp's search: a check of the port), gptq, gptq --sequential;
#                and --gguf-type q4_0 --method gptq
# Calibration: the last CALIB_BYTES bytes of the first text, for llama-imatrix and for ours
# alike (ours take its last CALIB tokens). Scored: every text given; the first text's
# calibration tail is never scored (score a head of it: see the usage line).
#
# usage: scripts/quant_vs_llamacpp.sh SRC.gguf OUTDIR CALIB.txt TEXT [TEXT...]
#   SRC.gguf  an F32 or F16 Llama GGUF, e.g. a rotated F32 (`orthoformer rotate --model
#             Q4_1.gguf --out rot.gguf --rotation hadamard --rotate-heads`), whose weights are
#             on no 4-bit grid
#   CALIB.txt the calibration text (disjoint from every TEXT)
#   env: BIN (orthoformer binary, default target/release/orthoformer), CTX (256), CHUNKS
#        (at most this many windows per text, 200), CALIB (calibration tokens, 4096), THREADS (2)
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,27p' "$0"; exit 2; }
SRC=$1; OUT=$2; CAL=$3; shift 3; TEXTS=("$@")
BIN=${BIN:-target/release/orthoformer}
CTX=${CTX:-256}; CHUNKS=${CHUNKS:-200}; CALIB=${CALIB:-4096}; THREADS=${THREADS:-2}
LC=$(scripts/build_llamacpp.sh --print-dir)/bin
[ -x "$LC/llama-perplexity" ] || { echo "llama.cpp is not built: run scripts/build_llamacpp.sh" >&2; exit 2; }
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$LC${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

[ -s "$OUT/imatrix.gguf" ] || "$LC/llama-imatrix" -m "$SRC" -f "$CAL" -o "$OUT/imatrix.gguf" \
    -c "$CTX" -t "$THREADS" > "$OUT/imatrix.log" 2>&1
q() { # llama-quantize NAME TYPE [imatrix]
    [ -s "$OUT/$1.gguf" ] && return
    local im=(); [ "${3:-}" = imatrix ] && im=(--imatrix "$OUT/imatrix.gguf")
    "$LC/llama-quantize" "${im[@]}" "$SRC" "$OUT/$1.gguf" "$2" "$THREADS" > "$OUT/$1.log" 2>&1
}
q llamacpp-Q4_K_M Q4_K_M
q llamacpp-Q4_K_M-imatrix Q4_K_M imatrix
q llamacpp-Q4_0-imatrix Q4_0 imatrix
ours() { # NAME GGUF_TYPE METHOD [FLAGS...]
    local name=$1 ty=$2 method=$3; shift 3
    [ -s "$OUT/$name.gguf" ] && return
    "$BIN" quantize --model "$SRC" --method "$method" "$@" --data "$CAL" --calib-tokens "$CALIB" \
        --context "$CTX" --out "$OUT/$name.gguf" --gguf-type "$ty" --json > "$OUT/$name.json"
}
ours orthoformer-q4_k_m-imatrix q4_k_m imatrix
ours orthoformer-q4_k_m-gptq q4_k_m gptq
ours orthoformer-q4_k_m-gptq-sequential q4_k_m gptq --sequential
ours orthoformer-q4_0-gptq q4_0 gptq

BASE=llamacpp-Q4_K_M-imatrix
FILES=("$SRC")
for f in "$OUT"/llamacpp-*.gguf "$OUT"/orthoformer-*.gguf; do FILES+=("$f"); done
for f in "${FILES[@]}"; do
    for x in "${TEXTS[@]}"; do
        log="$OUT/ppl-$(basename "$f" .gguf)-$(basename "$x" .txt).log"
        [ -s "$log" ] && grep -q 'Final estimate' "$log" && continue
        "$LC/llama-perplexity" -m "$f" -f "$x" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
            > "$log" 2>&1 || echo "llama-perplexity failed on $f (see $log)" >&2
    done
done
{
printf '| file | MiB |'; for x in "${TEXTS[@]}"; do printf ' %s: ppl, Δ nats/token vs %s [95%%] |' "$(basename "$x")" "$BASE"; done; echo
printf '|---|---|'; for _ in "${TEXTS[@]}"; do printf -- '---|'; done; echo
for f in "${FILES[@]}"; do
    mib=$(python3 -c "import os,sys; print(f'{os.path.getsize(sys.argv[1])/2**20:.1f}')" "$f")
    printf '| %s | %s |' "$(basename "$f" .gguf)" "$mib"
    for x in "${TEXTS[@]}"; do
        t=$(basename "$x" .txt)
        python3 scripts/ppl_paired.py "$OUT/ppl-$BASE-$t.log" "$OUT/ppl-$(basename "$f" .gguf)-$t.log" --json \
            | python3 -c "import json,sys; r=list(json.load(sys.stdin)['files'].values())[0]; lo,hi=r['ci95']; print(f\" {r['ppl']:.2f}, {r['diff_nats']:+.4f} [{lo:+.4f}, {hi:+.4f}] ({r['chunks']} windows) |\", end='')" \
            || printf ' failed |'
    done
    echo
done
} | tee "$OUT/table.md"

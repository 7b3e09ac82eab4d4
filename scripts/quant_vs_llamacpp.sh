#!/usr/bin/env bash
# The llama.cpp user's question, asked as they would: from the plain model (no rotation), is
# the tool's best quantised file better than llama-quantize's with an importance matrix, at the
# same size? Every file is scored by llama-perplexity (built natively: scripts/build_llamacpp.sh)
# on the same texts and windows, and compared window by window with llama-quantize's file of
# the same class and calibration text (scripts/quant_compare_table.py: mean difference in nats
# per token with a 95% t interval over the windows, per file and pooled per class).
#
# Per class (q4_k_m, q5_k_m, iq4_xs by default) and per calibration text (two):
#   llamacpp       llama-imatrix on the calibration text, then llama-quantize --imatrix CLASS
#   plain          ours: quantize --method gptq --gguf-type CLASS, no rotation (llama.cpp's
#                  per-tensor types, so the same size to the byte)
#   rot-sN         ours: the same after QuaRot's R1+R2 (--rotate hadamard --rotate-heads --seed N)
#                  for each rotation seed, with overrides that pay for the untied head so that
#                  the file is within 1% of llama.cpp's size (size_match below; the table
#                  prints each file's size against llama.cpp's); none where no overrides can
#   rot-s0-natural ours rotated with the mix's own types (head untied, larger), first class and
#                  first calibration text only: what the rotation costs in bytes
#   rot-s0-head5   ours rotated with a second size-matching rule that keeps the head at 5 bits
#                  and lets the layers pay (size_match_head5), first class and calibration text
# Calibration: the last CALIB_BYTES bytes of each calibration source (TinyShakespeare, GCIDE),
# all of it for llama-imatrix -c CTX and its last CALIB tokens for ours; each of our
# calibrations is written once (`quantize --calibration`) and reused for every class.
# Scored (at most CHUNKS windows of CTX tokens each, the second half of each window scored):
# the first 61,440 bytes of TinyShakespeare and of GCIDE (the calibration texts' domains,
# disjoint from the tails), Roosevelt's 1941 address and 61,440 bytes of Debian's fortunes
# (scripts/fetch_fortunes_prose.sh), which no calibration saw.
#
# usage: scripts/quant_vs_llamacpp.sh PLAIN.gguf OUTDIR
#   PLAIN.gguf  an F32 (or F16) Llama GGUF, e.g. SmolLM2-135M-Instruct dequantised by
#               `llama-quantize --allow-requantize models/SmolLM2-135M-Instruct.Q4_1.gguf f32.gguf F32`
#   env: BIN (orthoformer binary, default target/release/orthoformer), CLASSES ("q4_k_m q5_k_m
#        iq4_xs"), SEEDS ("0 1"), CTX (256), CHUNKS (32), CALIB (4096 tokens), CALIB_BYTES
#        (20480), THREADS (2), GCIDE (data/gcide/gcide.txt: scripts/fetch_gcide.sh)
# Resumable: every file and log that exists is kept; delete one to redo it. Prints the table
# and writes OUTDIR/table.md and OUTDIR/summary.json.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { sed -n '2,36p' "$0"; exit 2; }
SRC=$1; OUT=$2
BIN=${BIN:-target/release/orthoformer}
CLASSES=${CLASSES:-"q4_k_m q5_k_m iq4_xs"}; SEEDS=${SEEDS:-"0 1"}
CTX=${CTX:-256}; CHUNKS=${CHUNKS:-32}; CALIB=${CALIB:-4096}; CALIB_BYTES=${CALIB_BYTES:-20480}
THREADS=${THREADS:-2}; GCIDE=${GCIDE:-data/gcide/gcide.txt}
die() { echo "quant_vs_llamacpp: $*" >&2; exit 2; }
[ -f "$SRC" ] || die "no model at '$SRC' (an F32 or F16 Llama GGUF)"
[ -x "$BIN" ] || die "no orthoformer binary at '$BIN': cargo build --release, or set BIN"
[ -f "$GCIDE" ] || die "no GCIDE text at '$GCIDE': run scripts/fetch_gcide.sh, or set GCIDE"
LC=$(scripts/build_llamacpp.sh --print-dir)/bin
[ -x "$LC/llama-perplexity" ] || die "llama.cpp is not built: run scripts/build_llamacpp.sh"
scripts/fetch_fortunes_prose.sh >/dev/null || die "could not fetch the fortunes text"
mkdir -p "$OUT/texts"

# The texts: calibration tails and scored heads, cut once.
T=$OUT/texts
[ -s "$T/calib-shakespeare.txt" ] || tail -c "$CALIB_BYTES" data/tinyshakespeare.txt > "$T/calib-shakespeare.txt"
[ -s "$T/calib-gcide.txt" ] || tail -c "$CALIB_BYTES" "$GCIDE" > "$T/calib-gcide.txt"
[ -s "$T/shakespeare-head.txt" ] || head -c 61440 data/tinyshakespeare.txt > "$T/shakespeare-head.txt"
[ -s "$T/gcide-head.txt" ] || head -c 61440 "$GCIDE" > "$T/gcide-head.txt"
cp -f data/sotu-1941-roosevelt.txt "$T/roosevelt-1941.txt"
cp -f data/fortunes-prose.txt "$T/fortunes-prose.txt"
CALIBS=(shakespeare gcide)
TEXTS=(shakespeare-head gcide-head roosevelt-1941 fortunes-prose)
(cd "$T" && sha256sum ./*.txt) > "$OUT/texts.sha256"

# Overrides that bring a rotated file (untied head) to the plain file's size: the head and
# the embedding at 4-5 bits instead of one Q8_0 tensor, paid for by the layers the mix had
# raised. `attn_output` is named first because a pattern is a substring and `output` is part
# of its name. Sizes for SmolLM2-135M (576-wide rows fall back from K-quants to Q5_0/Q5_1);
# another model needs its own, and the table shows the size ratio of every file.
size_match() {
    case "$1" in
        q4_k_m) echo "attn_output=q4_k output=q4_1 token_embd=q4_0 ffn_down=q4_k" ;;
        q5_k_m) echo "attn_output=q5_0 output=q5_0 token_embd=q4_0 attn_q=q5_0 ffn_gate=q5_0 ffn_up=q5_0 ffn_down=q5_k" ;;
        # Every layer is at its least already and no smaller type is written: a rotated
        # file cannot come within 1% (the head and embedding at IQ4_NL are 1.9% over).
        iq4_xs) echo "-" ;;
        *) die "no size-matching overrides for class '$1': add them to size_match()" ;;
    esac
}
# The second rule, q4_k_m only: the head at Q5_1, the embedding and most of the 576-wide
# matrices at Q4_0 instead of the Q5_0 fallback (+0.8% on SmolLM2-135M).
size_match_head5() {
    echo "attn_output=q4_0 output=q5_1 token_embd=q4_0 attn_q=q4_0 attn_k=q4_0 ffn_up=q4_0"
}
llama_type() { echo "$1" | tr '[:lower:]' '[:upper:]'; }

export LD_LIBRARY_PATH="$LC${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
MANIFEST=$OUT/files.tsv
printf 'name\tclass\tcalib\torigin\tseed\tfile\n' > "$MANIFEST.new"
add() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$MANIFEST.new"; }

ours() { # NAME CLASS CALIB ROTATE SEED [OVERRIDES...]
    local name=$1 class=$2 cal=$3 rot=$4 seed=$5; shift 5
    local f="$OUT/$name.gguf" rflags=() tflags=()
    [ "$rot" = none ] || rflags=(--rotate "$rot" --rotate-heads --seed "$seed")
    for o in "$@"; do tflags+=(--tensor-type "$o"); done
    if [ ! -s "$f" ]; then
        echo "quant_vs_llamacpp: $name" >&2
        "$BIN" quantize --model "$SRC" --method gptq "${rflags[@]}" "${tflags[@]}" \
            --data "$T/calib-$cal.txt" --calib-tokens "$CALIB" --context "$CTX" \
            --calibration "$OUT/calibration-$cal-$rot-$seed.safetensors" \
            --out "$f" --gguf-type "$class" --json > "$OUT/$name.json" \
            || die "quantize failed for $name (see $OUT/$name.json)"
    fi
}

first=1
for cal in "${CALIBS[@]}"; do
    im="$OUT/imatrix-$cal.gguf"
    [ -s "$im" ] || "$LC/llama-imatrix" -m "$SRC" -f "$T/calib-$cal.txt" -o "$im" -c "$CTX" \
        -t "$THREADS" > "$OUT/imatrix-$cal.log" 2>&1 || die "llama-imatrix failed (see $OUT/imatrix-$cal.log)"
    for class in $CLASSES; do
        name="llamacpp-$class-$cal"
        [ -s "$OUT/$name.gguf" ] || "$LC/llama-quantize" --imatrix "$im" "$SRC" "$OUT/$name.gguf" \
            "$(llama_type "$class")" "$THREADS" > "$OUT/$name.log" 2>&1 \
            || die "llama-quantize failed for $name (see $OUT/$name.log)"
        add "$name" "$class" "$cal" llamacpp - "$name.gguf"
        ours "plain-$class-$cal" "$class" "$cal" none 0
        add "plain-$class-$cal" "$class" "$cal" plain - "plain-$class-$cal.gguf"
        match=$(size_match "$class") || exit 2
        for s in $SEEDS; do
            [ "$match" != - ] || break
            # shellcheck disable=SC2086 # one override per word
            ours "rot-s$s-$class-$cal" "$class" "$cal" hadamard "$s" $match
            add "rot-s$s-$class-$cal" "$class" "$cal" rotated "$s" "rot-s$s-$class-$cal.gguf"
        done
        if [ "$first" = 1 ]; then
            s0=${SEEDS%% *}
            ours "rot-s$s0-natural-$class-$cal" "$class" "$cal" hadamard "$s0"
            add "rot-s$s0-natural-$class-$cal" "$class" "$cal" rotated-natural "$s0" "rot-s$s0-natural-$class-$cal.gguf"
            if [ "$class" = q4_k_m ]; then
                # shellcheck disable=SC2046 # one override per word
                ours "rot-s$s0-head5-$class-$cal" "$class" "$cal" hadamard "$s0" $(size_match_head5)
                add "rot-s$s0-head5-$class-$cal" "$class" "$cal" rotated-head5 "$s0" "rot-s$s0-head5-$class-$cal.gguf"
            fi
            first=0
        fi
    done
done
add source - - source - "$(realpath "$SRC")"
mv "$MANIFEST.new" "$MANIFEST"

# Scoring: every file on every text, the same windows.
tail -n +2 "$MANIFEST" | while IFS=$'\t' read -r name _ _ _ _ file; do
    case "$file" in /*) path=$file ;; *) path=$OUT/$file ;; esac
    for x in "${TEXTS[@]}"; do
        log="$OUT/ppl/$name--$x.log"
        mkdir -p "$OUT/ppl"
        [ -s "$log" ] && grep -q 'Final estimate' "$log" && continue
        echo "quant_vs_llamacpp: scoring $name on $x" >&2
        "$LC/llama-perplexity" -m "$path" -f "$T/$x.txt" -c "$CTX" --chunks "$CHUNKS" \
            -t "$THREADS" > "$log" 2>&1 || echo "llama-perplexity failed on $name (see $log)" >&2
    done
done
python3 scripts/quant_compare_table.py "$OUT" "${TEXTS[@]}" | tee "$OUT/table.md"

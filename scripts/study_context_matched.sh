#!/usr/bin/env bash
# Context at matched tokens. Softmax vs frozen orthogonal Q/K at contexts 64
# to 512 with the tokens per optimizer step held constant (batch = TOKENS / context, so every
# context sees the same tokens in the same number of steps and no context gets more epochs),
# learned and rotary positions, paired seeds, a fixed step count. Each final checkpoint is
# then scored by `orthoformer eval --by-position --induction` (loss at each position of the
# window on the whole validation split, and the induction-head probe), and
# scripts/context_matched_table.py writes OUT/context_matched.json and OUT/context_matched.md.
#
#   bash scripts/study_context_matched.sh BIN OUT [DATA]
#
# BIN: the orthoformer binary. OUT: the output folder. DATA: the training data, passed to
# `compare --data` (a UTF-8 text, or a token folder such as data/gcide-bpe8k once compare
# reads those) [default: the embedded TinyShakespeare, one token per character].
#
# Settings (environment):
#   CONTEXTS   contexts, each dividing TOKENS            [64 128 256 512]
#   TOKENS     tokens per optimizer step (batch x ctx)   [4096: batch 64 at 64, 8 at 512]
#   STEPS      optimizer steps, the same at every context [2000]
#   SEEDS      paired seeds per block (SEED, SEED+1, ...) [3]; SEED [0]
#   POSITIONS  position schemes                          [learned rope]
#   ATTENTION  variants, softmax first                   [softmax,orthogonal]
#   WARMUP     warm-up steps                             [the recipe's]
#   EVAL_EVERY loss curve every this many steps          [the recipe's]
#   EVAL_ITERS score only this many batches of the validation split at the end [all of it]
#   INDUCTION_SEQUENCES sequences of the probe            [64; length half the context]
#   EXTRA      more `compare` flags, e.g. "--preset shakespeare-char --lr 2e-3"
#   ENGINE     cpu (orthoformer compare) or torch (python -m orthoformer.train on DEVICE,
#              for contexts past 512 on a GPU; PYTHON, DTYPE pass through) [cpu]
#   THREADS, NICE, JOBS  as scripts/study_context.sh     [1, 10, compare's]
#
# Safe to stop and start again: a block with plan.json continues with `compare --resume`, a
# probe whose JSON exists is not run again.
set -euo pipefail
BIN=${1:?usage: study_context_matched.sh BIN OUT [DATA]}
OUT=${2:?usage: study_context_matched.sh BIN OUT [DATA]}
DATA=${3:-}
CONTEXTS=${CONTEXTS:-64 128 256 512}
TOKENS=${TOKENS:-4096}
STEPS=${STEPS:-2000}
SEEDS=${SEEDS:-3}
SEED=${SEED:-0}
POSITIONS=${POSITIONS:-learned rope}
ATTENTION=${ATTENTION:-softmax,orthogonal}
ENGINE=${ENGINE:-cpu}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export RAYON_NUM_THREADS=${THREADS:-1}
mkdir -p "$OUT"

common=(--steps "$STEPS")
[[ -n ${WARMUP:-} ]] && common+=(--warmup "$WARMUP")
[[ -n ${EVAL_EVERY:-} ]] && common+=(--eval-every "$EVAL_EVERY")
# shellcheck disable=SC2206 # EXTRA is a list of flags, split on spaces on purpose.
extra=(${EXTRA:-})

# Trains one block (context x position, every variant and seed) with the CPU engine.
train_cpu() {
    local dir=$1 ctx=$2 batch=$3 pos=$4
    if [[ -f $dir/plan.json ]]; then
        nice -n "${NICE:-10}" "$BIN" compare --resume --out "$dir" >"$dir.txt"
        return
    fi
    local data=()
    [[ -n $DATA ]] && data=(--data "$DATA")
    local jobs=()
    [[ -n ${JOBS:-} ]] && jobs=(--jobs "$JOBS")
    nice -n "${NICE:-10}" "$BIN" compare "${data[@]}" --context "$ctx" --batch "$batch" \
        --position "$pos" --attention "$ATTENTION" --seed "$SEED" --seeds "$SEEDS" \
        "${common[@]}" "${extra[@]}" "${jobs[@]}" --out "$dir" >"$dir.txt"
}

# Trains one block with the PyTorch trainer, run by run, into compare's layout.
train_torch() {
    local dir=$1 ctx=$2 batch=$3 pos=$4 py=${PYTHON:-python3}
    # The installed package when there is one; else the source tree's, built in place.
    local pkgpath=${PYTHONPATH:-}
    "$py" -c "import orthoformer" 2>/dev/null || pkgpath="$HERE/../python${PYTHONPATH:+:$PYTHONPATH}"
    local data=()
    if [[ -d $DATA ]]; then data=(--data-dir "$DATA"); elif [[ -n $DATA ]]; then data=(--data "$DATA"); fi
    local s a
    for ((s = SEED; s < SEED + SEEDS; s++)); do
        for a in ${ATTENTION//,/ }; do
            local run=$dir/seed-$s/$a
            [[ -f $run/state.json ]] && continue
            mkdir -p "$dir/seed-$s"
            # The recipe's model at this context, attention and position, its frozen draw
            # seeded by s (compare's rule), resolved by the package as gpu_context.sh does.
            PYTHONPATH="$pkgpath" "$py" - "$ctx" "$a" "$pos" "$s" \
                >"$run.config.json" <<'PY'
import dataclasses, json, sys
from orthoformer.config import GPTConfig
c, a, pos, s = sys.argv[1:]
cfg = GPTConfig.resolve(recipe="nanogpt-cpu", context=int(c), attention=a, position=pos)
print(json.dumps(dataclasses.asdict(dataclasses.replace(cfg, frozen_seed=int(s)))))
PY
            PYTHONPATH="$pkgpath" "$py" -m orthoformer.train \
                --recipe nanogpt-cpu --config "$run.config.json" "${data[@]}" --batch "$batch" \
                "${common[@]}" "${extra[@]}" --seed "$s" --model-seed "$s" \
                --dtype "${DTYPE:-bf16}" --device "${DEVICE:-cuda}" --log-every 0 --json \
                --out "$run" >"$run.log" 2>&1
        done
    done
}

# The probes of every finished run of a block, one JSON each under DIR/probes/.
probe_block() {
    local dir=$1 run name
    mkdir -p "$dir/probes"
    local limit=()
    [[ -n ${EVAL_ITERS:-} ]] && limit=(--eval-iters "$EVAL_ITERS")
    for run in "$dir"/seed-*/*/; do
        run=${run%/}
        [[ -f $run/state.json ]] || continue
        name=$(basename "$(dirname "$run")")-$(basename "$run")
        [[ -s $dir/probes/$name.json ]] && continue
        nice -n "${NICE:-10}" "$BIN" eval --checkpoint "$run" --by-position --induction \
            --induction-sequences "${INDUCTION_SEQUENCES:-64}" "${limit[@]}" --json \
            >"$dir/probes/$name.tmp"
        mv "$dir/probes/$name.tmp" "$dir/probes/$name.json"
    done
}

blocks=()
for ctx in $CONTEXTS; do
    if ((ctx <= 0 || TOKENS % ctx != 0)); then
        echo "error: context $ctx does not divide TOKENS=$TOKENS (batch = TOKENS / context)" >&2
        exit 2
    fi
    batch=$((TOKENS / ctx))
    for pos in $POSITIONS; do
        name=ctx$ctx-$pos
        case $ENGINE in
            cpu) train_cpu "$OUT/$name" "$ctx" "$batch" "$pos" ;;
            torch) train_torch "$OUT/$name" "$ctx" "$batch" "$pos" ;;
            *) echo "error: ENGINE=$ENGINE: use cpu or torch" >&2; exit 2 ;;
        esac
        probe_block "$OUT/$name"
        echo "done $name (batch $batch, $STEPS steps)"
        blocks+=("$OUT/$name")
    done
done
python3 "$HERE/context_matched_table.py" --tokens "$TOKENS" --steps "$STEPS" \
    --out "$OUT" "${blocks[@]}"

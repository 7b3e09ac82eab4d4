#!/usr/bin/env bash
# Frozen Q/K fine-tuning on one GPU (docs/RESULTS.md, "Frozen Q/K fine-tuning of SmolLM2-135M on a
# GPU"): SmolLM2-135M, rotated into a Hugging Face folder as the CPU runs had it, fine-tuned
# on TinyShakespeare three ways (full, Q/K frozen at their pretrained values, Q/K replaced by
# frozen orthogonal matrices) on the same batches, 3 seeds, one after the other, with a
# validation curve. Float32 weights and AdamW; the matrix products take TF32 (cuBLAS), as
# float32 training on an Ampere or newer GPU usually does.
#
#   bash scripts/gpu_finetune.sh GGUF OUT [STEPS] [DEVICE]    # repository root, package built
#
# GGUF is the project's SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch_smollm2.sh); OUT
# receives the folder, seed{0,1,2}.json (the reports) and seed{0,1,2}.md (their tables).
# STEPS (default 400) of 8 windows of 256 tokens; DEVICE defaults to cuda.
set -euo pipefail
gguf=$1
out=$2
steps=${3:-400}
device=${4:-cuda}
py=${PYTHON:-python3}
# The installed package when there is one; else the source tree's, built in place.
"$py" -c "import orthoformer" 2>/dev/null || export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 PYTHONUNBUFFERED=1
mkdir -p "$out"
model=$out/smollm2-hf
if [[ ! -f $model/config.json ]]; then
    "$py" -c 'import sys, orthoformer
r = orthoformer.rotate(sys.argv[1], sys.argv[2], check=True)
print("rotated:", r["check"], file=sys.stderr)' "$gguf" "$model"
fi
"$py" -c 'import torch; print(torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")' \
    | tee "$out/device.txt"
for seed in 0 1 2; do
    "$py" -m orthoformer.finetune --model "$model" --data data/tinyshakespeare.txt \
        --steps "$steps" --context "${CONTEXT:-256}" --batch "${BATCH:-8}" --warmup "${WARMUP:-20}" \
        --val-windows "${VAL_WINDOWS:-64}" --eval-every "${EVAL_EVERY:-25}" --device "$device" \
        --seed "$seed" --out "$out/seed$seed.json" | tee "$out/seed$seed.md"
done

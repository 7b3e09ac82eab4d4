#!/usr/bin/env bash
# Training throughput of python -m orthoformer.train against nanoGPT's train.py on one
# CUDA GPU, offline: GPT-2 small (12 x 768, context 1024, no biases), micro-batch 32, bf16
# autocast, torch.compile on, 60 steps each (the first 20 untimed), random GPT-2 ids written in
# nanoGPT's format. Prints one table (tokens/s, ms/step, MFU of both, and the ratio); about 4
# minutes, capped at 9.
# Needs: torch with CUDA (and triton, for compile), this tree with the built native module
# (python/orthoformer/_native*.so) and a nanoGPT checkout (default bench-peers/nanoGPT).
# Usage, from anywhere:  bash scripts/gpu_bench_trainer.sh [NANOGPT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nano=$(cd "${1:-$root/bench-peers/nanoGPT}" && pwd)
py=${PYTHON:-python3}
# The installed package when there is one; else the source tree's, built in place.
"$py" -c "import orthoformer" 2>/dev/null || export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
"$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device visible to torch')"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
work=${WORK:-$(mktemp -d /tmp/bench-nanogpt.XXXXXX)}
cd "$root"
timeout 540 "$py" python/bench/bench_nanogpt.py --nanogpt "$nano" --size gpt2-small --batch 32 \
  --device cuda --dtype bf16 --compile on --steps 60 --skip 20 --log-every 5 --work "$work"

#!/usr/bin/env bash
# The size ladder past the CPU's reach: the size ladder's GPU plan (assets/ladder/gpu-small.json:
# 4 rungs of 0.1M-1.8M non-embedding parameters at 20 tokens per parameter, softmax, frozen
# orthogonal and frozen Hadamard Q/K, 3 paired seeds, 4 rates extended past the edges, on the
# GCIDE token folder with its 8k BPE; 3.4e16 training FLOPs before extensions) on one GPU with
# the PyTorch engine, JOBS runs at a time (these models leave most of a GPU idle).
#
#   bash scripts/gpu_ladder.sh OUT [PLAN]     # repository root, native module built
#
# Needs data/gcide-bpe8k (bash scripts/prepare_gcide.sh; carry it to a device machine, which
# reaches no network: 23 MB) and python/orthoformer/_native.abi3.so. A second start continues
# the ladder in OUT (--resume). DEADLINE (seconds, default 540) stops the runs in progress
# with their checkpoints written, so one device call leaves a ladder the next call continues.
# JOBS (default 8), DTYPE (default bf16) and COMPILE (default off) pass through.
set -euo pipefail
out=$1
plan=${2:-assets/ladder/gpu-small.json}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
# The installed package when there is one; else the source tree's, built in place.
"$py" -c "import orthoformer" 2>/dev/null || export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$(dirname "$out")"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
args=(--out "$out" --device "${DEVICE:-cuda}" --dtype "${DTYPE:-bf16}" --compile "${COMPILE:-off}" --jobs "${JOBS:-8}")
if [[ -f $out/ladder.json ]]; then args+=(--resume); else args+=(--plan "$plan"); fi
# SIGINT at the deadline: every worker writes its checkpoint and stops; the ladder resumes.
status=0
timeout --signal=INT --kill-after=60 "${DEADLINE:-540}" "$py" -m orthoformer.ladder "${args[@]}" || status=$?
if [[ -f $out/report.md ]]; then cat "$out/report.md"; fi
echo "results: $(find "$out" -name result.json | wc -l) runs finished; exit status $status"

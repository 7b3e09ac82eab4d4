#!/usr/bin/env bash
# Training tokens/s of the Rust engine (`orthoformer train`) and of the PyTorch path
# (`python -m orthoformer.train`: one process, and two gloo processes under torchrun) on the
# CPU, configs A and B, best of ROUNDS rounds; each figure is the `tokens_per_s` the run's
# metrics.jsonl records for its STEPS training steps (evaluation excluded).
# Usage (repository root, package installed):
#   flock /tmp/orthoformer-bench.lock bash python/bench/train_throughput.sh [ROUNDS] [STEPS]
set -euo pipefail
rounds=${1:-3}
steps=${2:-30}
bin=${ORTHOFORMER_BIN:-target/release/orthoformer}
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tps() { "$py" -c "import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])['tokens_per_s'])" "$1/metrics.jsonl"; }
for cfg in "config-a 16" "config-b 8"; do
  set -- $cfg
  preset=$1 batch=$2
  for attn in softmax orthogonal; do
    common=(--preset "$preset" --attention "$attn" --batch "$batch" --steps "$steps" --warmup 0 --eval-every "$steps" --eval-iters 1)
    for r in $(seq "$rounds"); do
      "$bin" train "${common[@]}" --out "$tmp/rust-$r" --json > /dev/null
      "$py" -m orthoformer.train "${common[@]}" --device cpu --out "$tmp/torch-$r" > /dev/null
      OMP_NUM_THREADS=1 "$py" -m torch.distributed.run --standalone --nproc_per_node=2 -m orthoformer.train \
        "${common[@]}" --device cpu --out "$tmp/ddp-$r" > /dev/null 2>&1
      echo "$preset $attn round $r: rust $(tps "$tmp/rust-$r") torch $(tps "$tmp/torch-$r") ddp2 $(tps "$tmp/ddp-$r")"
      rm -rf "$tmp"/*-"$r"
    done
  done
done

#!/usr/bin/env bash
# Training tokens/s of the Rust engine (`orthoformer train`, all cores and one thread) and of
# the PyTorch path (`python -m orthoformer.train`: one process with all cores, one with one
# thread, and two gloo processes of one thread each under torchrun) on the CPU, configs A and
# B; each figure is the `tokens_per_s` the run's metrics.jsonl records for its training steps
# (evaluation and start-up excluded), one line per round (report the best round per column).
# Usage (repository root, package installed):
#   flock /tmp/orthoformer-bench.lock bash python/bench/train_throughput.sh [ROUNDS] [STEPS_A] [STEPS_B]
set -euo pipefail
rounds=${1:-3}
bin=${ORTHOFORMER_BIN:-target/release/orthoformer}
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tps() { "$py" -c "import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])['tokens_per_s'])" "$1/metrics.jsonl"; }
for cfg in "config-a 16 ${2:-30}" "config-b 8 ${3:-20}"; do
  set -- $cfg
  preset=$1 batch=$2 steps=$3
  for attn in softmax orthogonal; do
    common=(--preset "$preset" --attention "$attn" --batch "$batch" --steps "$steps" --warmup 0 --eval-every "$steps" --eval-iters 1)
    for r in $(seq "$rounds"); do
      "$bin" train "${common[@]}" --out "$tmp/rust-$r" --json > /dev/null
      RAYON_NUM_THREADS=1 "$bin" train "${common[@]}" --out "$tmp/rust1-$r" --json > /dev/null
      "$py" -m orthoformer.train "${common[@]}" --device cpu --out "$tmp/torch-$r" > /dev/null
      OMP_NUM_THREADS=1 "$py" -m orthoformer.train "${common[@]}" --device cpu --out "$tmp/torch1-$r" > /dev/null
      OMP_NUM_THREADS=1 "$py" -m torch.distributed.run --standalone --nproc_per_node=2 -m orthoformer.train \
        "${common[@]}" --device cpu --out "$tmp/ddp-$r" > /dev/null 2>&1
      echo "$preset $attn round $r: rust $(tps "$tmp/rust-$r") rust1 $(tps "$tmp/rust1-$r")" \
        "torch $(tps "$tmp/torch-$r") torch1 $(tps "$tmp/torch1-$r") ddp2 $(tps "$tmp/ddp-$r")"
      rm -rf "$tmp"/*-"$r"
    done
  done
done

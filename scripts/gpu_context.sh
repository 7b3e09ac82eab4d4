#!/usr/bin/env bash
# The context sweep past the CPU's reach (docs/RESULTS.md, "Contexts 512 to 2048 on a GPU"):
# softmax vs frozen orthogonal Q/K on nanoGPT's CPU recipe model (width 128, 4 layers, 4
# heads, no biases), learned and rotary positions, at contexts 512, 1024 and 2048, 3 paired
# seeds, the recipe's budget (2000 steps of batch 12, lr 1e-3 cosine to 1e-4, warm-up 100):
# the CPU context table's blocks, trained by the PyTorch trainer (python -m orthoformer.train)
# on one GPU. Seed s sets the batches, the initialisation and the frozen draw, as
# `orthoformer compare --seed s` does. Context 512 repeats the CPU table's last row, so the
# two engines can be compared where both ran.
#
#   bash scripts/gpu_context.sh OUT [STEPS]     # repository root, package built (native module)
#
# OUT receives one folder per block, ctx{C}-{learned,rope}/seed-{s}/{softmax,orthogonal} (the
# trainer's checkpoint folders), a finals.json per block (whole-validation-split loss from
# `orthoformer eval`, BIN=target/release/orthoformer), and table.md (scripts/context_table.py).
# JOBS trainings share the GPU at once (default 12: these models leave most of it idle).
# DTYPE (default bf16, the trainer's CUDA default) and COMPILE (default off) pass through;
# CONTEXTS (default "1024 2048 512": the new ones first) and DEVICE (default cuda) too.
# DEADLINE (seconds) stops the trainings still running then and tabulates the seeds that
# finished both variants. A finished run (its .eval.json present) is not run again.
set -euo pipefail
out=$1
export steps=${2:-2000} out py=${PYTHON:-python3} bin=${BIN:-target/release/orthoformer}
export dtype=${DTYPE:-bf16} compile=${COMPILE:-off} device=${DEVICE:-cuda}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
# The installed package when there is one; else the source tree's, built in place.
"$py" -c "import orthoformer" 2>/dev/null || export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
contexts=${CONTEXTS:-1024 2048 512}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/device.txt" 2>/dev/null || true
"$py" -c 'import torch; print("torch", torch.__version__)' >>"$out/device.txt"

one() { # CONTEXT POSITION SEED ATTENTION
    local c=$1 pos=$2 s=$3 a=$4
    local block=$out/ctx$c-$pos
    local run=$block/seed-$s/$a
    [[ -f $run.eval.json ]] && return 0
    mkdir -p "$block/seed-$s"
    # The recipe's model at this context, attention and position, its frozen draw seeded by s
    # (`compare`'s rule); the library resolves it, so it cannot drift from the recipe.
    "$py" - "$c" "$a" "$pos" "$s" >"$run.config.json" <<'PY'
import dataclasses, json, sys
from orthoformer.config import GPTConfig
c, a, pos, s = sys.argv[1:]
cfg = GPTConfig.resolve(recipe="nanogpt-cpu", context=int(c), attention=a, position=pos)
print(json.dumps(dataclasses.asdict(dataclasses.replace(cfg, frozen_seed=int(s)))))
PY
    rm -rf "$run"
    "$py" -m orthoformer.train --recipe nanogpt-cpu --config "$run.config.json" --steps "$steps" \
        --eval-every 100 --seed "$s" --model-seed "$s" --dtype "$dtype" \
        --compile "$compile" --device "$device" --log-every 0 --json --out "$run" >"$run.log" 2>&1
    RAYON_NUM_THREADS=1 "$bin" eval --checkpoint "$run" --json >"$run.eval.tmp"
    mv "$run.eval.tmp" "$run.eval.json"
    echo "done ctx $c $pos seed $s $a"
}
export -f one

start=$(date +%s)
for c in $contexts; do
    for pos in learned rope; do
        for s in 0 1 2; do
            for a in softmax orthogonal; do echo "$c $pos $s $a"; done
        done
    done
done | timeout "${DEADLINE:-infinity}" xargs -P "${JOBS:-12}" -L 1 bash -c 'one "$@"' _ || true
echo "all runs: $(($(date +%s) - start)) s" | tee "$out/wall.txt"

# finals.json per block, in `orthoformer compare`'s layout, then the table.
args=()
for c in $contexts; do
    for pos in learned rope; do
        "$py" - "$out/ctx$c-$pos" <<'PY'
import json, pathlib, sys
block = pathlib.Path(sys.argv[1])
finals = {}
for seed in sorted(block.glob("seed-*")):
    runs = {a: seed / f"{a}.eval.json" for a in ("softmax", "orthogonal")}
    if all(f.is_file() for f in runs.values()):  # a seed counts when both variants finished
        for a, f in runs.items():
            finals[f"{seed.name}/{a}"] = {"val_loss": json.loads(f.read_text())["report"]["loss"]}
if finals:
    (block / "finals.json").write_text(json.dumps(finals, indent=2))
PY
        label=$c
        [[ $pos == rope ]] && label=${c}rope
        [[ -f $out/ctx$c-$pos/finals.json ]] && args+=("$label=$out/ctx$c-$pos")
    done
done
if ((${#args[@]})); then "$py" scripts/context_table.py "${args[@]}" | tee "$out/table.md"; fi

"""Runs `orthoformer compare` on TinyShakespeare for several seeds and prints the markdown
table of docs/RESULTS.md (issue 6): final validation loss per attention variant and seed, and
the gap of each variant to softmax.

Usage: python3 scripts/results_tinyshakespeare.py [--seeds 0 1] [--bin target/release/orthoformer]
       [--out runs/results] [-- extra compare flags, e.g. --steps 2000]
"""
import argparse, json, statistics, subprocess, sys, os

p = argparse.ArgumentParser()
p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
p.add_argument("--bin", default="target/release/orthoformer")
p.add_argument("--out", default="runs/results")
p.add_argument("rest", nargs=argparse.REMAINDER)
a = p.parse_args()
extra = [x for x in a.rest if x != "--"]

summaries = []
for seed in a.seeds:
    out = os.path.join(a.out, f"seed{seed}")
    cmd = [a.bin, "compare", "--seed", str(seed), "--out", out, "--json", *extra]
    print("running:", " ".join(cmd), file=sys.stderr)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"compare failed for seed {seed}: {res.stderr.strip()}")
    summaries.append(json.loads(res.stdout))

s0 = summaries[0]
opts = s0["options"]
print(f"{opts['steps']} steps, batch {opts['batch']}, context {s0['model']['context']}, "
      f"lr {opts['lr']} -> {opts['min_lr']}, warm-up {opts['warmup']}, "
      f"{s0['tokenizer']} tokenizer (vocab {s0['vocab_size']}); seeds {a.seeds}\n")
variants = [r["attention"] for r in s0["runs"]]
print("| attention | trainable | frozen | " + " | ".join(f"val loss seed {s}" for s in a.seeds)
      + " | mean val | gap vs softmax | ms/step |")
print("|---|---:|---:|" + "---:|" * len(a.seeds) + "---:|---:|---:|")
base = None
rows = []
for v in variants:
    runs = [next(r for r in s["runs"] if r["attention"] == v) for s in summaries]
    vals = [r["final_val_loss"] for r in runs]
    mean = statistics.mean(vals)
    if v == "softmax":
        base = mean
    rows.append((v, runs, vals, mean))
for v, runs, vals, mean in rows:
    gap = "base" if v == "softmax" or base is None else f"{(mean - base) / base * 100:+.2f}%"
    ms = statistics.mean(r["ms_per_step"] for r in runs)
    print(f"| {v} | {runs[0]['params_trainable']:,} | {runs[0]['params_frozen']:,} | "
          + " | ".join(f"{x:.4f}" for x in vals) + f" | {mean:.4f} | {gap} | {ms:.1f} |")

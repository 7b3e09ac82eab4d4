"""Markdown tables of docs/RESULTS.md from the study's summaries
(`scripts/study_compare.sh` writes them), optionally with seconds-to-target derived from
step times measured alone (`cargo bench --bench compare_step_times > times.txt`).

Usage: python3 scripts/study_tables.py [runs/study] [--step-times times.txt]
"""
import argparse
import json
import math
import os

T975 = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105}

p = argparse.ArgumentParser()
p.add_argument("study", nargs="?", default="runs/study")
p.add_argument("--step-times", help="output of benches/compare_step_times.rs")
a = p.parse_args()

quiet = {}
if a.step_times:
    for line in open(a.step_times):
        f = line.split()
        if len(f) == 4 and f[0].isdigit():
            quiet[(int(f[0]), int(f[1]), f[2])] = float(f[3])


def load(name):
    path = os.path.join(a.study, name, "summary.json")
    return json.load(open(path)) if os.path.exists(path) else None


def finals(v, seeds=None):
    return [r["final_val_loss"] for r in v["seeds"] if seeds is None or r["seed"] in seeds]


def paired(xs, base):
    d = [(x - b) / b * 100 for x, b in zip(xs, base)]
    n = len(d)
    m = sum(d) / n
    if n < 2:
        return m, None, None
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1))
    h = T975[n - 1] * sd / math.sqrt(n)
    return m, m - h, m + h


def fmt_iv(m, lo, hi):
    if lo is None:
        return f"{m:+.2f}%"
    return f"{m:+.2f}% [{lo:+.2f}, {hi:+.2f}]"


def sd(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else float("nan")


def main_table(s, title):
    if s is None:
        print(f"(no summary for {title} yet)\n")
        return
    width = s["model"]["d_model"]
    ctx = s["model"]["context"]
    print(f"### {title}\n")
    print(f"{s['options']['steps']} steps, seeds {', '.join(map(str, s['seeds']))}, "
          f"width {width}, context {ctx}; target {s['target_val_loss']:.4f}\n")
    print("| attention | trainable | val loss per seed | mean ± sd | vs softmax [95% interval] "
          "| steps to softmax's loss | s to it (quiet step time) | ms/step quiet (shared) |")
    print("|---|---:|---|---|---|---:|---:|---:|")
    for v in s["variants"]:
        per = " / ".join(f"{x:.4f}" for x in finals(v))
        d = v["vs_baseline"]
        diff = "base" if d is None else fmt_iv(d["percent"]["mean"], d["percent"]["lo"], d["percent"]["hi"])
        st = v["to_target"]["steps"]
        ms = quiet.get((width, ctx, v["attention"]))
        steps = "not reached" if st is None else f"{st:.0f}"
        secs = "-" if st is None or ms is None else f"{st * ms / 1e3:.0f}"
        msq = "-" if ms is None else f"{ms:.1f}"
        print(f"| {v['attention']} | {v['params_trainable']:,} | {per} | "
              f"{v['val_loss_mean']:.4f} ± {v['val_loss_sd'] or float('nan'):.4f} | {diff} | "
              f"{steps} | {secs} | {msq} ({v['ms_per_step']:.0f}) |")
    print()
    for line in s["verdicts"]:
        print(f"- {line}.")
    print()


def scale_table():
    rows = []
    b1 = load("recipe-all")
    for name, label in [("width64", (64, 64)), ("recipe-all", (128, 64)), ("width256", (256, 64)),
                        ("width384", (384, 64)), ("context256", (128, 256))]:
        s = b1 if name == "recipe-all" else load(name)
        if s is None:
            rows.append(f"| {label[0]} | {label[1]} | (not run yet) | | | |")
            continue
        by = {v["attention"]: v for v in s["variants"]}
        seeds = {0, 1}
        soft, orth = finals(by["softmax"], seeds), finals(by["orthogonal"], seeds)
        m, lo, hi = paired(orth, soft)
        rows.append(
            f"| {label[0]} | {label[1]} | {by['softmax']['params_trainable']:,} | "
            f"{' / '.join(f'{x:.4f}' for x in soft)} | {' / '.join(f'{x:.4f}' for x in orth)} | "
            f"{fmt_iv(m, lo, hi)} |")
    print("### Scale (seeds 0 and 1, 2000 steps)\n")
    print("| width | context | softmax trainable | softmax val (seed 0 / 1) | orthogonal val | "
          "orthogonal vs softmax [95% interval, t with 1 df] |")
    print("|---:|---:|---:|---|---|---|")
    for r in rows:
        print(r)
    print()


main_table(load("recipe-all"), "All seven variants, nanoGPT CPU recipe, 2000 steps")
main_table(load("steps5000"), "5000 steps")
scale_table()

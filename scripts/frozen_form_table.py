"""Tables of the frozen-form study from the `compare` folders that
`scripts/study_frozen_form.sh` writes: each variant's final validation loss (mean ± sd over
seeds) and its paired difference from softmax, with a 95% Student t interval over the seeds.
Runs pair by seed across folders: every block trains the same seeds, so seed s sees the same
batches in each. Writes OUT/frozen_form.md and OUT/frozen_form.json and prints the tables.

Usage: python3 scripts/frozen_form_table.py [--heads "1 2 4 8"] [--n-head 4] OUT
"""

import argparse
import json
import math
import os

# Two-sided 95% Student t quantiles by degrees of freedom (study_tables.py's).
T975 = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105, 5: 2.570581836}

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--heads", default="1 2 4 8")
p.add_argument("--n-head", type=int, default=4)
a = p.parse_args()


def runs(block, label_start):
    """{seed: final validation loss} of the variant of `block` whose label starts with
    `label_start` (`orthogonal` matches `orthogonal+gaussian` only when asked so), or None."""
    path = os.path.join(a.out, block, "summary.json")
    if not os.path.exists(path):
        return None
    for v in json.load(open(path))["variants"]:
        name = v["attention"]
        if name == label_start or (name.startswith(label_start) and label_start.endswith(("+", "[", "-"))):
            return {r["seed"]: r["final_val_loss"] for r in v["seeds"]}, name
    return None


def paired(xs, base):
    """Mean and 95% interval of the per-seed percentage differences over shared seeds."""
    seeds = sorted(set(xs) & set(base))
    d = [(xs[s] - base[s]) / base[s] * 100 for s in seeds]
    n = len(d)
    if n == 0:
        return None
    m = sum(d) / n
    if n < 2:
        return {"n": n, "mean": m, "lo": None, "hi": None}
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1))
    h = T975.get(n - 1, 1.96) * sd / math.sqrt(n)
    return {"n": n, "mean": m, "lo": m - h, "hi": m + h}


def fmt(iv):
    if iv is None:
        return "-"
    if iv["lo"] is None:
        return f"{iv['mean']:+.2f}% (1 seed)"
    return f"{iv['mean']:+.2f}% [{iv['lo']:+.2f}, {iv['hi']:+.2f}]"


def mean_sd(xs):
    v = list(xs.values())
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else float("nan")
    return f"{m:.4f} ± {sd:.4f}" if len(v) > 1 else f"{m:.4f}"


rows = {}  # table -> list of (label, runs, vs softmax, vs other)
out_json = {}


def table(title, entries):
    """entries: (row label, (block, label), (base block, base label), (other block, label))."""
    lines = [
        f"### {title}",
        "",
        "| variant | seeds | val loss | vs softmax [95%] | vs orthogonal [95%] |",
        "|---|---:|---|---|---|",
    ]
    data = []
    for row, (blk, lab), base, other in entries:
        got = runs(blk, lab)
        if got is None:
            lines.append(f"| {row} | - | (not run yet) | - | - |")
            continue
        xs, name = got
        b = runs(*base) if base else None
        o = runs(*other) if other else None
        vs_b = paired(xs, b[0]) if b else None
        vs_o = paired(xs, o[0]) if o else None
        lines.append(f"| {row} ({blk}/{name}) | {len(xs)} | {mean_sd(xs)} | {fmt(vs_b)} | {fmt(vs_o)} |")
        data.append(
            {
                "row": row,
                "block": blk,
                "variant": name,
                "val_loss": xs,
                "vs_softmax_percent": vs_b,
                "vs_orthogonal_percent": vs_o,
            }
        )
    out_json[title] = data
    return "\n".join(lines) + "\n"


soft = ("base", "softmax")
orth = ("base", "orthogonal")
parts = [
    table(
        "1. Orthogonal vs Gaussian frozen Q/K at equal scale",
        [
            ("softmax", soft, None, None),
            ("orthogonal (qr)", orth, soft, None),
            ("gaussian N(0, 1/C)", ("draw-gaussian", "orthogonal+"), soft, orth),
        ],
    ),
]
heads = []
for h in a.heads.split():
    blk = "base" if int(h) == a.n_head else f"heads-{h}"
    heads.append((f"softmax, {h} heads", (blk, "softmax"), None, None))
    heads.append((f"orthogonal, {h} heads", (blk, "orthogonal"), (blk, "softmax"), None))
parts.append(table("2. Head count at fixed width (vs softmax at the same head count)", heads))
parts.append(
    table(
        "3. Freezing only some layers",
        [
            ("frozen in every layer", orth, soft, None),
            ("frozen in the first half", ("layers-first", "orthogonal["), soft, orth),
            ("frozen in the last half", ("layers-last", "orthogonal["), soft, orth),
        ],
    )
)
parts.append(
    table(
        "4. Q/K trained for the first 10% of steps, then frozen",
        [
            ("softmax", soft, None, None),
            ("softmax, Q/K frozen after 10%", ("freeze", "softmax-"), soft, orth),
            ("orthogonal", orth, soft, None),
        ],
    )
)
md = "## Which frozen form\n\n" + "\n".join(parts)
with open(os.path.join(a.out, "frozen_form.md"), "w") as f:
    f.write(md)
with open(os.path.join(a.out, "frozen_form.json"), "w") as f:
    json.dump(out_json, f, indent=1)
print(md)

"""The tables of the matched-token context study (study_context_matched.sh).

Usage:
  python3 scripts/context_matched_table.py --out OUT [--tokens 4096] [--steps 2000] \
      OUT/ctx64-learned OUT/ctx64-rope ...

Each block folder is named `ctx<C>-<position>` and holds one `orthoformer eval --by-position
--induction --json` object per run in `probes/seed-<s>-<attention>.json`, and (from
`orthoformer compare`) `finals.json`, whose whole-validation-split loss is the loss at the end
when present (otherwise the probe's own loss, the same evaluation to f32 rounding).

Writes OUT/context_matched.json (every run, then the paired differences) and
OUT/context_matched.md: per block and variant the loss at the end, the loss over position
buckets (1, 2-3, 4-7, ...) and the induction probe (loss on the first and second copy of a
repeated random sequence, and their difference), each a mean over seeds; then every variant's
paired differences from softmax (same seed, same batches), with 95% Student t intervals.
"""

import argparse
import json
import math
import os
import re
import sys

# Two-sided 95% Student t quantiles t(0.975, df), df 1-30 (beyond: 1.96 is within 2%).
T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]
BLOCK = re.compile(r"^ctx(\d+)-([a-z]+)$")
PROBE = re.compile(r"^seed-(\d+)-([a-z0-9-]+)\.json$")


def fail(msg):
    """One error line on stderr, exit 2 (the project's status for bad input)."""
    sys.stderr.write(f"error: {msg}\n")
    sys.exit(2)


def interval(xs):
    """{n, mean, lo, hi}: the mean of xs with its 95% t interval (None with one value)."""
    n = len(xs)
    if n == 0:
        return {"n": 0, "mean": None, "lo": None, "hi": None}
    mean = sum(xs) / n
    if n < 2:
        return {"n": n, "mean": mean, "lo": None, "hi": None}
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = (T975[n - 2] if n - 1 <= len(T975) else 1.96) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "lo": mean - half, "hi": mean + half}


def block_runs(folder):
    """(context, position, [run]) of one block folder."""
    m = BLOCK.match(os.path.basename(os.path.normpath(folder)))
    if not m:
        fail(f"{folder}: a block folder is named ctx<C>-<position>")
    context, position = int(m.group(1)), m.group(2)
    finals = {}
    path = os.path.join(folder, "finals.json")
    if os.path.exists(path):
        with open(path) as f:
            finals = json.load(f)
    runs = []
    probes = os.path.join(folder, "probes")
    for name in sorted(os.listdir(probes)) if os.path.isdir(probes) else []:
        p = PROBE.match(name)
        if not p:
            continue
        seed, attention = int(p.group(1)), p.group(2)
        with open(os.path.join(probes, name)) as f:
            probe = json.load(f)
        final = finals.get(f"seed-{seed}/{attention}", {}).get("val_loss")
        ind = probe["induction"]
        runs.append({
            "context": context,
            "position": position,
            "seed": seed,
            "attention": attention,
            "step": probe["step"],
            "loss": final if final is not None else probe["report"]["loss"],
            "loss_tokens": finals.get(f"seed-{seed}/{attention}", {}).get("val_tokens")
            if final is not None else probe["report"]["tokens"],
            "probe_tokens": probe["report"]["tokens"],
            "buckets": [
                {"first": b["first"], "last": b["last"], "loss": b["loss"]}
                for b in probe["by_position"]["buckets"]
            ],
            "induction": {
                "len": ind["len"],
                "first": ind["first"]["mean"],
                "second": ind["second"]["mean"],
                "score": ind["score"]["mean"],
                "uniform": ind["uniform_loss"],
            },
        })
    return context, position, runs


def values(run):
    """The figures compared per run: name -> value."""
    out = {"loss": run["loss"]}
    for b in run["buckets"]:
        span = f"{b['first']}" if b["first"] == b["last"] else f"{b['first']}-{b['last']}"
        out[f"pos {span}"] = b["loss"]
    for k in ("first", "second", "score"):
        out[f"induction {k}"] = run["induction"][k]
    return out


def summarise(runs):
    """Per (context, position, attention): mean of each figure over seeds; and per other
    attention the paired differences from softmax over the seeds both have."""
    groups = {}
    for r in runs:
        groups.setdefault((r["context"], r["position"]), {}).setdefault(r["attention"], {})[
            r["seed"]
        ] = values(r)
    means, diffs = [], []
    for (context, position), by_att in sorted(groups.items()):
        for attention, seeds in by_att.items():
            names = list(next(iter(seeds.values())))
            means.append({
                "context": context, "position": position, "attention": attention,
                "seeds": sorted(seeds),
                "mean": {k: interval([v[k] for v in seeds.values() if v.get(k) is not None])
                         for k in names},
            })
        base = by_att.get("softmax", {})
        for attention, seeds in by_att.items():
            if attention == "softmax":
                continue
            paired = sorted(set(seeds) & set(base))
            if not paired:
                continue
            names = [k for k in seeds[paired[0]] if k in base[paired[0]]]
            diffs.append({
                "context": context, "position": position, "attention": attention,
                "seeds": paired,
                "diff": {
                    k: interval([seeds[s][k] - base[s][k] for s in paired
                                 if seeds[s][k] is not None and base[s][k] is not None])
                    for k in names
                },
            })
    return means, diffs


def cell(i, digits=4, interval=True):
    """`mean [lo, hi]`, or the mean alone (one seed, or `interval` off); `-` for nothing."""
    if i is None or i["n"] == 0:
        return "-"
    if not interval:
        return f"{i['mean']:.{digits}f}"
    if i["lo"] is None:
        return f"{i['mean']:+.{digits}f}"
    return f"{i['mean']:+.{digits}f} [{i['lo']:+.{digits}f}, {i['hi']:+.{digits}f}]"


def span(runs, key):
    """The token counts of `key` over `runs`, as one number or a range."""
    counts = sorted({r[key] for r in runs if r.get(key) is not None})
    if not counts:
        return "?"
    return f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,} to {counts[-1]:,}"


def markdown(means, diffs, tokens, steps, runs):
    lines = [
        f"# Context at matched tokens ({tokens} tokens per step, {steps} steps)",
        "",
        f"Losses are nats/token on {span(runs, 'loss_tokens')} tokens of the validation split;",
        "`pos a-b` is the mean loss at positions a..b of the window, on the first",
        f"{span(runs, 'probe_tokens')} tokens of the same split; induction: loss on tokens 2..L of",
        "the first and the second copy of a random sequence repeated once (L = context/2),",
        "score = first - second.",
        "",
        "## Means over seeds",
        "",
    ]
    mean_cols = ["loss", "induction first", "induction second", "induction score"]
    lines += ["| context | position | variant | seeds | " + " | ".join(mean_cols) + " |",
              "|---|---|---|---|" + "---|" * len(mean_cols)]
    for m in means:
        row = [str(m["context"]), m["position"], m["attention"], str(len(m["seeds"]))]
        row += [cell(m["mean"].get(k), interval=False) for k in mean_cols]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Loss by position in the window (means over seeds)", ""]
    for m in means:
        buckets = [k for k in m["mean"] if k.startswith("pos ")]
        lines.append(f"- ctx {m['context']} {m['position']} {m['attention']}: " + ", ".join(
            f"{k[4:]} {m['mean'][k]['mean']:.3f}" for k in buckets
            if m["mean"][k]["mean"] is not None))
    lines += ["", "## Paired differences from softmax (variant - softmax, 95% t interval)", ""]
    diff_cols = ["loss", "induction score"]
    lines += ["| context | position | variant | seeds | " + " | ".join(diff_cols)
              + " | by position |", "|---|---|---|---|" + "---|" * (len(diff_cols) + 1)]
    for d in diffs:
        row = [str(d["context"]), d["position"], d["attention"], str(len(d["seeds"]))]
        row += [cell(d["diff"].get(k)) for k in diff_cols]
        row.append(", ".join(f"{k[4:]} {d['diff'][k]['mean']:+.3f}"
                             for k in d["diff"]
                             if k.startswith("pos ") and d["diff"][k]["mean"] is not None))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    """Writes `text` to `path` through a temporary file and a rename."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for context_matched.{json,md}")
    ap.add_argument("--tokens", type=int, default=4096, help="tokens per optimizer step")
    ap.add_argument("--steps", type=int, default=2000, help="optimizer steps")
    ap.add_argument("blocks", nargs="+", help="block folders ctx<C>-<position>")
    args = ap.parse_args()
    runs = []
    for folder in args.blocks:
        runs += block_runs(folder)[2]
    if not runs:
        fail("no probes/*.json in the blocks given: run study_context_matched.sh")
    means, diffs = summarise(runs)
    doc = {"tokens_per_step": args.tokens, "steps": args.steps, "runs": runs,
           "means": means, "differences": diffs}
    write_atomic(os.path.join(args.out, "context_matched.json"), json.dumps(doc, indent=2) + "\n")
    md = markdown(means, diffs, args.tokens, args.steps, runs)
    write_atomic(os.path.join(args.out, "context_matched.md"), md)
    sys.stdout.write(md)


if __name__ == "__main__":
    main()

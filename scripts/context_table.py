"""The context table of docs/RESULTS.md: softmax vs frozen orthogonal Q/K per context,
paired over the seeds of one or more `orthoformer compare` folders per context.

Usage:
  python3 scripts/context_table.py 128=runs/context/ctx128 \
      256=runs/study/context256,runs/context/ctx256-seed2 512=runs/context/ctx512,...

For each context: every seed's whole-split validation loss (`summary.json`, or `finals.json`
for a folder still running), the per-seed difference of orthogonal from softmax, the paired
mean with its 95% Student t interval, and from the evaluation curves (the loss on the
evaluation batches every `--eval-every` steps, interpolated): the steps orthogonal needs to
reach softmax's final loss on the mean curve, and per seed the steps softmax needs to reach
orthogonal's final loss (what frozen Q/K cost in training steps), with their t interval.
"""
import json
import os
import sys

T975 = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105, 5: 2.570581836}


def runs(folder):
    """{(attention, seed): (final val loss, curve or None)} of one compare folder."""
    out = {}
    path = os.path.join(folder, "summary.json")
    if os.path.exists(path):
        s = json.load(open(path))
        for v in s["variants"]:
            for r in v["seeds"]:
                out[(v["attention"], r["seed"])] = (r["final_val_loss"], r["curve"])
        return out
    for key, f in json.load(open(os.path.join(folder, "finals.json"))).items():
        seed, attention = key.split("/")
        curve = None
        metrics = os.path.join(folder, key, "metrics.jsonl")
        if os.path.exists(metrics):
            curve = [json.loads(line) for line in open(metrics)]
            curve = [c for c in curve if c.get("val_loss") is not None]
            seconds, prev = 0.0, 0
            for c in curve:
                seconds += (c["step"] - prev) * (c.get("ms_per_step") or 0.0) / 1e3
                prev = c["step"]
                c["seconds"] = seconds
        out[(attention, int(seed.split("-")[1]))] = (f["val_loss"], curve)
    return out


def mean_curve(curves):
    """(steps, mean val loss, mean seconds) over curves evaluated at the same steps."""
    steps = [c["step"] for c in curves[0]]
    n = len(curves)
    loss = [sum(c[i]["val_loss"] for c in curves) / n for i in range(len(steps))]
    secs = [sum(c[i]["seconds"] for c in curves) / n for i in range(len(steps))]
    return steps, loss, secs


def reach(curve, target):
    """First (step, seconds) at which the mean curve reaches `target`, interpolated."""
    steps, loss, secs = curve
    for i in range(1, len(steps)):
        if loss[i] <= target:
            f = (loss[i - 1] - target) / (loss[i - 1] - loss[i]) if loss[i - 1] != loss[i] else 1.0
            return steps[i - 1] + f * (steps[i] - steps[i - 1]), secs[i - 1] + f * (secs[i] - secs[i - 1])
    return None


def steps_interval(xs):
    """Mean [95% t interval] of per-seed steps, with the seeds' values; `None` is a seed that
    never reached the target, and then there is no mean (it would leave out the slowest)."""
    each = " / ".join("not reached" if x is None else f"{x:.0f}" for x in xs)
    if any(x is None for x in xs):
        return f"no mean ({each})"
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return f"{each} (one seed)"
    sd = (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5
    h = T975[len(xs) - 1] * sd / len(xs) ** 0.5
    return f"{m:.0f} [{m - h:.0f}, {m + h:.0f}] ({each})"


def row(context, folders):
    data = {}
    for f in folders:
        data.update(runs(f))
    seeds = sorted(s for (a, s) in data if a == "softmax" and ("orthogonal", s) in data)
    sm = [data[("softmax", s)][0] for s in seeds]
    og = [data[("orthogonal", s)][0] for s in seeds]
    d = [(o - b) / b * 100 for o, b in zip(og, sm)]
    n = len(d)
    m = sum(d) / n
    if n >= 2:
        sd = (sum((x - m) ** 2 for x in d) / (n - 1)) ** 0.5
        h = T975[n - 1] * sd / n**0.5
        interval = f"{m:+.2f}% [{m - h:+.2f}, {m + h:+.2f}]"
    else:
        interval = f"{m:+.2f}% (one seed, no interval)"
    cells = [str(context), ", ".join(map(str, seeds)),
             " / ".join(f"{x:.4f}" for x in sm), " / ".join(f"{x:.4f}" for x in og),
             " / ".join(f"{x:+.2f}%" for x in d), interval]
    curves_ok = all(data[(a, s)][1] for a in ("softmax", "orthogonal") for s in seeds)
    if curves_ok:
        sc = mean_curve([data[("softmax", s)][1] for s in seeds])
        oc = mean_curve([data[("orthogonal", s)][1] for s in seeds])
        o_to_s = reach(oc, sc[1][-1])
        cells.append("not reached" if o_to_s is None else f"{o_to_s[0]:.0f}")
        # Per seed: the step at which softmax's curve reaches orthogonal's last evaluation.
        per = []
        for s in seeds:
            sc1 = mean_curve([data[("softmax", s)][1]])
            oc1 = mean_curve([data[("orthogonal", s)][1]])
            hit = reach(sc1, oc1[1][-1])
            per.append(hit[0] if hit else None)
        cells.append(steps_interval(per))
    else:
        cells += ["-", "-"]
    return "| " + " | ".join(cells) + " |"


print("| context | seeds | softmax val | orthogonal val | orthogonal vs softmax, per seed "
      "| paired mean [95% interval] | orthogonal's steps to softmax's loss "
      "| softmax's steps to orthogonal's final loss, mean [95% interval] (per seed) |")
print("|---|---|---|---|---|---|---|---|")
for arg in sys.argv[1:]:
    context, folders = arg.split("=", 1)
    print(row(context, folders.split(",")))

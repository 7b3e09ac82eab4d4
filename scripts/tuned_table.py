"""Tables of tuned comparisons (`orthoformer compare --lr-sweep`) for docs/RESULTS.md:
softmax vs frozen orthogonal Q/K, each at its own best rate, paired over the seeds.

Usage:
  python3 scripts/tuned_table.py 64=runs/tuned/ctx64 128=runs/tuned/ctx128 \
      256=runs/tuned/ctx256,runs/tuned/ctx256-seed2 rope256=runs/tuned/rope-softmax-ctx256,runs/tuned/rope-ctx256

`ms:LABEL=S/O` gives quiet milliseconds per step of softmax and orthogonal for LABEL's
context (measured apart, e.g. `compare --steps 150 --jobs 1`), to turn steps into seconds
where the runs' own times were taken on a shared machine.

A label's folders (comma-separated) are merged: more seeds of one sweep, or one variant's
sweep with the other's on the same seeds, rates and design.

Reads each folder's `finals.json`, so a sweep still running is tabled on the seeds whose every
run has finished (the rate is then chosen on those seeds only). For each folder: every rate's
held-out training loss (the last 10% of the training split, which chooses) and whole-split
validation loss (which is reported), the rate each variant chooses, orthogonal's paired
difference from softmax at the chosen rates and at each shared rate with a 95% Student t
interval, and, from the evaluation curves at the chosen rates (`metrics.jsonl`, the loss on the
evaluation batches every `--eval-every` steps, interpolated), the steps and training seconds
softmax needs to reach orthogonal's last evaluation (what freezing Q/K costs), per seed.
"""
import itertools
import json
import math
import os
import statistics as st
import sys

T975 = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105, 5: 2.570581836}
VARIANTS = ("softmax", "orthogonal")


def interval(xs, unit="%", digits=2, sign="+"):
    """Mean [95% t interval] of per-seed values."""
    m = st.mean(xs)
    f = f"{sign}.{digits}f"
    if len(xs) < 2:
        return f"{m:{f}}{unit} (one seed)"
    h = T975[len(xs) - 1] * st.stdev(xs) / len(xs) ** 0.5
    return f"{m:{f}}{unit} [{m - h:{f}}, {m + h:{f}}]"


def curve(folder, key):
    """[(step, eval val loss, training seconds)] of the run `key` in `folder`, from its
    metrics.jsonl."""
    out, seconds, prev = [], 0.0, 0
    with open(os.path.join(folder, key, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    for r in records:
        if r.get("val_loss") is None:
            continue
        seconds += (r["step"] - prev) * (r.get("ms_per_step") or 0.0) / 1e3
        prev = r["step"]
        out.append((r["step"], r["val_loss"], seconds))
    return out


def reach(points, target):
    """First (step, seconds) at which a curve reaches `target`, interpolated; None if never."""
    for (s0, l0, t0), (s1, l1, t1) in itertools.pairwise(points):
        if l1 <= target:
            f = (l0 - target) / (l0 - l1) if l0 != l1 else 1.0
            return s0 + f * (s1 - s0), t0 + f * (t1 - t0)
    return None


def table(label, folder):
    finals, where = {}, {}
    for part in folder.split(","):
        with open(os.path.join(part, "finals.json")) as f:
            for key, value in json.load(f).items():
                finals[key], where[key] = value, part
    lrs = sorted({k.split("/")[1] for k in finals}, key=lambda s: float(s[3:]))
    seeds = sorted({k.split("/")[0] for k in finals}, key=lambda s: int(s[5:]))
    whole = [s for s in seeds if all(f"{s}/{lr}/{v}" in finals for lr in lrs for v in VARIANTS)]
    if not whole:
        print(f"{label}: no seed has every run finished yet\n")
        return
    cell = {(v, lr): [finals[f"{s}/{lr}/{v}"] for s in whole] for v in VARIANTS for lr in lrs}
    best = {v: min(lrs, key=lambda lr: st.mean(f["held_out_loss"] for f in cell[(v, lr)]))
            for v in VARIANTS}
    names = ", ".join(s[5:] for s in whole)
    print(f"**{label}** ({folder}, seeds {names} of {len(seeds)} started)\n")
    print("| variant | lr | held-out train loss, mean (per seed): chooses "
          "| val loss, mean (per seed): reported |")
    print("|---|---:|---|---|")
    for v in VARIANTS:
        for lr in lrs:
            ho = [f["held_out_loss"] for f in cell[(v, lr)]]
            vl = [f["val_loss"] for f in cell[(v, lr)]]
            mark = " (chosen)" if lr == best[v] else ""
            print(f"| {v} | {lr[3:]}{mark} | {st.mean(ho):.4f} ({' / '.join(f'{x:.4f}' for x in ho)}) "
                  f"| {st.mean(vl):.4f} ({' / '.join(f'{x:.4f}' for x in vl)}) |")

    def gap(lr_o, lr_s):
        d = [100 * (o["val_loss"] / s["val_loss"] - 1)
             for o, s in zip(cell[("orthogonal", lr_o)], cell[("softmax", lr_s)])]
        return f"{interval(d)} ({' / '.join(f'{x:+.2f}%' for x in d)})"

    print(f"\n- tuned (softmax at {best['softmax'][3:]}, orthogonal at {best['orthogonal'][3:]}): "
          f"orthogonal vs softmax {gap(best['orthogonal'], best['softmax'])}")
    for lr in lrs:
        print(f"- both at {lr[3:]}: {gap(lr, lr)}")
    steps, secs, back = [], [], []
    for s in whole:
        ks, ko = f"{s}/{best['softmax']}/softmax", f"{s}/{best['orthogonal']}/orthogonal"
        sm, og = curve(where[ks], ks), curve(where[ko], ko)
        hit = reach(sm, og[-1][1])
        steps.append(hit[0] if hit else float("nan"))
        secs.append(hit[1] if hit else float("nan"))
        hit = reach(og, sm[-1][1])
        back.append(f"{hit[0]:.0f}" if hit else "never")
    print(f"- orthogonal's steps to softmax's last evaluation (tuned, per seed): {' / '.join(back)}")
    if any(math.isnan(x) for x in steps):  # softmax never reaches it in some seed
        print(f"- softmax's steps to orthogonal's last evaluation (tuned, per seed): "
              f"{' / '.join('never' if math.isnan(x) else f'{x:.0f}' for x in steps)}\n")
        return
    print(f"- softmax's steps to orthogonal's last evaluation (tuned, per seed): "
          f"{interval(steps, '', 0, '')} ({' / '.join(f'{x:.0f}' for x in steps)}); "
          f"training seconds as run {interval(secs, ' s', 0, '')} "
          f"({' / '.join(f'{x:.0f}' for x in secs)})")
    if label in QUIET:
        ms_s, ms_o = QUIET[label]
        total = max(r[0] for r in curve(where[ko], ko))
        print(f"- at the quiet step times ({ms_s:g} / {ms_o:g} ms, softmax / orthogonal): softmax "
              f"reaches it in {interval([x * ms_s / 1e3 for x in steps], ' s', 0, '')}, "
              f"orthogonal's whole run takes {total * ms_o / 1e3:.0f} s")
    print()


QUIET = {}
for arg in sys.argv[1:]:
    if arg.startswith("ms:"):
        label, pair = arg[3:].split("=", 1)
        QUIET[label] = tuple(float(x) for x in pair.split("/"))
for arg in sys.argv[1:]:
    if not arg.startswith("ms:"):
        label, folder = arg.split("=", 1)
        table(label, folder)

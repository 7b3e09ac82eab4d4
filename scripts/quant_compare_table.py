"""The tables of scripts/quant_vs_llamacpp.sh from its folder: each file against llama-quantize's
file of the same class and calibration text, window by window, and pooled per class.

Per file and text: perplexity, and the mean per-window difference in loss against llama.cpp's
file (nats per token; negative: ours is better) with a 95% t interval over the windows
(scripts/ppl_paired.py). Pooled, per class, origin (plain, rotated) and text: the per-window
differences averaged over the calibration texts (and rotation seeds) first, then the same t
interval over the windows, beside the least and greatest of the separate means; and the
share of the quantisation loss (F32 source against llama.cpp's file) that ours recovers.

usage: python3 scripts/quant_compare_table.py OUTDIR TEXT [TEXT ...]
  writes OUTDIR/summary.json, OUTDIR/sizes.json (every file's bytes) and OUTDIR/windows.json (every file's per-window losses, rounded
  to 1e-6 nats: what results/ keeps, so the tables are recomputed without the logs); prints
  Markdown. Without OUTDIR/ppl, reads windows.json instead of the logs.
"""

import csv
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ppl_paired import T95, chunk_losses


def t_interval(d):
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    t = T95[n - 2] if n - 1 <= len(T95) else 1.96
    return mean, mean - t * sd / math.sqrt(n), mean + t * sd / math.sqrt(n)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, texts = sys.argv[1], sys.argv[2:]
    with open(os.path.join(out, "files.tsv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    # Sizes: of the files when they are here, else from the sizes.json a run wrote.
    sizes_path = os.path.join(out, "sizes.json")
    sizes = {}
    for r in rows:
        path = r["file"] if os.path.isabs(r["file"]) else os.path.join(out, r["file"])
        if os.path.exists(path):
            sizes[r["name"]] = os.path.getsize(path)
    if len(sizes) < len(rows):
        with open(sizes_path, encoding="utf-8") as f:
            sizes = json.load(f)
    else:
        with open(sizes_path, "w", encoding="utf-8") as f:
            json.dump(sizes, f, indent=1)
    for r in rows:
        r["mib"] = sizes[r["name"]] / 2**20

    # Per-window losses: from the llama-perplexity logs when they are here, else from the
    # windows.json a run wrote (what results/ keeps instead of the logs).
    saved_path = os.path.join(out, "windows.json")
    saved = {}
    if not os.path.isdir(os.path.join(out, "ppl")) and os.path.exists(saved_path):
        with open(saved_path, encoding="utf-8") as f:
            saved = json.load(f)

    def losses(name, text):
        if saved:
            return saved.get(f"{name}--{text}")
        log = os.path.join(out, "ppl", f"{name}--{text}.log")
        # A log still being written (no final estimate yet) is no reading.
        if not os.path.exists(log):
            return None
        with open(log, encoding="utf-8", errors="replace") as f:
            if "Final estimate" not in f.read():
                return None
        return chunk_losses(log)

    base = {(r["class"], r["calib"]): r for r in rows if r["origin"] == "llamacpp"}
    src = next(r for r in rows if r["origin"] == "source")
    summary = {"texts": texts, "files": [], "pooled": []}
    for r in rows:
        if r["origin"] in ("llamacpp", "source"):
            continue
        b = base[(r["class"], r["calib"])]
        entry = {k: r[k] for k in ("name", "class", "calib", "origin", "seed")}
        entry.update(mib=r["mib"], size_ratio=r["mib"] / b["mib"], texts={})
        for x in texts:
            lb, lo = losses(b["name"], x), losses(r["name"], x)
            if lb is None or lo is None:
                continue
            n = min(len(lb), len(lo))
            d = [o - q for q, o in zip(lb[:n], lo[:n])]
            mean, a, z = t_interval(d)
            entry["texts"][x] = {
                "windows": n,
                "ppl": math.exp(sum(lo[:n]) / n),
                "ppl_llamacpp": math.exp(sum(lb[:n]) / n),
                "diff": d,
                "mean": mean,
                "ci95": [a, z],
                "better_share": sum(v < 0 for v in d) / n,
            }
        summary["files"].append(entry)

    print(
        "Each file against llama-quantize's file of the same class and calibration text "
        "(Δ: nats per token, negative is better; [95% t interval over windows]).\n"
    )
    print(
        "| class | calibration | file | MiB | size vs llama.cpp |"
        + "".join(f" {x}: ppl, Δ |" for x in texts)
    )
    print("|---|---|---|---|---|" + "---|" * len(texts))
    for (cls, cal), b in base.items():
        cells = []
        for x in texts:
            lb = losses(b["name"], x)
            cells.append(
                f" {math.exp(sum(lb) / len(lb)):.2f} ({len(lb)} windows) |"
                if lb
                else " – |"
            )
        print(
            f"| {cls} | {cal} | llama.cpp + imatrix | {b['mib']:.1f} | 1 |"
            + "".join(cells)
        )
        for e in summary["files"]:
            if (e["class"], e["calib"]) != (cls, cal):
                continue
            label = {
                "plain": "ours, GPTQ",
                "rotated": f"ours, GPTQ, R1+R2 seed {e['seed']}, size-matched",
                "rotated-natural": f"ours, GPTQ, R1+R2 seed {e['seed']}, the mix's own types",
                "rotated-head5": f"ours, GPTQ, R1+R2 seed {e['seed']}, size-matched keeping the head at 5 bits",
            }[e["origin"]]
            cells = []
            for x in texts:
                t = e["texts"].get(x)
                cells.append(
                    f" {t['ppl']:.2f}, {t['mean']:+.4f} [{t['ci95'][0]:+.4f}, {t['ci95'][1]:+.4f}] |"
                    if t
                    else " – |"
                )
            print(
                f"| {cls} | {cal} | {label} | {e['mib']:.1f} | {e['size_ratio']:.3f} |"
                + "".join(cells)
            )

    print(
        "\nPooled over calibration texts (and rotation seeds): mean per-window Δ against "
        "llama.cpp [95% t over windows]; range: the least and greatest of the separate means; "
        "recovered: the share of llama.cpp's quantisation loss (its file against the F32 "
        "source) that ours removes.\n"
    )
    print(
        "| class | ours | size vs llama.cpp |"
        + "".join(f" {x}: Δ [95%], range, recovered |" for x in texts)
    )
    print("|---|---|---|" + "---|" * len(texts))
    for cls in dict.fromkeys(c for c, _ in base):
        for origin in ("plain", "rotated"):
            group = [
                e
                for e in summary["files"]
                if e["class"] == cls and e["origin"] == origin
            ]
            if not group:
                continue
            ratio = [e["size_ratio"] for e in group]
            pooled = {
                "class": cls,
                "origin": origin,
                "files": len(group),
                "size_ratio": [min(ratio), max(ratio)],
                "texts": {},
            }
            cells = []
            for x in texts:
                ds = [e["texts"][x]["diff"] for e in group if x in e["texts"]]
                if len(ds) != len(group):
                    cells.append(" – |")
                    continue
                n = min(map(len, ds))
                avg = [sum(d[i] for d in ds) / len(ds) for i in range(n)]
                mean, a, z = t_interval(avg)
                means = [e["texts"][x]["mean"] for e in group]
                # The quantisation loss of llama.cpp's files on this text, against the source.
                ls = losses(src["name"], x)
                gaps = []
                for e in group:
                    lb = losses(base[(cls, e["calib"])]["name"], x)
                    if ls is None or lb is None:
                        break
                    m = min(len(lb), len(ls))
                    gaps.append(sum(q - s for q, s in zip(lb[:m], ls[:m])) / m)
                gap = sum(gaps) / len(gaps) if len(gaps) == len(group) else float("nan")
                rec = -mean / gap if gap > 0 else float("nan")
                pooled["texts"][x] = {
                    "mean": mean,
                    "ci95": [a, z],
                    "range": [min(means), max(means)],
                    "llamacpp_loss_vs_source": gap,
                    "recovered": rec,
                }
                cells.append(
                    f" {mean:+.4f} [{a:+.4f}, {z:+.4f}], {min(means):+.3f} to {max(means):+.3f}, {rec:+.0%} |"
                )
            summary["pooled"].append(pooled)
            print(
                f"| {cls} | {origin} ({len(group)} files) | {min(ratio):.3f}-{max(ratio):.3f} |"
                + "".join(cells)
            )
    for e in summary["files"]:
        for t in e["texts"].values():
            del t["diff"]
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    if not saved:
        found = {f"{r['name']}--{x}": losses(r["name"], x) for r in rows for x in texts}
        with open(saved_path, "w", encoding="utf-8") as f:
            json.dump(
                {
                    k: [round(v, 6) for v in w]
                    for k, w in found.items()
                    if w is not None
                },
                f,
            )


if __name__ == "__main__":
    main()

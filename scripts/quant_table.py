"""Markdown tables of docs/RESULTS.md's quantisation grid from the JSON report of
`orthoformer quantize --table ... --json`: one table per text, a row per width and method, a
column per rotation set (none, fold when the grid has it, R1, R1-R4), each cell the mean
perplexity over the rotation seeds with its range [least, greatest] when there are several.

Usage: python3 scripts/quant_table.py REPORT.json
"""
import json
import sys


def rot_key(r):
    if not (r["residual"] != "none" or r["heads"] or r["qk"] or r["down"]):
        return "none"
    if r["residual"] == "identity" and not (r["heads"] or r["qk"] or r["down"]):
        return "fold"  # norms folded as for R1, nothing rotated (`--rotate identity`)
    if r["heads"] and r["qk"] and r["down"]:
        return "R1-R4"
    return "R1"


def width(row):
    w, a, kv = row["wbits"], row["abits"], row["kv_bits"]
    if w >= 16 and a >= 16 and kv >= 16:
        return "FP"
    s = f"W{w}A{a}"
    return s + (f"KV{kv}" if kv < 16 else "")


def cell(row, t):
    m, lo, hi = row["ppl"][t], row["ppl_min"][t], row["ppl_max"][t]
    if len(row["by_seed"]) > 1:
        return f"{m:,.2f} [{lo:,.2f}, {hi:,.2f}]"
    return f"{m:,.2f}"


def main():
    rep = json.load(open(sys.argv[1]))
    cols = ["none", "R1", "R1-R4"]
    if any(rot_key(row["rotations"]) == "fold" for row in rep["rows"]):
        cols.insert(1, "fold")
    names = {"rtn": "RTN", "rtn-clip": "RTN+clip", "gptq": "GPTQ"}
    for t, text in enumerate(rep["data"]):
        print(f"\n{text} ({rep['tokens_per_text']} tokens, window {rep['context']}):\n")
        print("| config | " + " | ".join(cols) + " |")
        print("|---|" + "---|" * len(cols))
        rows = {}
        order = []
        for row in rep["rows"]:
            w = width(row)
            key = (w, "" if w == "FP" else names.get(row["method"], row["method"]))
            if key not in rows:
                rows[key] = {}
                order.append(key)
            rows[key][rot_key(row["rotations"])] = cell(row, t)
        for key in order:
            label = key[0] + (f" {key[1]}" if key[1] else "")
            print(f"| {label} | " + " | ".join(rows[key].get(c, "-") for c in cols) + " |")
    print(
        f"\nseeds {rep['seeds']}; activation clip {rep['act_clip']}, "
        f"{'asymmetric' if rep['act_asym'] else 'symmetric'} activations; "
        f"{'asymmetric' if rep.get('weight_asym') else 'symmetric'} weights, group "
        f"{rep['group'] or 'per channel'}; GPTQ damp {rep.get('gptq_damp')}, act-order "
        f"{rep.get('gptq_act_order')}; {rep['calibration_tokens']} calibration tokens"
    )


if __name__ == "__main__":
    main()

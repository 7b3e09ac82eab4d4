"""The table of ``scripts/lora_rotated.sh``: for each base (plain, hadamard, random, r1r2) and
mode (full, lora at each rank), the final validation loss averaged over seeds and its paired
difference against the plain base at the same seed (95% Student t interval over seeds; one
seed: no interval), and the effective rank of the learned updates.

    python scripts/lora_table.py runs/lora
"""

from __future__ import annotations

import json
import math
import pathlib
import re
import statistics
import sys

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
BASES = ("plain", "hadamard", "random", "r1r2")


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    runs: dict[tuple[str, str], dict[int, dict]] = {}
    for f in sorted(out.glob("*-s*.json")):
        m = re.fullmatch(r"(\w+)-(full|lora\d+)-s(\d+)\.json", f.name)
        if m:
            runs.setdefault((m[1], m[2]), {})[int(m[3])] = json.loads(f.read_text())[0]
    modes = sorted(
        {mode for _, mode in runs}, key=lambda s: (s != "full", int(s[4:] or 0) if s != "full" else 0)
    )
    print("| base | mode | seeds | val loss after (mean) | against plain [95%] | update eff. rank | rank90 |")
    print("|---|---|---:|---:|---|---:|---:|")
    for mode in modes:
        for base in BASES:
            got = runs.get((base, mode), {})
            if not got:
                continue
            loss = statistics.mean(r["val_loss_after"] for r in got.values())
            plain = runs.get(("plain", mode), {})
            diffs = [got[s]["val_loss_after"] - plain[s]["val_loss_after"] for s in got if s in plain]
            if base == "plain" or not diffs:
                vs = "-"
            elif len(diffs) == 1:
                vs = f"{diffs[0]:+.4f} (one seed)"
            else:
                m, h = (
                    statistics.mean(diffs),
                    T95[len(diffs) - 1] * statistics.stdev(diffs) / math.sqrt(len(diffs)),
                )
                vs = f"{m:+.4f} [{m - h:+.4f}, {m + h:+.4f}]"
            ranks = [r["update_rank"] for r in got.values() if "update_rank" in r]
            er = statistics.mean(r["effective_rank"] for r in ranks) if ranks else float("nan")
            r90 = statistics.mean(r["rank90"] for r in ranks) if ranks else float("nan")
            print(f"| {base} | {mode} | {len(got)} | {loss:.4f} | {vs} | {er:.1f} | {r90:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

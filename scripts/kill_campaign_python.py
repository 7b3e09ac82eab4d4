"""SIGKILL campaign over the Python trainer's checkpoints (docs/RELIABILITY.md, section 9).

``python -m orthoformer.train`` checkpoints after every step (``--eval-every 1``, a model of
about 10 MB of weights and moments), in one process on the embedded TinyShakespeare and as two
gloo ranks (``torchrun --nproc_per_node=2``) on a token folder; the whole process group is
killed with SIGKILL at a seeded moment: a third of the kills at a random time, a third as soon
as a write has staged a file, a third as soon as a commit record appears. After each kill the
folder must be loadable (``orthoformer eval --checkpoint``, whose first open recovers it),
hold no temporary file, pass ``sha256sum -c SHA256SUMS``, and resume (two more steps, in the
same mode). Bounded in count (``--kills`` per mode) and time (``--budget-s``); prints one line
per kill and a summary, exit status 1 when any check failed.

    python scripts/kill_campaign_python.py --kills 10 --seed 52
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = ["--preset", "shakespeare-char", "--context", "32", "--batch", "4", "--lr", "1e-3"]
MODEL += ["--warmup", "0", "--eval-every", "1", "--eval-iters", "1", "--device", "cpu"]
TEMPS = (".checkpoint.new.", ".checkpoint.commit")


def trainer(mode: str) -> list[str]:
    """The command that starts the trainer in ``mode`` (``one`` or ``ddp``)."""
    if mode == "one":
        return [sys.executable, "-m", "orthoformer.train"]
    run = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    return [*run, "-m", "orthoformer.train"]


def env() -> dict[str, str]:
    # One thread per process: the machine's cores are shared, and the kill lands on I/O anyway.
    return dict(os.environ, OMP_NUM_THREADS="1")


def token_folder(work: pathlib.Path) -> pathlib.Path:
    """TinyShakespeare's bytes as ids (vocabulary 256), the DDP runs' data."""
    import numpy as np

    from orthoformer.tokens import write_meta

    folder = work / "tokens"
    folder.mkdir()
    ids = np.frombuffer((ROOT / "data" / "tinyshakespeare.txt").read_bytes(), dtype=np.uint8)
    cut = len(ids) * 9 // 10
    ids[:cut].astype("<u2").tofile(folder / "train.bin")
    ids[cut:].astype("<u2").tofile(folder / "val.bin")
    write_meta(folder, 256, {"kind": "ids"})
    return folder


def descendants(pid: int) -> list[int]:
    """The children of ``pid``, and theirs (from /proc)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tasks:
        try:
            kids = pathlib.Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
        except OSError:
            continue
        for kid in map(int, kids):
            out += [kid, *descendants(kid)]
    return out


def kill_one(mode: str, out: pathlib.Path, data: list[str], how: str, rng: random.Random) -> dict:
    """Starts a run into ``out``, kills its process group with SIGKILL (``how``: ``random``,
    ``staged``, ``commit``) and says what the folder held at that moment."""
    cmd = [*trainer(mode), *MODEL, *data, "--steps", "100000", "--out", str(out)]
    p = subprocess.Popen(
        cmd, env=env(), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    started = time.monotonic()
    # Wait for the first checkpoint, then for the moment asked for (or a deadline).
    while not (out / "state.json").exists() and p.poll() is None and time.monotonic() - started < 120:
        time.sleep(0.01)
    delay = rng.uniform(0.0, 3.0)
    deadline = time.monotonic() + (delay if how == "random" else 10.0)
    seen: list[str] = []
    while time.monotonic() < deadline and p.poll() is None:
        if how != "random":
            try:
                seen = [n for n in os.listdir(out) if n.startswith(TEMPS)]
            except FileNotFoundError:
                seen = []
            # A staged file of the write, or its commit record renamed into place (the commit
            # point: `.checkpoint.commit.tmp` is still before it).
            if how == "staged" and any(n.startswith(".checkpoint.new.") for n in seen):
                break
            if how == "commit" and ".checkpoint.commit" in seen:
                break
    # Every process at once: torchrun starts each rank in a session of its own, so killing
    # torchrun's process group alone would leave the ranks writing.
    for pid in [p.pid, *descendants(p.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait()
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    left = sorted(n for n in os.listdir(out) if n.startswith(TEMPS)) if out.exists() else []
    committed = any(n.startswith(".checkpoint.commit") and not n.endswith(".tmp") for n in left)
    if not (out / "state.json").exists() and not left:
        where = "before the first checkpoint"
    elif committed:
        where = "in a committed write"
    elif left:
        where = "in an uncommitted write"
    else:
        where = "between writes"
    return {"where": where, "left": left, "secs": round(time.monotonic() - started, 1), "stderr": err}


def check(mode: str, out: pathlib.Path, binary: str) -> tuple[list[str], int]:
    """The folder after a kill: loads (recovered), no temporary file, checksums, resumes.
    Returns the failures and the step it held."""
    bad: list[str] = []
    ev = subprocess.run(
        [binary, "eval", "--checkpoint", str(out), "--eval-iters", "1", "--json"],
        capture_output=True,
        text=True,
        env=env(),
    )
    if ev.returncode != 0:
        return [f"eval exited {ev.returncode}: {ev.stderr.strip()[-300:]}"], -1
    left = [n for n in os.listdir(out) if n.startswith(TEMPS) or n.endswith(".tmp")]
    if left:
        bad.append(f"temporary files after recovery: {left}")
    sums = subprocess.run(
        ["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True
    )
    if sums.returncode != 0:
        bad.append(f"sha256sum -c: {(sums.stdout + sums.stderr).strip()[-300:]}")
    step = json.loads((out / "state.json").read_text())["step"]
    res = subprocess.run(
        [*trainer(mode), "--out", str(out), "--resume", "--steps", str(step + 2)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=300,
    )
    if res.returncode != 0:
        bad.append(f"resume exited {res.returncode}: {res.stderr.strip()[-300:]}")
    else:
        after = json.loads((out / "state.json").read_text())["step"]
        if after != step + 2:
            bad.append(f"resumed to step {after}, not {step + 2}")
    return bad, step


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=10, help="kills per mode [default: 10]")
    p.add_argument("--seed", type=int, default=52)
    p.add_argument("--modes", default="one,ddp", help="one, ddp or both [default: one,ddp]")
    p.add_argument("--budget-s", type=float, default=1500.0, help="stop starting kills after this")
    p.add_argument(
        "--bin", default=os.environ.get("ORTHOFORMER_BIN", str(ROOT / "target/release/orthoformer"))
    )
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    args = p.parse_args()
    rng = random.Random(args.seed)
    work = pathlib.Path(tempfile.mkdtemp(prefix="kill-py-"))
    tokens = token_folder(work)
    start, results, failures = time.monotonic(), [], 0
    for mode in args.modes.split(","):
        data = [] if mode == "one" else ["--data-dir", str(tokens)]
        for i in range(args.kills):
            if time.monotonic() - start > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s spent: stopping", flush=True)
                break
            how = ("random", "staged", "commit")[i % 3]
            out = work / f"{mode}-{i}"
            k = kill_one(mode, out, data, how, rng)
            bad, step = (
                check(mode, out, args.bin) if k["where"] != "before the first checkpoint" else ([], -1)
            )
            failures += bool(bad)
            results.append({"mode": mode, "how": how, **k, "step": step, "bad": bad})
            status = "ok" if not bad else "FAILED: " + "; ".join(bad)
            print(
                f"{mode} #{i} kill {how:6} after {k['secs']:5.1f} s, {k['where']}, step {step}: {status}",
                flush=True,
            )
            shutil.rmtree(out, ignore_errors=True)
    print(f"\n{len(results)} kills in {time.monotonic() - start:.0f} s, {failures} failed")
    for mode in args.modes.split(","):
        rows = [r for r in results if r["mode"] == mode]
        kinds: dict[str, int] = {}
        for r in rows:
            kinds[r["where"]] = kinds.get(r["where"], 0) + 1
        print(f"  {mode}: {len(rows)} kills: " + ", ".join(f"{n} {w}" for w, n in sorted(kinds.items())))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

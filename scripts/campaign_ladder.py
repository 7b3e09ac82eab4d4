"""An adversarial campaign against the size ladder (`orthoformer ladder` and
`python -m orthoformer.ladder`): hostile plans, data folders, output folders and resumes.

Every case states what a demanding user expects: a refusal (exit 2, one line on stderr naming
what was wrong, no traceback or panic) or a run (exit 0). A case is handled when the engine
does that ("either": a run or a one-line refusal), wrong otherwise; the table and the counts go into docs/RELIABILITY.md.

    python scripts/campaign_ladder.py --bin target/release/orthoformer --data data/gcide-bpe8k
    python scripts/campaign_ladder.py ... --engine python   # the PyTorch engine

The data folder is only read (its files are linked into hostile copies, never written).
"""

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TIMEOUT_S = 120


def base_plan(data: str) -> dict:
    """A valid plan small enough to take a step in seconds."""
    return {
        "format": "orthoformer-ladder",
        "version": 1,
        "data": data,
        "variants": ["softmax", "orthogonal"],
        "seeds": [0],
        "rungs": [
            {"name": "a", "layers": 1, "heads": 2, "width": 16},
            {"name": "b", "layers": 1, "heads": 2, "width": 32},
        ],
        "context": 32,
        "batch": 4,
        "tokens_per_param": 1,
        "lrs": [1e-3, 2e-3, 4e-3, 8e-3],
        "curve_points": 2,
        "eval_batches": 1,
        "eval_tokens": 2048,
    }


def plan_cases() -> list:
    """(name, change to the plan, expected) with expected "refuse" or "run"."""
    rung = {"name": "c", "layers": 1, "heads": 2, "width": 48}
    cases = [
        ("valid plan", {}, "run"),
        ("format wrong", {"format": "nanogpt"}, "refuse"),
        ("version 2", {"version": 2}, "refuse"),
        ("version 1.0", {"version": 1.0}, "refuse"),
        ("unknown field", {"lerning_rates": [1]}, "refuse"),
        ("data missing", {"data": "/nonexistent/tokens"}, "refuse"),
        ("data is a file", {"data": "/etc/hostname"}, "refuse"),
        ("transfer missing", {"transfer": "/nonexistent.txt"}, "refuse"),
        ("transfer is /dev/zero", {"transfer": "/dev/zero"}, "refuse"),
        ("transfer binary", {"transfer": "/bin/true"}, "refuse"),
        ("architecture llama (CPU)", {"architecture": "llama"}, "refuse-cpu"),
        ("architecture unknown", {"architecture": "mamba"}, "refuse"),
        ("position unknown", {"position": "alibi"}, "refuse"),
        ("variants without softmax", {"variants": ["orthogonal"]}, "refuse"),
        ("variants duplicate", {"variants": ["softmax", "softmax"]}, "refuse"),
        ("variants unknown", {"variants": ["softmax", "mamba"]}, "refuse"),
        ("variants empty", {"variants": []}, "refuse"),
        ("seeds empty", {"seeds": []}, "refuse"),
        ("seeds duplicate", {"seeds": [0, 0]}, "refuse"),
        ("seed negative", {"seeds": [-1]}, "refuse"),
        ("seed float", {"seeds": [0.5]}, "refuse"),
        ("seed 2^64", {"seeds": [18446744073709551616]}, "refuse"),
        ("seeds a million", {"seeds": list(range(1_000_000))}, "refuse"),
        ("rungs one", {"rungs": [{"name": "a", "layers": 1, "heads": 2, "width": 16}]}, "refuse"),
        ("rungs unsorted", {"rungs": [rung, {"name": "a", "layers": 1, "heads": 2, "width": 16}]}, "refuse"),
        (
            "rung names duplicate",
            {
                "rungs": [
                    {"name": "a", "layers": 1, "heads": 2, "width": 16},
                    {"name": "a", "layers": 1, "heads": 2, "width": 32},
                ]
            },
            "refuse",
        ),
        (
            "rung name with slash",
            {"rungs": [{"name": "../x", "layers": 1, "heads": 2, "width": 16}, rung]},
            "refuse",
        ),
        ("rung name empty", {"rungs": [{"name": "", "layers": 1, "heads": 2, "width": 16}, rung]}, "refuse"),
        ("rung heads 0", {"rungs": [{"name": "a", "layers": 1, "heads": 0, "width": 16}, rung]}, "refuse"),
        ("rung layers 0", {"rungs": [{"name": "a", "layers": 0, "heads": 2, "width": 16}, rung]}, "refuse"),
        (
            "rung width not divisible",
            {"rungs": [{"name": "a", "layers": 1, "heads": 3, "width": 16}, rung]},
            "refuse",
        ),
        (
            "rung width 2^40",
            {
                "rungs": [
                    {"name": "a", "layers": 1, "heads": 2, "width": 16},
                    {"name": "z", "layers": 1, "heads": 2, "width": 2**40},
                ]
            },
            "refuse",
        ),
        (
            "rung layers 10^9",
            {
                "rungs": [
                    {"name": "a", "layers": 1, "heads": 2, "width": 16},
                    {"name": "z", "layers": 10**9, "heads": 2, "width": 16},
                ]
            },
            "refuse",
        ),
        (
            "rung ffn 0",
            {"rungs": [{"name": "a", "layers": 1, "heads": 2, "width": 16, "ffn": 0}, rung]},
            "refuse",
        ),
        (
            "rung unknown field",
            {"rungs": [{"name": "a", "layers": 1, "heads": 2, "width": 16, "hidden": 3}, rung]},
            "refuse",
        ),
        ("context 0", {"context": 0}, "refuse"),
        ("context 2^40", {"context": 2**40}, "refuse"),
        ("context longer than val", {"context": 10**8}, "refuse"),
        ("batch 0", {"batch": 0}, "refuse"),
        ("batch 2^40", {"batch": 2**40}, "refuse"),
        ("tokens_per_param 0", {"tokens_per_param": 0}, "refuse"),
        ("tokens_per_param negative", {"tokens_per_param": -1}, "refuse"),
        ("tokens_per_param 1e300", {"tokens_per_param": 1e300}, "refuse"),
        ("tokens_per_param string", {"tokens_per_param": "20"}, "refuse"),
        ("lrs three", {"lrs": [1e-3, 2e-3, 4e-3]}, "refuse"),
        ("lrs decreasing", {"lrs": [8e-3, 4e-3, 2e-3, 1e-3]}, "refuse"),
        ("lrs with zero", {"lrs": [0, 1e-3, 2e-3, 4e-3]}, "refuse"),
        ("lrs negative", {"lrs": [-1e-3, 1e-3, 2e-3, 4e-3]}, "refuse"),
        ("lrs 1e300", {"lrs": [1e-3, 2e-3, 4e-3, 1e300]}, "refuse"),
        ("extend negative", {"extend": -1}, "refuse"),
        ("extend 10^9", {"extend": 10**9}, "refuse"),
        ("heldout_fraction 0", {"heldout_fraction": 0}, "refuse"),
        ("heldout_fraction 1", {"heldout_fraction": 1}, "refuse"),
        ("warmup_fraction 2", {"warmup_fraction": 2}, "refuse"),
        ("min_lr_ratio 2", {"min_lr_ratio": 2}, "refuse"),
        ("weight_decay negative", {"weight_decay": -0.1}, "refuse"),
        ("beta2 1", {"beta2": 1}, "refuse"),
        ("grad_clip negative", {"grad_clip": -1}, "refuse"),
        ("curve_points 0", {"curve_points": 0}, "refuse"),
        ("curve_points 10^9", {"curve_points": 10**9}, "refuse"),
        ("eval_batches 0", {"eval_batches": 0}, "refuse"),
        ("eval_tokens 0", {"eval_tokens": 0}, "refuse"),
        ("eval_tokens 2^62", {"eval_tokens": 2**62}, "run"),
    ]
    return cases


def run(cmd: list, cwd: Path) -> tuple:
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", "", ""


def judge(expected: str, rc, err: str) -> str:
    """'' when handled, else why not."""
    if rc == "timeout":
        return f"hung past {TIMEOUT_S} s"
    if "panicked" in err or "Traceback" in err or (isinstance(rc, int) and rc < 0):
        return f"crash (rc {rc}): {err.strip().splitlines()[-1] if err.strip() else ''}"
    if expected == "either" and rc in (0, 2):
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        return "" if rc == 0 or len(lines) == 1 else f"{len(lines)} lines on stderr"
    if expected == "run":
        return "" if rc == 0 else f"refused a valid plan (rc {rc}): {err.strip()[:160]}"
    if rc == 0:
        return "accepted (exit 0)"
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    if rc != 2:
        return f"exit {rc}, not 2: {err.strip()[:160]}"
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr"
    return ""


def engine_cmd(engine: str, binary: str) -> list:
    if engine == "cpu":
        return [binary, "ladder"]
    return [sys.executable, "-m", "orthoformer.ladder"]


def hostile_folders(work: Path, data: Path) -> list:
    """(name, data folder, expected): copies of the token folder with one thing wrong."""
    out = []

    def copy_with(name: str, change) -> Path:
        d = work / "data" / name
        d.mkdir(parents=True)
        for f in data.iterdir():
            if f.is_file():
                os.link(f, d / f.name) if f.stat().st_dev == d.stat().st_dev else shutil.copy(f, d / f.name)
        change(d)
        return d

    def replace(d: Path, name: str, content: bytes) -> None:
        (d / name).unlink(missing_ok=True)
        (d / name).write_bytes(content)

    out.append(("val.bin missing", copy_with("noval", lambda d: (d / "val.bin").unlink()), "refuse"))
    out.append(("train.bin empty", copy_with("empty", lambda d: replace(d, "train.bin", b"")), "refuse"))
    out.append(
        (
            "train.bin odd length",
            copy_with("odd", lambda d: replace(d, "train.bin", b"\x01\x00\x00")),
            "refuse",
        )
    )
    big = (10**9).to_bytes(4, "little") * 4096
    out.append(("token id beyond vocab", copy_with("beyond", lambda d: replace(d, "val.bin", big)), "refuse"))
    out.append(
        ("tokenizer.json garbage", copy_with("tok", lambda d: replace(d, "tokenizer.json", b"{")), "refuse")
    )
    out.append(("meta.json garbage", copy_with("meta", lambda d: replace(d, "meta.json", b"[1,2")), "refuse"))

    def fifo(d: Path) -> None:
        (d / "val.bin").unlink()
        os.mkfifo(d / "val.bin")

    out.append(("val.bin a FIFO", copy_with("fifo", fifo), "refuse"))

    def link(d: Path) -> None:
        (d / "val.bin").unlink()
        (d / "val.bin").symlink_to("/dev/zero")

    out.append(("val.bin a link to /dev/zero", copy_with("link", link), "refuse"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/orthoformer")
    ap.add_argument("--data", default="data/gcide-bpe8k")
    ap.add_argument("--engine", choices=["cpu", "python"], default="cpu")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    data = Path(args.data).resolve()
    cmd = engine_cmd(args.engine, str(Path(args.bin).resolve()))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)

        def attempt(name: str, plan, extra: list, expected: str, out=None) -> None:
            if expected == "refuse-cpu":
                expected = "refuse" if args.engine == "cpu" else "run"
            out = out or work / f"out-{len(results)}"
            argv = list(cmd)
            if plan is not None:
                p = work / f"plan-{len(results)}.json"
                p.write_text(json.dumps(plan) if not isinstance(plan, str) else plan)
                argv += ["--plan", str(p)]
            argv += ["--out", str(out), *extra]
            rc, _, err = run(argv, work)
            results.append({"case": name, "expected": expected, "rc": rc, "wrong": judge(expected, rc, err)})
            print(
                f"{'ok   ' if not results[-1]['wrong'] else 'WRONG'} {name}: {results[-1]['wrong']}",
                flush=True,
            )

        stop = ["--stop-at", "1"]
        for name, change, expected in plan_cases():
            plan = copy.deepcopy(base_plan(str(data)))
            plan.update(change)
            attempt(name, plan, stop, expected)
        attempt("plan not JSON", "{not json", stop, "refuse")
        attempt("plan is JSON null", "null", stop, "refuse")
        attempt("plan 3 MB of nesting", "[" * 3_000_000, stop, "refuse")
        for name, folder, expected in hostile_folders(work, data):
            plan = base_plan(str(folder))
            attempt(name, plan, stop, expected)

        good = base_plan(str(data))
        # Output folders.
        f = work / "a-file"
        f.write_text("x")
        attempt("--out an existing file", good, stop, "refuse", out=f)
        foreign = work / "foreign"
        foreign.mkdir()
        (foreign / "thesis.tex").write_text("precious")
        attempt("--out a foreign non-empty folder", good, stop, "refuse", out=foreign)
        attempt("--out inside the data folder", good, stop, "refuse", out=data / "ladder-out")
        attempt("--jobs 0", good, [*stop, "--jobs", "0"], "refuse")
        # More jobs than runs: training every run at once or a one-line cap are both right.
        attempt("--jobs 10^6", good, [*stop, "--jobs", "1000000"], "either")
        attempt("--stop-at 0", good, ["--stop-at", "0"], "refuse")
        attempt("--resume without a ladder", None, ["--resume"], "refuse")
        attempt("--report-only without a ladder", None, ["--report-only"], "refuse")
        # Resumes of a started ladder with one thing changed.
        started = work / "started"
        attempt("start for the resume cases", good, stop, "run", out=started)
        for name, edit in [
            ("resume: ladder.json edited", lambda d: _edit_json(d / "ladder.json", "context", 64)),
            ("resume: ladder.json truncated", lambda d: _truncate(d / "ladder.json")),
            ("resume: ladder.json a FIFO", lambda d: _fifo(d / "ladder.json")),
            (
                "resume: data changed",
                lambda d: _edit_json(d / "ladder.json", "data", str(work / "data" / "odd")),
            ),
        ]:
            target = work / f"copy-{len(results)}"
            if not started.is_dir():
                results.append(
                    {"case": name, "expected": "refuse", "rc": None, "wrong": "not run: no ladder started"}
                )
                continue
            shutil.copytree(started, target, symlinks=True)
            edit(target)
            attempt(name, None, ["--resume", *stop], "refuse", out=target)
        attempt("resume: --plan the same", good, ["--resume", *stop], "run", out=started)
        other = dict(good, context=64)
        attempt("resume: --plan another", other, ["--resume", *stop], "refuse", out=started)
        attempt("resume: clean", None, ["--resume", "--stop-at", "2"], "run", out=started)

    wrong = [r for r in results if r["wrong"]]
    print(
        f"{len(results)} cases, {len(results) - len(wrong)} handled, {len(wrong)} not ({args.engine} engine)"
    )
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


def _edit_json(path: Path, key: str, value) -> None:
    d = json.loads(path.read_text())
    d[key] = value
    path.write_text(json.dumps(d))


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _truncate(path: Path) -> None:
    path.write_text(path.read_text()[:40])


if __name__ == "__main__":
    sys.exit(main())

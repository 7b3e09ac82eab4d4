"""``python -m orthoformer.interpolate``: the loss along the straight line between two
Llama-style models' weights, ``θ(α) = (1 − α)·θ_A + α·θ_B``, on the last ``--tokens`` tokens
of a text, and its barrier: the largest excess of ``L(θ(α))`` over the line between the two
ends' losses. Two models trained from different seeds have a high barrier; aligning B to A
first (``orthoformer align --weights``, which folds the RMSNorm weights, so interpolate A's
folded form, ``align --weights --model A --model-b A``, against the aligned B) shows how much
of it their symmetries explain.

Both folders are read as :class:`~orthoformer.torch.llama.Llama` (softmax attention); they
must hold the same tensors of the same shapes (tying included), or they are refused by name.
Prints a table, or with ``--json`` one JSON object.
"""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Sequence
from typing import Any, Optional

from .text_windows import folder_windows
from .validate import ArgumentParser, InputError, input_file, int_flag, one_line


def parser() -> ArgumentParser:
    """The flags of ``python -m orthoformer.interpolate``."""
    p = ArgumentParser(prog="python -m orthoformer.interpolate", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--model", required=True, help="model A: a Hugging Face Llama folder (its tokenizer is used)"
    )
    p.add_argument("--model-b", required=True, help="model B: a folder of the same shapes")
    p.add_argument("--data", required=True, help="the text scored (UTF-8)")
    p.add_argument(
        "--tokens", type=int_flag(lo=2), default=16384, help="last tokens of --data scored (default 16384)"
    )
    p.add_argument("--context", type=int_flag(lo=2), default=128, help="window (default 128)")
    p.add_argument(
        "--points", type=int_flag(lo=2, hi=1001), default=11, help="values of α from 0 to 1 (default 11)"
    )
    p.add_argument("--batch", type=int_flag(lo=1), default=16, help="windows per forward pass (default 16)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    return p


def _model(folder: pathlib.Path, flag: str) -> Any:
    from .torch.llama import Llama

    if not folder.is_dir():
        raise InputError(f"{flag} {folder}: is not a folder: pass a Hugging Face Llama folder")
    return Llama.from_hf(folder, attention="softmax").eval()


# The parts of tokenizer.json that decide which ids a text becomes.
_TOKENIZER_PARTS = ("model", "added_tokens", "normalizer", "pre_tokenizer")


def check_comparable(fa: pathlib.Path, a: Any, fb: pathlib.Path, b: Any) -> None:
    """Refuses two models the path between them would not mean anything for, naming the first
    field that differs: every configuration field (the path runs under ``a``'s configuration,
    so a model ``b`` with another ``rope_theta`` or ``rms_norm_eps`` would be scored as a
    different model) and the tokenizer that turns the text into ids."""
    import dataclasses

    ca, cb = dataclasses.asdict(a.config), dataclasses.asdict(b.config)
    for k, va in ca.items():
        if cb.get(k) != va:
            raise InputError(
                f"--model-b {fb}: its {k} is {cb.get(k)!r} where --model has {va!r}: both ends "
                "of the path run under one configuration, so the two models must share it"
            )
    ta, tb = (_tokenizer_json(f, flag) for f, flag in ((fa, "--model"), (fb, "--model-b")))
    for part in _TOKENIZER_PARTS:
        if ta.get(part) != tb.get(part):
            raise InputError(
                f"--model-b {fb}: its tokenizer.json's {part} differs from --model's: both "
                "models are scored on one tokenization, so they must share the tokenizer"
            )


def _tokenizer_json(folder: pathlib.Path, flag: str) -> dict[str, Any]:
    path = folder / "tokenizer.json"
    # Regular files only: reading a FIFO there would block forever.
    if not path.is_file():
        what = "missing" if not path.exists() else "a folder" if path.is_dir() else "not a regular file"
        raise InputError(f"{flag} {folder}: tokenizer.json is {what}: give the model's tokenizer.json")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{flag} {folder}: tokenizer.json is unreadable ({type(e).__name__})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{flag} {folder}: tokenizer.json is not a JSON object")
    return doc


def mean_loss(model: Any, windows: Any, batch: int) -> float:
    """Mean next-token loss (nats) over every target of ``windows`` (``(n, T)`` ids)."""
    import torch

    total, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(windows), batch):
            rows = windows[i : i + batch]
            _, loss = model(rows[:, :-1], rows[:, 1:])
            k = rows[:, 1:].numel()
            total += float(loss) * k
            n += k
    return total / n


def path_losses(a: Any, b: Any, windows: Any, points: int, batch: int) -> list[float]:
    """The loss of ``(1 − α)·a + α·b`` at ``points`` evenly spaced ``α`` from 0 to 1 (``a``
    is used as the work model and restored)."""
    import torch

    sa = {k: v.clone() for k, v in a.state_dict().items()}
    sb = b.state_dict()
    out = []
    try:
        for i in range(points):
            t = i / (points - 1)
            a.load_state_dict(
                {k: torch.lerp(sa[k], sb[k], t) if sa[k].is_floating_point() else sa[k] for k in sa}
            )
            out.append(mean_loss(a, windows, batch))
    finally:
        a.load_state_dict(sa)
    return out


def barrier(losses: Sequence[float]) -> tuple[float, float]:
    """The largest excess of ``losses`` over the line between its ends, and its ``α``."""
    n = len(losses)
    excess = [losses[i] - ((1 - i / (n - 1)) * losses[0] + i / (n - 1) * losses[-1]) for i in range(n)]
    i = max(range(n), key=lambda j: excess[j])
    return excess[i], i / (n - 1)


def run(args: Any) -> dict[str, Any]:
    """Reads both models and the text, scores the path; returns the report."""
    fa, fb = pathlib.Path(args.model), pathlib.Path(args.model_b)
    data = input_file("--data", args.data)
    a, b = _model(fa, "--model"), _model(fb, "--model-b")
    shapes_a = {k: tuple(v.shape) for k, v in a.state_dict().items()}
    shapes_b = {k: tuple(v.shape) for k, v in b.state_dict().items()}
    if shapes_a != shapes_b:
        diff = sorted(set(shapes_a.items()) ^ set(shapes_b.items()))
        name = diff[0][0]
        raise InputError(
            f"--model-b {fb}: tensor {name} is {shapes_b.get(name, 'missing')} where --model has "
            f"{shapes_a.get(name, 'none')}: interpolation needs two models of the same shapes "
            "(align both with orthoformer align --weights to fold them alike)"
        )
    check_comparable(fa, a, fb, b)
    windows = folder_windows(fa, data, args.tokens, args.context, tool="interpolate")
    losses = path_losses(a, b, windows, args.points, args.batch)
    height, where = barrier(losses)
    return {
        "model_a": str(fa),
        "model_b": str(fb),
        "data": str(data),
        "tokens": int(windows.numel()),
        "alphas": [i / (args.points - 1) for i in range(args.points)],
        "losses": losses,
        "barrier": height,
        "barrier_alpha": where,
    }


def table(r: dict[str, Any]) -> str:
    """The report as text."""
    lines = [f"loss along (1 - a)·A + a·B on {r['tokens']} tokens of {r['data']}"]
    lines += [f"  a {a:.2f}  {loss:.4f}" for a, loss in zip(r["alphas"], r["losses"])]
    lines.append(f"barrier {r['barrier']:.4f} nats at a {r['barrier_alpha']:.2f}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs interpolate; returns the exit status."""
    try:
        args = parser().parse_args(argv)
        report = run(args)
    except (ValueError, OSError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    print(json.dumps(report) if args.json else table(report))
    return 0


__all__ = ["barrier", "main", "mean_loss", "parser", "path_losses", "run"]


if __name__ == "__main__":
    sys.exit(main())

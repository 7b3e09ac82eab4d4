"""``python -m orthoformer.learn_rotation``: SpinQuant's learned rotations for a pretrained
Llama folder (:mod:`orthoformer.torch.learned_rotation`): R1 and R2 optimised by Cayley
descent on the last ``--calib-tokens`` tokens of ``--data`` for the loss of the model rounded
to ``--bits``, folded into the weights and written as a Hugging Face folder that computes
what the input computes (checked on the unrounded model before anything is written). Quantise
it with ``orthoformer quantize --model OUT --out model.gguf --gguf-type q4_k_m --method gptq``:
the file runs in llama.cpp unchanged. A line of progress per step goes to stderr; the report
is one JSON object on stdout; a bad input is one ``error:`` line and exit 2."""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Sequence
from typing import Any, Optional

from .text_windows import folder_windows
from .validate import ArgumentParser, InputError, input_file, int_flag, number_flag, one_line

#: Files of the input folder copied as they are (those present).
COPIED = (
    "tokenizer.json",
    "tokenizer_config.json",
    "generation_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)
#: The logits of the written model may differ from the input's by this fraction of their
#: largest magnitude: only float rounding separates them; a wrong fold moves them by far more.
TOLERANCE = 1e-3


def parser() -> ArgumentParser:
    """The flags, each type- and range-checked."""
    p = ArgumentParser(
        prog="python -m orthoformer.learn_rotation",
        description="Learn R1/R2 rotations (SpinQuant: Cayley descent on the quantised model's loss) "
        "for a Hugging Face Llama folder and write the rotated folder.",
    )
    p.add_argument(
        "--model", required=True, help="the Hugging Face Llama folder (e.g. from orthoformer rotate)"
    )
    p.add_argument("--data", required=True, help="calibration text; its last --calib-tokens tokens are used")
    p.add_argument("--out", required=True, help="the rotated folder to write (new, or an earlier output)")
    p.add_argument(
        "--calib-tokens", type=int_flag(lo=2), default=4096, help="calibration tokens (default 4096)"
    )
    p.add_argument("--context", type=int_flag(lo=2), default=256, help="tokens per window (default 256)")
    p.add_argument("--steps", type=int_flag(lo=0), default=60, help="Cayley steps (default 60)")
    p.add_argument(
        "--lr", type=number_flag(0.0, lo_open=True), default=1.0, help="Cayley step size (default 1)"
    )
    p.add_argument("--batch", type=int_flag(lo=1), default=4, help="windows per step (default 4)")
    p.add_argument(
        "--bits", type=int_flag(lo=2, hi=8), default=4, help="weight bits of the objective (default 4)"
    )
    p.add_argument("--group", type=int_flag(lo=1), default=32, help="inputs per rounding group (default 32)")
    p.add_argument(
        "--symmetric", action="store_true", help="round on a symmetric grid (Q4_0/Q5_0's) instead of min/max"
    )
    p.add_argument(
        "--holdout",
        type=number_flag(0.0, 1.0, hi_open=True),
        default=0.25,
        help="share of the calibration windows held out of learning, to read overfitting (default 0.25)",
    )
    p.add_argument("--seed", type=int_flag(lo=0), default=0, help="seed of the batch draws (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def _windows(folder: pathlib.Path, data: pathlib.Path, calib: int, context: int) -> Any:
    return folder_windows(folder, data, calib, context, tool="learn_rotation")


def run(args: Any) -> dict[str, Any]:
    """Learns, checks and writes; returns the report."""

    from .outputs import output_folder
    from .torch.learned_rotation import Settings, check_group, folded, learn, rotated
    from .torch.llama_config import LlamaConfig
    from .torch.llama_io import read_folder

    folder, data = pathlib.Path(args.model), input_file("--data", args.data)
    if not folder.is_dir():
        raise InputError(
            f"--model {folder}: is not a folder: pass a Hugging Face Llama folder (from a GGUF: "
            "orthoformer rotate --model F.gguf --rotate-heads --out FOLDER writes one, QuaRot-rotated)"
        )
    copied = [n for n in COPIED if (folder / n).is_file()]
    names = ("config.json", "model.safetensors", *copied)
    with output_folder(
        "--out",
        args.out,
        what="a learned-rotation folder",
        tag="learned-rotation",
        names=names,
        kind="learned-rotation",
        inputs=[("--model", folder), ("--data", data)],
    ) as files:
        hf, tensors = read_folder(folder)
        cfg = LlamaConfig.from_hf_dict(hf)
        if cfg.qkv_bias:
            raise InputError(
                f"--model {folder}: a {cfg.family} model with attention biases, which the rotations "
                "do not fold: pass a bias-free Llama folder"
            )
        why = check_group(cfg, args.group)
        if why:
            raise InputError(why)
        windows = _windows(folder, data, args.calib_tokens, args.context)
        if args.context > cfg.max_position_embeddings:
            raise InputError(f"--context {args.context} exceeds the model's {cfg.max_position_embeddings}")
        s = Settings(
            steps=args.steps,
            lr=args.lr,
            batch=args.batch,
            bits=args.bits,
            group=args.group,
            symmetric=args.symmetric,
            holdout=args.holdout,
            seed=args.seed,
        )
        base = folded(tensors, cfg)

        def progress(step: int, loss: float) -> None:
            if not args.quiet:
                print(f"learn_rotation: step {step}/{s.steps} loss {loss:.4f}", file=sys.stderr, flush=True)

        r1, r2, report = learn(cfg, base, windows, s, progress)
        out = {k: v.float().contiguous() for k, v in rotated(base, r1, r2, cfg).items()}
        check = _check(folder, cfg, out, windows[:1])
        if not check["max_abs_logit_diff"] <= TOLERANCE * check["scale"]:
            raise ValueError(
                f"the rotated model's logits differ from the input's by {check['max_abs_logit_diff']:.3e}: "
                "nothing written (a fold bug; please report it)"
            )
        from safetensors.torch import save_file

        save_file(out, str(files.path("model.safetensors")), {"format": "pt"})
        hf_out = dict(hf, tie_word_embeddings=False)
        for key in ("torch_dtype", "dtype"):
            if key in hf_out:
                hf_out[key] = "float32"
        files.path("config.json").write_text(json.dumps(hf_out, indent=2) + "\n")
        for n in copied:
            files.path(n).write_bytes((folder / n).read_bytes())
        files.commit()
    return {
        "model": str(folder),
        "out": str(args.out),
        "calibration_text": str(data),
        "settings": vars(s),
        **report,
        "max_abs_logit_diff_unrounded": check["max_abs_logit_diff"],
    }


def _check(folder: pathlib.Path, cfg: Any, out: dict, ids: Any) -> dict[str, float]:
    """The input folder's logits against the rotated weights' on ``ids``."""
    import dataclasses

    import torch
    from torch.func import functional_call

    from .torch.llama import Llama, hf_name

    ref = Llama.from_hf(folder).eval()
    mine = Llama(dataclasses.replace(cfg, tie_word_embeddings=False)).eval()
    params = {n: out[hf_name(n)] for n, _ in mine.named_parameters()}
    with torch.no_grad():
        a, _ = ref(ids)
        b, _ = functional_call(mine, params, (ids,))
    return {"max_abs_logit_diff": float((a - b).abs().max()), "scale": max(1.0, float(a.abs().max()))}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs learn_rotation; returns the exit status."""
    try:
        args = parser().parse_args(argv)
        report = run(args)
    except (ValueError, OSError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    print(json.dumps(report))
    return 0


__all__ = ["COPIED", "TOLERANCE", "main", "parser", "run"]


if __name__ == "__main__":
    sys.exit(main())

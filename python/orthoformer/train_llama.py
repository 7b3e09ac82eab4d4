"""``python -m orthoformer.train --arch llama``: the flags read as a Llama (LlamaConfig's
fields), checked before anything is built, and the run opened (:mod:`.torch.llama_run`).
``--width``, ``--context`` and ``--attention`` mean what they mean for the GPT; ``--layers``,
``--heads`` (default: the default preset's), ``--kv-heads``, ``--ffn-width``, ``--rope-theta``,
``--rms-eps`` and ``--head`` are the Llama's own. The GPT's shaping flags (``--preset``,
``--config``, ``--recipe``, ``--position``, ``--temperature``) are refused with a Llama, and
the Llama's with a GPT, each by name."""

from __future__ import annotations

import argparse
import math
import pathlib
import re
from typing import Any

from .train_flags import LLAMA_FLAGS, OPTIM_FLAGS, PRESET
from .validate import InputError

#: The GPT's shaping flags, which mean nothing to a Llama.
GPT_ONLY = [
    ("--preset", "preset"),
    ("--config", "config"),
    ("--recipe", "recipe"),
    ("--position", "position"),
    ("--temperature", "temperature"),
]
#: The flag that sets each LlamaConfig field (for messages and the resume check).
FIELD_FLAGS = {
    "hidden_size": "--width",
    "max_position_embeddings": "--context",
    "attention": "--attention",
    **{field: flag for flag, _, field in LLAMA_FLAGS},
}


def ffn_width(width: int) -> int:
    """The default SwiGLU width: ``8/3 · C`` (three matrices holding a 4x GELU MLP's two
    matrices' parameters, as Llama sizes it), rounded up to a multiple of 64."""
    return 64 * math.ceil(8 * width / 3 / 64)


def check_gpt_flags(args: argparse.Namespace) -> None:
    """A GPT run refuses the Llama's shape flags by name."""
    for flag, key, _ in LLAMA_FLAGS:
        if getattr(args, key) is not None:
            raise InputError(
                f"{flag} shapes a Llama: add --arch llama, or shape the GPT with --preset or --config"
            )


def requested(args: argparse.Namespace) -> dict[str, Any]:
    """The LlamaConfig fields the flags set (only those given)."""
    given = {
        "hidden_size": args.width,
        "max_position_embeddings": args.context,
        "attention": args.attention,
        "num_hidden_layers": args.layers,
        "num_attention_heads": args.heads,
        "num_key_value_heads": args.kv_heads,
        "intermediate_size": args.ffn_width,
        "rope_theta": args.rope_theta,
        "rms_norm_eps": args.rms_eps,
        "tie_word_embeddings": None if args.head is None else args.head == "tied",
    }
    return {k: v for k, v in given.items() if v is not None}


def model_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The Llama the flags ask for (LlamaConfig's fields but the vocabulary, which is the
    data's), defaults filled in and checked; a field's error names its flag."""
    from .torch.llama_config import LlamaConfig

    width = args.width or PRESET["d_model"]
    fields = {
        "hidden_size": width,
        "num_hidden_layers": PRESET["n_layer"],
        "num_attention_heads": PRESET["n_head"],
        "intermediate_size": ffn_width(width),
        "max_position_embeddings": PRESET["context"],
        "attention": PRESET["attention"],
        "frozen_method": PRESET["frozen_method"],
        "frozen_seed": PRESET["frozen_seed"],
        **requested(args),
    }
    if fields["attention"] == "orthogonal-trained":
        raise InputError(
            "--attention orthogonal-trained is the GPT's (trainable W_Q, W_K started at the frozen draw): "
            "a Llama trains softmax or a frozen variant; use --arch gpt or another --attention"
        )
    try:
        LlamaConfig(vocab_size=1, **fields)
    except InputError as e:
        names = "|".join(FIELD_FLAGS)
        raise InputError(re.sub(rf"\b({names})\b", lambda m: FIELD_FLAGS[m[1]], str(e))) from None
    return fields


def open_llama_run(args: argparse.Namespace) -> Any:
    """A fresh or resumed Llama run (checked as the GPT's: resume keeps every option but
    ``--steps`` and refuses another shape by flag)."""
    from .checkpoint import check_out
    from .torch.llama_run import LlamaTrainRun, open_source

    for flag, key in GPT_ONLY:
        if getattr(args, key) is not None:
            raise InputError(
                f"{flag} shapes the GPT: a Llama is shaped by --width, --context, --layers, --heads, "
                f"--kv-heads, --ffn-width, --rope-theta, --rms-eps and --head; drop {flag} or use --arch gpt"
            )
    out = pathlib.Path(args.out)
    if args.resume:
        if any(getattr(args, k) is not None for _, k, _ in OPTIM_FLAGS if k != "steps") or (
            args.tokenizer or args.vocab_size
        ):
            raise InputError(
                "--resume continues with the options stored in the checkpoint: drop the optimisation "
                "and tokenizer flags (only --steps may change)"
            )
        run = LlamaTrainRun.resume(out, args.steps, args.data, args.data_dir)
        saved = run.spec["model"]
        for field, value in requested(args).items():
            if saved[field] != value:
                flag = FIELD_FLAGS[field]
                shown = ("tied" if saved[field] else "untied") if flag == "--head" else saved[field]
                raise InputError(
                    f"checkpoint {out} has {flag} {shown}: drop {flag} to resume it, or train a new run "
                    "into another --out"
                )
        return run
    if args.tokenizer != "bpe" and args.vocab_size is not None:
        raise InputError(
            "--vocab-size applies to --tokenizer bpe only (the character vocabulary is the text's characters)"
        )
    if args.data_dir is not None and (args.tokenizer or args.vocab_size):
        raise InputError(
            "--tokenizer and --vocab-size do not apply to --data-dir: its tokenizer is the folder's"
        )
    from .train import options

    opts = options(args)
    fields = model_fields(args)
    seed = args.model_seed if args.model_seed is not None else opts["seed"]
    check_out("--out", args.out)
    t = fields["max_position_embeddings"]
    source = open_source(args.data, args.data_dir, args.tokenizer or "char", args.vocab_size, t)
    return LlamaTrainRun.fresh(out, fields, opts, seed, source)


__all__ = ["check_gpt_flags", "ffn_width", "model_fields", "open_llama_run"]

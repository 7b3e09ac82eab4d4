"""The flags of ``python -m orthoformer.train`` (``orthoformer train``'s, with the library's
defaults, plus the PyTorch ones) and their checks: every flag's type and range is checked
before anything is read or built, one line naming the flag."""

from __future__ import annotations

import argparse
import json
from typing import Any

from . import _native
from .data import DEFAULTS
from .errors import EXIT_INTERRUPTED
from .validate import (
    COUNT_MAX,
    SEED_MAX,
    ArgumentParser,
    InputError,
    device,
    int_flag,
    integer,
    number,
    number_flag,
    seed,
)

OPTIONS = DEFAULTS["options"]
#: The default preset's model (its depth and heads are the Llama's defaults too).
PRESET = json.loads(_native.config_resolve(None, None, None, None, None, None, None, None))

# Flags that set training options: (flag, option key, type). Only --steps may change on resume.
OPTIM_FLAGS = [
    ("--steps", "steps", int),
    ("--batch", "batch", int),
    ("--lr", "lr", float),
    ("--warmup", "warmup", int),
    ("--min-lr", "min_lr", float),
    ("--weight-decay", "weight_decay", float),
    ("--beta2", "beta2", float),
    ("--grad-clip", "grad_clip", float),
    ("--eval-every", "eval_every", int),
    ("--eval-iters", "eval_iters", int),
    ("--seed", "seed", int),
]


def _default(key: str) -> Any:
    return OPTIONS["adamw"][key] if key in ("weight_decay", "beta2") else OPTIONS[key]


class _ArgsFileParser(ArgumentParser):
    """Reads ``@FILE`` arguments as white-space separated flags, ``#`` starting a comment."""

    def convert_arg_line_to_args(self, arg_line: str) -> list[str]:
        return arg_line.split("#", 1)[0].split()


#: The exit statuses, as ``--help`` lists them.
EXIT_STATUS = (
    "exit status: 0 trained (or stopped at --stop-at); 2 bad arguments or input, an I/O error, or a "
    f"non-finite loss (the last good checkpoint is kept); {EXIT_INTERRUPTED} interrupted by SIGINT or "
    "SIGTERM after writing a checkpoint: run again with --resume (EX_TEMPFAIL); 1 a defect (a traceback)"
)


def parser() -> argparse.ArgumentParser:
    """The argument parser: ``orthoformer train``'s flags plus ``--device``."""
    p = _ArgsFileParser(
        prog="python -m orthoformer.train",
        description="Train a GPT or a Llama in PyTorch (data parallel or sharded under torchrun) into an "
        "Orthoformer checkpoint folder.",
        fromfile_prefix_chars="@",
        epilog=EXIT_STATUS,
    )
    d = p.add_mutually_exclusive_group()
    d.add_argument("--data", help="training text, a UTF-8 file [default: the embedded TinyShakespeare]")
    d.add_argument(
        "--data-dir",
        help="a folder of token files (train.bin, val.bin, meta.json) from python -m orthoformer.prepare; "
        "the vocabulary and tokenizer are the folder's",
    )
    p.add_argument(
        "--tokenizer",
        choices=["char", "bpe"],
        help="one token per character, or byte-level BPE [default: char]",
    )
    p.add_argument(
        "--vocab-size",
        type=_int_type("vocab_size"),
        help=f"BPE vocabulary (at least 256) [default: {DEFAULTS['bpe_vocab']}]",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--preset", help=f"model preset [default: {DEFAULTS['preset']} with context {DEFAULTS['context']}]"
    )
    g.add_argument("--config", help="model configuration file (TOML or JSON with the fields of a preset)")
    p.add_argument("--context", type=_int_type("context"), help="context length, overriding the preset")
    p.add_argument(
        "--width",
        type=_int_type("width"),
        help="model width d_model (the feed-forward width becomes 4x), overriding the preset",
    )
    p.add_argument(
        "--model-seed", type=SEED_TYPE, help="seed of the model's initialisation [default: --seed]"
    )
    p.add_argument(
        "--attention",
        help="softmax, orthogonal, linear, orthogonal-linear, orthogonal-tied, identity-q, "
        "orthogonal-hadamard, orthogonal-trained (trainable W_Q, W_K started at the frozen orthogonal "
        "draw: the control that separates freezing from the initial scale) [default: the preset's]",
    )
    p.add_argument(
        "--position",
        choices=["learned", "rope"],
        help="positions: learned (an absolute position embedding, GPT-2's) or rope (rotary positions on "
        "every head's queries and keys, no position embedding) [default: the preset's, learned]",
    )
    p.add_argument(
        "--temperature",
        choices=["fixed", "learned"],
        help="attention-score temperature: fixed or learned (one trained scalar per head, starting at 1; "
        "softmax variants only) [default: the preset's, fixed]",
    )
    p.add_argument(
        "--recipe",
        choices=DEFAULTS["recipes"],
        help="start from a named recipe's model and options (flags given override it): nanogpt-cpu = "
        "nanoGPT's CPU recipe for character-level TinyShakespeare (4 layers, 4 heads, width 128, "
        "context 64, no biases; batch 12, 2000 steps, lr 1e-3 to 1e-4, warm-up 100)",
    )
    _llama_flags(p)
    for flag, key, ty in OPTIM_FLAGS:
        extra = " rows per micro-step, over all ranks" if key == "batch" else ""
        p.add_argument(
            flag,
            type=_int_type(key) if ty is int else _float_type(key),
            help=f"[default: {_default(key)}]{extra}",
        )
    p.add_argument(
        "--lr-decay-steps",
        type=_int_type("lr_decay_steps"),
        help="steps the cosine decays the learning rate over; later steps run at --min-lr (at least "
        "--warmup) [default: --steps of the first run: --resume with more --steps keeps it]",
    )
    p.add_argument(
        "--grad-accum",
        type=_int_type("grad_accum"),
        default=1,
        help="micro-steps per optimizer step (the step's batch is --batch times this) [default: 1]",
    )
    p.add_argument(
        "--dtype",
        default="auto",
        help="auto, fp32, bf16 or fp16 autocast [default: auto: "
        "bf16 on CUDA with bf16 support, fp16 on older GPUs, fp32 on the CPU]",
    )
    p.add_argument(
        "--compile", default="auto", help="torch.compile: auto, on or off [default: auto: on with CUDA]"
    )
    p.add_argument(
        "--fsdp",
        action="store_true",
        help="shard parameters, gradients and optimizer state "
        "with FSDP2 (under torchrun) instead of replicating them with DDP",
    )
    p.add_argument(
        "--pad-vocab",
        type=_int_type("pad_vocab"),
        default=64,
        help="pad the GPT's output layer's vocabulary to a multiple of this for faster kernels, logits cut "
        "back (as nanoGPT); 1: no padding [default: 64]",
    )
    p.add_argument(
        "--log-every",
        type=_int_type("log_every"),
        default=10,
        help="print loss, tokens/s, ms/step and MFU every this many steps; 0: never [default: 10]",
    )
    p.add_argument(
        "--peak-tflops",
        type=_float_type("peak_tflops"),
        help="the device's peak TFLOP/s for MFU [default: the "
        "GPU's data-sheet figure for the dtype; none on the CPU]",
    )
    p.add_argument("--tensorboard", help="also log to TensorBoard in this folder (needs tensorboard)")
    p.add_argument("--out", default="runs/train", help="checkpoint folder [default: runs/train]")
    p.add_argument(
        "--resume", action="store_true", help="continue the checkpoint in --out (--steps may extend it)"
    )
    p.add_argument("--stop-at", type=_int_type("stop_at"), help="checkpoint and stop after this many steps")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda [default: auto]")
    return p


#: The Llama's shape flags: (flag, attribute, LlamaConfig field). ``--width``, ``--context``
#: and ``--attention`` are the GPT's flags, read as ``hidden_size``,
#: ``max_position_embeddings`` and ``attention``.
LLAMA_FLAGS = [
    ("--layers", "layers", "num_hidden_layers"),
    ("--heads", "heads", "num_attention_heads"),
    ("--kv-heads", "kv_heads", "num_key_value_heads"),
    ("--ffn-width", "ffn_width", "intermediate_size"),
    ("--rope-theta", "rope_theta", "rope_theta"),
    ("--rms-eps", "rms_eps", "rms_norm_eps"),
    ("--head", "head", "tie_word_embeddings"),
]
#: LlamaConfig's defaults, as ``--help`` states them (a test holds them to the dataclass's).
LLAMA_DEFAULTS = {"rope_theta": 10_000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False}


def _llama_flags(p: argparse.ArgumentParser) -> None:
    """``--arch`` and the Llama's shape flags."""
    p.add_argument(
        "--arch",
        choices=["gpt", "llama"],
        help="gpt (the library's GPT, shaped by --preset or --config) or llama (RMSNorm, SwiGLU, RoPE, "
        "grouped-query attention; shaped by --width, --context, --layers, --heads, --kv-heads, "
        "--ffn-width, --rope-theta, --rms-eps, --head; the frozen variants but orthogonal-trained) "
        "[default: gpt; with --resume the checkpoint's]",
    )
    p.add_argument(
        "--layers",
        type=_int_type("layers"),
        help=f"llama: blocks [default: the default preset's, {PRESET['n_layer']}]",
    )
    p.add_argument(
        "--heads",
        type=_int_type("heads"),
        help=f"llama: query heads [default: the default preset's, {PRESET['n_head']}]",
    )
    p.add_argument(
        "--kv-heads",
        type=_int_type("kv_heads"),
        help="llama: key/value heads (grouped-query attention; divides --heads) [default: --heads]",
    )
    p.add_argument(
        "--ffn-width",
        type=_int_type("ffn_width"),
        help="llama: SwiGLU width [default: 8/3 of --width (a 4x GELU MLP's parameters), rounded up "
        "to a multiple of 64]",
    )
    p.add_argument(
        "--rope-theta",
        type=_float_type("rope_theta"),
        help=f"llama: RoPE base [default: {LLAMA_DEFAULTS['rope_theta']:g}]",
    )
    p.add_argument(
        "--rms-eps",
        type=_float_type("rms_eps"),
        help=f"llama: RMSNorm epsilon [default: {LLAMA_DEFAULTS['rms_norm_eps']:g}]",
    )
    p.add_argument(
        "--head",
        choices=["tied", "untied"],
        help="llama: output head tied to the token embedding or its own matrix [default: untied]",
    )


def check_args(args: argparse.Namespace) -> None:
    """Every flag's type and range, before anything is read or built (the library checks the
    options again, and the model): a negative count, a NaN rate or a seed outside u64 is one
    line naming the flag, not a conversion error deep in the native module."""
    for flag, key, lo, hi in INT_RANGES:
        value = getattr(args, key, None)
        if value is not None:
            integer(flag, value, lo=lo, hi=hi)
    for flag, key in (("--seed", "seed"), ("--model-seed", "model_seed")):
        if getattr(args, key) is not None:
            seed(flag, getattr(args, key))
    for flag, key, lo, hi, lo_open, hi_open in FLOAT_RANGES:
        value = getattr(args, key, None)
        if value is not None:
            # The library's words where it has a message for the same rule.
            what = "a positive number" if key == "lr" else ""
            number(flag, value, lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open, what=what)
    device("--device", args.device)
    for flag, key in (("--out", "out"), ("--data", "data"), ("--data-dir", "data_dir")):
        value = getattr(args, key)
        if value is not None and not str(value).strip():
            raise InputError(f"{flag} is empty: name a path")


#: Integer flags: (flag, attribute, least, most). Counts stop at ``COUNT_MAX`` (a u32), so
#: none overflows the library's integer types; the seeds are u64 (their own type).
INT_RANGES = [
    ("--steps", "steps", 1, COUNT_MAX),
    ("--batch", "batch", 1, COUNT_MAX),
    ("--warmup", "warmup", 0, COUNT_MAX),
    ("--eval-every", "eval_every", 1, COUNT_MAX),
    ("--eval-iters", "eval_iters", 1, 10_000),
    ("--log-every", "log_every", 0, COUNT_MAX),
    ("--stop-at", "stop_at", 0, COUNT_MAX),
    ("--context", "context", 1, COUNT_MAX),
    ("--width", "width", 1, COUNT_MAX),
    ("--vocab-size", "vocab_size", 1, 2**32),
    ("--lr-decay-steps", "lr_decay_steps", 1, COUNT_MAX),
    ("--pad-vocab", "pad_vocab", 1, 4096),
    ("--grad-accum", "grad_accum", 1, COUNT_MAX),
    ("--layers", "layers", 1, COUNT_MAX),
    ("--heads", "heads", 1, COUNT_MAX),
    ("--kv-heads", "kv_heads", 1, COUNT_MAX),
    ("--ffn-width", "ffn_width", 1, COUNT_MAX),
]
_SEED_HINT = "seeds are integers from 0 to 2**64 - 1"
#: The seeds' argparse type (``--seed``, ``--model-seed``).
SEED_TYPE = int_flag(0, SEED_MAX, _SEED_HINT)


def _int_type(key: str) -> object:
    """The argparse type of the integer flag ``key``: its row of ``INT_RANGES`` (the seed's
    type for ``seed``), so every integer flag is checked once, by the parser."""
    if key == "seed":
        return SEED_TYPE
    _, _, lo, hi = next(row for row in INT_RANGES if row[1] == key)
    return int_flag(lo, hi)


def _float_type(key: str) -> object:
    """The argparse type of the number flag ``key``: its row of ``FLOAT_RANGES``."""
    _, _, lo, hi, lo_open, hi_open = next(row for row in FLOAT_RANGES if row[1] == key)
    return number_flag(
        lo, hi, lo_open=lo_open, hi_open=hi_open, what="a positive number" if key == "lr" else ""
    )


#: Float flags: (flag, attribute, low, high, low open, high open).
FLOAT_RANGES = [
    ("--lr", "lr", 0.0, None, True, False),
    ("--min-lr", "min_lr", 0.0, None, False, False),
    ("--weight-decay", "weight_decay", 0.0, None, False, False),
    ("--beta2", "beta2", 0.0, 1.0, False, True),
    ("--grad-clip", "grad_clip", 0.0, None, False, False),
    ("--peak-tflops", "peak_tflops", 0.0, None, True, False),
    ("--rope-theta", "rope_theta", 0.0, None, True, False),
    ("--rms-eps", "rms_eps", 0.0, None, True, False),
]


__all__ = [
    "FLOAT_RANGES",
    "INT_RANGES",
    "LLAMA_DEFAULTS",
    "LLAMA_FLAGS",
    "OPTIM_FLAGS",
    "OPTIONS",
    "check_args",
    "parser",
]

"""Text generation from a trained checkpoint or a pretrained Llama-style model (GGUF or
Hugging Face folder) with the Rust library's engine, as ``orthoformer generate`` does it:
the same prompt and stop rules for both model families, the same checks and messages, and
the same text for the same seed. One call makes at most ``MAX_NEW_TOKENS`` tokens (the
library's cap), and Ctrl-C stops it between two tokens (``KeyboardInterrupt``)."""

from __future__ import annotations

import json
import os
from os import PathLike
from typing import Any, Optional, Sequence, Union

from . import _native, validate

PathArg = Union[str, "PathLike[str]"]

#: The most tokens one generation makes: the library's cap (``orthoformer generate`` has it).
MAX_NEW_TOKENS: int = _native.MAX_NEW_TOKENS


def _check_counts(max_new_tokens: Any, top_k: Any, seed: Any) -> None:
    """The whole-number settings, checked before the native call (which would see a float
    or a bool as a type error, not as the setting it is)."""
    if max_new_tokens is not None:
        validate.integer(
            "max_new_tokens",
            max_new_tokens,
            lo=0,
            hi=MAX_NEW_TOKENS,
            hint="ask for fewer tokens, or continue the text in several calls",
        )
    if top_k is not None:
        validate.integer("top_k", top_k, lo=0, hint="0 keeps every token")
    if seed is not None:
        validate.seed("seed", seed)


def generate(
    prompt: str = "",
    *,
    checkpoint: Optional[PathArg] = None,
    model: Optional[PathArg] = None,
    max_new_tokens: Optional[int] = None,
    temperature: Optional[float] = None,
    top_k: Optional[int] = None,
    top_p: Optional[float] = None,
    seed: Optional[int] = None,
    kv_cache: Optional[str] = None,
    dot: Optional[str] = None,
) -> dict[str, Any]:
    """Continues ``prompt`` with the model of ``checkpoint`` (a folder ``orthoformer train``
    wrote) or ``model`` (a ``.gguf`` file or Hugging Face folder); give exactly one. An empty
    prompt starts from the model's beginning-of-sequence token (id 0 for a checkpoint);
    generation stops after ``max_new_tokens`` (default 200) or the model's end-of-sequence
    token. ``temperature`` (default 1; 0 is greedy), ``top_k`` (0: all), ``top_p`` (1: all)
    and ``seed`` (default 0) choose the sampling; ``kv_cache`` (``"f16"``, the default, or
    ``"f32"``) how a pretrained model caches keys and values; ``dot`` (``"q8"``, the
    default, ``"f32"`` or ``"q8-all"``) what its decode multiplies the quantised weights
    with: the activations rounded to 8 bits per 32 for integer dot products (llama.cpp's way,
    faster, perplexity within 0.5% of exact), or exactly; both apply to ``model`` only, and a checkpoint
    refuses them. ``max_new_tokens`` is at most :data:`MAX_NEW_TOKENS`; Ctrl-C stops the
    generation between two tokens and raises ``KeyboardInterrupt``. This is the library's one
    generate operation, as ``orthoformer generate`` runs it: both refuse the same inputs with
    the same message. Returns the report (``text``, ``prompt_tokens``, ``new_tokens``,
    ``stopped_on_eos``, speeds) as a dict; bad inputs raise ``ValueError``/``OSError``.
    """
    _check_counts(max_new_tokens, top_k, seed)
    report = _native.generate_text(
        prompt,
        None if checkpoint is None else os.fspath(checkpoint),
        None if model is None else os.fspath(model),
        max_new_tokens,
        temperature,
        top_k,
        top_p,
        seed,
        kv_cache,
        dot,
    )
    return json.loads(report)


#: The most sequences one batch generates: the library's cap.
MAX_SEQUENCES: int = _native.MAX_SEQUENCES


def generate_batch(
    prompts: Sequence[str],
    *,
    parallel: int = 1,
    checkpoint: Optional[PathArg] = None,
    model: Optional[PathArg] = None,
    max_new_tokens: Optional[int] = None,
    temperature: Optional[float] = None,
    top_k: Optional[int] = None,
    top_p: Optional[float] = None,
    seed: Optional[int] = None,
    kv_cache: Optional[str] = None,
    dot: Optional[str] = None,
) -> dict[str, Any]:
    """Continues every text of ``prompts`` (``parallel`` sequences each) in one batch: each
    prompt is read on its own, then the sequences decode together, one batched step making
    the next token of every sequence still running (each weight read once per step for the
    whole batch). Sequence ``p * parallel + j`` continues ``prompts[p]`` and samples with
    seed ``seed + p * parallel + j``; with the default integer products (``dot="q8"``) it is
    the text :func:`generate` makes with that seed. The other arguments are
    :func:`generate`'s. At most :data:`MAX_SEQUENCES` sequences; Ctrl-C stops the batch
    between two steps (``KeyboardInterrupt``). Returns the report (``sequences``: a list of
    ``prompt``, ``seed``, ``text``, ``prompt_tokens``, ``new_tokens``, ``stopped_on_eos``;
    ``prompt_tokens_per_s`` and ``decode_tokens_per_s`` of the whole batch) as a dict; bad
    inputs raise ``ValueError``/``OSError``, as ``orthoformer generate --prompt A --prompt
    B --parallel N`` refuses them.
    """
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
        raise validate.InputError(
            f"prompts must be a list of texts, not {validate._show(prompts)}: use generate() for one prompt"
        )
    texts = [validate.text(f"prompts[{i}]", p) for i, p in enumerate(prompts)]
    if len(texts) > MAX_SEQUENCES:
        raise validate.InputError(
            f"prompts holds {len(texts)} texts, more than one batch makes ({MAX_SEQUENCES}): "
            "split them over several calls"
        )
    validate.integer("parallel", parallel, lo=1, hi=MAX_SEQUENCES, hint="sequences per prompt")
    _check_counts(max_new_tokens, top_k, seed)
    report = _native.generate_batch_text(
        texts,
        parallel,
        None if checkpoint is None else os.fspath(checkpoint),
        None if model is None else os.fspath(model),
        max_new_tokens,
        temperature,
        top_k,
        top_p,
        seed,
        kv_cache,
        dot,
    )
    return json.loads(report)

"""A text as windows of a Hugging Face folder's tokens: the folder's ``tokenizer.json``
(through the ``tokenizers`` package) encodes the text, and its last ``tokens`` tokens are cut
into whole windows of ``context``. ``learn_rotation`` calibrates on them and ``interpolate``
scores them; both name their flags ``--model``, ``--data`` and ``--context``."""

from __future__ import annotations

import pathlib
from typing import Any

from .validate import InputError


def folder_windows(folder: pathlib.Path, data: pathlib.Path, tokens: int, context: int, *, tool: str) -> Any:
    """A ``(n, context)`` long tensor of the last ``tokens`` tokens of ``data`` (whole windows
    only), tokenised by ``folder``'s tokenizer; ``tool`` names the command in messages."""
    import torch

    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise InputError(f"{tool} tokenizes with the tokenizers package: pip install tokenizers") from None
    tok_path = folder / "tokenizer.json"
    if not tok_path.is_file():
        raise InputError(f"--model {folder}: has no tokenizer.json")
    tok = Tokenizer.from_file(str(tok_path))
    try:
        text = data.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"--data {data}: is not UTF-8 text") from None
    ids = tok.encode(text, add_special_tokens=False).ids[-tokens:]
    n = len(ids) // context
    if n == 0:
        raise InputError(
            f"--data {data}: {len(ids)} tokens make no window of --context {context}; "
            "give more text or a smaller --context"
        )
    return torch.tensor(ids[len(ids) - n * context :]).reshape(n, context)

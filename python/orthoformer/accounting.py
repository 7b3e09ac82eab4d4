"""Exact parameter, memory and FLOP accounting of a configuration: the report of
``orthoformer params``, computed by the library's ``model::accounting``."""

from __future__ import annotations

import json
from os import PathLike
from typing import Any, Optional, Union

from . import _native
from .config import GPTConfig


def params(
    config: Union[GPTConfig, str, None] = "seed-003",
    *,
    attention: Optional[str] = None,
    batch: int = 8,
    seq: Optional[int] = None,
    config_file: Union[str, PathLike[str], None] = None,
    seed_claims: bool = False,
) -> dict[str, Any]:
    """The account of a model as a dict: ``{"config", "account"[, "seed_claims"]}``.

    ``config`` is a :class:`GPTConfig` or a preset name (default ``seed-003``, as
    ``orthoformer params``); ``config_file`` a TOML/JSON config instead. ``account`` holds the
    components (trainable and frozen parameters per component), ``total``, ``trainable``,
    ``frozen``, ``memory`` (bytes of weights, gradients, AdamW, activations at ``batch x seq``)
    and ``flops_per_token``. Bad inputs raise ``ValueError``.
    """
    if config_file is not None:
        cfg = GPTConfig.resolve(config=config_file, attention=attention)
    elif isinstance(config, GPTConfig):
        cfg = config if attention is None else GPTConfig(**{**config.__dict__, "attention": attention})
    else:
        cfg = GPTConfig.preset(config or "seed-003", attention=attention)
    return json.loads(_native.params_report(cfg.to_json(), batch, seq, seed_claims))

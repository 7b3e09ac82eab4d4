"""``GPTConfig``: the shape and variant of a GPT, field for field the Rust library's
``model::config::GptConfig``. Presets, defaults and validation come from the library."""

from __future__ import annotations

import dataclasses
import json
from os import PathLike
from typing import Any, Optional, Union

from . import _native
from .validate import InputError

PRESETS, ATTENTIONS = (list(x) for x in _native.model_names())


@dataclasses.dataclass
class GPTConfig:
    """A GPT configuration (``vocab_size`` ``V``, ``context`` ``T``, ``n_layer`` ``L``,
    ``n_head`` ``H``, ``d_model`` ``C``, ``d_ff`` ``F``); see ``orthoformer params``.
    ``position`` is ``learned`` (an absolute position embedding ``wpe``) or ``rope`` (rotary
    positions on every head's queries and keys, no ``wpe``); ``temperature`` is ``fixed`` or
    ``learned`` (one trained scalar per head multiplying the scores; softmax kernels only).
    ``frozen_method`` is an orthogonal draw (``qr``, ``svd``, ``householder``, ``cayley``) or
    ``gaussian`` (i.i.d. ``N(0, 1/C)``, not orthogonal: the equal-scale control). A library
    configuration with ``frozen_layers`` (Q/K frozen in some layers only) is refused here."""

    vocab_size: int
    context: int
    n_layer: int
    n_head: int
    d_model: int
    d_ff: int
    attention: str = "softmax"
    norm: str = "pre"
    attn_bias: bool = False
    ffn_bias: bool = True
    norm_bias: bool = True
    gelu: str = "tanh"
    dropout: float = 0.0
    frozen_method: str = "qr"
    frozen_seed: int = 0
    position: str = "learned"
    temperature: str = "fixed"

    @classmethod
    def preset(cls, name: str, attention: Optional[str] = None, context: Optional[int] = None) -> GPTConfig:
        """The library's preset ``name`` (one of :data:`PRESETS`), with ``attention`` and
        ``context`` overridden when given."""
        return cls.from_json(_native.config_resolve(name, None, attention, context))

    @classmethod
    def resolve(
        cls,
        preset: Optional[str] = None,
        config: Union[str, PathLike[str], None] = None,
        attention: Optional[str] = None,
        context: Optional[int] = None,
        *,
        width: Optional[int] = None,
        position: Optional[str] = None,
        temperature: Optional[str] = None,
        recipe: Optional[str] = None,
    ) -> GPTConfig:
        """The model ``orthoformer train`` builds from ``--recipe``, ``--preset``/``--config``,
        ``--attention``, ``--context``, ``--width``, ``--position`` and ``--temperature`` (none
        given: its default model)."""
        path = None if config is None else str(config)
        return cls.from_json(
            _native.config_resolve(preset, path, attention, context, width, position, temperature, recipe)
        )

    @classmethod
    def from_json(cls, text: str) -> GPTConfig:
        """Parses and validates the library's JSON form (unknown fields are an error)."""
        fields = json.loads(_native.config_check(text))
        if fields.get("frozen_layers") is not None:
            # The PyTorch modules freeze Q/K in every layer or none: never build another model.
            raise InputError(
                f"frozen_layers {fields['frozen_layers']}: the PyTorch modules freeze Q/K in every "
                "layer; train or read a model frozen in some layers with `orthoformer train`"
            )
        fields.pop("frozen_layers", None)
        return cls(**fields)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GPTConfig:
        """From a dict of every field."""
        return cls.from_json(json.dumps(d))

    def to_json(self) -> str:
        """The library's canonical JSON form; raises ``ValueError`` when invalid."""
        return _native.config_check(json.dumps(dataclasses.asdict(self)))

    def validate(self) -> GPTConfig:
        """Checks every field (the library's rules) and returns ``self``."""
        self.to_json()
        return self

    @property
    def d_head(self) -> int:
        """Head width ``D = C / H``."""
        return self.d_model // max(self.n_head, 1)

    def projections(self) -> tuple[str, str]:
        """How ``W_Q`` and ``W_K`` work: ``trainable``, ``frozen-dense``, ``tied-to-q``,
        ``identity``, ``hadamard`` or ``trained-from-draw``."""
        return tuple(_native.attention_projections(self.attention))  # type: ignore[return-value]

    @property
    def is_linear(self) -> bool:
        """Whether the attention is the causal linear (kernel) form."""
        return self.attention in ("linear", "orthogonal-linear")

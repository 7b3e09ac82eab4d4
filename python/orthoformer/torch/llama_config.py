""":class:`LlamaConfig`: the shape and attention variant of a Llama-style model
(:class:`~orthoformer.torch.llama.Llama`), validated field by field, read from and written to
a Hugging Face ``config.json``.

Every field of a ``config.json`` that changes the function is honoured or refused by name:
RoPE's base is read from ``rope_theta`` or ``transformers`` 5's ``rope_parameters``; RoPE
scaling (``rope_scaling`` or ``rope_parameters``, read alike: a type other than ``default``
or any scaling field), two bases that disagree, biases (``attention_bias``, ``mlp_bias``), an
activation other than SiLU, a ``head_dim`` other than ``hidden_size / num_attention_heads``,
a sliding window and soft-capping are refused, as the library's engine refuses them
(``model::llama::supported``).
Fields that only describe (token ids, dtypes, versions) are ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Optional

from .. import init as _init
from ..config import ATTENTIONS
from ..validate import InputError, choice, integer, mapping, number, seed

#: ``config.json`` fields that would change the function and are not implemented (refused
#: when set to anything but null/false).
REFUSED = (
    "sliding_window",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "qkv_bias",
    "use_qk_norm",
    "qk_layernorm",
)
#: Keys of ``rope_parameters`` (and ``rope_scaling``) that default RoPE reads.
ROPE_KEYS = ("rope_type", "type", "rope_theta")


@dataclasses.dataclass
class LlamaConfig:
    """A Llama-style model: ``vocab_size`` ``V``, ``hidden_size`` ``C``, ``intermediate_size``
    ``F`` (SwiGLU width), ``num_hidden_layers`` ``L``, ``num_attention_heads`` ``H``,
    ``num_key_value_heads`` ``KV`` (``None``: ``H``; grouped-query attention below), RMSNorm
    ``rms_norm_eps``, RoPE base ``rope_theta`` (half-split pairs, as ``transformers``),
    ``max_position_embeddings`` (recorded, not enforced, as ``transformers``),
    ``tie_word_embeddings`` (the head is the embedding), ``attention`` (one of the library's
    variants but ``orthogonal-trained``; frozen Q/K of layer ``l`` are the library's tensors
    ``2l``, ``2l + 1`` drawn by ``frozen_method`` from ``frozen_seed``) and
    ``attention_dropout`` (on the softmax probabilities while training). Validated on
    construction."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: Optional[int] = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10_000.0
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    attention: str = "softmax"
    frozen_seed: int = 0
    frozen_method: str = "qr"
    attention_dropout: float = 0.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> LlamaConfig:
        """Checks every field (one-line :class:`~orthoformer.validate.InputError`); returns
        ``self`` with ``num_key_value_heads`` filled in."""
        sizes = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
        for name in sizes:
            setattr(self, name, integer(name, getattr(self, name), lo=1))
        c, h = self.hidden_size, self.num_attention_heads
        if c % h:
            raise InputError(f"hidden_size {c} is not divisible by num_attention_heads {h}")
        if (c // h) % 2:
            raise InputError(f"RoPE turns pairs of dimensions: the head width {c // h} must be even")
        kv = h if self.num_key_value_heads is None else self.num_key_value_heads
        self.num_key_value_heads = integer("num_key_value_heads", kv, lo=1, hi=h)
        if h % self.num_key_value_heads:
            raise InputError(
                f"num_key_value_heads {self.num_key_value_heads} does not divide num_attention_heads {h}"
            )
        self.rms_norm_eps = number("rms_norm_eps", self.rms_norm_eps, lo=0.0, lo_open=True)
        self.rope_theta = number("rope_theta", self.rope_theta, lo=0.0, lo_open=True)
        self.max_position_embeddings = integer("max_position_embeddings", self.max_position_embeddings, lo=1)
        if not isinstance(self.tie_word_embeddings, bool):
            raise InputError(f"tie_word_embeddings must be true or false, got {self.tie_word_embeddings!r}")
        choice("attention", self.attention, ATTENTIONS)
        if self.attention == "orthogonal-trained":
            raise InputError(
                "orthogonal-trained is built by orthoformer.torch.GPT only: use softmax for a Llama"
            )
        self.frozen_seed = seed("frozen_seed", self.frozen_seed)
        choice("frozen_method", self.frozen_method, _init.ORTHO_METHODS)
        self.attention_dropout = number(
            "attention_dropout", self.attention_dropout, lo=0.0, hi=1.0, hi_open=True
        )
        if self.num_key_value_heads != h and self.attention in ("orthogonal-tied", "orthogonal-hadamard"):
            raise InputError(
                f"{self.attention} needs as many key heads as query heads, not {self.num_key_value_heads} "
                f"of {h}: use num_key_value_heads {h} or another variant"
            )
        return self

    @property
    def head_dim(self) -> int:
        """Width ``D`` of one head."""
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_hf_dict(
        cls,
        hf: Mapping[str, Any],
        *,
        attention: str = "softmax",
        frozen_seed: int = 0,
        frozen_method: str = "qr",
    ) -> LlamaConfig:
        """The configuration of a Hugging Face Llama ``config.json`` (parsed), run with
        ``attention``; refuses, by name, what it cannot compute exactly."""
        hf = mapping("config.json", hf)

        def set_(key: str) -> Any:
            return hf.get(key)

        kind = set_("model_type")
        if kind != "llama":
            raise InputError(
                f"config.json: model_type {kind!r} is not llama: Llama reads LlamaForCausalLM folders"
            )
        for arch in set_("architectures") or []:
            if arch != "LlamaForCausalLM":
                raise InputError(f"config.json: architecture {arch!r} is not LlamaForCausalLM")
        act = set_("hidden_act") or set_("hidden_activation") or "silu"
        if act != "silu":
            raise InputError(f"config.json: hidden_act {act!r} is not implemented (only silu)")
        for flag in ("attention_bias", "mlp_bias"):
            if set_(flag) not in (None, False, True):
                raise InputError(f"config.json: {flag} must be true or false, got {set_(flag)!r}")
            if set_(flag):
                raise InputError(f"config.json: {flag} true is not implemented (only bias-free Llamas)")
        for key in REFUSED:
            if set_(key) not in (None, False):
                raise InputError(f"config.json: {key} {set_(key)!r} is not implemented")
        theta = _rope_theta(hf)
        h = integer("num_attention_heads", set_("num_attention_heads"), lo=1)
        c = integer("hidden_size", set_("hidden_size"), lo=1)
        hd = set_("head_dim")
        if hd is not None and integer("config.json: head_dim", hd, lo=1) * h != c:
            raise InputError(
                f"config.json: head_dim {hd} is not hidden_size / num_attention_heads ({c} / {h}), "
                "which is not implemented"
            )
        return cls(
            vocab_size=set_("vocab_size"),
            hidden_size=c,
            intermediate_size=set_("intermediate_size"),
            num_hidden_layers=set_("num_hidden_layers"),
            num_attention_heads=h,
            num_key_value_heads=set_("num_key_value_heads"),
            rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            rope_theta=theta,
            max_position_embeddings=hf.get("max_position_embeddings", 2048),
            tie_word_embeddings=hf.get("tie_word_embeddings", False),
            attention=attention,
            frozen_seed=frozen_seed,
            frozen_method=frozen_method,
            attention_dropout=hf.get("attention_dropout", 0.0) or 0.0,
        )

    def to_hf_dict(self) -> dict[str, Any]:
        """A ``config.json`` that ``transformers``' ``LlamaForCausalLM`` (and the library's
        engine, which reads the top-level ``rope_theta``) load as this model's shape."""
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_parameters": {"rope_type": "default", "rope_theta": self.rope_theta},
            "rope_scaling": None,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "attention_bias": False,
            "mlp_bias": False,
            "attention_dropout": self.attention_dropout,
        }


def _rope_theta(hf: Mapping[str, Any]) -> float:
    """RoPE's base from ``rope_theta`` (``transformers`` 4), ``rope_parameters``
    (``transformers`` 5) or ``rope_scaling`` (the older name of the same object), read alike
    as the engine reads them (``model::llama::supported``): a type other than ``default`` or
    any scaling field is refused by name, two bases that disagree are refused, none means
    10000."""
    found = []
    if hf.get("rope_theta") is not None:
        found.append(("rope_theta", number("config.json: rope_theta", hf["rope_theta"])))
    for key in ("rope_parameters", "rope_scaling"):
        if hf.get(key) is None:
            continue
        params = mapping(f"config.json: {key}", hf[key])
        for kind_key in ("rope_type", "type"):
            kind = params.get(kind_key)
            if kind is not None and kind != "default":
                raise InputError(
                    f"config.json: {key}.{kind_key} {kind!r} is not implemented (only default RoPE)"
                )
        extra = sorted(k for k, v in params.items() if k not in ROPE_KEYS and v is not None)
        if extra:
            raise InputError(f"config.json: {key}.{extra[0]} is not implemented (only default RoPE)")
        if params.get("rope_theta") is not None:
            name = f"{key}.rope_theta"
            found.append((name, number(f"config.json: {name}", params["rope_theta"])))
    for name, theta in found[1:]:
        if theta != found[0][1]:
            raise InputError(
                f"config.json: {found[0][0]} {found[0][1]} and {name} {theta} disagree: keep one"
            )
    return found[0][1] if found else 10_000.0


__all__ = ["LlamaConfig", "REFUSED"]

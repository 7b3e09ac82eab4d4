""":class:`LlamaConfig`: the shape and attention variant of a Llama-style model
(:class:`~orthoformer.torch.llama.Llama`), validated field by field, read from and written to
a Hugging Face ``config.json``.

Two families are read, by ``model_type``: ``llama`` (``LlamaForCausalLM``) and ``qwen2``
(``Qwen2ForCausalLM``, a Llama with biases on ``q_proj``, ``k_proj`` and ``v_proj``).
Every field of a ``config.json`` that changes the function is honoured or refused by name:
RoPE's base is read from ``rope_theta`` or ``transformers`` 5's ``rope_parameters``; a
Llama's ``attention_bias`` puts biases on Q, K, V and O, as ``transformers``' Llama does.
RoPE scaling (``rope_scaling`` or ``rope_parameters``, read alike: a type other than
``default`` or any scaling field), two bases that disagree, ``mlp_bias``, an activation other
than SiLU, a ``head_dim`` other than ``hidden_size / num_attention_heads``, a sliding window
(Qwen2's as ``transformers`` applies it: ``use_sliding_window`` with a ``sliding_window`` on
some layer that ``layer_types``, or else ``max_window_layers``, calls ``sliding_attention``)
and soft-capping are refused. On a Qwen2, ``attention_bias`` and ``mlp_bias`` are not
``transformers``' fields (its Qwen2 ignores them) and are refused when true.
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
#: The ``model_type`` s read, and the architecture of each.
FAMILIES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}
#: What a Qwen2 ``layer_types`` entry may say.
LAYER_TYPES = ("full_attention", "sliding_attention")
#: Keys of ``rope_parameters`` (and ``rope_scaling``) that default RoPE reads.
ROPE_KEYS = ("rope_type", "type", "rope_theta")


@dataclasses.dataclass
class LlamaConfig:
    """A Llama-style model: ``vocab_size`` ``V``, ``hidden_size`` ``C``, ``intermediate_size``
    ``F`` (SwiGLU width), ``num_hidden_layers`` ``L``, ``num_attention_heads`` ``H``,
    ``num_key_value_heads`` ``KV`` (``None``: ``H``; grouped-query attention below), RMSNorm
    ``rms_norm_eps``, RoPE base ``rope_theta`` (half-split pairs, as ``transformers``),
    ``max_position_embeddings`` (not enforced by the forward, as ``transformers``;
    :meth:`~orthoformer.torch.Llama.generate` refuses to go past it),
    ``tie_word_embeddings`` (the head is the embedding), ``attention`` (one of the library's
    variants but ``orthogonal-trained``; frozen Q/K of layer ``l`` are the library's tensors
    ``2l``, ``2l + 1`` drawn by ``frozen_method`` from ``frozen_seed``) and
    ``attention_dropout`` (on the softmax probabilities while training). ``family`` is the
    ``transformers`` model it is (``llama`` or ``qwen2``: Qwen2 has biases on Q, K and V);
    ``attention_bias`` gives a Llama biases on Q, K, V and O (``transformers``' Llama field
    of that name). With a frozen variant, biases on Q and K stay trainable (added after the
    frozen product); identity queries have no projection to carry a query bias and are
    refused with one. Validated on construction."""

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
    family: str = "llama"
    attention_bias: bool = False

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
        choice("family", self.family, tuple(FAMILIES))
        if not isinstance(self.attention_bias, bool):
            raise InputError(f"attention_bias must be true or false, got {self.attention_bias!r}")
        if self.family == "qwen2" and self.attention_bias:
            raise InputError(
                "attention_bias is a Llama field: a qwen2 model has biases on Q, K and V (none on O); "
                "leave it false"
            )
        if self.qkv_bias and self.attention == "identity-q":
            raise InputError(
                f"identity-q has no query projection to carry the {self.family} query bias: "
                "use another variant or a model without attention biases"
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

    @property
    def qkv_bias(self) -> bool:
        """Whether Q, K and V have biases (Qwen2, or a Llama's ``attention_bias``)."""
        return self.family == "qwen2" or self.attention_bias

    @property
    def o_bias(self) -> bool:
        """Whether the output projection has a bias (a Llama's ``attention_bias`` only)."""
        return self.attention_bias

    @classmethod
    def from_hf_dict(
        cls,
        hf: Mapping[str, Any],
        *,
        attention: str = "softmax",
        frozen_seed: int = 0,
        frozen_method: str = "qr",
    ) -> LlamaConfig:
        """The configuration of a Hugging Face Llama or Qwen2 ``config.json`` (parsed), run
        with ``attention``; refuses, by name, what it cannot compute exactly."""
        hf = mapping("config.json", hf)

        def set_(key: str) -> Any:
            return hf.get(key)

        kind = set_("model_type")
        if kind not in FAMILIES:
            raise InputError(
                f"config.json: model_type {kind!r} is not llama or qwen2: Llama reads "
                "LlamaForCausalLM and Qwen2ForCausalLM folders"
            )
        for arch in set_("architectures") or []:
            if arch != FAMILIES[kind]:
                raise InputError(f"config.json: architecture {arch!r} is not {FAMILIES[kind]} ({kind})")
        act = set_("hidden_act") or set_("hidden_activation") or "silu"
        if act != "silu":
            raise InputError(f"config.json: hidden_act {act!r} is not implemented (only silu)")
        for flag in ("attention_bias", "mlp_bias"):
            if set_(flag) not in (None, False, True):
                raise InputError(f"config.json: {flag} must be true or false, got {set_(flag)!r}")
            if set_(flag) and (kind == "qwen2" or flag == "mlp_bias"):
                why = (
                    "not a Qwen2 field (Qwen2 has biases on q/k/v only)"
                    if kind == "qwen2"
                    else "not implemented"
                )
                raise InputError(f"config.json: {flag} true is {why}")
        for key in REFUSED:
            if kind == "qwen2" and key == "sliding_window":
                continue  # Qwen2's window is read with the fields that switch it on
            if set_(key) not in (None, False):
                raise InputError(f"config.json: {key} {set_(key)!r} is not implemented")
        h = integer("num_attention_heads", set_("num_attention_heads"), lo=1)
        layers = integer("num_hidden_layers", set_("num_hidden_layers"), lo=1)
        if kind == "qwen2":
            _check_qwen2_window(hf, layers)
        theta = _rope_theta(hf)
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
            num_hidden_layers=layers,
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
            family=kind,
            attention_bias=bool(set_("attention_bias")) and kind == "llama",
        )

    def to_hf_dict(self) -> dict[str, Any]:
        """A ``config.json`` that ``transformers``' ``LlamaForCausalLM`` or
        ``Qwen2ForCausalLM`` (and the library's engine, which reads the top-level
        ``rope_theta``) load as this model's shape."""
        hf = {
            "architectures": [FAMILIES[self.family]],
            "model_type": self.family,
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
            "attention_dropout": self.attention_dropout,
        }
        if self.family == "qwen2":  # no head_dim, attention_bias or mlp_bias: not Qwen2 fields
            del hf["head_dim"]
            n = self.num_hidden_layers
            hf.update(use_sliding_window=False, sliding_window=None, max_window_layers=n)
            hf["layer_types"] = ["full_attention"] * n
        else:
            hf.update(attention_bias=self.attention_bias, mlp_bias=False)
        return hf


def _check_qwen2_window(hf: Mapping[str, Any], layers: int) -> None:
    """Refuses a Qwen2 sliding window by name where ``transformers`` applies one: on layer
    ``i`` when ``use_sliding_window`` is true, ``sliding_window`` is set and ``layer_types[i]``
    (or, without ``layer_types``, ``i >= max_window_layers``) says ``sliding_attention``."""
    on = hf.get("use_sliding_window", False)
    if on not in (True, False):
        raise InputError(f"config.json: use_sliding_window must be true or false, got {on!r}")
    # transformers' Qwen2Config: a window of 4096 when the key is absent, none when null.
    window = hf.get("sliding_window", 4096)
    if window is not None:
        integer("config.json: sliding_window", window, lo=1)
    types = hf.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise InputError(
                f"config.json: layer_types must list one entry per layer ({layers}), got {types!r}"[:200]
            )
        for i, t in enumerate(types):
            if t not in LAYER_TYPES:
                raise InputError(f"config.json: layer_types[{i}] {t!r} is not implemented")
    else:
        below = integer("config.json: max_window_layers", hf.get("max_window_layers", 28), lo=0)
        types = ["sliding_attention" if i >= below else "full_attention" for i in range(layers)]
    if on and window is not None and "sliding_attention" in types:
        layer = types.index("sliding_attention")
        raise InputError(
            f"config.json: sliding_window {window} from layer {layer} (use_sliding_window true) is "
            "not implemented"
        )


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


__all__ = ["FAMILIES", "LlamaConfig", "REFUSED"]

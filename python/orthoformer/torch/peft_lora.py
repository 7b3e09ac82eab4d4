"""``peft``'s LoRA on a model frozen by :func:`~orthoformer.torch.hf.freeze_qk_`, out of the
box, and never on the frozen matrices.

``peft.get_peft_model(model, LoraConfig(task_type="CAUSAL_LM"))`` targets ``q_proj`` and
``v_proj`` (Llama, Mistral, Qwen2) or GPT-2's fused ``c_attn`` by default. The frozen modules
are ``nn.Linear`` subclasses (:mod:`~orthoformer.torch.hf_frozen`), so peft wraps them in its
``lora.Linear``; this module makes every such wrapper a :class:`MaskedLoraLinear`, whose
adapter is *masked* on the frozen output rows (all of a frozen ``q_proj``/``k_proj``, the
first ``2C`` of ``c_attn``):

- ``B``'s rows there are zeroed when an adapter is made, and the adapter's output there is
  zero, so their gradient is exactly zero and no optimizer (AdamW's decay included) moves
  them; an adapter loaded with other values there (trained on an unfrozen model) has them
  ignored, in the forward pass and in the merge alike;
- merging (``merge_and_unload``) adds the other rows to what trains (``c_attn``'s ``W_V`` and
  ``b_V``), so the merged model computes what the adapted one did.

So a LoRA on ``c_attn`` adapts ``V`` only, and one on a frozen ``q_proj`` is inert (``v_proj``
carries the adaptation): the frozen Q/K stay the seed's matrices. Refused with one line when
peft reaches the first frozen target: LoRA variants and initialisations that rescale or
rewrite the base weight (DoRA, PiSSA, OLoRA, LoftQ, EVA, CorDA, ...; ``init_lora_weights``
may be ``True``, ``False`` or ``"gaussian"``), and peft tuners other than LoRA on a frozen
module.

Why a global hook: peft picks the LoRA class by the target's type, and the only other way in,
``LoraConfig._register_custom_module``, needs the user's config changed. torch's public
``register_module_module_registration_hook`` sees peft set a frozen module as its wrapper's
``base_layer`` (inside the wrapper's constructor, before any adapter exists); the check is an
``isinstance`` on one attribute name, so it costs nothing elsewhere. Tested with peft 0.22.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.module import register_module_module_registration_hook

from ..validate import InputError
from .hf_frozen import FrozenLinear, FrozenQKVConv1D

#: The frozen modules peft may wrap.
FROZEN = (FrozenLinear, FrozenQKVConv1D)
#: ``init_lora_weights`` values that leave the base weight alone and start ``B`` at zero
#: (``False`` starts it random: masking zeroes the frozen rows all the same).
PLAIN_INITS = (True, False, "gaussian")

_MASKED: Optional[type] = None


def masked_class() -> type:
    """:class:`MaskedLoraLinear`, defined on first use (peft is imported by then: it is
    what is building the wrapper)."""
    global _MASKED
    if _MASKED is None:
        from peft.tuners.lora.layer import Linear
        from peft.tuners.tuners_utils import check_adapters_to_merge

        class MaskedLoraLinear(Linear):  # type: ignore[misc, valid-type]
            """peft's ``lora.Linear`` around a frozen module, its adapters masked on the
            frozen rows (see the module doc)."""

            def update_layer(
                self, adapter_name: str, r: int, lora_alpha: int, config: Any, **kwargs: Any
            ) -> None:
                where = f"LoRA on {kwargs.get('target_name') or type(self.get_base_layer()).__name__}"
                init = config.init_lora_weights
                if init not in PLAIN_INITS:
                    raise InputError(
                        f"{where}: init_lora_weights={init!r} rewrites the frozen base weight; use "
                        "True, False or 'gaussian', or leave the frozen Q/K out of target_modules"
                    )
                if self.resolve_lora_variant(config=config) is not None:
                    raise InputError(
                        f"{where}: a LoRA variant (DoRA, ...) rescales the frozen base weight; use plain "
                        "LoRA, or leave the frozen Q/K out of target_modules"
                    )
                super().update_layer(adapter_name, r, lora_alpha, config=config, **kwargs)
                b = self.lora_B[adapter_name]
                n = self.get_base_layer().lora_frozen_rows
                with torch.no_grad():
                    b.weight[:n].zero_()
                    if b.bias is not None:
                        b.bias[:n].zero_()
                # The output, not only the values: zero gradient there, whatever is loaded.
                b.register_forward_hook(ZeroRows(n))

            def get_delta_weight(self, adapter: str) -> torch.Tensor:
                delta = super().get_delta_weight(adapter)
                delta[: self.get_base_layer().lora_frozen_rows] = 0  # (out x in): nn.Linear's layout
                return delta

            def _bias_delta(self, adapter: str) -> Optional[torch.Tensor]:
                if not self.lora_bias[adapter]:
                    return None
                db = self.lora_B[adapter].bias.detach() * self.scaling[adapter]
                db[: self.get_base_layer().lora_frozen_rows] = 0
                return db

            def merge(self, safe_merge: bool = False, adapter_names: Optional[list[str]] = None) -> None:
                """Adds each adapter's unfrozen rows to what trains in the frozen module
                (peft's own merge writes into ``base_layer.weight``, a copy here)."""
                base = self.get_base_layer()
                for a in check_adapters_to_merge(self, adapter_names):
                    if a not in self.lora_A:
                        continue
                    dw, db = self.get_delta_weight(a), self._bias_delta(a)
                    if safe_merge and not all(torch.isfinite(t).all() for t in (dw, db) if t is not None):
                        raise ValueError(
                            f"NaNs detected in the merged weights. The adapter {a} seems to be broken"
                        )
                    base.add_delta_(dw, db)
                    self.merged_adapters.append(a)

            def unmerge(self) -> None:
                base = self.get_base_layer()
                while self.merged_adapters:
                    a = self.merged_adapters.pop()
                    if a in self.lora_A:
                        db = self._bias_delta(a)
                        base.add_delta_(-self.get_delta_weight(a), None if db is None else -db)

        # Named as this module's attribute (see __getattr__), so a pickled model finds it.
        MaskedLoraLinear.__module__, MaskedLoraLinear.__qualname__ = __name__, "MaskedLoraLinear"
        _MASKED = MaskedLoraLinear
    return _MASKED


def __getattr__(name: str) -> Any:
    # `MaskedLoraLinear` subclasses a peft class, so it is made on first use (peft is optional).
    if name == "MaskedLoraLinear":
        return masked_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ZeroRows:
    """A forward hook on an adapter's ``B`` zeroing the first ``n`` output features (a class,
    not a closure, so a model holding it can be pickled)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, module: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
        return F.pad(out[..., self.n :], (self.n, 0))


def _on_register(module: nn.Module, name: str, submodule: Optional[nn.Module]) -> None:
    """torch's module-registration hook: a peft tuner layer taking a frozen module as its
    ``base_layer`` becomes a :class:`MaskedLoraLinear` (LoRA) or is refused (other tuners)."""
    if name != "base_layer" or not isinstance(submodule, FROZEN):
        return
    kind = type(module)
    if not kind.__module__.startswith("peft."):
        return
    from peft.tuners.lora.layer import Linear

    if kind is Linear:
        module.__class__ = masked_class()
    elif not issubclass(kind, masked_class()):
        raise InputError(
            f"peft's {kind.__name__} on a frozen {type(submodule).__name__} would change the frozen "
            "matrices: use LoRA (LoraConfig), or leave the frozen Q/K out of target_modules"
        )


_HANDLE: Any = None


def install() -> None:
    """Registers the hook (once per process; :mod:`orthoformer.torch.hf` calls it)."""
    global _HANDLE
    if _HANDLE is None:
        _HANDLE = register_module_module_registration_hook(_on_register)


__all__ = ["FROZEN", "PLAIN_INITS", "ZeroRows", "install", "masked_class"]

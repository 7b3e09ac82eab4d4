"""Text generation with the PyTorch models (:meth:`orthoformer.torch.GPT.generate`,
:meth:`orthoformer.torch.Llama.generate`): the prompt's last ``context`` tokens are run once
(prefill), then each new token is decoded through a key/value cache for the softmax-kernel
variants; linear-attention variants run the last ``context`` tokens again per token. The GPT
slides its window past the context (greedy decoding, ``temperature=0``, gives ``orthoformer
generate``'s tokens on the same checkpoint); a Llama refuses to go past
``max_position_embeddings`` instead. One call makes at most the library's ``MAX_NEW_TOKENS``
tokens, as ``orthoformer generate``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from .. import _native
from ..validate import integer
from .attention import KVCache


def sample(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: Optional[int] = None,
    top_p: Optional[float] = None,
    generator: Optional[torch.Generator] = None,
) -> torch.Tensor:
    """One token per row of ``logits`` ``(B, V)``: the argmax at temperature 0, else a draw
    from ``softmax(logits / temperature)`` restricted to the ``top_k`` most likely tokens and
    to the smallest set whose probability reaches ``top_p``."""
    if not (temperature >= 0 and temperature != float("inf")):
        raise ValueError(f"temperature {temperature} must be 0 (greedy) or a positive number")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p {top_p} must be in (0, 1] (1 keeps every token)")
    if top_k is not None and top_k < 0:
        raise ValueError(f"top_k {top_k} must be at least 0 (0 keeps every token)")
    if temperature == 0:
        return logits.argmax(-1)
    z = logits.float() / temperature
    if top_k:
        kth = torch.topk(z, min(top_k, z.shape[-1]), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        sorted_z, order = torch.sort(z, descending=True, dim=-1)
        probs = sorted_z.softmax(-1)
        # Drop a token when the ones before it already reach top_p (the first always stays).
        drop = probs.cumsum(-1) - probs >= top_p
        z = z.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    probs = z.softmax(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def cached_logits(model: Any, idx: torch.Tensor, caches: list[KVCache], start: int) -> torch.Tensor:
    """Logits of the last position of ``idx`` ``(B, T)``, which sit at positions ``start ..
    start + T`` after what ``caches`` hold (extended here), for the library's GPT (a Llama's
    are :meth:`~orthoformer.torch.Llama.cached_logits`)."""
    x = model.embed(idx, start)
    for block, cache in zip(model.h, caches):
        x = block(x, cache)
    return torch.nn.functional.linear(model.ln_f(x[:, -1]), model.wte)


@torch.no_grad()
def generate(
    model: Any,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: Optional[int] = None,
    top_p: Optional[float] = None,
    *,
    generator: Optional[torch.Generator] = None,
) -> torch.Tensor:
    """``idx`` ``(B, T)`` followed by ``max_new_tokens`` sampled tokens (see :func:`sample`) of
    the library's GPT ``model``, at most the library's ``MAX_NEW_TOKENS`` (the sequence grows
    by ``B`` ids per token)."""
    check_request(idx, max_new_tokens)
    cfg = model.config
    return decode(
        model,
        idx,
        max_new_tokens,
        temperature,
        top_k,
        top_p,
        generator,
        context=cfg.context,
        layers=len(model.h),
        cache=not cfg.is_linear,
        step=lambda x, caches, start: cached_logits(model, x, caches, start),
    )


def check_request(idx: Any, max_new_tokens: Any) -> None:
    """Checks a generation request: ``max_new_tokens`` an integer up to the library's
    ``MAX_NEW_TOKENS``, ``idx`` a non-empty ``(B, T)`` tensor of token ids."""
    integer(
        "max_new_tokens",
        max_new_tokens,
        lo=0,
        hi=_native.MAX_NEW_TOKENS,
        hint="ask for fewer tokens, or continue the text in several calls",
    )
    if (
        not isinstance(idx, torch.Tensor)
        or idx.dim() != 2
        or idx.shape[1] == 0
        or idx.dtype.is_floating_point
    ):
        shown = tuple(idx.shape) if isinstance(idx, torch.Tensor) else type(idx).__name__
        raise ValueError(f"idx must be a non-empty (B, T) tensor of token ids, got {shown}")


def decode(
    model: Any,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float,
    top_k: Optional[int],
    top_p: Optional[float],
    generator: Optional[torch.Generator],
    *,
    context: int,
    layers: int,
    cache: bool,
    step: Optional[Callable[[torch.Tensor, list[KVCache], int], torch.Tensor]] = None,
) -> torch.Tensor:
    """The decoding loop of a checked request: the last ``context`` tokens of ``idx`` run
    once, then each new token through ``step(ids, caches, start)`` (last-position logits
    ``(B, V)``; default ``model.cached_logits``) with one :class:`KVCache` per layer while
    ``cache`` and the sequence fits ``context``, else ``model(last context tokens)``."""
    ctx = context
    step = model.cached_logits if step is None else step
    was_training = model.training
    model.eval()
    try:
        use_cache = cache
        caches = [KVCache() for _ in range(layers)]
        window = idx[:, -ctx:]
        if use_cache:
            logits = step(window, caches, 0)
        else:
            logits = model(window)[0][:, -1]
        out = idx
        for i in range(max_new_tokens):
            nxt = sample(logits, temperature, top_k, top_p, generator)
            out = torch.cat((out, nxt[:, None]), dim=1)
            if i + 1 == max_new_tokens:
                break
            pos = caches[0].length if use_cache else 0
            if use_cache and pos < ctx:
                logits = step(nxt[:, None], caches, pos)
            else:
                # Past the context (or linear attention): the last `context` tokens again.
                use_cache = False
                logits = model(out[:, -ctx:])[0][:, -1]
        return out
    finally:
        model.train(was_training)


__all__ = ["cached_logits", "check_request", "decode", "generate", "sample"]

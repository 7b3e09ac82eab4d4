"""PyTorch's and Hugging Face's conventions: ``labels=`` with Hugging
Face's shift beside nanoGPT's pre-shifted ``targets`` (both refused), a ``(B, S)`` padding
``attention_mask`` as its own argument with no shape-ambiguous broadcasting of ``attn_mask``,
and a ``finetune --help`` that documents every option and counts its modes."""

from __future__ import annotations

import argparse

import pytest
import torch

try:
    import transformers
except ImportError as e:  # pragma: no cover - a clear failure, never a skip
    raise ImportError("these tests need transformers: pip install transformers") from e

import orthoformer
from orthoformer import finetune
from orthoformer.finetune_loop import MODES
from orthoformer.torch import GPT, Llama, LlamaConfig
from orthoformer.torch.attention import OrthogonalAttention
from orthoformer.validate import InputError

TOL = 1e-5


def tiny_hf_llama(tmp_path) -> tuple[transformers.LlamaForCausalLM, Llama]:
    """A tiny random ``transformers`` Llama and the same weights as :class:`Llama`."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=40,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    hf = transformers.LlamaForCausalLM(cfg).eval()
    hf.save_pretrained(tmp_path, safe_serialization=True)
    return hf, Llama.from_hf(tmp_path).eval()


def tokens(b: int, t: int, hi: int = 40, seed: int = 3) -> torch.Tensor:
    return torch.randint(0, hi, (b, t), generator=torch.Generator().manual_seed(seed))


def shifted(x: torch.Tensor) -> torch.Tensor:
    """nanoGPT's targets for inputs ``x``: the next token, ``-100`` after the last."""
    return torch.cat((x[:, 1:], torch.full_like(x[:, :1], -100)), dim=1)


def test_llama_labels_give_transformers_loss_and_targets_stay_pre_shifted(tmp_path) -> None:
    hf, ours = tiny_hf_llama(tmp_path)
    x = tokens(2, 12)
    labels = x.clone()
    labels[0, 5:8] = -100  # ignored positions, as a data collator marks a prompt
    with torch.no_grad():
        want = hf(input_ids=x, labels=labels).loss
        by_labels = ours(x, labels=labels)[1]
        by_targets = ours(x, shifted(labels))[1]
        plain = ours(x, x)[1]  # x as targets is the unshifted mistake: another loss
    assert abs(by_labels.item() - want.item()) <= TOL
    assert torch.equal(by_labels, by_targets)
    assert abs(plain.item() - want.item()) > 100 * TOL


def test_gpt_labels_shift_and_both_conventions_at_once_are_refused() -> None:
    cfg = orthoformer.GPTConfig.preset("tiny")
    cfg.context = 16
    model = GPT(cfg, seed=1).eval()
    x = tokens(2, 16, hi=cfg.vocab_size)
    with torch.no_grad():
        assert torch.equal(model(x, labels=x)[1], model(x, shifted(x))[1])
    for m in (model, Llama(LlamaConfig(40, 32, 64, 1, 4))):
        with pytest.raises(InputError, match="not both") as e:
            m(x % 40, x % 40, labels=x % 40)
        assert "\n" not in str(e.value)


def test_a_b_by_t_attn_mask_is_refused_even_when_b_equals_t() -> None:
    # A (B, T) padding mask given as attn_mask used to broadcast as (T, S) when B == T.
    attn = OrthogonalAttention(32, 4, variant="softmax").eval()
    x = torch.randn(6, 6, 32)
    pad = torch.ones(6, 6, dtype=torch.bool)
    with pytest.raises(InputError, match="attention_mask") as e:
        attn(x, attn_mask=pad)
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="attention_mask has shape"):
        attn(x, attention_mask=pad[None])
    for bad in (torch.full((6, 6), 2), torch.ones(6, 6)):
        with pytest.raises(InputError, match="0 and 1"):
            attn(x, attention_mask=bad)


@pytest.mark.parametrize("variant", ["softmax", "orthogonal", "linear"])
def test_a_right_padded_batch_equals_each_sequence_alone(variant) -> None:
    torch.manual_seed(4)
    attn = OrthogonalAttention(32, 4, variant=variant, seed=2, num_kv_heads=2).eval()
    x = torch.randn(2, 9, 32)
    lengths = (6, 9)
    mask = torch.tensor([[1] * n + [0] * (9 - n) for n in lengths])  # a tokenizer's 1/0
    with torch.no_grad():
        got = attn(x, attention_mask=mask)
        # Right padding under a causal mask changes nothing before it: also compare a
        # non-causal attention, where the padding would be seen.
        bidi = OrthogonalAttention(32, 4, variant=variant, seed=3, num_kv_heads=2, causal=False).eval()
        bidi.load_state_dict(attn.state_dict())  # seed 2's matrices too
        both = bidi(x, attention_mask=mask.bool())
        for row, n in enumerate(lengths):
            alone = attn(x[row : row + 1, :n])
            assert (got[row, :n] - alone[0]).abs().max() <= TOL
            alone = bidi(x[row : row + 1, :n])
            assert (both[row, :n] - alone[0]).abs().max() <= TOL
        assert (bidi(x)[0, :6] - both[0, :6]).abs().max() > 1e-3, "the padding mask changed nothing"


def test_left_padding_leaves_no_nan(tmp_path) -> None:
    # A left-padded row's padding queries see no key under the causal mask; they are
    # unmasked (as transformers does for SDPA), so no NaN reaches the real tokens.
    _, ours = tiny_hf_llama(tmp_path)
    x = tokens(2, 8)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1], [1] * 8])
    with torch.no_grad():
        logits = ours(x, attention_mask=mask)[0]
    assert torch.isfinite(logits).all()


def test_finetune_help_documents_every_option_and_counts_its_modes(capsys) -> None:
    p = finetune._parser()
    for a in p._actions:
        if not a.option_strings or a.help == argparse.SUPPRESS or a.dest == "help":
            continue
        assert a.help, a.option_strings
        if not a.required:
            assert "default" in a.help, (a.option_strings, a.help)
    text = " ".join(p.format_help().split())
    assert "up to four ways" in text and "three ways" not in text and ":func:" not in text
    assert all(f"- {m}:" in text or f"- {m} " in text for m in MODES), text

"""The Llama-style model (``orthoformer.torch.Llama``) and what its attention gained: a tiny
random ``transformers`` Llama (made here, no hub) loads with transformers' logits and scores
as the library's engine scores it; grouped-query heads, boolean/additive masks and document
masking against explicit references; every variant trains with its frozen parts untouched;
``to_hf`` round trips; fused Q/K/V and cached RoPE tables change no number. Needs
``transformers`` and ``tokenizers`` (CI installs them)."""

from __future__ import annotations

import copy
import json
import math
import pathlib

import pytest
import torch
import torch.nn.functional as F

try:
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
except ImportError as e:  # pragma: no cover - a clear failure, never a skip
    raise ImportError(
        "these tests need transformers and tokenizers: pip install transformers tokenizers"
    ) from e

from orthoformer.config import ATTENTIONS
from orthoformer.torch import Llama, LlamaConfig, freeze_qk_
from orthoformer.torch import rope as R
from orthoformer.torch.attention import OrthogonalAttention
from orthoformer.torch.functional import frozen_orthogonal_weight
from orthoformer.validate import InputError

WORDS = [f"w{i}" for i in range(95)]
TOL = 1e-5


def tiny_hf(tied: bool, seed: int = 0) -> transformers.LlamaForCausalLM:
    """hidden 32, 4 heads, 2 key/value heads, 2 layers; weights and norms well away from
    their initial values, so a missed or misplaced tensor shows."""
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        vocab_size=len(WORDS) + 1,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
    )
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.3 * torch.randn_like(p) if "norm" in name else 0.15 * torch.randn_like(p))
    return model


def save(model: torch.nn.Module, folder: pathlib.Path) -> pathlib.Path:
    if isinstance(model, Llama):
        model.to_hf(folder)
    else:
        model.save_pretrained(folder, safe_serialization=True)
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def ids(n: int = 40, seed: int = 5) -> torch.Tensor:
    return torch.randint(1, len(WORDS) + 1, (1, n), generator=torch.Generator().manual_seed(seed))


def hf_logits(model: transformers.LlamaForCausalLM, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=x).logits


def ours(model: Llama, x: torch.Tensor, **kw) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(x, **kw)[0]


@pytest.mark.parametrize("tied", [False, True])
def test_from_hf_gives_transformers_logits(tmp_path, tied) -> None:
    hf = tiny_hf(tied)
    x = ids(48)
    folder = save(hf, tmp_path / "one")
    model = Llama.from_hf(folder)
    assert model.config.num_key_value_heads == 2 and (model.lm_head is None) == tied
    diff = (ours(model, x) - hf_logits(hf, x)).abs().max().item()
    assert diff <= TOL, f"max |Δlogit| {diff:.2e}"
    # Shards and their index load to the same model.
    hf.save_pretrained(tmp_path / "shards", safe_serialization=True, max_shard_size="20KB")
    assert not (tmp_path / "shards" / "model.safetensors").exists()
    assert torch.equal(ours(Llama.from_hf(tmp_path / "shards"), x), ours(model, x))


def engine_ppl(cli_json, folder: pathlib.Path, text: str) -> float:
    data = folder / "text.txt"
    data.write_text(text)
    r = cli_json("eval", "--model", folder, "--data", data, "--context", 64, "--max-tokens", 64)
    return float(r["report"]["perplexity"])


def ppl(model: Llama, x: torch.Tensor) -> float:
    logits = ours(model, x)
    return math.exp(F.cross_entropy(logits[0, :-1].double(), x[0, 1:]).item())


@pytest.mark.parametrize("attention", ["softmax", "orthogonal"])
def test_the_engine_scores_our_llama_as_we_do(cli_json, tmp_path, attention) -> None:
    """``orthoformer eval`` on a Llama folder against our forward: softmax as transformers
    wrote it; a frozen variant through ``to_hf`` (the engine reads the frozen weights)."""
    folder = save(tiny_hf(False), tmp_path / "hf")
    model = Llama.from_hf(folder, attention=attention, frozen_seed=7)
    if attention != "softmax":
        folder = save(model, tmp_path / "ours")
    text = " ".join(WORDS[i - 1] for i in ids(40)[0].tolist())
    x = torch.tensor([Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids])
    want, got = ppl(model, x), engine_ppl(cli_json, folder, text)
    assert abs(got - want) <= TOL * want, f"engine {got} vs ours {want}"


def attention_reference(attn: OrthogonalAttention, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Softmax attention written out: separate projections, K/V heads repeated, RoPE, masked
    scores (``keep`` ``(B|1, 1, T, T)`` boolean)."""
    b, t, _ = x.shape
    h, kv, d = attn.n_head, attn.n_kv_head, attn.d_head
    q = attn.q(x).view(b, t, h, d).transpose(1, 2)
    k = attn.k(x).view(b, t, kv, d).transpose(1, 2).repeat_interleave(h // kv, dim=1)
    v = attn.v(x).view(b, t, kv, d).transpose(1, 2).repeat_interleave(h // kv, dim=1)
    cos, sin = R._compute(0, t, d, attn.rope_theta, x.device, x.dtype)
    q, k = R.rotate(q, cos, sin), R.rotate(k, cos, sin)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    y = s.masked_fill(~keep, float("-inf")).softmax(-1) @ v
    return attn.o(y.transpose(1, 2).reshape(b, t, h * d))


@pytest.mark.parametrize("kv", [2, 1])
@pytest.mark.parametrize("variant", ["softmax", "orthogonal"])
def test_grouped_query_heads_equal_repeated_key_value_heads(variant, kv) -> None:
    torch.manual_seed(0)
    attn = OrthogonalAttention(32, 4, variant=variant, seed=11, layer=1, rope=True, num_kv_heads=kv).eval()
    assert attn.v.weight.shape == (kv * 8, 32)
    if variant != "softmax":  # W_K: kv heads of tensor 2l + 1, as freeze_qk_ draws a Llama's
        assert torch.equal(attn.k.weight, frozen_orthogonal_weight(32, kv, 8, seed=11, tensor=3))
    x = torch.randn(2, 10, 32)
    causal = torch.ones(10, 10, dtype=torch.bool).tril()
    diff = (attn(x) - attention_reference(attn, x, causal)).abs().max().item()
    assert diff <= 1e-6, diff


def test_bad_key_value_heads_are_refused() -> None:
    for bad in (3, 0, 8, 2.0, True):
        with pytest.raises(InputError, match="num_kv_heads"):
            OrthogonalAttention(32, 4, variant="softmax", num_kv_heads=bad)
    for variant in ("orthogonal-tied", "orthogonal-hadamard"):
        with pytest.raises(InputError, match=variant):
            OrthogonalAttention(32, 4, variant=variant, num_kv_heads=2)
        with pytest.raises(InputError, match="num_key_value_heads"):
            LlamaConfig(50, 32, 64, 1, 4, num_key_value_heads=2, attention=variant)


def test_boolean_and_additive_masks_agree_with_the_masked_reference() -> None:
    torch.manual_seed(1)
    attn = OrthogonalAttention(32, 4, variant="softmax", rope=True, num_kv_heads=2).eval()
    x = torch.randn(2, 9, 32)
    keep = torch.rand(2, 1, 9, 9) < 0.6
    keep |= torch.eye(9, dtype=torch.bool)  # every token may see itself: no empty row
    additive = torch.zeros(2, 1, 9, 9).masked_fill(~keep, float("-inf"))
    with torch.no_grad():
        by_bool, by_add = attn(x, attn_mask=keep), attn(x, attn_mask=additive)
        want = attention_reference(attn, x, keep & torch.ones(9, 9, dtype=torch.bool).tril())
        plain = attn(x)
    assert (by_bool - by_add).abs().max() <= 1e-6
    assert (by_bool - want).abs().max() <= 1e-6
    assert (by_bool - plain).abs().max() > 1e-3, "the mask changed nothing"
    with pytest.raises(InputError, match="attn_mask of shape"):
        attn(x, attn_mask=keep[:, :, :5])
    with pytest.raises(InputError, match="no scores"):
        OrthogonalAttention(32, 4, variant="linear")(x, attn_mask=additive)


@pytest.mark.parametrize("variant", ["softmax", "orthogonal", "linear", "orthogonal-linear"])
def test_document_masking_equals_each_document_alone(variant) -> None:
    torch.manual_seed(2)
    rope = variant not in ("linear", "orthogonal-linear")  # φ(rotated q)·φ(rotated k) is not relative
    attn = OrthogonalAttention(32, 4, variant=variant, seed=5, rope=rope, num_kv_heads=2).eval()
    x = torch.randn(2, 12, 32)
    docs = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2], [4, 4, 4, 4, 4, 4, 9, 9, 9, 9, 9, 9]])
    with torch.no_grad():
        got = attn(x, doc_ids=docs)
        for row in range(2):
            for d in docs[row].unique():
                sel = docs[row] == d
                alone = attn(x[row : row + 1, sel])
                assert (got[row : row + 1, sel] - alone).abs().max() <= 1e-5, (variant, row, int(d))
    with pytest.raises(InputError, match="doc_ids"):
        attn(x, doc_ids=docs[:, :5])


def test_llama_document_masking_equals_each_document_alone() -> None:
    torch.manual_seed(3)
    model = Llama(LlamaConfig(60, 32, 64, 2, 4, num_key_value_heads=2)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(1.0 if p.dim() == 1 else 0.0, 0.3)
    x = torch.randint(0, 60, (1, 10))
    docs = torch.tensor([[0] * 4 + [1] * 6])
    got = ours(model, x, doc_ids=docs)
    for sel in (docs[0] == 0, docs[0] == 1):
        assert (got[:, sel] - ours(model, x[:, sel])).abs().max() <= TOL
    assert (got[:, 4:] - ours(model, x)[:, 4:]).abs().max() > 1e-3, "the documents were not separated"


@pytest.mark.parametrize("attention", [a for a in ATTENTIONS if a != "orthogonal-trained"])
def test_every_variant_trains_and_leaves_frozen_parts_alone(attention) -> None:
    kv = 4 if attention in ("orthogonal-tied", "orthogonal-hadamard") else 2
    torch.manual_seed(4)
    cfg = LlamaConfig(60, 32, 64, 2, 4, num_key_value_heads=kv, attention=attention, frozen_seed=9)
    model = Llama(cfg).train()
    frozen = {n: b.clone() for n, b in model.named_buffers()}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randint(0, 60, (2, 12))
    _, loss = model(x[:, :-1], x[:, 1:])
    loss.backward()
    opt.step()
    assert all(p.grad is not None for p in model.parameters())
    assert all(not b.requires_grad for b in model.buffers())
    for n, b in model.named_buffers():
        assert torch.equal(b, frozen[n]), n
    assert all(not torch.equal(p, before[n]) for n, p in model.named_parameters()), attention
    names = {n for n, _ in model.named_parameters()}
    has_q = any(".self_attn.q." in n for n in names)
    assert has_q == (attention in ("softmax", "linear")), sorted(names)


def test_frozen_llama_equals_freeze_qk_on_transformers(tmp_path) -> None:
    hf = tiny_hf(False)
    folder = save(hf, tmp_path / "hf")
    model = Llama.from_hf(folder, attention="orthogonal", frozen_seed=21)
    freeze_qk_(hf, "orthogonal", seed=21)
    x = ids(30)
    assert (ours(model, x) - hf_logits(hf, x)).abs().max() <= TOL


@pytest.mark.parametrize("attention", ["softmax", "orthogonal", "identity-q", "orthogonal-tied"])
@pytest.mark.parametrize("tied", [False, True])
def test_to_hf_round_trips_through_transformers(tmp_path, attention, tied) -> None:
    torch.manual_seed(6)
    kv = 4 if attention == "orthogonal-tied" else 2
    cfg = LlamaConfig(60, 32, 64, 2, 4, num_key_value_heads=kv, tie_word_embeddings=tied, attention=attention)
    model = Llama(cfg)
    model.to_hf(tmp_path / "out")
    hf = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "out").eval()
    x = torch.randint(0, 60, (2, 16))
    assert (ours(model, x) - hf_logits(hf, x)).abs().max() <= TOL
    marker = json.loads((tmp_path / "out" / "config.json").read_text()).get("orthoformer")
    assert (marker is None) == (attention == "softmax")
    back = Llama.from_hf(tmp_path / "out")  # the marker freezes them again, values kept
    assert back.config.attention == attention
    assert torch.equal(ours(back, x), ours(model, x))
    assert {n for n, _ in back.named_parameters()} == {n for n, _ in model.named_parameters()}


def test_hf_configs_llama_cannot_compute_are_refused_by_name(tmp_path) -> None:
    base = tiny_hf(False).config.to_dict()
    cases = {
        "rope_parameters": {"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0}},
        "rope_scaling": {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
        "mlp_bias": {"mlp_bias": True},
        "hidden_act": {"hidden_act": "gelu"},
        "head_dim": {"head_dim": 16},
        "model_type": {"model_type": "gemma"},
        "sliding_window": {"sliding_window": 16},
    }
    for name, change in cases.items():
        with pytest.raises(InputError, match=name):
            LlamaConfig.from_hf_dict({**base, **change})
    default = {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}
    assert LlamaConfig.from_hf_dict({**base, **default}).rope_theta == 5e5


def count_linear(monkeypatch) -> list[int]:
    calls = [0]
    real = F.linear

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(torch.nn.functional, "linear", counted)
    return calls


@pytest.mark.parametrize("variant,products", [("softmax", 2), ("orthogonal", 3), ("identity-q", 2)])
def test_fused_qkv_is_one_product_with_unchanged_numbers(monkeypatch, variant, products) -> None:
    torch.manual_seed(7)
    attn = OrthogonalAttention(32, 4, variant=variant, seed=3, bias=True, rope=True, num_kv_heads=2)
    x = torch.randn(2, 8, 32, requires_grad=True)
    separate = copy.deepcopy(attn)
    for m in (separate.q, separate.k, separate.v):
        if m is not None:
            m.register_forward_hook(lambda *a: None)  # a hooked module runs as itself
    calls = count_linear(monkeypatch)
    y = attn(x)
    assert calls[0] == products, calls
    y2 = separate(x)
    assert calls[0] == products + 4 - (variant == "identity-q"), calls
    assert (y - y2).abs().max() <= 1e-6
    g = torch.autograd.grad(y.square().sum(), [x, *attn.parameters()])
    g2 = torch.autograd.grad(y2.square().sum(), [x, *separate.parameters()])
    for a, b in zip(g, g2):
        assert (a - b).abs().max() <= 1e-6 * max(1.0, b.abs().max().item())


def test_rope_tables_are_cached_and_bit_identical() -> None:
    R.clear_cache()
    with torch.inference_mode():  # a table first made here still serves a backward pass later
        R.tables(0, 4, 8, device=torch.device("cpu"), dtype=torch.float32)
    for start, length in ((0, 4), (3, 5), (60, 10), (5000, 7)):
        cos, sin = R.tables(start, length, 8, theta=500.0, device=torch.device("cpu"), dtype=torch.float32)
        angle = torch.arange(start, start + length, dtype=torch.float64)[:, None] * (
            500.0 ** (-2.0 * torch.arange(4, dtype=torch.float64) / 8)
        )
        assert torch.equal(cos, angle.cos().float()) and torch.equal(sin, angle.sin().float())
    a, _ = R.tables(2, 6, 8, device=torch.device("cpu"), dtype=torch.float32)
    b, _ = R.tables(2, 6, 8, device=torch.device("cpu"), dtype=torch.float32)
    assert a.data_ptr() == b.data_ptr(), "the second call recomputed the table"
    q = torch.randn(1, 1, 4, 8, requires_grad=True)
    cos, sin = R.tables(0, 4, 8, device=torch.device("cpu"), dtype=torch.float32)
    R.rotate(q, cos, sin).sum().backward()
    assert q.grad is not None

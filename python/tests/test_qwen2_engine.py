"""The engine runs the Qwen2 family exactly: a tiny random ``transformers`` Qwen2ForCausalLM
(made here, no hub) with large random q/k/v biases is saved as a Hugging Face folder (and as
two safetensors shards with ``model.safetensors.index.json``), and ``orthoformer eval``'s
perplexity over one window equals the one ``transformers`` computes; with the biases zeroed
both move the same way. A Llama-2-style (SentencePiece, byte-fallback) ``tokenizer.json`` scores
as ``transformers`` scores it. Needs ``transformers`` and ``tokenizers`` (CI installs them)."""

from __future__ import annotations

import json
import math
import pathlib

import gguf
import numpy as np
import torch

try:
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
except ImportError as e:  # pragma: no cover - a clear failure, never a skip
    raise ImportError(
        "these tests need transformers and tokenizers: pip install transformers tokenizers"
    ) from e

WORDS = [f"w{i}" for i in range(95)]


def tiny_qwen2(bias_std: float, vocab: int = len(WORDS) + 1) -> transformers.Qwen2ForCausalLM:
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        use_sliding_window=False,
    )
    model = transformers.Qwen2ForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.copy_(torch.randn(proj.bias.shape, generator=g) * bias_std)
    return model


def save_folder(model: transformers.Qwen2ForCausalLM, out: pathlib.Path, shard: str | None = None) -> None:
    model.save_pretrained(out, safe_serialization=True, max_shard_size=shard or "10GB")
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(out / "tokenizer.json"))


def text(n: int = 40) -> str:
    rng = np.random.default_rng(5)
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), n))


def reference_ppl(model: transformers.Qwen2ForCausalLM, folder: pathlib.Path, data: str) -> float:
    ids = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(data).ids
    with torch.no_grad():
        loss = model(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss
    return math.exp(loss.item())


def engine_ppl(cli_json, folder: pathlib.Path, data_file: pathlib.Path) -> float:
    r = cli_json("eval", "--model", folder, "--data", data_file, "--context", 64, "--max-tokens", 64)
    return float(r["report"]["perplexity"])


def test_qwen2_biases_run_as_transformers_runs_them(cli_json, tmp_path) -> None:
    data = text()
    data_file = tmp_path / "text.txt"
    data_file.write_text(data)
    got = {}
    for std in (2.0, 0.0):
        model = tiny_qwen2(std)
        folder = tmp_path / f"qwen2-{std}"
        save_folder(model, folder)
        want = reference_ppl(model, folder, data)
        got[std] = engine_ppl(cli_json, folder, data_file)
        assert abs(got[std] - want) <= 1e-4 * want, (
            f"bias std {std}: engine {got[std]} vs transformers {want}"
        )
    # The biases matter: a loader that dropped them would give the second number for both.
    assert abs(got[2.0] - got[0.0]) > 1e-2 * got[0.0], got


def test_sharded_qwen2_folder_equals_the_single_file(cli_json, tmp_path) -> None:
    data_file = tmp_path / "text.txt"
    data_file.write_text(text())
    model = tiny_qwen2(1.0)
    one, shards = tmp_path / "one", tmp_path / "sharded"
    save_folder(model, one)
    save_folder(model, shards, shard="20KB")
    index = json.loads((shards / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) >= 2, "the model was not split into shards"
    assert not (shards / "model.safetensors").exists()
    assert engine_ppl(cli_json, shards, data_file) == engine_ppl(cli_json, one, data_file)


def sentencepiece_tokenizer_json() -> tuple[str, int]:
    """A Llama-2-style ``tokenizer.json`` (SentencePiece converted by ``transformers``): BPE
    with byte fallback to ``<0xXX>``, spaces as ``▁`` with one prepended, no pre-tokenizer."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for piece in ["▁", *letters, *("▁" + c for c in letters), "th", "▁th", "▁the", "he"]:
        vocab.setdefault(piece, len(vocab))
    merges = [["▁", c] for c in letters] + [["t", "h"], ["▁", "th"], ["▁th", "e"], ["h", "e"]]
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for t, i in (("<unk>", 0), ("<s>", 1), ("</s>", 2))
        ],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "Prepend", "prepend": "▁"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
            ],
        },
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }
    return json.dumps(doc), len(vocab)


def test_sentencepiece_style_tokenizer_json_scores_as_transformers(cli_json, tmp_path) -> None:
    text_json, vocab = sentencepiece_tokenizer_json()
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        use_sliding_window=False,
    )
    model = transformers.Qwen2ForCausalLM(cfg).eval()
    folder = tmp_path / "spm"
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "tokenizer.json").write_text(text_json)
    # Bytes outside the vocabulary (é, !, digits) go through <0xXX> byte fallback.
    data = "the theme is thé end! then 42 heh"
    ids = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(data).ids
    assert any(3 <= i < 259 for i in ids), ids
    data_file = tmp_path / "text.txt"
    data_file.write_text(data)
    with torch.no_grad():
        want = math.exp(model(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss.item())
    got = engine_ppl(cli_json, folder, data_file)
    assert abs(got - want) <= 1e-4 * want, f"engine {got} vs transformers {want} ({len(ids)} tokens)"


def spm_vocab() -> tuple[list[str], list[float], list[int]]:
    """A small SentencePiece vocabulary: unknown, control, 256 byte tokens, then scored pieces
    whose merges conflict (``▁the`` is both ``▁t``+``he`` and ``▁th``+``e``)."""
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(toks)
    letters = "abcdefghijklmnopqrstuvwxyz"
    pieces = ["▁", *letters, *("▁" + c for c in letters), "th", "▁th", "▁the", "he", "en", "▁en"]
    for i, p in enumerate(dict.fromkeys(pieces)):
        toks.append(p)
        types.append(1)
        scores.append(-float(i))
    return toks, scores, types


def write_qwen2_gguf(model: transformers.Qwen2ForCausalLM, path: pathlib.Path) -> None:
    """The model as a ``qwen2`` GGUF (F32, Hugging Face Q/K order) with the SentencePiece vocabulary."""
    toks, scores, types = spm_vocab()
    c = model.config
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_block_count(c.num_hidden_layers)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_context_length(c.max_position_embeddings)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_freq_base(10000.0)  # tiny_qwen2 sets rope_theta=10000
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    names = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.q_proj.bias": "attn_q.bias",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.k_proj.bias": "attn_k.bias",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.v_proj.bias": "attn_v.bias",
        "self_attn.o_proj.weight": "attn_output.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    }
    for i in range(c.num_hidden_layers):
        for hf, gg in names.items():
            w.add_tensor(f"blk.{i}.{gg}", sd[f"model.layers.{i}.{hf}"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_sentencepiece_gguf_tokenizes_as_transformers_reads_it(cli_json, tmp_path) -> None:
    """The engine's tokenizer built from a GGUF SentencePiece vocabulary (scores, byte
    fallback, ▁) against ``transformers``' own GGUF tokenizer conversion, through a qwen2 GGUF
    with biases: equal perplexity needs equal token ids and the same forward."""
    toks, _, _ = spm_vocab()
    model = tiny_qwen2(1.0, vocab=len(toks))
    write_qwen2_gguf(model, tmp_path / "m.gguf")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file="m.gguf")
    data = "the theme is thé end! then 42 heh\\nen  the"
    ids = tok(data, add_special_tokens=False).input_ids
    assert any(3 <= i < 259 for i in ids) and toks.index("▁the") in ids, ids
    data_file = tmp_path / "text.txt"
    data_file.write_text(data)
    with torch.no_grad():
        want = math.exp(model(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss.item())
    got = engine_ppl(cli_json, tmp_path / "m.gguf", data_file)
    assert abs(got - want) <= 1e-4 * want, f"engine {got} vs transformers {want} ({len(ids)} tokens)"

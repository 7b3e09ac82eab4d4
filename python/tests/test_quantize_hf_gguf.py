"""Hugging Face in, GGUF out: a Llama folder saved by transformers with a
byte-level BPE trained by ``tokenizers`` (SmolLM's pre-tokenizer: single digits, then GPT-2's
byte-level regex) is quantised by ``orthoformer quantize --out``, and the ``gguf`` package
reads back the tokenizer llama.cpp's converter would write: every token in id order (the
embedding's extra rows as unused ``[PAD{i}]``), special tokens as control, the merges, the
pre-tokenizer's llama.cpp name, the special ids and the chat template. A tokenizer llama.cpp
would run differently (a Metaspace pre-tokenizer) is refused in one line, nothing written."""

from __future__ import annotations

import json

import gguf

from helpers import SPECIAL, TEMPLATE, tiny_bpe_llama_folder


def test_a_transformers_folder_becomes_the_gguf_llama_cpps_converter_writes(cli_json, tmp_path) -> None:
    hf, tok = tiny_bpe_llama_folder(tmp_path)
    out = tmp_path / "q.gguf"
    r = cli_json("quantize", "--model", hf, "--out", out, "--gguf-type", "q8_0", "--data", tmp_path / "t.txt")
    assert r["greedy_same"] is True
    g = gguf.GGUFReader(str(out))

    def field(k: str):
        return g.fields[k].contents()

    n = len(tok)
    vocab = {i: t for t, i in tok.get_vocab().items()}
    want = [vocab[i] for i in range(n)] + [f"[PAD{i}]" for i in range(n, n + 20)]
    assert field("tokenizer.ggml.tokens") == want
    types = field("tokenizer.ggml.token_type")
    assert types[: len(SPECIAL)] == [3] * len(SPECIAL)
    assert set(types[len(SPECIAL) : n]) == {1} and set(types[n:]) == {5}
    merges = json.loads((hf / "tokenizer.json").read_text())["model"]["merges"]
    assert field("tokenizer.ggml.merges") == [m if isinstance(m, str) else " ".join(m) for m in merges]
    assert field("tokenizer.ggml.model") == "gpt2"
    assert field("tokenizer.ggml.pre") == "smollm"
    assert field("tokenizer.ggml.bos_token_id") == tok.bos_token_id
    assert field("tokenizer.ggml.eos_token_id") == tok.eos_token_id
    assert field("tokenizer.ggml.unknown_token_id") == tok.unk_token_id
    assert field("tokenizer.chat_template") == TEMPLATE
    assert field("general.architecture") == "llama"
    assert field("llama.vocab_size") == n + 20


def test_a_tokenizer_llama_cpp_would_split_differently_is_refused(cli, tmp_path) -> None:
    hf, _ = tiny_bpe_llama_folder(tmp_path, vocab_extra=0)
    path = hf / "tokenizer.json"
    doc = json.loads(path.read_text())
    doc["pre_tokenizer"] = {
        "type": "Metaspace",
        "replacement": "\u2581",
        "prepend_scheme": "always",
        "split": True,
    }
    path.write_text(json.dumps(doc))
    out = tmp_path / "q.gguf"
    p = cli("quantize", "--model", hf, "--out", out, "--gguf-type", "q8_0", check=False)
    assert p.returncode == 2, p.stderr
    assert "pre_tokenizer" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not out.exists()

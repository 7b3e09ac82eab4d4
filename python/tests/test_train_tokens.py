"""Training on token folders (``--data-dir``): each rank reads its own disjoint rows of every
batch from the memory map, two gloo ranks equal one process, the vocabulary is the folder's
(a preset does not change it), and the tokenizer travels with the checkpoint, so
``orthoformer eval`` and ``generate`` read the checkpoint with it: a Hugging Face
``tokenizer.json``, or ids only (a model over one's own token ids saves and loads)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import orthoformer
from conftest import python_module
from orthoformer import prepare
from orthoformer.tokens import TokenFolder, TokenSampler, write_meta
from orthoformer.torch.trainer import micro_rows
from test_prepare import TEXT, hf_tokenizer_json
from test_train import max_diff, train, weights

STEPS = ["--context", 16, "--steps", 12, "--lr", 1e-2, "--warmup", 2, "--eval-every", 6]
STEPS += ["--eval-iters", 2, "--seed", 7, "--device", "cpu"]


def steps(tmp_path) -> list:
    """The flags of every run here: the ``tiny`` preset (vocabulary 65, which the folder's
    replaces) without attention biases (see test_train's ``tiny``), a few steps."""
    cfg = orthoformer.GPTConfig.preset("tiny")
    cfg.attn_bias = False
    path = tmp_path / "tiny.json"
    path.write_text(cfg.to_json())
    return ["--config", path, *STEPS]


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    """TinyShakespeare's first 60 kB through a 300-token BPE, prepared."""
    tmp = tmp_path_factory.mktemp("hf")
    (tmp / "tokenizer.json").write_text(hf_tokenizer_json(TEXT))
    (tmp / "text.txt").write_text(TEXT)
    out = tmp / "tokens"
    tok = prepare.tokenizer(str(tmp / "tokenizer.json"))
    meta = prepare.prepare([str(tmp / "text.txt")], str(out), tok, progress=False)
    assert 0.08 < meta["val_tokens"] / meta["train_tokens"] < 0.13  # one chunk, split at 90%
    return out


def ids_folder(tmp_path, vocab: int = 50):
    """Random ids with no tokenizer, written as one's own tools would, then described."""
    out = tmp_path / "ids"
    out.mkdir()
    rng = np.random.default_rng(1)
    for split, n in (("train", 5000), ("val", 600)):
        rng.integers(0, vocab, size=n, dtype=np.uint16).tofile(out / f"{split}.bin")
    write_meta(out, vocab, {"kind": "ids"})
    return out


def test_rank_shards_are_disjoint_and_cover_the_batch(tmp_path) -> None:
    for batch, accum, size in ((8, 1, 2), (12, 3, 2), (16, 2, 4), (5, 5, 1)):
        rows = [micro_rows(batch, accum, size, r, j) for j in range(accum) for r in range(size)]
        covered = sorted(i for lo, hi in rows for i in range(lo, hi))
        assert covered == list(range(batch)), (batch, accum, size)
    # Rows read from the memory map are the windows at the drawn offsets (ids = positions).
    folder = tmp_path / "pos"
    folder.mkdir()
    for split in ("train", "val"):
        np.arange(70_000, dtype=np.uint32).tofile(folder / f"{split}.bin")
    write_meta(folder, 70_000, {"kind": "ids"})
    tf = TokenFolder(folder)
    assert tf.meta["dtype"] == "uint32" and isinstance(tf.open("train"), np.memmap)
    sampler = TokenSampler(tf, seed=3)
    sampler.draw("train", 8, 16)
    x, y = sampler.rows(*micro_rows(8, 2, 2, 1, 1))  # rank 1, second micro-step: rows 6..8
    off = sampler.offsets[6:8]
    assert np.array_equal(x, off[:, None] + np.arange(16)) and np.array_equal(y, x + 1)
    again = TokenSampler(tf, seed=3)
    again.draw("train", 8, 16)
    assert np.array_equal(again.offsets, sampler.offsets) and sampler.position == 1


def test_two_gloo_ranks_on_token_files_equal_one_process(tmp_path, hf_folder) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    args = [*steps(tmp_path), "--data-dir", hf_folder, "--attention", "orthogonal", "--batch", 8]
    train(*args, "--out", one)
    train(*args, "--out", two, torchrun=2)
    assert max_diff(weights(one), weights(two)) < 1e-5


def test_tokenizer_travels_with_the_checkpoint(cli, cli_json, tmp_path, hf_folder) -> None:
    run = tmp_path / "run"
    p = train(*steps(tmp_path), "--data-dir", hf_folder, "--batch", 4, "--out", run)
    # The preset's vocabulary (65) gives way to the folder's, and the run says so.
    assert f"vocabulary 300 from {hf_folder}" in p.stderr and "(hf tokenizer)" in p.stderr
    ck = orthoformer.load_checkpoint(run)
    assert ck.config.vocab_size == 300 and ck.state["tokenizer"] == {"kind": "hf", "file": "tokenizer.json"}
    assert ck.state["data"]["source"] == str(hf_folder)
    assert (run / "tokenizer.json").read_text() == (hf_folder / "tokenizer.json").read_text()
    # The Python side decodes through the same recorded tokenizer.
    from tokenizers import Tokenizer as HfTokenizer

    tok, sample = ck.tokenizer, TEXT[:2000]
    hf = HfTokenizer.from_file(str(hf_folder / "tokenizer.json"))
    assert tok.name == "hf" and tok.encode(sample).tolist() == hf.encode(sample, add_special_tokens=False).ids
    assert tok.decode(tok.encode(sample)) == sample
    ev = cli_json("eval", "--checkpoint", run, "--eval-iters", 1)
    assert ev["data"].startswith("val.bin of") and ev["tokenizer"] == "hf" and ev["report"]["unit"] == "byte"
    g = cli_json("generate", "--checkpoint", run, "--prompt", "ROMEO:", "--max-new-tokens", 8)
    assert g["prompt"] == "ROMEO:" and g["new_tokens"] == 8 and g["text"]
    # Either trainer's resume: this one continues it on the recorded folder (not as another
    # model: the library's check, as for text runs), and so does the Rust one.
    r = python_module("orthoformer.train", "--out", run, "--resume", "--position", "rope")
    assert r.returncode == 2 and 'position is "learned" in the checkpoint but "rope"' in r.stderr, r.stderr
    train("--out", run, "--resume", "--steps", 14)
    assert orthoformer.load_checkpoint(run).step == 14
    cli("train", "--out", run, "--resume", "--steps", 16)
    assert orthoformer.load_checkpoint(run).step == 16


def test_ids_only_models_save_and_load(cli, cli_json, tmp_path) -> None:
    folder = ids_folder(tmp_path)
    run = tmp_path / "run"
    train(*steps(tmp_path), "--data-dir", folder, "--batch", 4, "--out", run)
    ck = orthoformer.load_checkpoint(run)
    assert ck.tokenizer.decode([1, 49]) == " 1 49" and ck.tokenizer.encode("3 4").tolist() == [3, 4]
    assert (
        ck.state["tokenizer"] == {"kind": "ids", "vocab_size": 50} and not (run / "tokenizer.json").exists()
    )
    g = cli_json("generate", "--checkpoint", run, "--prompt", "1 2 3", "--max-new-tokens", 5)
    new = g["text"].split()  # the ids, each after a space
    assert g["text"].startswith(" ") and len(new) == 5 and all(0 <= int(t) < 50 for t in new)
    # A model trained anywhere on one's own ids: save_checkpoint(tokenizer="ids").
    cfg = ck.config
    out = tmp_path / "saved"
    orthoformer.save_checkpoint(out, cfg, ck.params, tokenizer="ids")
    back = orthoformer.load_checkpoint(out)
    assert back.state["tokenizer"]["kind"] == "ids" and max_diff(back.params, ck.params) == 0
    assert cli_json("eval", "--checkpoint", run, "--eval-iters", 1)["report"]["unit"] == "token"


def test_token_folder_errors_exit_2_with_one_line(tmp_path, hf_folder) -> None:
    folder = ids_folder(tmp_path)
    (folder / "val.bin").write_bytes(b"\0" * 10)
    for args, message in (
        (["--data-dir", folder], "is missing or not the 600 uint16 tokens"),
        (["--data-dir", hf_folder, "--tokenizer", "bpe"], "do not apply to --data-dir"),
        (["--data-dir", hf_folder, "--context", 100_000], "context"),
    ):
        p = python_module("orthoformer.train", *steps(tmp_path), *args, "--out", tmp_path / "x")
        assert p.returncode == 2 and message in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    meta = json.loads((hf_folder / "meta.json").read_text())
    assert meta["format"] == "orthoformer-tokens"

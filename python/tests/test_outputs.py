"""Outputs never replace inputs: ``prepare --out`` and ``to_hf`` write only into a
new or empty folder or an earlier output of their own kind, never into a checkpoint or a
foreign folder, never through a link, never over or inside an input; their files are replaced
as one set, so a failed or killed run leaves the old folder as it was (or, past the commit
point, the new one whole)."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from conftest import ROOT
from helpers import small_config
from orthoformer import outputs, prepare
from orthoformer.tokens import TokenFolder
from orthoformer.validate import InputError

TEXT = (ROOT / "data" / "tinyshakespeare.txt").read_text()[:30_000]


def _prepare(tmp_path: pathlib.Path, out: pathlib.Path, *extra: str, text: str = TEXT) -> int:
    src = tmp_path / "corpus.txt"
    if not src.exists():
        src.write_text(text)
    code = prepare.main(["--input", str(src), "--out", str(out), "--quiet", "--train-bpe", "300", *extra])
    return code


def _snapshot(folder: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.is_symlink()}


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("marked", [True, False])
def test_prepare_never_rewrites_a_checkpoint_that_holds_a_token_meta_json(tmp_path, capsys, marked) -> None:
    tokens = tmp_path / "tokens"
    assert _prepare(tmp_path, tokens) == 0
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "state.json").write_text("{}")
    (ckpt / "tokenizer.json").write_text("the checkpoint's tokenizer")
    (ckpt / "meta.json").write_bytes((tokens / "meta.json").read_bytes())
    if marked:
        (ckpt / ".orthoformer").write_text("orthoformer-folder checkpoint\n")
    before = _snapshot(ckpt)
    capsys.readouterr()
    assert _prepare(tmp_path, ckpt) == 2
    err = _one_line(capsys)
    assert ("training checkpoint" if marked else "not a token folder") in err
    assert _snapshot(ckpt) == before


def test_a_failed_prepare_leaves_the_old_token_folder_intact(tmp_path, capsys) -> None:
    out = tmp_path / "tokens"
    assert _prepare(tmp_path, out) == 0
    before = _snapshot(out)
    # A folder where the tokenizer goes: the old commit replaced train.bin and val.bin and
    # removed meta.json before failing on it.
    (out / "tokenizer.json").unlink()
    (out / "tokenizer.json").mkdir()
    before.pop("tokenizer.json")
    capsys.readouterr()
    assert _prepare(tmp_path, out) == 2
    assert "tokenizer.json is not a regular file" in _one_line(capsys)
    assert _snapshot(out) == before
    (out / "tokenizer.json").rmdir()
    # A failure while tokenizing (a file that is not UTF-8) changes nothing either.
    assert _prepare(tmp_path, out) == 0
    before = _snapshot(out)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9\n")
    code = prepare.main(["--input", str(tmp_path / "corpus.txt"), str(bad), "--out", str(out), "--quiet"])
    assert code == 2 and _snapshot(out) == before
    assert sorted(os.listdir(out)) == sorted(before)


def test_a_prepare_killed_after_its_commit_point_is_finished_by_the_reader(tmp_path, monkeypatch) -> None:
    out = tmp_path / "tokens"
    assert _prepare(tmp_path, out) == 0
    old = _snapshot(out)
    real_replace, calls = os.replace, []

    def dies_midway(src, dst):  # the record's publication, one file moved, then the "kill"
        calls.append(dst)
        if len(calls) == 3:
            raise OSError("killed")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", dies_midway)
    assert _prepare(tmp_path, out, "--val-fraction", "0.3") == 2
    monkeypatch.setattr(os, "replace", real_replace)
    assert (out / ".tokens.commit").exists()  # committed, half moved: a mix on disk
    folder = TokenFolder(out)  # finishes the set before reading it
    assert not (out / ".tokens.commit").exists()
    assert folder.meta["val_tokens"] > 2 * json.loads(old["meta.json"])["val_tokens"]
    assert not any(n.startswith(".tokens.new") for n in os.listdir(out))


def test_prepare_refuses_links_in_its_output_and_never_writes_through_them(tmp_path, capsys) -> None:
    out = tmp_path / "tokens"
    assert _prepare(tmp_path, out) == 0
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious")
    (out / "val.bin").unlink()
    (out / "val.bin").symlink_to(victim)
    (out / ".tokens.new.train.bin").symlink_to(victim)  # a staged name: removed, never followed
    capsys.readouterr()
    assert _prepare(tmp_path, out) == 2
    assert "val.bin is a link" in _one_line(capsys)
    assert victim.read_bytes() == b"precious" and (out / "val.bin").is_symlink()


@pytest.mark.parametrize("case", ["input inside out", "out inside input", "tokenizer inside out", "same"])
def test_prepare_output_is_never_an_input_or_inside_one(tmp_path, capsys, case) -> None:
    out = tmp_path / "tokens"
    assert _prepare(tmp_path, out) == 0
    before = _snapshot(out)
    corpus = tmp_path / "corpus.txt"
    if case == "input inside out":
        argv = ["--input", str(out / "meta.json"), "--out", str(out), "--train-bpe", "300"]
    elif case == "out inside input":
        argv = ["--input", str(tmp_path), "--out", str(out), "--train-bpe", "300"]
    elif case == "tokenizer inside out":
        argv = ["--input", str(corpus), "--out", str(out), "--tokenizer", str(out / "tokenizer.json")]
    else:  # the same folder, spelled through a link and `..`
        (tmp_path / "link").symlink_to(out)
        argv = ["--input", str(tmp_path / "link" / ".." / "tokens" / "train.bin"), "--out", str(out)]
        argv += ["--train-bpe", "300"]
    capsys.readouterr()
    assert prepare.main([*argv, "--quiet"]) == 2
    assert "--out" in _one_line(capsys)
    assert _snapshot(out) == before


def test_check_apart_compares_resolved_paths_and_inodes(tmp_path) -> None:
    a = tmp_path / "a"
    (a / "b").mkdir(parents=True)
    (tmp_path / "l").symlink_to(a)
    assert outputs.contains(a, tmp_path / "l" / "b" / "new-file")
    assert outputs.contains(tmp_path / "l", a / "b" / ".." / "b")
    assert not outputs.contains(a / "b", a)
    with pytest.raises(InputError, match="lies inside --in"):
        outputs.check_apart("--out", tmp_path / "l" / "b", [("--in", a)])
    outputs.check_apart("--out", tmp_path / "other", [("--in", a), ("--none", None)])


@pytest.fixture()
def checkpoint_like(tmp_path) -> pathlib.Path:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / ".orthoformer").write_text("orthoformer-folder checkpoint\n")
    for name in ("model.safetensors", "state.json", "optimizer.safetensors", "SHA256SUMS"):
        (folder / name).write_bytes(b"checkpoint bytes " + name.encode())
    return folder


def _gpt():
    from orthoformer.torch import GPT

    return GPT(small_config("orthogonal"), seed=0)


def _llama():
    from orthoformer.torch import Llama, LlamaConfig

    cfg = LlamaConfig(
        vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
    )
    return Llama(cfg)


@pytest.mark.parametrize("make", [_gpt, _llama], ids=["gpt", "llama"])
def test_to_hf_refuses_checkpoints_and_foreign_folders(tmp_path, checkpoint_like, make) -> None:
    model = make()
    before = _snapshot(checkpoint_like)
    with pytest.raises(InputError, match="holds a training checkpoint"):
        model.to_hf(checkpoint_like)
    assert _snapshot(checkpoint_like) == before
    # Unmarked, from before markers (state.json), or anyone's folder: refused too.
    (checkpoint_like / ".orthoformer").unlink()
    before.pop(".orthoformer")
    with pytest.raises(InputError, match="is not empty"):
        model.to_hf(checkpoint_like)
    assert _snapshot(checkpoint_like) == before
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "config.json").write_text('{"mine": true}')
    with pytest.raises(InputError, match="is not empty"):
        model.to_hf(foreign)
    assert (foreign / "config.json").read_text() == '{"mine": true}'
    # A new folder, then the same export again (its marker says it is ours).
    out = tmp_path / "export"
    model.to_hf(out)
    model.to_hf(out)
    assert sorted(os.listdir(out)) == [".orthoformer", "config.json", "model.safetensors"]
    assert type(model).from_hf(out) is not None


def test_a_gpt2_export_is_not_a_llama_export(tmp_path) -> None:
    out = tmp_path / "export"
    _gpt().to_hf(out)
    with pytest.raises(InputError, match="Hugging Face GPT-2 model, not a Hugging Face Llama"):
        _llama().to_hf(out)

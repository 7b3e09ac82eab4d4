"""``prepare`` writes what it declares: the validation share is the fraction asked
for (to within 0.1% of the bytes, whatever the line lengths), no id reaches or passes the
declared vocabulary, and a bad number flag is one line with exit status 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import python_module
from orthoformer import prepare, tokens
from orthoformer.validate import InputError
from test_prepare import TEXT, tiktoken_encoding


def _val_share(tmp_path, texts: list[str], fraction: float, chunk_mb: float = 4.0) -> float:
    """The share of the text's bytes that ``val.bin`` decodes to (a byte-level encoding)."""
    enc = tiktoken_encoding(TEXT[:5000], merges=20)
    folder = tmp_path / f"text-{fraction}-{chunk_mb}"
    folder.mkdir(parents=True)
    for i, t in enumerate(texts):
        (folder / f"{i}.txt").write_text(t)
    out = tmp_path / f"out-{fraction}-{chunk_mb}"
    tok = prepare.from_tiktoken(enc)
    prepare.prepare([str(folder)], str(out), tok, val_fraction=fraction, chunk_mb=chunk_mb, progress=False)
    val = np.fromfile(out / "val.bin", dtype="<u2").tolist()
    total = sum(len(t.encode()) for t in texts)
    return len(enc.decode_bytes(val)) / total


@pytest.mark.parametrize("fraction", [0.999, 0.6, 0.25, 0.01])
def test_the_validation_share_is_the_fraction_asked_for(tmp_path, fraction) -> None:
    # Lines of text, and files that are one long line each (no place a tokenizer never joins
    # pieces): the old rule put a whole chunk or file on one side (0.25% for 0.999).
    lines = [TEXT[:40_000]]
    one_line = [TEXT[i : i + 20_000].replace("\n", " ") for i in (0, 20_000)]
    for texts in (lines, one_line):
        assert _val_share(tmp_path / str(len(texts)), texts, fraction) == pytest.approx(fraction, abs=1e-3)
    # Small chunks: the split falls inside one of many.
    assert _val_share(tmp_path, lines, fraction, chunk_mb=0.002) == pytest.approx(fraction, abs=1e-3)


def test_a_tokenizer_whose_ids_pass_its_vocabulary_is_refused_by_name(tmp_path, capsys) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(sorted(set(TEXT[:3000].split())))}
    vocab["[UNK]"] = len(vocab)
    vocab["zzzunused"] = 5000  # never in the text: the old check only saw ids the text used
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "gaps.json"
    path.write_text(tok.to_str())
    text = tmp_path / "t.txt"
    text.write_text(TEXT[:3000])
    out = tmp_path / "out"
    code = prepare.main(["--input", str(text), "--out", str(out), "--tokenizer", str(path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "'zzzunused' has id 5000, not below the vocabulary size" in err
    assert not out.exists()


def test_write_meta_refuses_a_vocabulary_below_the_ids(tmp_path) -> None:
    for split, ids in (("train", [1, 2, 300]), ("val", [4, 5])):
        np.asarray(ids, "<u2").tofile(tmp_path / f"{split}.bin")
    with pytest.raises(InputError, match="vocab_size 300 is not above the largest id in train.bin, 300"):
        tokens.write_meta(tmp_path, 300, {"kind": "ids"})
    assert not (tmp_path / "meta.json").exists()
    meta = tokens.write_meta(tmp_path, 301, {"kind": "ids"})
    assert json.loads((tmp_path / "meta.json").read_text()) == meta


@pytest.mark.parametrize(
    "flag,value,message",
    [
        ("--chunk-mb", "inf", "--chunk-mb must be a finite number, got inf"),
        ("--chunk-mb", "nan", "--chunk-mb must be a finite number, got nan"),
        ("--chunk-mb", "-1", "--chunk-mb must be > 0 and <= 4096, got -1"),
        ("--chunk-mb", "1e308", "--chunk-mb must be > 0 and <= 4096, got 1e+308"),
        ("--chunk-mb", "lots", "--chunk-mb must be a number, got 'lots'"),
        ("--val-fraction", "nan", "--val-fraction must be a finite number, got nan"),
        ("--train-bpe", "-3", "--train-bpe must be from 257 to 65536, got -3"),
        ("--train-bpe", "1e4", "--train-bpe must be an integer, got '1e4'"),
    ],
)
def test_number_flags_are_one_line_and_exit_2(tmp_path, capsys, flag, value, message) -> None:
    text = tmp_path / "t.txt"
    text.write_text(TEXT[:2000])
    extra = [] if flag == "--train-bpe" else ["--train-bpe", "300"]
    code = prepare.main(["--input", str(text), "--out", str(tmp_path / "o"), flag, value, *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_chunk_mb_inf_as_a_process_prints_one_line(tmp_path) -> None:
    text = tmp_path / "t.txt"
    text.write_text(TEXT[:2000])
    p = python_module("orthoformer.prepare", "--input", text, "--out", tmp_path / "o", "--chunk-mb", "inf")
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr
    assert "Traceback" not in p.stderr and "--chunk-mb" in p.stderr

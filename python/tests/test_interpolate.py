"""``python -m orthoformer.interpolate``: the loss along the line between two models. A model
and its own rotated copy compute the same function, yet the line between their weights
leaves it (a barrier); after ``align_weights`` the line is flat, since both ends are the same
weights. Bad requests exit 2 with one line."""

from __future__ import annotations

import json

import orthoformer
from orthoformer import interpolate
from helpers import tiny_bpe_llama_folder


def _path(a, b, text, capsys) -> dict:
    argv = ["--model", str(a), "--model-b", str(b), "--data", str(text), "--tokens", "256", "--context", "32"]
    assert interpolate.main([*argv, "--points", "5", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_alignment_flattens_the_path_between_a_model_and_its_rotation(tmp_path, capsys) -> None:
    a, _ = tiny_bpe_llama_folder(tmp_path)
    text = tmp_path / "t.txt"
    rotated = tmp_path / "rotated"
    orthoformer.rotate(a, rotated, rotation="random", seed=1)
    folded = tmp_path / "folded"
    orthoformer.align_weights(a, a, folded, check=text, context=32)
    aligned = tmp_path / "aligned"
    orthoformer.align_weights(a, rotated, aligned, check=text, context=32)

    same = _path(a, a, text, capsys)
    assert same["barrier"] < 1e-9 and len(same["losses"]) == 5 and same["alphas"][-1] == 1.0
    ends = _path(folded, rotated, text, capsys)
    # Same function at both ends ...
    assert abs(ends["losses"][0] - ends["losses"][-1]) < 1e-4
    # ... but not along the line: the midpoint is a different model.
    assert ends["barrier"] > 1e-3, ends
    flat = _path(folded, aligned, text, capsys)
    assert flat["barrier"] < 1e-4 and max(flat["losses"]) - min(flat["losses"]) < 1e-4, flat


def test_bad_requests_exit_2_with_one_line(tmp_path, capsys) -> None:
    a, _ = tiny_bpe_llama_folder(tmp_path)
    text = tmp_path / "t.txt"
    capsys.readouterr()  # transformers' save progress
    base = ["--model", str(a), "--data", str(text)]
    cases = [
        ([*base, "--model-b", str(tmp_path / "missing")], "--model-b"),
        ([*base, "--model-b", str(a), "--points", "1"], "--points"),
        ([*base, "--model-b", str(a), "--context", "100000"], "--context"),
        (["--model", str(a), "--model-b", str(a), "--data", str(tmp_path / "none.txt")], "--data"),
    ]
    for argv, flag in cases:
        assert interpolate.main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert flag in err and len(err.splitlines()) == 1, err


def test_models_of_another_configuration_or_tokenizer_are_refused_by_field(tmp_path, capsys) -> None:
    import shutil

    a, _ = tiny_bpe_llama_folder(tmp_path)
    text = tmp_path / "t.txt"
    capsys.readouterr()
    base = ["--model", str(a), "--data", str(text), "--tokens", "256", "--context", "32"]
    # The same shapes under another rope_theta: the path would run B as a different model.
    b = tmp_path / "b"
    shutil.copytree(a, b)
    cfg = json.loads((b / "config.json").read_text())
    cfg["rope_theta"] = cfg.get("rope_theta", 10000.0) * 2
    (b / "config.json").write_text(json.dumps(cfg))
    assert interpolate.main([*base, "--model-b", str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert "rope_theta" in err and len(err.splitlines()) == 1, err
    # The same configuration with two vocabulary entries swapped.
    c = tmp_path / "c"
    shutil.copytree(a, c)
    tok = json.loads((c / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    x, y = list(vocab)[10:12]
    vocab[x], vocab[y] = vocab[y], vocab[x]
    (c / "tokenizer.json").write_text(json.dumps(tok))
    assert interpolate.main([*base, "--model-b", str(c)]) == 2
    err = capsys.readouterr().err.strip()
    assert "tokenizer.json's model differs" in err and len(err.splitlines()) == 1, err

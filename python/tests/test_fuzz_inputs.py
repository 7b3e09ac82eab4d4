"""Fuzz suite of the Python side's inputs: every input the package reads or is
given is checked as the command line checks it. Each case feeds one hostile input to an entry
point (``main(argv)`` in this process; a few through ``python -m`` for the exit status) and
asserts one clear error: status 2, exactly one ``error:`` line on stderr naming the field or
flag, and nothing written (the output absent, or unchanged byte for byte).

Classes (``FUZZ_SEED`` reseeds the mutated ones): ``meta.json`` fields with hostile values,
``meta.json`` byte mutations, token-file mutations, hostile options of ``train``,
``prepare`` and ``finetune``, hostile outputs, and a few subprocess cases."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pathlib
import shutil

import numpy as np
import pytest

from conftest import python_module
from orthoformer import finetune, prepare, train
from orthoformer.tokens import TokenFolder, write_meta
from orthoformer.validate import InputError
from test_prepare import TEXT, hf_tokenizer_json

SEED = int(os.environ.get("FUZZ_SEED", "52"))
VOCAB = 50


def snapshot(path: pathlib.Path) -> dict:
    """Every file under ``path`` (hidden ones too) with its SHA-256; ``None`` when absent."""
    if not path.exists():
        return None
    if path.is_file():
        return {"": hashlib.sha256(path.read_bytes()).hexdigest()}
    return {
        os.fspath(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else "dir"
        for f in sorted(path.rglob("*"))
    }


def one_error(capsys, code: int, *names: str) -> str:
    """Asserts status 2 and one ``error:`` line on stderr naming every one of ``names``."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> pathlib.Path:
    """A valid token folder of ids only (vocabulary 50, uint16), as one's own tools write one."""
    out = tmp_path_factory.mktemp("fuzz") / "ids"
    out.mkdir()
    rng = np.random.default_rng(1)
    for split, n in (("train", 5000), ("val", 600)):
        rng.integers(0, VOCAB, size=n, dtype=np.uint16).tofile(out / f"{split}.bin")
    write_meta(out, VOCAB, {"kind": "ids"})
    cfg = out.parent / "tiny.json"
    from orthoformer import GPTConfig

    c = GPTConfig.preset("tiny")
    c.attn_bias = False
    cfg.write_text(c.to_json())
    return out


def copy(base: pathlib.Path, tmp: pathlib.Path) -> pathlib.Path:
    folder = tmp / "data"
    shutil.copytree(base, folder)
    return folder


def train_args(base: pathlib.Path, folder: pathlib.Path, out: pathlib.Path, *extra) -> list[str]:
    args = ["--config", base.parent / "tiny.json", "--context", 16, "--steps", 2, "--batch", 2]
    args += ["--eval-every", 1, "--eval-iters", 1, "--device", "cpu", "--data-dir", folder, "--out", out]
    return [str(a) for a in (*args, *extra)]


def edit_meta(folder: pathlib.Path, key: str, value) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    if value is DELETE:
        del meta[key]
    else:
        meta[key] = value
    (folder / "meta.json").write_text(json.dumps(meta))


DELETE = object()
SHA = "sha256"
# (field, hostile value, what the one line must name)
META_CASES = [
    ("format", "nanogpt", "format"),
    ("format", 1, "format"),
    ("format", DELETE, "format"),
    ("version", 2, "version"),
    ("version", "1", "version"),
    ("version", True, "version"),
    ("dtype", "int16", "dtype"),
    ("dtype", "uint32", "uint32 tokens"),
    ("dtype", None, "dtype"),
    ("dtype", DELETE, "dtype"),
    ("vocab_size", 10, "vocab_size"),
    ("vocab_size", 49, "vocab_size"),
    ("vocab_size", 50.5, "vocab_size"),
    ("vocab_size", 257.5, "vocab_size"),
    ("vocab_size", "50", "vocab_size"),
    ("vocab_size", True, "vocab_size"),
    ("vocab_size", None, "vocab_size"),
    ("vocab_size", 0, "vocab_size"),
    ("vocab_size", -1, "vocab_size"),
    ("vocab_size", 2**33, "vocab_size"),
    ("vocab_size", 70_000, "dtype"),
    ("vocab_size", DELETE, "vocab_size"),
    ("train_tokens", 4999, "4999 uint16 tokens"),
    ("train_tokens", 5000.0, "train_tokens"),
    ("train_tokens", "5000", "train_tokens"),
    ("train_tokens", 0, "train_tokens"),
    ("train_tokens", -1, "train_tokens"),
    ("train_tokens", None, "train_tokens"),
    ("train_tokens", DELETE, "train_tokens"),
    ("val_tokens", 601, "601 uint16 tokens"),
    ("val_tokens", 1e300, "val_tokens"),
    ("val_tokens", [600], "val_tokens"),
    ("sha256", "0" * 64, SHA),
    ("sha256", "xyz", SHA),
    ("sha256", 123, SHA),
    ("sha256", None, SHA),
    ("sha256", DELETE, SHA),
    ("tokenizer", "ids", "tokenizer"),
    ("tokenizer", {"kind": "bpe"}, "tokenizer"),
    ("tokenizer", {"kind": "hf"}, "tokenizer.json"),
    ("tokenizer", {"kind": "tiktoken", "name": 5}, "tokenizer.name"),
    ("tokenizer", [], "tokenizer"),
    ("text_bytes", -1, "text_bytes"),
    ("text_bytes", 1.5, "text_bytes"),
    ("eot", VOCAB, "eot"),
    ("eot", -1, "eot"),
    ("eot", "0", "eot"),
    ("source", 5, "source"),
]


@pytest.mark.parametrize("key,value,name", META_CASES, ids=[f"{k}={v!r}"[:40] for k, v, _ in META_CASES])
def test_meta_fields(capsys, tmp_path, base, key, value, name) -> None:
    folder = copy(base, tmp_path)
    edit_meta(folder, key, value)
    before, out = snapshot(folder), tmp_path / "run"
    code = train.main(train_args(base, folder, out))
    one_error(capsys, code, name)
    assert not out.exists() and snapshot(folder) == before


WHOLE = [b"[]", b'"x"', b"null", b"5", b"{", b"", b"\xef\xbb\xbf{}", b"\xff\xfe", b"[" * 100_000]


@pytest.mark.parametrize("text", WHOLE, ids=range(len(WHOLE)))
def test_meta_documents(capsys, tmp_path, base, text) -> None:
    folder = copy(base, tmp_path)
    (folder / "meta.json").write_bytes(text)
    code = train.main(train_args(base, folder, tmp_path / "run"))
    one_error(capsys, code, "meta.json")
    assert not (tmp_path / "run").exists()


def test_meta_byte_mutations(tmp_path, base) -> None:
    """200 seeded mutations of meta.json's bytes (flips, insertions, deletions, truncation):
    each is refused with one line naming the file, or reads as a folder whose every field
    agrees with its files."""
    rng = np.random.default_rng(SEED)
    good = bytearray((base / "meta.json").read_bytes())
    folder = copy(base, tmp_path)
    refused = 0
    for _ in range(200):
        b = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(0, len(b)))
            op = rng.integers(0, 4)
            if op == 0:
                b[i] ^= 1 << int(rng.integers(0, 8))
            elif op == 1:
                b.insert(i, int(rng.choice(list(b'0123456789"{}[],:.-e '))))
            elif op == 2:
                del b[i]
            else:
                del b[i:]
        (folder / "meta.json").write_bytes(bytes(b))
        try:
            tf = TokenFolder(folder)
        except InputError as e:
            assert "\n" not in str(e) and "meta.json" in str(e) or ".bin" in str(e), str(e)
            refused += 1
            continue
        assert tf.vocab_size >= VOCAB and tf.lengths == {"train": 5000, "val": 600}
    print(f"meta.json byte mutations: {refused} of 200 refused, {200 - refused} valid and consistent")
    assert refused > 150, refused


def token_file_cases():
    rng = np.random.default_rng(SEED + 1)
    cases = [
        ("id = vocab in train.bin", "train", "set", 1234, VOCAB, "vocab_size"),
        ("id 65535 in val.bin", "val", "set", 599, 65535, "vocab_size"),
        ("truncated train.bin", "train", "truncate", 2, None, "train.bin"),
        ("odd byte in val.bin", "val", "append", 1, None, "val.bin"),
        ("train.bin a folder", "train", "folder", 0, None, "train.bin"),
        ("val.bin missing", "val", "missing", 0, None, "val.bin"),
    ]
    for _ in range(14):
        pos = int(rng.integers(0, 10_000))
        cases.append((f"flipped byte {pos}", "train", "flip", pos, int(rng.integers(0, 8)), "meta.json"))
    return cases


TOKEN_CASES = token_file_cases()


@pytest.mark.parametrize("what,split,op,pos,arg,name", TOKEN_CASES, ids=[c[0] for c in TOKEN_CASES])
def test_token_files(capsys, tmp_path, base, what, split, op, pos, arg, name) -> None:
    folder = copy(base, tmp_path)
    path = folder / f"{split}.bin"
    if op == "set":  # a consistent meta.json (sizes, SHA-256) over an id it cannot hold
        ids = np.fromfile(path, dtype="<u2")
        ids[pos] = arg
        ids.tofile(path)
        # write_meta refuses such a vocabulary: the lie is edited in afterwards.
        meta = write_meta(folder, 1 << 16, {"kind": "ids"})
        (folder / "meta.json").write_text(json.dumps({**meta, "vocab_size": VOCAB}))
    elif op == "flip":  # the SHA-256 (or the vocabulary) catches an edit meta.json missed
        b = bytearray(path.read_bytes())
        b[pos] ^= 1 << arg
        path.write_bytes(bytes(b))
    elif op == "truncate":
        path.write_bytes(path.read_bytes()[:-pos])
    elif op == "append":
        path.write_bytes(path.read_bytes() + b"\0")
    elif op == "folder":
        path.unlink()
        path.mkdir()
    else:
        path.unlink()
    code = train.main(train_args(base, folder, tmp_path / "run"))
    line = one_error(capsys, code)
    assert name in line or "vocab_size" in line, line
    assert not (tmp_path / "run").exists()


def test_hf_tokenizer_disagreeing_with_meta(capsys, tmp_path, base) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    (tmp_path / "t.txt").write_text(TEXT[:20_000])
    (tmp_path / "tok.json").write_text(hf_tokenizer_json(TEXT[:20_000], 300))
    tok = prepare.tokenizer(str(tmp_path / "tok.json"))
    prepare.prepare([str(tmp_path / "t.txt")], str(folder), tok, progress=False)
    edit_meta(folder, "vocab_size", 301)  # the ids fit, the tokenizer says 300
    code = train.main(train_args(base, folder, tmp_path / "run"))
    one_error(capsys, code, "vocab_size", "tokenizer.json")
    assert not (tmp_path / "run").exists()


TRAIN_OPTIONS = [
    (["--steps", "0"], "--steps"),
    (["--steps", "-5"], "--steps"),
    (["--steps", "abc"], "--steps"),
    (["--batch", "0"], "--batch"),
    (["--lr", "nan"], "--lr"),
    (["--lr", "inf"], "--lr"),
    (["--lr", "-1"], "--lr"),
    (["--warmup", "-5"], "--warmup"),
    (["--min-lr", "nan"], "--min-lr"),
    (["--weight-decay", "-inf"], "--weight-decay"),
    (["--beta2", "1"], "--beta2"),
    (["--beta2", "nan"], "--beta2"),
    (["--grad-clip", "-1"], "--grad-clip"),
    (["--eval-every", "0"], "--eval-every"),
    (["--eval-iters", "10001"], "--eval-iters"),
    (["--seed", "-1"], "--seed"),
    (["--seed", str(2**64)], "--seed"),
    (["--model-seed", "-1"], "--model-seed"),
    (["--model-seed", str(2**64)], "--model-seed"),
    (["--grad-accum", "-1"], "--grad-accum"),
    (["--log-every", "-1"], "--log-every"),
    (["--peak-tflops", "nan"], "--peak-tflops"),
    (["--peak-tflops", "0"], "--peak-tflops"),
    (["--stop-at", "-1"], "--stop-at"),
    (["--context", "-3"], "--context"),
    (["--width", "0"], "--width"),
    (["--tokenizer", "bpe", "--vocab-size", "-1"], "--vocab-size"),
    (["--device", "tpu"], "--device"),
    (["--device", "cuda:x"], "--device"),
    (["--out", ""], "--out"),
    (["--no-such-flag"], "--no-such-flag"),
]


@pytest.mark.parametrize("args,flag", TRAIN_OPTIONS, ids=[" ".join(a)[:40] for a, _ in TRAIN_OPTIONS])
def test_train_options(capsys, tmp_path, args, flag) -> None:
    out = tmp_path / "run"
    code = train.main(["--steps", "2", "--out", str(out), *args])
    one_error(capsys, code, flag)
    assert not out.exists()


@pytest.mark.parametrize("value", ["two", "0", "-1"])
def test_train_world_size(capsys, tmp_path, monkeypatch, value) -> None:
    monkeypatch.setenv("WORLD_SIZE", value)
    code = train.main(["--steps", "2", "--out", str(tmp_path / "run")])
    one_error(capsys, code, "WORLD_SIZE")


@pytest.fixture()
def text_in(tmp_path) -> tuple[pathlib.Path, pathlib.Path]:
    (tmp_path / "t.txt").write_text(TEXT[:3000])
    (tmp_path / "tok.json").write_text(hf_tokenizer_json(TEXT[:2000], 260))
    return tmp_path / "t.txt", tmp_path / "tok.json"


PREPARE_OPTIONS = [
    (["--val-fraction", "0"], "--val-fraction"),
    (["--val-fraction", "1"], "--val-fraction"),
    (["--val-fraction", "-0.5"], "--val-fraction"),
    (["--val-fraction", "nan"], "--val-fraction"),
    (["--val-fraction", "inf"], "--val-fraction"),
    (["--val-fraction", "1e-12"], "--val-fraction"),
    (["--val-fraction", "0.9999999"], "--val-fraction"),
    (["--chunk-mb", "0"], "--chunk-mb"),
    (["--chunk-mb", "-1"], "--chunk-mb"),
    (["--chunk-mb", "inf"], "--chunk-mb"),
    (["--chunk-mb", "nan"], "--chunk-mb"),
    (["--chunk-mb", "1e9"], "--chunk-mb"),
    (["--tiktoken-file", "MISSING"], "--tiktoken-file"),
    (["--tiktoken-file", "TEXT"], "--tiktoken-file"),
    (["--chunk-mb"], "--chunk-mb"),
]


@pytest.mark.parametrize("args,flag", PREPARE_OPTIONS, ids=[" ".join(a)[:40] for a, _ in PREPARE_OPTIONS])
def test_prepare_options(capsys, tmp_path, text_in, args, flag) -> None:
    text, tok = text_in
    args = [str(text) if a == "TEXT" else str(tmp_path / "nope") if a == "MISSING" else a for a in args]
    out = tmp_path / "o"
    code = prepare.main(["--input", str(text), "--out", str(out), "--tokenizer", str(tok), "--quiet", *args])
    one_error(capsys, code, flag)
    assert not out.exists()


def test_prepare_inputs_and_outputs(capsys, tmp_path, text_in) -> None:
    """Bad inputs and outputs: one line each, and the output absent or unchanged; an error
    found midway (a file that is not UTF-8) leaves nothing behind either."""
    text, tok = text_in
    base = ["--tokenizer", str(tok), "--quiet"]
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.txt").write_bytes(TEXT[:2000].encode() + b"\n\xff\xfe\n" + TEXT[:2000].encode())
    (tmp_path / "a-file").write_text("x")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    cases = [
        (["--input", str(tmp_path / "none.txt")], tmp_path / "o", "--input"),
        (["--input", str(tmp_path / "empty")], tmp_path / "o", "--input"),
        (["--input", str(tmp_path / "bad.txt")], tmp_path / "o", "UTF-8"),
        (["--input", str(text)], tmp_path / "a-file", "--out"),
        (["--input", str(text)], tmp_path / "a-file" / "sub", "--out"),
        (["--input", str(text)], foreign, "not empty"),
    ]
    for args, out, name in cases:
        before = snapshot(out)
        code = prepare.main([*args, "--out", str(out), *base])
        one_error(capsys, code, name)
        assert snapshot(out) == before, (args, out)
    # A folder another prepare is writing (its lock held) is refused, not shared.
    good = tmp_path / "tokens"
    assert prepare.main(["--input", str(text), "--out", str(good), *base]) == 0
    capsys.readouterr()
    before = snapshot(good)
    fd = os.open(good / ".tokens.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        code = prepare.main(["--input", str(text), "--out", str(good), *base])
        one_error(capsys, code, "another process")
    finally:
        os.close(fd)
        (good / ".tokens.lock").unlink()  # the other writer's, removed as it would
    assert snapshot(good) == before
    # An error found midway leaves the token folder it was rewriting as it was.
    code = prepare.main(["--input", str(tmp_path / "bad.txt"), "--out", str(good), *base])
    one_error(capsys, code, "UTF-8")
    assert snapshot(good) == before
    # Rewriting a token folder is allowed, and leaves no working file.
    assert prepare.main(["--input", str(text), "--out", str(good), *base, "--val-fraction", "0.2"]) == 0
    assert sorted(p.name for p in good.iterdir()) == ["meta.json", "tokenizer.json", "train.bin", "val.bin"]
    TokenFolder(good)


@pytest.fixture()
def hf_model(tmp_path) -> tuple[pathlib.Path, pathlib.Path]:
    """A folder with the files finetune checks before loading a model (the model itself is
    never loaded: every case here fails first)."""
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"vocab_size": 300, "model_type": "llama"}))
    (folder / "tokenizer.json").write_text(hf_tokenizer_json(TEXT[:20_000], 300))
    text = tmp_path / "text.txt"
    text.write_text(TEXT[:20_000])
    return folder, text


FINETUNE_OPTIONS = [
    (["--warmup", "-5"], "--warmup"),
    (["--steps", "0"], "--steps"),
    (["--context", "-1"], "--context"),
    (["--batch", "0"], "--batch"),
    (["--val-windows", "0"], "--val-windows"),
    (["--eval-every", "-1"], "--eval-every"),
    (["--lr", "nan"], "--lr"),
    (["--lr", "inf"], "--lr"),
    (["--lr", "-1"], "--lr"),
    (["--seed", "-1"], "--seed"),
    (["--seed", str(2**64)], "--seed"),
    (["--device", "tpu"], "--device"),
    (["--modes", ""], "--modes"),
    (["--modes", "full,full"], "--modes"),
    (["--modes", "lora2"], "--modes"),
    (["--lora-rank", "0"], "--lora-rank"),
    (["--lora-targets", "q_proj,q_proj"], "--lora-targets"),
    (["--context", "100000"], "--context"),
    (["--out", "DIR"], "--out"),
    (["--out", "MISSING/r.json"], "--out"),
    (["--steps", "1.5"], "--steps"),
]


@pytest.mark.parametrize("args,flag", FINETUNE_OPTIONS, ids=[" ".join(a)[:40] for a, _ in FINETUNE_OPTIONS])
def test_finetune_options(capsys, tmp_path, hf_model, args, flag) -> None:
    folder, text = hf_model
    args = [str(tmp_path) if a == "DIR" else a.replace("MISSING", str(tmp_path / "nope")) for a in args]
    before = snapshot(tmp_path)
    code = finetune.main(["--model", str(folder), "--data", str(text), *args])
    one_error(capsys, code, flag)
    assert snapshot(tmp_path) == before


def test_finetune_files(capsys, tmp_path, hf_model) -> None:
    folder, text = hf_model
    out = tmp_path / "report.json"
    (tmp_path / "bad.txt").write_bytes(b"abc\xff\xfe")
    cases = [
        ("data", tmp_path / "bad.txt", "UTF-8"),
        ("config", "[1, 2]", "config.json"),
        ("config", '{"vocab_size": 100}', "vocab_size"),
        ("config", '{"vocab_size": 300.5}', "vocab_size"),
    ]
    good = (folder / "config.json").read_text()
    for kind, value, name in cases:
        data = value if kind == "data" else text
        if kind == "config":
            (folder / "config.json").write_text(value)
        code = finetune.main(["--model", str(folder), "--data", str(data), "--out", str(out)])
        one_error(capsys, code, name)
        assert not out.exists()
        (folder / "config.json").write_text(good)
    # An --out another run is writing is refused before any work.
    fd = os.open(tmp_path / ".report.json.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        code = finetune.main(["--model", str(folder), "--data", str(text), "--out", str(out)])
        one_error(capsys, code, "another process")
    finally:
        os.close(fd)
    assert not out.exists()


def test_train_outputs(capsys, tmp_path, base) -> None:
    """A token run's --out is checked before training, as the library checks a text run's."""
    (tmp_path / "a-file").write_text("x")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / ".orthoformer").write_text("orthoformer-folder hf-llama\n")
    for out, name in ((tmp_path / "a-file", "is a file"), (foreign, "not empty"), (hf, "marker")):
        before = snapshot(out)
        code = train.main(train_args(base, base, out))
        one_error(capsys, code, "--out", name)
        assert snapshot(out) == before


SUBPROCESS = [
    ("orthoformer.train", "vocab_size", "meta-lie"),
    ("orthoformer.train", "vocab_size", "meta-fraction"),
    ("orthoformer.prepare", "--chunk-mb", "chunk-inf"),
    ("orthoformer.finetune", "--warmup", "warmup"),
    ("orthoformer.finetune", "--out", "out-dir"),
]


@pytest.mark.parametrize("module,name,case", SUBPROCESS, ids=[c for _, _, c in SUBPROCESS])
def test_python_m_exit_2_one_line(tmp_path, base, text_in, module, name, case) -> None:
    out = tmp_path / "out"
    if case.startswith("meta"):
        folder = copy(base, tmp_path)
        edit_meta(folder, "vocab_size", 10 if case == "meta-lie" else 257.5)
        args = train_args(base, folder, out)
    elif module == "orthoformer.prepare":
        text, tok = text_in
        args = ["--input", text, "--out", out, "--tokenizer", tok, "--chunk-mb", "inf"]
    else:
        (tmp_path / "hf").mkdir()
        (tmp_path / "hf" / "config.json").write_text('{"vocab_size": 300}')
        (tmp_path / "hf" / "tokenizer.json").write_text(hf_tokenizer_json(TEXT[:20_000], 300))
        (tmp_path / "t.txt").write_text(TEXT[:20_000])
        args = ["--model", tmp_path / "hf", "--data", tmp_path / "t.txt"]
        args += ["--warmup", "-5"] if case == "warmup" else ["--out", tmp_path]
    p = python_module(module, *args, timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and name in lines[0], p.stderr
    assert not out.exists()


def test_library_calls(tmp_path) -> None:
    """The same checks from Python: a ValueError (InputError) naming the argument, where the
    native module raised OverflowError or a serde message, and nothing written."""
    import orthoformer
    from orthoformer.data import BatchSampler, Data

    cfg = orthoformer.GPTConfig.preset("tiny")
    params = {name: np.zeros(shape, np.float32) for name, shape, *_ in orthoformer.RustGPT(cfg).table}
    cases = [
        (lambda: Data(tokenizer="bpe", vocab_size=-1), "vocab_size"),
        (lambda: Data(context=-4), "context"),
        (lambda: Data(tokenizer="word"), "tokenizer"),
        (lambda: BatchSampler(-1), "seed"),
        (lambda: BatchSampler(2**64), "seed"),
        (lambda: orthoformer.save_checkpoint(tmp_path / "c", cfg, params, step=-1), "step"),
        (lambda: orthoformer.save_checkpoint(tmp_path / "c", cfg, params, model_seed=-1), "model_seed"),
        (lambda: write_meta(tmp_path, 50.5, {"kind": "ids"}), "vocab_size"),
    ]
    for call, name in cases:
        with pytest.raises(InputError, match=name) as e:
            call()
        assert "\n" not in str(e.value)
    assert not (tmp_path / "c").exists() and not (tmp_path / "meta.json").exists()

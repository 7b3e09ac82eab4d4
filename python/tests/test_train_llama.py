"""``python -m orthoformer.train --arch llama``: a tiny Llama learns a repeated text; a run
stopped and resumed equals the run trained straight, bit for bit (a token folder, grouped-query
frozen attention); resume refuses another architecture or shape by name; every variant the
Llama supports trains a step and the one it cannot is refused in one line; bf16 autocast
trains; two gloo ranks under DDP (with gradient accumulation) or FSDP equal one process;
``--compile`` equals eager; the checkpoint loads back as a ``Llama``
whose ``to_hf`` folder ``transformers`` loads with the same logits; ``--help`` lists the
flags with LlamaConfig's defaults."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from conftest import python_module
from orthoformer import prepare
from orthoformer import train as train_module
from orthoformer.config import ATTENTIONS
from orthoformer.torch import GPT, Llama, LlamaConfig
from orthoformer.torch.runs import read_safetensors
from orthoformer.train_flags import LLAMA_DEFAULTS
from test_prepare import TEXT, hf_tokenizer_json

TINY = ["--arch", "llama", "--width", 16, "--layers", 2, "--heads", 2, "--context", 16, "--batch", 4]
STEPS = ["--lr", 1e-2, "--warmup", 2, "--eval-iters", 1, "--seed", 3, "--device", "cpu", "--log-every", 0]


@pytest.fixture
def text(tmp_path):
    """A short sentence repeated: a model that learns anything lowers its loss fast."""
    path = tmp_path / "text.txt"
    path.write_text("the quick brown fox jumps over the lazy dog. " * 100)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """TinyShakespeare's first 60 kB through a 300-token Hugging Face BPE, prepared."""
    tmp = tmp_path_factory.mktemp("tokens")
    (tmp / "tokenizer.json").write_text(hf_tokenizer_json(TEXT))
    (tmp / "text.txt").write_text(TEXT)
    tok = prepare.tokenizer(str(tmp / "tokenizer.json"))
    prepare.prepare([str(tmp / "text.txt")], str(tmp / "out"), tok, progress=False)
    return tmp / "out"


def train(*args) -> None:
    assert train_module.main([str(a) for a in args]) == 0


def refused(capsys, *args) -> str:
    """The one line a refused run prints (exit status 2)."""
    capsys.readouterr()
    assert train_module.main([str(a) for a in args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def state(out) -> dict:
    return json.loads((out / "state.json").read_text())


def files(out) -> dict[str, np.ndarray]:
    """Every saved tensor: the model's by name, AdamW's moments as ``m``, ``v``."""
    st = state(out)
    return {n: a for f in ("model", "optimizer") for n, a in read_safetensors(out / st["files"][f])}


def losses(out) -> list[tuple]:
    """Each evaluation's step, losses and rate (not its timings)."""
    keys = ("step", "train_loss", "val_loss", "step_loss", "lr")
    return [tuple(m[k] for k in keys) for m in state(out)["state"]["metrics"]]


def test_loss_decreases_on_a_repeated_text(text, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    train(*TINY, *STEPS, "--data", text, "--steps", 30, "--eval-every", 15, "--out", out, "--json")
    summary = json.loads(capsys.readouterr().out)
    assert summary["arch"] == "llama" and summary["step"] == 30
    losses = [m["val_loss"] for m in state(out)["state"]["metrics"]]
    assert len(losses) == 3 and losses[2] < losses[1] < losses[0] - 0.5, losses
    assert state(out)["arch"] == "llama" and state(out)["model"]["vocab_size"] == 28


@pytest.mark.parametrize("data", ["text", "tokens"])
def test_stopped_and_resumed_equals_straight_bit_for_bit(data, text, folder, tmp_path) -> None:
    """GQA with frozen orthogonal Q/K and a tied head, on a text (the library's sampler) or a
    token folder (whose tokenizer travels with the checkpoint); the resumed half reads the
    moments and the sampler's position back."""
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    source = ["--data", text] if data == "text" else ["--data-dir", folder]
    args = [*TINY, *STEPS, *source, "--kv-heads", 1, "--attention", "orthogonal"]
    args += ["--head", "tied", "--steps", 8, "--eval-every", 4]
    train(*args, "--out", straight)
    train(*args, "--out", cut, "--stop-at", 4)
    assert state(cut)["state"]["step"] == 4
    train("--out", cut, "--resume", "--device", "cpu", "--log-every", 0)
    a, b = files(straight), files(cut)
    assert a.keys() == b.keys() and "m" in a
    assert not any(n.endswith(("q.weight", "k.weight")) for n in a)  # frozen: regenerated
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert losses(straight) == losses(cut)
    if data == "tokens":
        assert (cut / "tokenizer.json").read_text() == (folder / "tokenizer.json").read_text()


def test_resume_refuses_another_architecture_or_shape(text, tmp_path, capsys) -> None:
    llama, gpt = tmp_path / "llama", tmp_path / "gpt"
    train(*TINY, *STEPS, "--data", text, "--steps", 1, "--out", llama)
    cfg = dataclasses.replace(GPT("tiny").config, vocab_size=65)
    GPT(cfg).save_checkpoint(gpt)
    assert "holds a llama run, which --arch gpt cannot resume" in refused(
        capsys, "--out", llama, "--resume", "--arch", "gpt", "--steps", 2
    )
    assert "holds a gpt run, which --arch llama cannot resume" in refused(
        capsys, "--out", gpt, "--resume", "--arch", "llama", "--steps", 2
    )
    assert "cannot be read" in refused(capsys, "--out", tmp_path / "none", "--resume", "--arch", "llama")
    assert f"checkpoint {llama} has --heads 2: drop --heads" in refused(
        capsys, "--out", llama, "--resume", "--heads", 4, "--steps", 2
    )
    assert "--preset shapes the GPT" in refused(capsys, *TINY, "--preset", "tiny", "--out", tmp_path / "x")
    assert "--kv-heads shapes a Llama: add --arch llama" in refused(capsys, "--kv-heads", 1, "--out", gpt)
    line = refused(capsys, *TINY, "--heads", 4, "--kv-heads", 3, "--out", tmp_path / "x")
    assert "--kv-heads 3 does not divide --heads 4" in line


VARIANTS = [a for a in ATTENTIONS if a != "orthogonal-trained"]


@pytest.mark.parametrize("attention", VARIANTS)
def test_every_variant_trains_a_step(attention, text, tmp_path) -> None:
    out = tmp_path / attention
    train(*TINY, *STEPS, "--data", text, "--attention", attention, "--steps", 1, "--out", out)
    last = state(out)["state"]["metrics"][-1]
    assert last["step"] == 1 and np.isfinite(last["val_loss"])
    assert state(out)["model"]["attention"] == attention


def test_a_variant_the_llama_cannot_train_is_refused(tmp_path, capsys) -> None:
    line = refused(capsys, *TINY, "--attention", "orthogonal-trained", "--out", tmp_path / "x")
    assert "a Llama trains softmax or a frozen variant" in line
    assert not (tmp_path / "x").exists()


def test_bf16_autocast_trains(text, tmp_path, capsys) -> None:
    runs = {}
    for dtype in ("fp32", "bf16"):
        train(
            *TINY,
            *STEPS,
            "--data",
            text,
            "--steps",
            6,
            "--eval-every",
            6,
            "--dtype",
            dtype,
            "--out",
            tmp_path / dtype,
        )
        assert f"dtype {dtype}" in capsys.readouterr().err
        runs[dtype] = [m["val_loss"] for m in state(tmp_path / dtype)["state"]["metrics"]]
    assert runs["bf16"][1] < runs["bf16"][0] - 0.3
    assert abs(runs["bf16"][1] - runs["fp32"][1]) < 0.1 and runs["bf16"] != runs["fp32"]


def test_fsdp_on_two_gloo_ranks_equals_one_process(folder, tmp_path) -> None:
    one, fsdp = tmp_path / "one", tmp_path / "fsdp"
    args = [*TINY, *STEPS, "--data-dir", folder, "--kv-heads", 1, "--attention", "orthogonal", "--steps", 3]
    args += ["--eval-every", 3]
    train(*args, "--out", one)
    p = python_module("orthoformer.train", *args, "--fsdp", "--out", fsdp, torchrun=2)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "FSDP2" in p.stderr
    a, b = files(one), files(fsdp)
    assert max(float(np.abs(a[n] - b[n]).max()) for n in a if n not in ("m", "v")) < 1e-5


def test_ddp_with_grad_accum_on_two_gloo_ranks_equals_one_process(text, tmp_path) -> None:
    """Two ranks of one row each per micro-step, two micro-steps (``no_sync`` on the first)."""
    one, ddp = tmp_path / "one", tmp_path / "ddp"
    args = [*TINY, *STEPS, "--data", text, "--kv-heads", 1, "--attention", "orthogonal", "--steps", 3]
    args += ["--eval-every", 3]
    train(*args, "--out", one)
    p = python_module("orthoformer.train", *args, "--batch", 2, "--grad-accum", 2, "--out", ddp, torchrun=2)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "DDP" in p.stderr
    a, b = files(one), files(ddp)
    assert max(float(np.abs(a[n] - b[n]).max()) for n in a if n not in ("m", "v")) < 1e-5


def test_compile_equals_eager(text, tmp_path, monkeypatch, capsys) -> None:
    """``--compile on`` through dynamo and AOT autograd (``aot_eager``: inductor's C++
    compilation would take most of a minute on one core, and is the GPT's test's business)."""
    import functools

    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    args = [*TINY, *STEPS, "--data", text, "--attention", "orthogonal", "--steps", 3, "--eval-every", 3]
    train(*args, "--compile", "off", "--out", tmp_path / "eager")
    calls = []
    monkeypatch.setattr(torch, "compile", lambda m, _c=torch.compile: calls.append(m) or _c(m))
    train(*args, "--compile", "on", "--out", tmp_path / "compiled")
    assert "compile on" in capsys.readouterr().err and len(calls) == 1
    a, b = files(tmp_path / "eager"), files(tmp_path / "compiled")
    assert max(float(np.abs(a[n] - b[n]).max()) for n in a) < 1e-5


def test_the_checkpoint_exports_a_folder_transformers_loads(folder, tmp_path) -> None:
    out, hf = tmp_path / "run", tmp_path / "hf"
    train(
        *TINY,
        *STEPS,
        "--data-dir",
        folder,
        "--kv-heads",
        1,
        "--attention",
        "orthogonal",
        "--steps",
        2,
        "--out",
        out,
    )
    model = Llama.from_checkpoint(out).eval()
    assert isinstance(model.config, LlamaConfig) and model.config.attention == "orthogonal"
    model.to_hf(hf)
    from transformers import LlamaForCausalLM

    ref = LlamaForCausalLM.from_pretrained(hf).eval()
    idx = torch.randint(0, model.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        mine, _ = model(idx)
        theirs = ref(idx).logits
    assert float((mine - theirs).abs().max()) < 1e-5


def test_help_lists_the_llama_flags_with_their_defaults(capsys) -> None:
    with pytest.raises(SystemExit):
        train_module.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in (
        "--arch",
        "--layers",
        "--heads",
        "--kv-heads",
        "--ffn-width",
        "--rope-theta",
        "--rms-eps",
        "--head",
    ):
        assert flag in text
    fields = {f.name: f.default for f in dataclasses.fields(LlamaConfig)}
    assert {k: fields[k] for k in LLAMA_DEFAULTS} == LLAMA_DEFAULTS
    assert f"RoPE base [default: {fields['rope_theta']:g}]" in text
    assert f"RMSNorm epsilon [default: {fields['rms_norm_eps']:g}]" in text
    assert "[default: gpt; with --resume the checkpoint's]" in text

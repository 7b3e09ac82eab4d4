"""The trainer's hot loop and host memory: a step reads nothing back
from the device (losses, norms and stop flags wait for the next read, where a non-finite one
stops the run); clipping is ``clip_grad_norm_(foreach=True)``; batches are prefetched without
moving the checkpointed sampler position; the head pads the vocabulary without any external
view seeing it; MFU is per device; the model is built on its device from the seed or the
checkpoint's file, the native session dropped, so building GPT-2-like models costs about the
model's bytes of host memory."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import orthoformer
from conftest import ROOT
from orthoformer import _native
from orthoformer.data import DEFAULTS
from orthoformer.errors import TrainingStopped
from orthoformer.torch import GPT, distributed, precision
from orthoformer.torch.progress import Progress, Timer, flops_per_token
from orthoformer.tokens import write_meta
from orthoformer.torch.runs import TextRun, TokenRun
from orthoformer.torch.trainer import Trainer
from orthoformer.validate import InputError


def tiny_config() -> orthoformer.GPTConfig:
    cfg = orthoformer.GPTConfig.preset("tiny")
    cfg.attn_bias = False
    cfg.context = 16
    return cfg


def options(**kw) -> dict:
    o = json.loads(json.dumps(DEFAULTS["options"]))
    o.update(steps=8, batch=4, eval_every=4, eval_iters=1, warmup=2, lr=1e-2, seed=3, **kw)
    return json.loads(_native.options_check(json.dumps(o)))


def text_run(out, *, keep_session: bool = False, resume: bool = False) -> TextRun:
    if resume:
        session = _native.Session.resume(str(out))
    else:
        session = _native.Session.fresh(str(out), tiny_config().to_json(), json.dumps(options()), 5)
    return TextRun(session) if keep_session else TextRun(session, out)


def trainer(run) -> Trainer:
    world = distributed.setup("cpu")
    return Trainer(run, world, precision.resolve(world.device, "fp32", "off"))


def test_a_step_reads_nothing_back_and_a_nan_stops_at_the_read(tmp_path, monkeypatch) -> None:
    tr = trainer(text_run(tmp_path / "r"))
    batches = tr.batches(tr.run.train_batches(), prefetch=False)
    reads = []
    for name in ("item", "tolist", "__float__", "__bool__", "__int__", "numpy"):
        real = getattr(torch.Tensor, name)

        def spy(self, *a, _real=real, _name=name, **k):
            reads.append((_name, self))
            return _real(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, spy)
    for s in range(3):
        tr.pending.append((s + 1, *tr.step(s, batches.next()), 1e-3))
    # The plain CPU AdamW reads its own step counters (host tensors); nothing else is read.
    steps = {id(st["step"]) for st in tr.opt.state.values()}
    assert [n for n, t in reads if id(t) not in steps] == []
    monkeypatch.undo()
    tr.read(Timer())
    assert tr.state["window_steps"] == 3 and np.isfinite(tr.state["window_loss"])
    with torch.no_grad():
        tr.model.ln_f.weight.fill_(float("nan"))
    for s in range(3, 5):
        tr.pending.append((s + 1, *tr.step(s, batches.next()), 1e-3))
    with pytest.raises(TrainingStopped, match="the loss became nan at step 4, so training stopped"):
        tr.read(Timer())


def test_clipping_is_clip_grad_norm_foreach(tmp_path) -> None:
    tr = trainer(text_run(tmp_path / "r"))
    gen = torch.Generator().manual_seed(0)
    twins = []
    for p in tr.params.values():
        p.grad = torch.randn(p.shape, generator=gen) * 3
        twins.append(torch.nn.Parameter(p.detach().clone()))
        twins[-1].grad = p.grad.clone()
    norm = tr.clip()
    want = torch.nn.utils.clip_grad_norm_(twins, tr.options["grad_clip"], foreach=True)
    assert isinstance(norm, torch.Tensor) and torch.equal(norm, want) and float(norm) > 1
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(tr.params.values(), twins))


def test_prefetch_keeps_the_position_of_the_batch_handed_out(tmp_path, monkeypatch) -> None:
    run = text_run(tmp_path / "r")
    tr = trainer(run)
    plain = tr.batches(run.train_batches(), prefetch=False)
    ahead = tr.batches(run.train_batches(), prefetch=False)
    ahead.pin = True  # what CUDA turns on; the copy itself stays on the CPU here
    monkeypatch.setattr(ahead, "_send", lambda a: torch.from_numpy(np.ascontiguousarray(a)))
    for _ in range(3):
        got, want = ahead.next(), plain.next()
        ahead.prefetch()
        assert ahead.ahead is not None and ahead.position() == plain.position()
        assert all(torch.equal(a, b) for pa, pb in zip(got, want) for a, b in zip(pa, pb))


def test_vocabulary_padding_is_invisible_outside_the_head() -> None:
    cfg = tiny_config()
    cfg.vocab_size = 65  # TinyShakespeare's characters: padded to 128
    c = cfg.d_model
    padded, plain = GPT(cfg, seed=1), GPT(cfg, seed=1, pad_vocab=1)
    x = torch.from_numpy(np.random.default_rng(0).integers(0, 65, (2, 16)))
    (lp, loss_p), (lq, loss_q) = padded(x, x), plain(x, x)
    assert lp.shape == lq.shape == (2, 16, 65) and torch.allclose(lp, lq, atol=1e-6)
    assert torch.allclose(loss_p, loss_q, atol=1e-6)
    head = padded.head(padded.ln_f(torch.zeros(1, c)))
    assert head.shape == (1, 128) and torch.isinf(head[:, 65:]).all()
    (loss_p + loss_q).backward()
    assert padded.wte.grad.shape == (65, c) and torch.allclose(padded.wte.grad, plain.wte.grad, atol=1e-6)
    assert padded.state_numpy()["wte"].shape == (65, c)
    with pytest.raises(InputError, match="pad_vocab"):
        GPT(cfg, pad_vocab=0)


def test_mfu_and_tokens_per_second_are_per_device() -> None:
    """Two processes each at 1,000 tokens/s: 2,000 for the job, MFU of one device's 1,000."""
    cfg, lines = tiny_config(), []
    p = Progress(cfg, 1000, 2, 1e12, lines.append, True, devices=2)
    p.steps([(1, 2.0, 1e-3), (2, 2.0, 1e-3)], 1.0)
    assert p.last["tokens_per_s"] == 2000 and p.last["tokens_per_s_per_device"] == 1000
    assert p.last["mfu"] == pytest.approx(1000 * flops_per_token(cfg) / 1e12)
    assert "2,000 tok/s (1,000/device)" in lines[0]


def test_the_session_is_dropped_and_a_resume_reads_the_folder(tmp_path) -> None:
    straight = trainer(text_run(tmp_path / "a", keep_session=True))
    straight.run_loop()
    run = text_run(tmp_path / "b")
    parts = trainer(run)
    assert run.session is None  # no native model on the host during the loop
    parts.run_loop(stop_at=4)
    run = text_run(tmp_path / "b", resume=True)
    resumed = trainer(run)
    assert run.session is None and resumed.state["step"] == 4
    resumed.run_loop()
    a, b = (orthoformer.load_checkpoint(tmp_path / r) for r in "ab")
    assert a.step == b.step == 8 and a.state["sampler_word_pos"] == b.state["sampler_word_pos"]
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)


def test_a_token_run_resumes_from_its_files_bit_for_bit(tmp_path) -> None:
    """Frozen orthogonal Q/K, a vocabulary of 50 (padded to 64 in the head): a run stopped at
    step 4 and resumed from the folder's files (the native model dropped) ends where the
    straight run ends."""
    folder = tmp_path / "ids"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for split, n in (("train", 5000), ("val", 600)):
        rng.integers(0, 50, size=n, dtype=np.uint16).tofile(folder / f"{split}.bin")
    write_meta(folder, 50, {"kind": "ids"})
    cfg = tiny_config()
    cfg.attention = "orthogonal"

    def fresh(out):
        return TokenRun.fresh(out, str(folder), cfg.to_json(), options(), 5)

    trainer(fresh(tmp_path / "a")).run_loop()
    trainer(fresh(tmp_path / "b")).run_loop(stop_at=4)
    run = TokenRun.resume(tmp_path / "b", None, None)
    resumed = trainer(run)
    assert run.native is None and resumed.state["step"] == 4
    resumed.run_loop()
    a, b = (orthoformer.load_checkpoint(tmp_path / r) for r in "ab")
    assert a.step == b.step == 8 and a.config.vocab_size == 50
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    assert all(np.array_equal(a.adam_m[k], b.adam_m[k]) for k in a.adam_m)


def test_building_a_trainer_costs_about_the_model_in_host_memory(tmp_path) -> None:
    """A fresh run of a GPT-2-shaped model (vocabulary 50257, 6 x 512): the rise of peak
    resident memory while the run opens and the trainer builds (after a small one paid for
    the imports) is within 1.3x the model's bytes plus a little (the old path held the native
    model, its byte copy and the torch model at once: 2.8x)."""
    cfg = json.loads((ROOT / "python" / "recipes" / "gpt2-small.json").read_text())
    cfg.update(n_layer=6, d_model=512, d_ff=2048, n_head=8, context=256)
    path = tmp_path / "mid.json"
    path.write_text(json.dumps(cfg))
    script = ROOT / "python" / "bench" / "trainer_memory.py"
    p = subprocess.run(
        [sys.executable, str(script), "--config", str(path)], capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["rise_MiB"] <= 1.3 * got["model_MiB"] + 16, got


def test_log_lines_carry_the_gradient_norm_before_clipping(tmp_path) -> None:
    """Every log line shows its step's gradient norm, before clipping (a
    clip at 1e-3 would cap a norm read after it)."""
    session = _native.Session.fresh(
        str(tmp_path / "r"), tiny_config().to_json(), json.dumps(options(grad_clip=1e-3)), 5
    )
    world, lines = distributed.setup("cpu"), []
    tr = Trainer(
        TextRun(session, tmp_path / "r"),
        world,
        precision.resolve(world.device, "fp32", "off"),
        log_every=2,
        log=lines.append,
    )
    tr.run_loop()
    progress = [line for line in lines if "tok/s" in line]
    assert len(progress) == 4 and all("grad norm" in line for line in progress), lines
    assert tr.progress.last["grad_norm"] > 1e-2  # pre-clip: far above the clip
    shown = float(progress[-1].split("grad norm ")[1].split()[0])
    assert shown == pytest.approx(tr.progress.last["grad_norm"], rel=1e-3)

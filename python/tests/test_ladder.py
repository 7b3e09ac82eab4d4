"""``python -m orthoformer.ladder`` (``docs/LADDER.md``): one run trained,
stopped and resumed equals the run trained at once (``gpt`` and ``llama``); a tiny ladder
(2 rungs × 2 variants × 1 seed × 4 rates, a few CPU steps) runs end to end with both
architectures and writes every ``result.json`` and the report; ``--stop-at`` then
``--resume`` gives the uninterrupted ladder's results; the Llama's parameters are the
library's count; the CPU engine's ``gpt`` runs have the same steps, FLOPs and parameters;
bad flags exit 2 with one line.

The end-to-end tests need the native ``ladder_*`` functions (``python/src/ladder.rs``) and
the CLI's ``orthoformer ladder``: skipped while they are missing, a failure under CI."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from conftest import ROOT
from orthoformer import _native, ladder, ladder_run, prepare

TEXT = (ROOT / "data" / "tinyshakespeare.txt").read_text()[:200_000]
T, B = 16, 4
# Largest held-out loss difference allowed between the Rust and PyTorch engines on the same plan.
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    """A token folder of TinyShakespeare's start, with a 320-token BPE trained on it."""
    root = tmp_path_factory.mktemp("ladder-data")
    (root / "text.txt").write_text(TEXT)
    out = root / "tok"
    assert (
        prepare.main(["--input", str(root / "text.txt"), "--out", str(out), "--train-bpe", "320", "--quiet"])
        == 0
    )
    return out


def _native_ladder() -> None:
    if not hasattr(_native, "ladder_pending"):
        if os.environ.get("CI"):
            pytest.fail("the native module has no ladder_pending: rebuild it (maturin develop --release)")
        pytest.skip("the native module has no ladder_* functions yet")


def _plan(tmp_path, tokens, architecture: str, **extra) -> str:
    plan = {
        "format": "orthoformer-ladder",
        "version": 1,
        "data": str(tokens),
        "architecture": architecture,
        "variants": ["softmax", "orthogonal"],
        "seeds": [0],
        "rungs": [
            {"name": "r1", "layers": 1, "heads": 2, "width": 16},
            {"name": "r2", "layers": 2, "heads": 2, "width": 16},
        ],
        "context": T,
        "batch": B,
        "tokens_per_param": 0.05,
        "lrs": [1e-3, 3e-3, 1e-2, 3e-2],
        "extend": 1,
        "curve_points": 3,
        "eval_batches": 2,
        "eval_tokens": 1024,
        **extra,
    }
    path = tmp_path / f"plan-{architecture}.json"
    path.write_text(json.dumps(plan))
    return str(path)


def _results(out) -> dict[str, dict]:
    return {
        str(p.parent.relative_to(out)): json.loads(p.read_text()) for p in sorted(out.rglob("result.json"))
    }


# -- one run, without the native ladder --------------------------------------------------------


def _spec(tokens, tmp_path, architecture: str, variant: str, name: str) -> dict:
    """A run spec as ``ladder_pending`` gives one (``runs.rs``), written by hand."""
    from orthoformer.tokens import TokenFolder

    folder = TokenFolder(tokens)
    n, v = folder.lengths["train"], folder.vocab_size
    transfer = tmp_path / "transfer.bin"
    np.asarray(folder.open("val")[:2000], dtype="<u4").tofile(transfer)
    cut = int(n * 0.9)
    if architecture == "gpt":
        model = dict(
            vocab_size=v, context=T, n_layer=1, n_head=2, d_model=16, d_ff=64, attention=variant,
            norm="pre", attn_bias=False, ffn_bias=False, norm_bias=False, gelu="erf", dropout=0.0,
            frozen_method="qr", frozen_seed=0, position="rope", temperature="fixed",
        )  # fmt: skip
    else:
        model = dict(
            vocab_size=v, hidden_size=16, intermediate_size=64, num_hidden_layers=1,
            num_attention_heads=2, num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=10000.0,
            max_position_embeddings=T, tie_word_embeddings=False, attention=variant,
            frozen_seed=0, frozen_method="qr",
        )  # fmt: skip
    zero = {"total": 0, "trainable": 0, "non_embedding": 0, "trainable_non_embedding": 0}
    return {
        "rung": "r1", "variant": variant, "seed": 0, "lr": 3e-3, "dir": str(tmp_path / name),
        "architecture": architecture, "model": model, "model_seed": 0, "data": str(tokens),
        "transfer_file": str(transfer), "steps": 10, "warmup": 1, "min_lr": 3e-4, "batch": B,
        "context": T, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "grad_clip": 1.0,
        "train_range": [0, cut], "heldout_range": [cut, n], "curve_steps": [0, 4, 8, 10],
        "curve_range": [cut, cut + 2 * B * T + 1], "eval_batches": 2,
        "final_ranges": {
            "heldout": [cut, cut + 20 * T + 1], "val": [0, 10 * T + 1], "transfer": [0, 10 * T + 1]
        },
        "params": zero, "flops_per_step": 1000, "tokens_per_step": B * T,
    }  # fmt: skip


@pytest.mark.parametrize("architecture,variant", [("gpt", "orthogonal"), ("llama", "orthogonal")])
def test_a_run_stopped_and_resumed_equals_the_run_trained_at_once(tokens, tmp_path, architecture, variant):
    from orthoformer.torch import distributed, precision

    world = distributed.setup("cpu")
    speed = precision.resolve(world.device, "fp32", "off")
    quiet = lambda line: None  # noqa: E731
    cut = _spec(tokens, tmp_path, architecture, variant, "cut")
    assert ladder_run.train(cut, world, speed, 6, quiet) is None  # stopped between curve points
    assert not (tmp_path / "cut" / "result.json").exists()
    resumed = ladder_run.train(cut, world, speed, None, quiet)
    whole = ladder_run.train(
        _spec(tokens, tmp_path, architecture, variant, "whole"), world, speed, None, quiet
    )
    assert json.loads((tmp_path / "cut" / "result.json").read_text()) == resumed
    for key in ("heldout_loss", "val_loss", "transfer_loss", "steps", "tokens", "flops"):
        assert resumed[key] == whole[key], key
    # Curve losses are float32 values (the library's metrics file writes them as such).
    curve = [np.float32(p["heldout_loss"]) for p in resumed["curve"]]
    assert curve == [np.float32(p["heldout_loss"]) for p in whole["curve"]]
    assert [p["step"] for p in resumed["curve"]] == [0, 4, 8, 10] and resumed["engine"] == "torch"
    # The run learned: the last curve point is below the first.
    assert curve[-1] < curve[0]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--out", "OUT"], "--plan is required"),
        (["--out", "OUT", "--resume"], "holds no ladder"),
        (["--out", "OUT", "--plan", "PLAN", "--stop-at", "0"], "--stop-at must be >= 1, got 0"),
        (["--out", "OUT", "--plan", "PLAN", "--stop-at", "x"], "--stop-at must be an integer"),
        (["--out", "OUT", "--plan", "PLAN", "--dtype", "fp8"], "--dtype"),
        (["--out", "OUT", "--plan", "PLAN", "--device", "tpu"], "--device"),
        (["--out", "OUT", "--plan", "missing.json"], "missing.json"),
        (["--out", "OUT", "--report-only", "--stop-at", "3"], "leave --stop-at out"),
        (["--out", "OUT", "--plan", "PLAN", "--partial"], "--partial goes with --report-only"),
        (["--out", "OUT", "--plan", "PLAN", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_flags_exit_2_with_one_line(tmp_path, capsys, argv, message):
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    sub = {"OUT": str(tmp_path / "out"), "PLAN": str(plan)}
    code = ladder.main([sub.get(a, a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


# -- the ladder, end to end ------------------------------------------------------------------


@pytest.mark.parametrize("architecture", ["gpt", "llama"])
def test_a_tiny_ladder_runs_end_to_end(tokens, tmp_path, capsys, architecture):
    _native_ladder()
    out = tmp_path / "out"
    argv = ["--plan", _plan(tmp_path, tokens, architecture), "--out", str(out), "--device", "cpu", "--json"]
    assert ladder.main(argv) == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    assert report and (out / "report.json").is_file() and (out / "report.md").is_file()
    results = _results(out)
    assert len(results) >= 2 * 2 * 4  # rungs × variants × rates (more if rates were added)
    keys = {"format", "version", "engine", "device", "rung", "variant", "seed", "lr", "params", "steps"}
    keys |= {
        "tokens",
        "flops_per_step",
        "flops",
        "seconds",
        "heldout_loss",
        "val_loss",
        "transfer_loss",
        "curve",
        "spec_sha256",
    }
    for where, r in results.items():
        assert set(r) == keys, where
        assert len(r["spec_sha256"]) == 64  # the run's fingerprint, as the library computes it
        assert r["engine"] == "torch" and r["format"] == "orthoformer-ladder-run"
        assert r["flops"] == r["steps"] * r["flops_per_step"] and r["curve"][-1]["step"] == r["steps"]
        assert all(np.isfinite([r["heldout_loss"], r["val_loss"], r["transfer_loss"]]))
    assert ladder_pending_is_empty(out)


def ladder_pending_is_empty(out) -> bool:
    return json.loads(_native.ladder_pending(str(out))) == []


def test_the_llama_parameter_count_is_the_librarys(tokens, tmp_path):
    _native_ladder()
    import torch

    from orthoformer.ladder_llama import ladder_llama_class
    from orthoformer.torch.llama_config import LlamaConfig

    out = tmp_path / "out"
    _native.ladder_start((open(_plan(tmp_path, tokens, "llama")).read()), str(out))
    for spec in json.loads(_native.ladder_pending(str(out))):
        model = ladder_llama_class()(LlamaConfig(**spec["model"]), device=torch.device("meta"))
        trainable = sum(p.numel() for p in model.parameters())
        embedding = model.embed_tokens.weight.numel() + model.lm_head.weight.numel()
        frozen = sum(b.numel() for n, b in model.named_buffers() if n.endswith(("q.weight", "k.weight")))
        p = spec["params"]
        assert (p["trainable"], p["trainable_non_embedding"]) == (trainable, trainable - embedding), spec[
            "variant"
        ]
        assert p["total"] == trainable + frozen, spec["variant"]


def test_stop_at_then_resume_equals_the_uninterrupted_ladder(tokens, tmp_path, capsys):
    _native_ladder()
    plan = _plan(tmp_path, tokens, "gpt")
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert ladder.main(["--plan", plan, "--out", str(whole), "--device", "cpu"]) == 0
    assert ladder.main(["--plan", plan, "--out", str(cut), "--device", "cpu", "--stop-at", "2"]) == 0
    assert not (cut / "report.json").exists() and not _results(cut)
    assert ladder.main(["--out", str(cut), "--resume", "--device", "cpu"]) == 0, capsys.readouterr().err
    a, b = _results(whole), _results(cut)
    assert a.keys() == b.keys()
    for where in a:
        for key in ("heldout_loss", "val_loss", "transfer_loss", "steps", "flops", "params"):
            assert a[where][key] == b[where][key], (where, key)
    assert (cut / "report.json").is_file()
    # Handed on as its plan and finished runs' result.json alone, one run of r2 missing: the
    # partial report reads r1 only and names r2.
    half = tmp_path / "half"
    half.mkdir()
    shutil.copy(whole / "ladder.json", half / "ladder.json")
    runs = sorted(whole.rglob("result.json"))
    missing = [r for r in runs if r.relative_to(whole).parts[0] == "r2"][-1]
    for r in runs:
        if r != missing:
            (half / r.relative_to(whole)).parent.mkdir(parents=True)
            shutil.copy(r, half / r.relative_to(whole))
    capsys.readouterr()
    assert ladder.main(["--out", str(half), "--report-only", "--partial", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unfinished"] == ["r2"]
    assert {s["rung"] for s in report["selection"]} == {"r1"}


def test_both_engines_give_the_same_steps_flops_and_parameters(tokens, tmp_path, cli):
    _native_ladder()
    plan = _plan(tmp_path, tokens, "gpt", extend=0)
    torch_out, cpu_out = tmp_path / "torch", tmp_path / "cpu"
    assert ladder.main(["--plan", plan, "--out", str(torch_out), "--device", "cpu"]) == 0
    cli("ladder", "--plan", plan, "--out", cpu_out)
    a, b = _results(torch_out), _results(cpu_out)
    assert a.keys() == b.keys() and len(a) == 16
    worst = 0.0
    for where in a:
        assert b[where]["engine"] == "orthoformer-cpu"
        for key in ("steps", "tokens", "flops_per_step", "flops", "params"):
            assert a[where][key] == b[where][key], (where, key)
        worst = max(worst, abs(a[where]["heldout_loss"] - b[where]["heldout_loss"]))
    print(f"worst held-out loss difference between the engines: {worst:.2e}")
    # The same windows (NumPy's draw in both engines) and the same initial values: only the
    # float order of the kernels differs.
    assert worst < TOLERANCE, worst


def test_jobs_train_what_one_job_trains(tokens, tmp_path):
    """The same runs, windows and initial values; on the CPU a worker has fewer threads, so
    the float summation order (only) may differ."""
    _native_ladder()
    plan = _plan(tmp_path, tokens, "gpt", extend=0)
    one, two = tmp_path / "one", tmp_path / "two"
    assert ladder.main(["--plan", plan, "--out", str(one), "--device", "cpu"]) == 0
    assert ladder.main(["--plan", plan, "--out", str(two), "--device", "cpu", "--jobs", "2"]) == 0
    a, b = _results(one), _results(two)
    assert a.keys() == b.keys() and len(a) == 16
    for where in a:
        for key in ("steps", "tokens", "flops", "params"):
            assert a[where][key] == b[where][key], (where, key)
        for key in ("heldout_loss", "val_loss", "transfer_loss"):
            assert abs(a[where][key] - b[where][key]) < 1e-5, (where, key)
        assert len(a[where]["curve"]) == len(b[where]["curve"])
    assert (two / "report.json").is_file()

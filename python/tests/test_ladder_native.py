"""The native ladder bindings (``python/src/ladder.rs``; ``docs/LADDER.md``): the plan is
normalised and recorded once, started again it is the same ladder, every pending run has the
documented fields, and bad plans, foreign rungs and unfinished reports raise ``ValueError``
with one line."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from orthoformer import _native, prepare

FIELDS = {
    "rung",
    "variant",
    "seed",
    "lr",
    "dir",
    "architecture",
    "model",
    "model_seed",
    "data",
    "transfer_file",
    "steps",
    "warmup",
    "min_lr",
    "batch",
    "context",
    "weight_decay",
    "beta1",
    "beta2",
    "eps",
    "grad_clip",
    "train_range",
    "heldout_range",
    "curve_steps",
    "curve_range",
    "eval_batches",
    "final_ranges",
    "params",
    "flops_per_step",
    "tokens_per_step",
    "fingerprint",
}


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    root = tmp_path_factory.mktemp("ladder-native")
    (root / "text.txt").write_text((ROOT / "data" / "tinyshakespeare.txt").read_text()[:60_000])
    out = root / "tok"
    assert (
        prepare.main(["--input", str(root / "text.txt"), "--out", str(out), "--train-bpe", "300", "--quiet"])
        == 0
    )
    return out


def plan(tokens, **extra) -> str:
    p = {
        "format": "orthoformer-ladder",
        "version": 1,
        "data": str(tokens),
        "variants": ["softmax", "orthogonal"],
        "seeds": [0, 1],
        "context": 16,
        "batch": 4,
        "tokens_per_param": 0.2,
        "curve_points": 3,
        "eval_batches": 2,
        "eval_tokens": 320,
        "rungs": [
            {"name": "a", "layers": 1, "heads": 2, "width": 8},
            {"name": "b", "layers": 2, "heads": 2, "width": 16},
        ],
    }
    p.update(extra)
    return json.dumps(p)


def one_line_value_error(f, want: str) -> None:
    with pytest.raises(ValueError) as e:
        f()
    assert want in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_start_pending_and_run_dir(tokens, tmp_path):
    out = str(tmp_path / "ladder")
    normal = json.loads(_native.ladder_start(plan(tokens), out))
    assert normal["lrs"] == [3e-4, 1e-3, 3e-3, 1e-2] and normal["recorded"]["vocab_size"] > 0
    assert normal["rungs"][0]["ffn"] == 32
    # Started again with the same plan: the same ladder; with another, refused.
    assert json.loads(_native.ladder_start(plan(tokens), out)) == normal
    one_line_value_error(lambda: _native.ladder_start(plan(tokens, seeds=[0]), out), '"seeds"')
    runs = json.loads(_native.ladder_pending(out))
    assert len(runs) == 2 * 2 * 4 * 2
    for r in runs:
        assert set(r) == FIELDS, set(r) ^ FIELDS
    r = runs[0]
    assert r["dir"] == _native.ladder_run_dir(out, r["rung"], r["seed"], r["lr"], r["variant"])
    assert r["curve_steps"][0] == 0 and r["curve_steps"][-1] == r["steps"]
    # The run's fingerprint: 64 hex digits, the same for the same run, another for another.
    assert len(r["fingerprint"]) == 64 and len({x["fingerprint"] for x in runs}) == len(runs)
    assert r["model"]["frozen_seed"] == r["seed"] and r["model"]["context"] == 16
    one_line_value_error(lambda: _native.ladder_run_dir(out, "zz", 0, 1e-3, "softmax"), "not a rung")
    one_line_value_error(lambda: _native.ladder_report(out), "unfinished")


def test_bad_plans_raise_one_line(tokens, tmp_path):
    out = str(tmp_path / "bad")
    one_line_value_error(lambda: _native.ladder_start(plan(tokens, colour=1), out), 'unknown field "colour"')
    one_line_value_error(lambda: _native.ladder_start(plan(tokens, lrs=[1e-3, 2e-3, 3e-3]), out), "3 rates")
    one_line_value_error(lambda: _native.ladder_start(plan(tokens, variants=["orthogonal"]), out), "softmax")
    one_line_value_error(lambda: _native.ladder_start("[]", out), "JSON object")

"""``orthoformer.params``: the library's account, as ``orthoformer params --json`` prints it."""

from __future__ import annotations

import pytest

import orthoformer


@pytest.mark.parametrize(
    "preset,attention", [("seed-003", "orthogonal"), ("config-b", "orthogonal-hadamard"), ("tiny", None)]
)
def test_params_is_the_cli_account(cli_json, preset, attention) -> None:
    args = ["params", "--preset", preset, "--batch", 4] + (["--attention", attention] if attention else [])
    want = cli_json(*args)
    got = orthoformer.params(preset, attention=attention, batch=4)
    assert got["account"] == want["account"]
    assert got["config"] == want["config"]


def test_seed_003_frozen_share_and_claims() -> None:
    r = orthoformer.params("seed-003", attention="orthogonal", seed_claims=True)
    acc = r["account"]
    assert acc["frozen"] == 12 * 2 * 768 * 768
    assert acc["total"] == acc["trainable"] + acc["frozen"]
    assert r["seed_claims"]


def test_bad_requests_are_value_errors() -> None:
    with pytest.raises(ValueError, match="seq"):
        orthoformer.params("tiny", seq=9)
    with pytest.raises(ValueError, match="batch"):
        orthoformer.params("tiny", batch=0)
    with pytest.raises(ValueError, match="unknown preset"):
        orthoformer.params("gpt-7")

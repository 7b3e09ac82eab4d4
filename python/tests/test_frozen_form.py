"""Which frozen form in the Python package: the ``gaussian`` frozen draw is
the library's bit for bit, and what the PyTorch side does not implement (Q/K frozen in some
layers, Q/K frozen after a step) is refused by field name, never built differently."""

import json

import numpy as np
import pytest

from orthoformer import _native
from orthoformer.config import GPTConfig
from orthoformer.torch.functional import frozen_orthogonal_weight, head_seed
from orthoformer.validate import InputError


def test_gaussian_draw_is_the_librarys_and_has_equal_scale():
    c, h = 64, 4
    d = c // h
    w = frozen_orthogonal_weight(c, h, method="gaussian", seed=5, tensor=1).double().numpy()
    for head in range(h):
        raw = _native.init_frozen_block("gaussian", c, d, head_seed(5, 1, head))
        block = np.frombuffer(bytes(raw), dtype="<f8").reshape(c, d).astype(np.float32)
        assert np.array_equal(w[head * d : (head + 1) * d], block.T)
    # Rows of W are the heads' columns: squared norm about 1 each, and not orthonormal.
    norms = (w**2).sum(axis=1)
    assert abs(norms.mean() - 1.0) < 0.1
    gram = w[:d] @ w[:d].T
    assert np.abs(gram - np.eye(d)).max() > 0.1
    again = frozen_orthogonal_weight(c, h, method="gaussian", seed=5, tensor=1).numpy()
    assert np.array_equal(again, w.astype(np.float32))
    # The orthogonal draws are unchanged by the route through FrozenDraw.
    q = frozen_orthogonal_weight(c, h, method="qr", seed=5, tensor=1).double().numpy()
    assert np.abs(q[:d] @ q[:d].T - np.eye(d)).max() < 1e-5


def test_a_gaussian_config_builds_and_unimplemented_fields_are_refused_by_name():
    cfg = GPTConfig.preset("tiny", attention="orthogonal")
    cfg.frozen_method = "gaussian"
    assert json.loads(cfg.to_json())["frozen_method"] == "gaussian"
    d = json.loads(cfg.to_json())
    d["frozen_layers"] = [1]
    with pytest.raises(InputError, match="frozen_layers"):
        GPTConfig.from_json(json.dumps(d))
    opts = json.loads(
        _native.options_check(
            json.dumps(
                {
                    "steps": 2,
                    "batch": 2,
                    "lr": 1e-3,
                    "min_lr": 1e-4,
                    "warmup": 1,
                    "grad_clip": 1.0,
                    "eval_every": 1,
                    "eval_iters": 1,
                    "seed": 0,
                    "adamw": {"beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1},
                }
            )
        )
    )
    opts["freeze_qk_after"] = 1
    with pytest.raises(ValueError, match="freeze_qk_after 1"):
        _native.options_check(json.dumps(opts))
    with pytest.raises(InputError, match="unknown frozen method"):
        frozen_orthogonal_weight(8, 2, method="normal")

"""Learned rotations: the Cayley step stays on the
orthogonal group and descends; the rotated, norm-folded weights give transformers' logits
exactly; ``python -m orthoformer.learn_rotation`` lowers the rounded model's loss on its
calibration text, writes a folder transformers runs to the input's logits, which ``orthoformer
quantize`` turns into a GGUF; bad inputs are one line and exit 2, nothing written."""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib

import pytest
import torch
import transformers
from torch.func import functional_call

from orthoformer.learn_rotation import main
from orthoformer.torch.cayley import cayley_step, orthogonality_error
from orthoformer.torch.learned_rotation import Objective, Settings, fake_quant, folded, rotated
from orthoformer.torch.llama import Llama, hf_name
from orthoformer.torch.llama_config import LlamaConfig

from helpers import tiny_bpe_llama_folder as tiny_folder


def haar(n: int, seed: int, batch: tuple = ()) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(*batch, n, n, generator=g, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)


def test_a_cayley_step_stays_orthogonal_and_descends_to_a_target() -> None:
    target, r = haar(12, 1), haar(12, 2)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return ((x - target) ** 2).sum()

    first = float(loss(r))
    for _ in range(300):
        x = r.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(loss(x), x)
        r = cayley_step(r, g, 0.05)
        assert orthogonality_error(r) < 1e-10
    # Rotations reach every orthogonal matrix of the same determinant; the target's is
    # matched by flipping one column of the start when they differ.
    assert float(loss(r)) < 0.01 * first or torch.det(r) * torch.det(target) < 0
    batch = haar(5, 3, (4,))
    step = cayley_step(batch, torch.randn(4, 5, 5, dtype=torch.float64), 2.0)
    assert orthogonality_error(step) < 1e-10


def tiny_hf(seed: int = 0) -> transformers.LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        tie_word_embeddings=True,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.3 * torch.randn_like(p) if "norm" in name else 0.2 * torch.randn_like(p))
    return model


def test_rotated_folded_weights_give_transformers_logits(tmp_path: pathlib.Path) -> None:
    hf = tiny_hf()
    hf.save_pretrained(tmp_path / "m", safe_serialization=True)
    cfg = LlamaConfig.from_hf_dict(json.loads((tmp_path / "m" / "config.json").read_text()))
    tensors = {k: v.detach().clone() for k, v in hf.state_dict().items()}
    w = rotated(folded(tensors, cfg), haar(32, 4), haar(8, 5, (2,)), cfg)
    model = Llama(dataclasses.replace(cfg, tie_word_embeddings=False)).eval().double()
    params = {n: w[hf_name(n)] for n, _ in model.named_parameters()}
    ids = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        want = hf.double()(ids).logits
        got, _ = functional_call(model, params, (ids,))
    # Both compute RMSNorm in float32 (as transformers does): that rounding, not the rotation,
    # is what separates them; a wrong fold moves logits by O(1).
    assert float((want - got).abs().max()) < 1e-4


def test_the_objective_unrounded_is_transformers_loss_under_any_rotation(tmp_path: pathlib.Path) -> None:
    hf = tiny_hf()
    hf.save_pretrained(tmp_path / "m", safe_serialization=True)
    cfg = LlamaConfig.from_hf_dict(json.loads((tmp_path / "m" / "config.json").read_text()))
    tensors = {k: v.detach().clone() for k, v in hf.state_dict().items()}
    obj = Objective(cfg, folded(tensors, cfg), Settings())
    ids = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        want = float(hf(ids, labels=ids).loss)
        plain = float(obj.loss(torch.eye(32), torch.eye(8).repeat(2, 1, 1), ids, quantise=False))
        turned = float(obj.loss(haar(32, 9), haar(8, 10, (2,)), ids, quantise=False))
        rounded = float(obj.loss(haar(32, 9), haar(8, 10, (2,)), ids, quantise=True))
    assert abs(plain - want) < 1e-5 and abs(turned - want) < 1e-5, (plain, turned, want)
    assert abs(rounded - want) > 1e-3  # rounding to 4 bits changes the loss


def test_fake_quant_rounds_to_the_grid_and_passes_gradients() -> None:
    w = torch.randn(4, 64, dtype=torch.float64, requires_grad=True)
    q = fake_quant(w, 4, 32)
    for g in q.detach().reshape(8, 32):
        assert len(set(g.flatten().tolist())) <= 16
    assert float((q - w).detach().abs().max()) < float(w.detach().abs().max()) / 8
    (grad,) = torch.autograd.grad(q.sum(), w)
    assert torch.isfinite(grad).all() and float(grad.abs().sum()) > 0


def test_learning_lowers_the_rounded_loss_and_writes_an_equal_model(cli_json, tmp_path, capsys) -> None:
    hf, _ = tiny_folder(tmp_path, vocab_extra=0)
    out = tmp_path / "learned"
    argv = ["--model", str(hf), "--data", str(tmp_path / "t.txt"), "--out", str(out), "--calib-tokens", "512",
            "--context", "32", "--steps", "25", "--lr", "2", "--bits", "3", "--quiet"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["quantised_loss_after"] < report["quantised_loss_before"], report
    assert report["orthogonality_error"] < 1e-10 and report["max_abs_logit_diff_unrounded"] < 1e-3
    assert (report["calibration_windows"], report["held_out_windows"]) == (12, 4)
    for k in ("held_out_quantised_loss_before", "held_out_quantised_loss_after", "held_out_unrounded_loss"):
        assert math.isfinite(report[k]), (k, report)
    ids = torch.randint(0, 200, (1, 24), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        a = transformers.LlamaForCausalLM.from_pretrained(hf).eval()(ids).logits
        b = transformers.LlamaForCausalLM.from_pretrained(out).eval()(ids).logits
    assert float((a - b).abs().max()) < 1e-3
    r = cli_json("quantize", "--model", out, "--out", tmp_path / "q.gguf", "--gguf-type", "q8_0")
    assert r["greedy_same"] is True


@pytest.mark.parametrize(
    "change, needle",
    [
        (["--group", "48"], "--group 48"),
        (["--context", "1"], "--context"),
        (["--lr", "0"], "--lr"),
        (["--holdout", "1"], "--holdout"),
        (["--calib-tokens", "8", "--context", "16"], "no window"),
    ],
)
def test_bad_inputs_are_one_line_and_write_nothing(tmp_path, capsys, change, needle) -> None:
    hf, _ = tiny_folder(tmp_path, vocab_extra=0)
    capsys.readouterr()  # transformers' own progress lines while saving the folder
    out = tmp_path / "learned"
    argv = ["--model", str(hf), "--data", str(tmp_path / "t.txt"), "--out", str(out), "--steps", "1", *change]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_a_model_with_attention_biases_is_refused_by_name(tmp_path, capsys) -> None:
    """Qwen2 (biases on q/k/v) loads as a Llama now; its biases would need rotating too."""
    cfg = transformers.Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    transformers.Qwen2ForCausalLM(cfg).save_pretrained(tmp_path / "qwen2")
    (tmp_path / "t.txt").write_text("some calibration text " * 50)
    capsys.readouterr()
    out = tmp_path / "learned"
    argv = ["--model", str(tmp_path / "qwen2"), "--data", str(tmp_path / "t.txt"), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "qwen2 model with attention biases" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()

"""Rotation-aligned merging: do the residual stream's rotations remove the
loss barrier between two Llama-style models trained from different seeds, and how do they
compare with permutation alignment (Git Re-Basin's weight matching)?

Trains ``2 · --pairs`` models of :class:`orthoformer.torch.llama.Llama` (RMSNorm, SwiGLU,
RoPE, grouped-query attention, untied head) on the first 90% of TinyShakespeare, tokenised
by a byte-level BPE trained on that split; model ``s`` draws its initialisation and its batch
order from seed ``s``. For each pair (A = seed 2p, B = seed 2p + 1) it measures the loss
along ``(1 − α)·A + α·B`` on the last 10% (``orthoformer.interpolate``), for B as trained and
B aligned to A by ``orthoformer.align_weights`` in each form:

- ``raw``: the models as trained (norm weights interpolated too);
- ``folded``: both models' RMSNorm weights folded, nothing aligned (the control for every
  aligned form, which folds both);
- ``permutation``: residual channels and FFN units permuted (weight matching);
- ``rotation``: the residual stream rotated (Procrustes);
- ``rotation+heads``: and each value head rotated;
- ``rotation+heads+ffn``: and the FFN units permuted.

Writes ``results.json`` (every loss curve and distance) and ``table.md`` under ``--out``.
One command: ``python scripts/merge_barrier.py --out /tmp/merge`` (about 40 minutes on two
cores with the defaults).
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
try:  # the installed package; else the source tree's, built in place
    import orthoformer  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))

import orthoformer  # noqa: E402
from orthoformer import interpolate  # noqa: E402
from orthoformer.torch.llama import Llama  # noqa: E402
from orthoformer.torch.llama_config import LlamaConfig  # noqa: E402

FORMS = {
    "permutation": {"residual": "permutation", "permute_ffn": True},
    "rotation": {},
    "rotation+heads": {"heads": True},
    "rotation+heads+ffn": {"heads": True, "permute_ffn": True},
}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=pathlib.Path)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--eval-tokens", type=int, default=16384)
    p.add_argument("--points", type=int, default=11)
    return p.parse_args()


def tokenizer(train: str, vocab: int):
    """A byte-level BPE of ``vocab`` tokens trained on ``train``, as transformers wraps it."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([train], trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>"
    )


def train_one(
    seed: int, ids: torch.Tensor, cfg: LlamaConfig, a: argparse.Namespace, folder: pathlib.Path, tok
) -> dict:
    torch.manual_seed(seed)
    model = Llama(cfg)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=a.lr,
        betas=(0.9, 0.95),
    )
    gen = torch.Generator().manual_seed(1000 + seed)
    warm = max(1, a.steps // 20)
    t0, losses = time.time(), []
    for step in range(a.steps):
        lr = (
            a.lr * (step + 1) / warm
            if step < warm
            else a.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * (step - warm) / (a.steps - warm))))
        )
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, len(ids) - a.context - 1, (a.batch,), generator=gen)
        rows = torch.stack([ids[s : s + a.context + 1] for s in starts.tolist()])
        _, loss = model(rows[:, :-1], rows[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0 or step == a.steps - 1:
            print(f"seed {seed} step {step} loss {losses[-1]:.4f} ({time.time() - t0:.0f} s)", flush=True)
    model.to_hf(folder)
    tok.save_pretrained(folder)
    return {"seed": seed, "final_train_loss": sum(losses[-20:]) / 20, "seconds": time.time() - t0}


def path(a_dir: pathlib.Path, b_dir: pathlib.Path, val: pathlib.Path, args: argparse.Namespace) -> dict:
    ns = argparse.Namespace(
        model=str(a_dir),
        model_b=str(b_dir),
        data=str(val),
        tokens=args.eval_tokens,
        context=args.context,
        points=args.points,
        batch=16,
        json=True,
    )
    return interpolate.run(ns)


def main() -> int:
    a = parse()
    a.out.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "data" / "tinyshakespeare.txt").read_text()
    cut = int(len(text) * 0.9)
    train_txt, val_txt = a.out / "train.txt", a.out / "val.txt"
    train_txt.write_text(text[:cut])
    val_txt.write_text(text[cut:])
    tok = tokenizer(text[:cut], a.vocab)
    ids = torch.tensor(tok(text[:cut])["input_ids"])
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=a.width,
        intermediate_size=3 * a.width,
        num_hidden_layers=a.layers,
        num_attention_heads=a.width // 32,
        num_key_value_heads=a.width // 64,
        max_position_embeddings=2 * a.context,
        rms_norm_eps=1e-5,
    )
    results: dict = {
        "settings": vars(a) | {"out": str(a.out)},
        "train_tokens": len(ids),
        "models": [],
        "pairs": [],
    }
    for s in range(2 * a.pairs):
        folder = a.out / f"seed{s}"
        if not (folder / "model.safetensors").is_file():
            results["models"].append(train_one(s, ids, cfg, a, folder, tok))
    for p in range(a.pairs):
        A, B = a.out / f"seed{2 * p}", a.out / f"seed{2 * p + 1}"
        work = a.out / f"pair{p}"
        work.mkdir(exist_ok=True)
        pair: dict = {"a": 2 * p, "b": 2 * p + 1, "forms": {}}
        pair["forms"]["raw"] = {"path": path(A, B, val_txt, a)}
        folded = {}
        for name, src in (("a", A), ("b", B)):
            out = work / f"folded-{name}"
            folded[name] = orthoformer.align_weights(src, src, out, check=val_txt)
        pair["forms"]["folded"] = {"path": path(work / "folded-a", work / "folded-b", val_txt, a)}
        for form, kw in FORMS.items():
            out = work / form
            rep = orthoformer.align_weights(A, B, out, check=val_txt, **kw)
            assert rep["check_passed"], rep["check"]
            pair["forms"][form] = {
                "path": path(work / "folded-a", out, val_txt, a),
                "distance_before": rep["distance_before"],
                "distance_after": rep["distance_after"],
                "rounds": rep["steps"][-1]["round"],
            }
            print(
                f"pair {p} {form}: distance {rep['distance_before']:.4f} -> {rep['distance_after']:.4f}, "
                f"barrier {pair['forms'][form]['path']['barrier']:.4f}",
                flush=True,
            )
        results["pairs"].append(pair)
        (a.out / "results.json").write_text(json.dumps(results, indent=1))
    (a.out / "table.md").write_text(table(results))
    print(table(results))
    return 0


def table(r: dict) -> str:
    forms = ["raw", "folded", *FORMS]
    lines = [
        "| form | distance after (mean) | barrier per pair (nats) | mean barrier "
        "| loss at α=0.5 (mean) | end losses (mean) |",
        "|---|---|---|---|---|---|",
    ]
    for f in forms:
        rows = [p["forms"][f] for p in r["pairs"]]
        bars = [x["path"]["barrier"] for x in rows]
        mids = [x["path"]["losses"][len(x["path"]["losses"]) // 2] for x in rows]
        ends = [(x["path"]["losses"][0] + x["path"]["losses"][-1]) / 2 for x in rows]
        dist = [x["distance_after"] for x in rows if "distance_after" in x]
        d = f"{sum(dist) / len(dist):.4f}" if dist else "-"
        lines.append(
            f"| {f} | {d} | {', '.join(f'{b:.3f}' for b in bars)} | {sum(bars) / len(bars):.3f} | "
            f"{sum(mids) / len(mids):.3f} | {sum(ends) / len(ends):.3f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

"""A Llama run of ``python -m orthoformer.train --arch llama`` (:class:`LlamaTrainRun`): the
Llama-style model of :mod:`.llama` trained by the same :class:`~.trainer.Trainer` as the GPT
(DDP or FSDP2, autocast, ``torch.compile``, gradient accumulation, the same AdamW, schedule,
clipping, evaluation and stop handling), on a text the library tokenizes (``--data``) or a
token folder (``--data-dir``), with the same samplers as the GPT's runs.

The library has no Llama checkpoint, so the folder is the ladder's Llama format
(:class:`~orthoformer.ladder_llama.LlamaRun`: ``model-<step>.safetensors`` with the trainable
tensors by name, ``optimizer-<step>.safetensors`` with AdamW's ``m`` and ``v``, ``state.json``
renamed into place last and naming both files with their SHA-256), whose ``state.json`` a
trainer's run extends: ``format`` :data:`FORMAT`, ``arch`` ``llama``, the data it trained on
and its tokenizer (a Hugging Face or tiktoken document as ``tokenizer.json`` beside it). Frozen
Q/K are never stored: the config's ``frozen_seed`` and ``frozen_method`` regenerate them.
:func:`load` reads the folder back as a :class:`~.llama.Llama` (``Llama.from_checkpoint``),
whose ``to_hf`` writes a folder ``transformers``' ``LlamaForCausalLM`` loads.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any, Optional

import numpy as np

from .. import _native
from ..ladder_llama import LlamaRun, _sha256
from ..tokens import EVAL_STREAM, TokenFolder, TokenSampler
from ..validate import InputError
from .functional import Device
from .runs import _NativeBatches, _TokenBatches, read_safetensors, resumed_options

#: ``state.json``'s ``format`` of a trainer's Llama checkpoint.
FORMAT = "orthoformer-llama-checkpoint"
#: The architecture a Llama checkpoint records (``--arch``).
ARCH = "llama"
#: The file a token folder's tokenizer document is copied to.
TOKENIZER_FILE = "tokenizer.json"


def flops_per_token(model: dict[str, Any], t: int) -> int:
    """Forward + backward FLOPs per token of training the Llama of ``model`` (LlamaConfig
    fields) at context ``t``, counted on the model built on the meta device: ``6·N`` for the
    trainable matrices (the head included, the embedding lookup not), ``4·N`` for frozen
    ``W_Q``/``W_K`` (no weight gradient), and PaLM's ``12·L·T·C`` for the attention scores
    and their weighted sum (PaLM, appendix B)."""
    import torch

    from .llama import Llama
    from .llama_config import LlamaConfig

    cfg = LlamaConfig(**model)
    meta = Llama(cfg, device=torch.device("meta"))
    trained = sum(
        p.numel() for n, p in meta.named_parameters() if p.dim() == 2 and n != "embed_tokens.weight"
    )
    if cfg.tie_word_embeddings:
        trained += meta.embed_tokens.weight.numel()  # the head's matmul
    frozen = sum(b.numel() for n, b in meta.named_buffers() if n.endswith(("q.weight", "k.weight")))
    return 6 * trained + 4 * frozen + 12 * cfg.num_hidden_layers * t * cfg.hidden_size


class _LlamaShape:
    """What the trainer and the banner read of a run's model."""

    def __init__(self, model: dict[str, Any]) -> None:
        self.context = model["max_position_embeddings"]
        self.dropout = model.get("attention_dropout", 0.0)
        self.attention = model.get("attention", "softmax")
        self.model = model


class _TextSource:
    """A UTF-8 text tokenized by the library (character or byte-level BPE, split 90/10),
    sampled by the library's seeded sampler, as a GPT's ``--data`` run is."""

    def __init__(self, path: Optional[str], tokenizer: str, vocab_size: Optional[int], t: int) -> None:
        self.path, self.kind, self.bpe_vocab = path, tokenizer, vocab_size
        self.data = _native.Data(path, tokenizer, vocab_size, t)
        self.vocab_size = self.data.vocab_size()
        self.vocab_line = f"vocabulary {self.vocab_size} ({self.data.tokenizer_kind()} tokenizer)"

    def record(self) -> dict[str, Any]:
        rec = json.loads(self.data.record_json())
        path = None if self.path is None else os.path.abspath(self.path)  # resumable from anywhere
        return {"kind": "text", "path": path, "tokenizer": self.kind, "bpe_vocab": self.bpe_vocab, **rec}

    def tokenizer(self) -> dict[str, Any]:
        """The tokenizer record (rebuilt from the text on resume)."""
        return {"kind": self.kind, "vocab_size": self.vocab_size}

    def fingerprint(self) -> list[int]:
        train, val = (np.frombuffer(self.data.tokens(s), dtype="<u4") for s in ("train", "val"))
        checksum = int((train.astype(np.uint64) * np.uint64(2654435761)).sum() % np.uint64(2**61 - 1))
        return [self.vocab_size, len(train), len(val), checksum]

    def train_batches(self, seed: int, pos: str, t: int) -> _NativeBatches:
        return _NativeBatches(self.data, "train", t, seed, pos)

    def eval_batches(self, split: str, seed: int, t: int) -> _NativeBatches:
        # Fixed batches per split, drawn apart from the training stream.
        stream = (seed + EVAL_STREAM + (split == "val")) % 2**64
        return _NativeBatches(self.data, split, t, stream)


class _FolderSource:
    """A token folder (``python -m orthoformer.prepare``) as a GPT's ``--data-dir`` run reads it."""

    def __init__(self, folder: str) -> None:
        self.folder = TokenFolder(folder)
        self.vocab_size = self.folder.vocab_size
        self.spec = self.folder.tokenizer_spec()
        name = _native.Tokenizer(json.dumps(self.spec)).name()
        self.vocab_line = f"vocabulary {self.vocab_size} from {self.folder.path} ({name} tokenizer)"

    def record(self) -> dict[str, Any]:
        return {"kind": "tokens", **self.folder.record()}

    def tokenizer(self) -> dict[str, Any]:
        """The tokenizer record, its document moved to :data:`TOKENIZER_FILE`."""
        rec = {k: v for k, v in self.spec.items() if k != "json"}
        if "json" in self.spec:
            rec["file"] = TOKENIZER_FILE
        return rec

    def fingerprint(self) -> list[int]:
        return [self.vocab_size, *(self.folder.lengths[s] for s in ("train", "val"))]

    def train_batches(self, seed: int, pos: str, t: int) -> _TokenBatches:
        return _TokenBatches(TokenSampler(self.folder, seed, 0, int(pos)), "train", t)

    def eval_batches(self, split: str, seed: int, t: int) -> _TokenBatches:
        sampler = TokenSampler(self.folder, seed, EVAL_STREAM + (split == "val"))
        return _TokenBatches(sampler, split, t)


def open_source(
    data: Optional[str], data_dir: Optional[str], tokenizer: str, vocab: Optional[int], t: int
) -> Any:
    """The run's data: the token folder ``data_dir``, else the text ``data`` (``None``: the
    embedded TinyShakespeare)."""
    if data_dir is not None:
        source = _FolderSource(data_dir)
        source.folder.check_context(t)
        return source
    return _TextSource(data, tokenizer, vocab, t)


class LlamaTrainRun(LlamaRun):
    """A Llama run in ``out`` of the Llama ``model`` (:class:`~.llama_config.LlamaConfig`'s
    fields, its context ``max_position_embeddings``) on ``source``; :meth:`fresh` and
    :meth:`resume` make one."""

    def __init__(
        self, out: pathlib.Path, model: dict[str, Any], options: dict[str, Any], model_seed: int, source: Any
    ) -> None:
        t = model["max_position_embeddings"]
        tokens = options["batch"] * t
        spec = {
            "model": model,
            "context": t,
            "model_seed": model_seed,
            "tokens_per_step": tokens,
            "flops_per_step": flops_per_token(model, t) * tokens,
        }
        super().__init__(out, spec, options, source)
        self.source = source
        self.config = _LlamaShape(model)
        self.vocab_line = source.vocab_line
        cfg = self.llama_config
        kv = "" if cfg.num_key_value_heads == cfg.num_attention_heads else f" ({cfg.num_key_value_heads} KV)"
        self.model_line = (
            f"llama {cfg.attention}, {cfg.num_hidden_layers} layers x {cfg.hidden_size} wide, "
            f"{cfg.num_attention_heads} heads{kv}, FFN {cfg.intermediate_size}, "
            f"{'tied' if cfg.tie_word_embeddings else 'untied'} head"
        )

    @classmethod
    def fresh(
        cls, out: pathlib.Path, model: dict[str, Any], options: dict[str, Any], model_seed: int, source: Any
    ) -> LlamaTrainRun:
        """A new run into ``out`` (which must not hold a checkpoint); the vocabulary is the
        data's."""
        if (out / "state.json").exists():
            raise InputError(
                f"{out} already holds a checkpoint: pass --resume to continue it, or choose another --out"
            )
        model = dict(model, vocab_size=source.vocab_size)
        from .llama_config import LlamaConfig

        model = dataclasses.asdict(LlamaConfig(**model))  # checked, defaults filled in
        out.mkdir(parents=True, exist_ok=True)  # an unwritable --out fails now
        return cls(out, model, options, model_seed, source)

    @classmethod
    def resume(
        cls, out: pathlib.Path, steps: Optional[int], data: Optional[str], data_dir: Optional[str]
    ) -> LlamaTrainRun:
        """The checkpoint in ``out`` (every file's SHA-256 checked), on its recorded data or
        the ``data``/``data_dir`` given (which must hold the same bytes)."""
        st = read_state(out)
        rec, model = st["data"], st["model"]
        t = model["max_position_embeddings"]
        if rec["kind"] == "tokens" or data_dir is not None:
            if rec["kind"] != "tokens":
                raise InputError(f"checkpoint {out} was trained on a text: pass --data, not --data-dir")
            source: Any = open_source(None, data_dir or rec["source"], "char", None, t)
        else:
            if rec.get("path") is None and data is not None:
                raise InputError(f"checkpoint {out} was trained on the embedded text: drop --data")
            source = open_source(data or rec.get("path"), None, rec["tokenizer"], rec.get("bpe_vocab"), t)
        if source.record()["sha256"] != rec["sha256"]:
            flag = "--data-dir" if rec["kind"] == "tokens" else "--data"
            raise InputError(
                f"the data {source.record()['source']} is not what checkpoint {out} was trained on "
                f"(SHA-256 differs): pass the original with {flag}"
            )
        if source.vocab_size != model["vocab_size"]:
            raise InputError(
                f"the data's vocabulary has {source.vocab_size} tokens, the checkpoint's model "
                f"{model['vocab_size']}: pass the data it was trained on"
            )
        run = cls(out, model, resumed_options(st["options"], steps), int(st["model_seed"]), source)
        run.state = dict(st["state"], last_checkpoint=st["state"]["step"])
        run.resumed, run._files = True, st["files"]
        return run

    def fingerprint(self) -> list[int]:
        return self.source.fingerprint()

    def train_batches(self) -> Any:
        return self.source.train_batches(
            self.options["seed"], self.state["sampler_word_pos"], self.config.context
        )

    def eval_batches(self, split: str) -> Any:
        return self.source.eval_batches(split, self.options["seed"], self.config.context)

    def build_model(self, device: Any, pad_vocab: int = 1) -> Any:
        """The model on ``device`` (the GPT's vocabulary padding does not apply: the Llama's
        head is a plain matrix); DDP leaves the frozen buffers alone, as the GPT's."""
        model = super().build_model(device)
        model._ddp_params_and_buffers_to_ignore = [n for n, _ in model.named_buffers()]
        return model

    def record(self, state: dict[str, Any], files: dict[str, str], digests: dict[str, str]) -> dict[str, Any]:
        rec = super().record(state, files, digests)
        rec.update(format=FORMAT, arch=ARCH, data=self.source.record(), tokenizer=self.source.tokenizer())
        return rec

    def save(
        self, flat: bytes, state: dict[str, Any], m: bytes, v: bytes, frozen: Optional[dict] = None
    ) -> None:
        spec = getattr(self.source, "spec", {})
        path = self.out / TOKENIZER_FILE
        if "json" in spec and not path.exists():
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(spec["json"], encoding="utf-8")
            os.replace(tmp, path)
        super().save(flat, state, m, v, frozen)


def read_state(out: Any) -> dict[str, Any]:
    """The ``state.json`` of the Llama checkpoint ``out``, its files' SHA-256 checked; a GPT's
    checkpoint (or anything else) is refused by name."""
    path = pathlib.Path(out) / "state.json"
    try:
        st = json.loads(path.read_text())
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror}): is {out} a checkpoint folder?") from None
    except ValueError as e:
        raise InputError(f"{path} is not JSON ({e})") from None
    if not isinstance(st, dict) or st.get("format") != FORMAT:
        raise InputError(
            f"{out} is not a Llama checkpoint (python -m orthoformer.train --arch llama writes one): "
            "load a GPT's with GPT.from_checkpoint"
        )
    for name, digest in st["sha256"].items():
        if _sha256(pathlib.Path(out) / name) != digest:
            raise InputError(
                f"{pathlib.Path(out) / name} does not match {path} (SHA-256): the checkpoint is damaged"
            )
    return st


def arch_of(out: Any) -> Optional[str]:
    """The architecture of the checkpoint in ``out``: ``llama`` (this module's format),
    ``gpt`` (any other ``state.json``, which the library's reader judges) or ``None`` (no
    readable ``state.json``: the reader of the architecture asked for says what is wrong)."""
    try:
        st = json.loads((pathlib.Path(out) / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return str(st.get("arch", "gpt")) if isinstance(st, dict) and st.get("format") == FORMAT else "gpt"


def load(out: Any, device: Device = None) -> tuple[Any, dict[str, Any]]:
    """The Llama of checkpoint ``out`` (on ``device``) and its ``state.json``."""
    import torch

    from .llama import Llama
    from .llama_config import LlamaConfig

    st = read_state(out)
    model = Llama(LlamaConfig(**st["model"]), device="meta")
    model.to_empty(device=torch.device("cpu") if device is None else device)
    model.reset_frozen()
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in read_safetensors(pathlib.Path(out) / st["files"]["model"]):
            if name not in params:
                raise InputError(f"{out}: tensor {name} is not a parameter of the recorded model")
            params.pop(name).copy_(torch.from_numpy(value))
    if params:
        raise InputError(f"{out} lacks the tensors {sorted(params)}")
    return model, st


__all__ = [
    "ARCH",
    "FORMAT",
    "LlamaTrainRun",
    "arch_of",
    "flops_per_token",
    "load",
    "open_source",
    "read_state",
]

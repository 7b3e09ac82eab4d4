"""What the trainer trains on and where its checkpoints go, behind one interface:

- :class:`TextRun`: a UTF-8 text tokenized by the library (character or BPE), the native
  ``Session`` of ``orthoformer train`` (its sampler, its checks, its checkpoint writer);
- :class:`TokenRun`: a folder of pre-tokenized ids (``python -m orthoformer.prepare``) read
  through memory maps, its tokenizer (Hugging Face, tiktoken or ids only) recorded in the
  checkpoint, which the library writes in the same format.

Both give the options, model pieces and loop state of a fresh or resumed run, batch sources
(:meth:`train_batches`, :meth:`eval_batches`: ``draw(b)`` then ``rows(lo, hi)``, so a rank
reads only its own rows) and :meth:`save`.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Optional

import numpy as np

from .. import _native
from ..config import GPTConfig
from ..data import u32
from ..tokens import EVAL_STREAM, TokenFolder, TokenSampler


class _NativeBatches:
    """The library's seeded sampler over a native ``Data``."""

    def __init__(self, data: Any, split: str, t: int, seed: int, pos: Optional[str] = None) -> None:
        self.sampler = _native.BatchSampler(seed, pos)
        self.data, self.split, self.t = data, split, t

    def draw(self, b: int) -> None:
        x, y = self.sampler.next_batch(self.data, self.split, b, self.t)
        self.x, self.y = u32(x, (b, self.t)), u32(y, (b, self.t))

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        return self.x[lo:hi], self.y[lo:hi]

    def position(self) -> str:
        return self.sampler.word_pos()


class _TokenBatches:
    """A :class:`TokenSampler` behind the same interface."""

    def __init__(self, sampler: TokenSampler, split: str, t: int) -> None:
        self.sampler, self.split, self.t = sampler, split, t

    def draw(self, b: int) -> None:
        self.sampler.draw(self.split, b, self.t)

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        return self.sampler.rows(lo, hi)

    def position(self) -> str:
        return str(self.sampler.position)


class TextRun:
    """A native ``Session`` (fresh or resumed) as the trainer's run."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.options_json = session.options_json()
        self.options: dict[str, Any] = json.loads(self.options_json)
        self.config = GPTConfig.from_json(session.config_json())
        self.table = session.tensors()
        self.state: dict[str, Any] = json.loads(session.state_json())
        self.data = session.data()
        self.vocab_line = f"vocabulary {self.data.vocab_size()} ({self.data.tokenizer_kind()} tokenizer)"

    def params(self) -> bytes:
        return self.session.params()

    def frozen(self) -> list:
        return self.session.frozen()

    def moments(self) -> tuple[bytes, bytes]:
        return self.session.adam_moments()

    def fingerprint(self) -> list[int]:
        """What every rank must agree on: vocabulary, token counts, a checksum of the ids."""
        train, val = (np.frombuffer(self.data.tokens(s), dtype="<u4") for s in ("train", "val"))
        checksum = int((train.astype(np.uint64) * np.uint64(2654435761)).sum() % np.uint64(2**61 - 1))
        return [self.data.vocab_size(), len(train), len(val), checksum]

    def train_batches(self) -> _NativeBatches:
        t = self.config.context
        return _NativeBatches(self.data, "train", t, self.options["seed"], self.state["sampler_word_pos"])

    def eval_batches(self, split: str) -> _NativeBatches:
        return _NativeBatches(self.data, split, self.config.context, self.session.eval_seed())

    def save(self, flat: bytes, state: dict[str, Any], m: bytes, v: bytes) -> None:
        self.session.save(flat, json.dumps(state), m, v)


class TokenRun:
    """A run on a token folder; :meth:`fresh` and :meth:`resume` make one."""

    def __init__(
        self,
        out: pathlib.Path,
        folder: TokenFolder,
        native: Any,
        options: dict[str, Any],
        model_seed: int,
        state: dict[str, Any],
        moments: Optional[tuple[bytes, bytes]],
    ) -> None:
        self.out, self.folder, self.native = out, folder, native
        self.options = options
        self.options_json = json.dumps(options)
        self.model_seed, self.state, self._moments = model_seed, state, moments
        self.config = GPTConfig.from_json(native.config_json())
        self.table = native.tensors()
        self.spec = folder.tokenizer_spec()
        self.tokenizer = _native.Tokenizer(json.dumps(self.spec))
        if self.tokenizer.vocab_size() != folder.vocab_size:
            raise ValueError(
                f"{folder.path}: the tokenizer has {self.tokenizer.vocab_size()} tokens but meta.json "
                f"says {folder.vocab_size}: prepare the folder again"
            )
        folder.check_context(self.config.context)
        self.vocab_line = (
            f"vocabulary {folder.vocab_size} from {folder.path} ({self.tokenizer.name()} tokenizer)"
        )

    @classmethod
    def fresh(
        cls, out: pathlib.Path, data_dir: str, config_json: str, options: dict[str, Any], model_seed: int
    ) -> TokenRun:
        """A new run into ``out`` (which must not hold a checkpoint); the model's vocabulary
        is the folder's, whatever the preset says."""
        if (out / "state.json").exists():
            raise ValueError(
                f"{out} already holds a checkpoint: pass --resume to continue it, or choose another --out"
            )
        folder = TokenFolder(data_dir)
        cfg = json.loads(config_json)
        cfg["vocab_size"] = folder.vocab_size
        native = _native.Gpt(GPTConfig.from_dict(cfg).to_json(), model_seed)
        out.mkdir(parents=True, exist_ok=True)  # an unwritable --out fails now, not at the first checkpoint
        state = {
            "step": 0,
            "sampler_word_pos": "0",
            "adam_t": 0,
            "window_loss": 0.0,
            "window_steps": 0,
            "metrics": [],
            "last_checkpoint": None,
        }
        return cls(out, folder, native, options, model_seed, state, None)

    @classmethod
    def resume(cls, out: pathlib.Path, data_dir: Optional[str], steps: Optional[int]) -> TokenRun:
        """The checkpoint in ``out`` (verified by the library), on its recorded token folder or
        ``data_dir`` (which must hold the same tokens)."""
        state_json, native, m, v = _native.load_checkpoint(str(out))
        st = json.loads(state_json)
        folder = TokenFolder(data_dir or st["data"]["source"])
        if folder.meta["sha256"] != st["data"]["sha256"]:
            raise ValueError(
                f"the token folder {folder.path} is not the one checkpoint {out} was trained on "
                "(SHA-256 differs): pass the original folder with --data-dir"
            )
        options = dict(st["options"])
        if steps is not None:
            options["steps"] = steps
        options = json.loads(_native.options_check(json.dumps(options)))
        metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line]
        state = {k: st[k] for k in ("step", "sampler_word_pos", "adam_t", "window_loss", "window_steps")}
        state.update(metrics=metrics, last_checkpoint=st["step"])
        return cls(out, folder, native, options, int(st["model_seed"]), state, (bytes(m), bytes(v)))

    def params(self) -> bytes:
        return self.native.params()

    def frozen(self) -> list:
        return self.native.frozen()

    def moments(self) -> tuple[bytes, bytes]:
        if self._moments is None:
            n = 4 * sum(int(np.prod(shape)) for _, shape, _, _ in self.table)
            return bytes(n), bytes(n)
        return self._moments

    def fingerprint(self) -> list[int]:
        return [self.folder.vocab_size, *(self.folder.lengths[s] for s in ("train", "val"))]

    def train_batches(self) -> _TokenBatches:
        pos = int(self.state["sampler_word_pos"])
        return _TokenBatches(
            TokenSampler(self.folder, self.options["seed"], 0, pos), "train", self.config.context
        )

    def eval_batches(self, split: str) -> _TokenBatches:
        stream = EVAL_STREAM + (split == "val")
        sampler = TokenSampler(self.folder, self.options["seed"], stream)
        return _TokenBatches(sampler, split, self.config.context)

    def save(self, flat: bytes, state: dict[str, Any], m: bytes, v: bytes) -> None:
        self.native.set_params(flat)
        run = {
            "options": self.options,
            "model_seed": self.model_seed,
            "data": self.folder.record(),
            "state": state,
        }
        _native.save_token_checkpoint(
            str(self.out), self.native, json.dumps(self.spec), json.dumps(run), (m, v)
        )

"""What the trainer trains on and where its checkpoints go, behind one interface:

- :class:`TextRun`: a UTF-8 text tokenized by the library (character or BPE), the native
  ``Session`` of ``orthoformer train`` (its sampler, its checks, its checkpoint writer);
- :class:`TokenRun`: a folder of pre-tokenized ids (``python -m orthoformer.prepare``) read
  through memory maps, its tokenizer (Hugging Face, tiktoken or ids only) recorded in the
  checkpoint, which the library writes in the same format.

Both give the options, model pieces and loop state of a fresh or resumed run, batch sources
(:meth:`train_batches`, :meth:`eval_batches`: ``draw(b)`` then ``rows(lo, hi)``, so a rank
reads only its own rows; :class:`DeviceBatches` puts them on the device) and :meth:`save`.
Neither keeps a native model for the loop: the trainer builds its own on its device, and
:meth:`save` makes a native one only to write each checkpoint.
"""

from __future__ import annotations

import json
import pathlib
import struct
from typing import Any, Optional

import numpy as np

from .. import _native
from ..config import GPTConfig
from ..data import u32
from ..model import frozen_tensors
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


class DeviceBatches:
    """A batch source's rows ``[(lo, hi), ...]`` (one pair per micro-step) of each drawn
    ``batch``, as tensors on ``device``. With ``prefetch`` (CUDA) they are copied from pinned
    memory without blocking, and :meth:`prefetch` draws and sends the next step's while the
    current one computes; on the CPU it is a no-op. :meth:`position` is the sampler's after
    the batch last handed out (what a checkpoint records), never after a prefetched one."""

    def __init__(self, source: Any, batch: int, rows: list, device: Any, prefetch: bool) -> None:
        self.source, self.batch, self.rows, self.device = source, batch, rows, device
        self.pin = prefetch and device.type == "cuda"
        self.ahead: Optional[tuple[list, str]] = None
        self._position = source.position()

    def _send(self, a: np.ndarray) -> Any:
        import torch

        t = torch.from_numpy(np.ascontiguousarray(a))
        if self.pin:
            # A fresh pinned block per batch: the caching host allocator reuses it only once
            # its copy has completed, so no copy in flight is overwritten.
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    def _load(self) -> tuple[list, str]:
        self.source.draw(self.batch)
        micro = [tuple(self._send(a) for a in self.source.rows(lo, hi)) for lo, hi in self.rows]
        return micro, self.source.position()

    def next(self) -> list:
        """The next step's micro-batches ``[(x, y), ...]``."""
        micro, self._position = self.ahead if self.ahead is not None else self._load()
        self.ahead = None
        return micro

    def prefetch(self) -> None:
        """Draws and sends the next step's batch now (with pinned memory only)."""
        if self.pin and self.ahead is None:
            self.ahead = self._load()

    def position(self) -> str:
        return self._position


def read_safetensors(path: pathlib.Path) -> Any:
    """``(name, float32 array)`` for every tensor of a safetensors file, read one at a time
    (not mapped: a mapped file's pages would count against the host's memory as a whole)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        header.pop("__metadata__", None)
        for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
            if info["dtype"] != "F32":
                raise ValueError(f"{path}: tensor {name} is {info['dtype']}, not F32")
            lo, hi = info["data_offsets"]
            f.seek(8 + n + lo)
            value = np.empty((hi - lo) // 4, dtype="<f4")
            if f.readinto(memoryview(value).cast("B")) != hi - lo:
                raise ValueError(f"{path} is truncated at tensor {name}")
            yield name, value.reshape(info["shape"])


class _ModelOnSave:
    """What both runs share about the model: the trainer's is built where it runs
    (:meth:`build_model`: from the seed, or from the checkpoint's ``model.safetensors``), so
    no native model lives on the host during the loop; a native one is made only to write a
    checkpoint (zeroed, then the trained values set) and dropped after."""

    config: GPTConfig
    model_seed: int
    resumed: bool
    _table: Optional[list] = None

    def release(self) -> None:
        """Drops the run's native model, if any (the trainer's holds the weights)."""

    def frozen(self) -> list:
        """The resumed model's frozen rows (see ``_native.Gpt.frozen``)."""
        raise NotImplementedError

    def params(self) -> bytes:
        """The resumed model's parameters, flat (f32 bytes, buffer order)."""
        raise NotImplementedError

    def model_file(self) -> Optional[pathlib.Path]:
        """The resumed checkpoint's model file (``None``: take :meth:`params`)."""
        raise NotImplementedError

    @property
    def table(self) -> list:
        """The library's tensor table ``(name, shape, offset, decay)`` in buffer order."""
        if self._table is None:
            self._table = _native.Gpt.zeroed(self.config.to_json()).tensors()
        return self._table

    def build_model(self, device: Any, pad_vocab: int = 64) -> Any:
        """The run's model on ``device``, tensor by tensor, after the native copy is dropped:
        from the seed (fresh) or the checkpoint's model file (resumed)."""
        from .model import GPT

        if not self.resumed:
            self.release()
            return GPT(self.config, seed=self.model_seed, device=device, pad_vocab=pad_vocab)
        path = self.model_file()
        if path is None:  # the run keeps its native session: take its weights
            model = GPT.from_parts(self.config, self.frozen(), self.table, self.params(), device=device)
            model.pad_vocab = pad_vocab
            return model
        frozen = frozen_tensors(self.frozen())  # as the library verified them, before the drop
        self.release()
        model = GPT(self.config, device="meta", pad_vocab=pad_vocab)
        model.to_empty(device=device)
        for block in model.h:
            block.attn.reset_frozen()
        params = dict(model.named_parameters())
        import torch

        with torch.no_grad():
            for name, value in read_safetensors(path):
                if name in params:
                    params.pop(name).copy_(torch.from_numpy(value))
        if params:
            raise ValueError(f"{path} lacks the tensors {sorted(params)}")
        model.adopt_frozen(frozen)
        return model

    def native_model(self, flat: bytes, frozen: Optional[dict[str, np.ndarray]]) -> Any:
        """A native model holding ``flat`` (buffer order) and, when given, frozen matrices
        stored whole (imported, rotated); others are regenerated from the config's seed."""
        native = _native.Gpt.zeroed(self.config.to_json())
        native.set_params(flat)
        for name, value in (frozen or {}).items():
            native.import_frozen(name, np.ascontiguousarray(value, dtype="<f4").tobytes())
        return native


class TextRun(_ModelOnSave):
    """A native ``Session`` (fresh or resumed) as the trainer's run. Given ``out`` (the
    session's folder), :meth:`release` drops the session, whose model and AdamW state would
    otherwise sit on the host for the whole run, and checkpoints are written through
    ``_native.save_checkpoint``; without it the session stays and writes them."""

    def __init__(self, session: Any, out: Optional[Any] = None) -> None:
        self.session: Any = session
        self.out = None if out is None else pathlib.Path(out)
        self.options_json = session.options_json()
        self.options: dict[str, Any] = json.loads(self.options_json)
        self.config = GPTConfig.from_json(session.config_json())
        self._table = session.tensors()
        self.state: dict[str, Any] = json.loads(session.state_json())
        # A loaded checkpoint always records its step as the last one written.
        self.resumed = self.state.get("last_checkpoint") is not None
        self.model_seed = int(session.model_seed())
        self._eval_seed = int(session.eval_seed())
        self.data = session.data()
        self.vocab_line = f"vocabulary {self.data.vocab_size()} ({self.data.tokenizer_kind()} tokenizer)"

    def model_file(self) -> Optional[pathlib.Path]:
        """The resumed checkpoint's model file (``None``: take :meth:`params`)."""
        return None if self.out is None or not self.resumed else self.out / "model.safetensors"

    def params(self) -> bytes:
        return self.session.params()

    def frozen(self) -> list:
        return self.session.frozen()

    def release(self) -> None:
        """Drops the session (its model and AdamW state) when checkpoints can be written
        without it; a resumed run's moments are then read from the verified folder."""
        if self.out is not None:
            self.session = None

    def moments(self) -> tuple[Any, Any]:
        if self.session is not None:
            return self.session.adam_moments()
        assert self.out is not None and self.resumed, "a fresh run has no moments"
        # The session verified (or recovered) this folder when it opened it.
        found = dict(read_safetensors(self.out / "optimizer.safetensors"))
        return found["m"], found["v"]

    def fingerprint(self) -> list[int]:
        """What every rank must agree on: vocabulary, token counts, a checksum of the ids."""
        train, val = (np.frombuffer(self.data.tokens(s), dtype="<u4") for s in ("train", "val"))
        checksum = int((train.astype(np.uint64) * np.uint64(2654435761)).sum() % np.uint64(2**61 - 1))
        return [self.data.vocab_size(), len(train), len(val), checksum]

    def train_batches(self) -> _NativeBatches:
        t = self.config.context
        return _NativeBatches(self.data, "train", t, self.options["seed"], self.state["sampler_word_pos"])

    def eval_batches(self, split: str) -> _NativeBatches:
        return _NativeBatches(self.data, split, self.config.context, self._eval_seed)

    def save(
        self, flat: bytes, state: dict[str, Any], m: bytes, v: bytes, frozen: Optional[dict] = None
    ) -> None:
        if self.session is not None:
            self.session.save(flat, json.dumps(state), m, v)
            return
        run = {"options": self.options, "model_seed": self.model_seed, "state": state}
        native = self.native_model(flat, frozen)
        _native.save_checkpoint(str(self.out), native, self.data, json.dumps(run), (m, v))


def resumed_options(saved: dict[str, Any], steps: Optional[int]) -> dict[str, Any]:
    """A checkpoint's options for a resumed run, ``--steps`` applied as the library's
    ``TrainOptions::with_steps`` applies it: a longer run keeps the first run's decay horizon
    (past it, ``--min-lr``) instead of stretching the cosine. Checked by the library."""
    options = dict(saved)
    if steps is not None:
        if steps != options["steps"] and "lr_decay_steps" not in options:
            options["lr_decay_steps"] = max(options["steps"], options["warmup"], 1)
        options["steps"] = steps
    return json.loads(_native.options_check(json.dumps(options)))


class TokenRun(_ModelOnSave):
    """A run on a token folder; :meth:`fresh` and :meth:`resume` make one."""

    def __init__(
        self,
        out: pathlib.Path,
        folder: TokenFolder,
        config: GPTConfig,
        options: dict[str, Any],
        model_seed: int,
        state: dict[str, Any],
        native: Optional[Any] = None,
        moments: Optional[tuple[bytes, bytes]] = None,
    ) -> None:
        self.out, self.folder, self.config = out, folder, config
        self.options = options
        self.options_json = json.dumps(options)
        self.model_seed, self.state, self._moments = model_seed, state, moments
        self.resumed = native is not None
        # A resumed run's verified native model: its table and frozen rows, then dropped.
        self.native = native
        if native is not None:
            self._table = native.tensors()
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
        is the folder's, whatever the preset says. No model is built here: the trainer
        builds it on its device from ``model_seed``."""
        if (out / "state.json").exists():
            raise ValueError(
                f"{out} already holds a checkpoint: pass --resume to continue it, or choose another --out"
            )
        folder = TokenFolder(data_dir)
        cfg = json.loads(config_json)
        cfg["vocab_size"] = folder.vocab_size
        config = GPTConfig.from_json(_native.config_check(GPTConfig.from_dict(cfg).to_json()))
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
        return cls(out, folder, config, options, model_seed, state)

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
        options = resumed_options(st["options"], steps)
        metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line]
        state = {k: st[k] for k in ("step", "sampler_word_pos", "adam_t", "window_loss", "window_steps")}
        state.update(metrics=metrics, last_checkpoint=st["step"])
        config = GPTConfig.from_json(native.config_json())
        moments = (m, v)  # writable: the CPU optimizer's state will be views of them
        return cls(out, folder, config, options, int(st["model_seed"]), state, native, moments)

    def model_file(self) -> Optional[pathlib.Path]:
        """The resumed checkpoint's model file, read by the trainer straight to its device."""
        return self.out / "model.safetensors" if self.resumed else None

    def params(self) -> bytes:
        return self.native.params()

    def frozen(self) -> list:
        return [] if self.native is None else self.native.frozen()

    def release(self) -> None:
        """Drops the resumed run's native model (the trainer holds the weights)."""
        self.native = None

    def moments(self) -> tuple[bytes, bytes]:
        """The resumed AdamW moments, handed over once (the trainer's optimizer holds them
        after: on the CPU as views of these buffers, on a GPU as copies)."""
        if self._moments is None:
            n = 4 * sum(int(np.prod(shape)) for _, shape, _, _ in self.table)
            return bytearray(n), bytearray(n)
        moments, self._moments = self._moments, None
        return moments

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

    def save(
        self, flat: bytes, state: dict[str, Any], m: bytes, v: bytes, frozen: Optional[dict] = None
    ) -> None:
        native = self.native_model(flat, frozen)
        run = {
            "options": self.options,
            "model_seed": self.model_seed,
            "data": self.folder.record(),
            "state": state,
        }
        _native.save_token_checkpoint(str(self.out), native, json.dumps(self.spec), json.dumps(run), (m, v))

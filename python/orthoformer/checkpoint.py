"""Checkpoint folders of ``orthoformer train`` (``model.safetensors``, ``optimizer.safetensors``,
``state.json``, ``metrics.jsonl``, ``tokenizer.json`` when there is one), read and written only
by the Rust library, so this package follows the library's format. Reading verifies every
file's hash and the frozen weights. ``state.json``'s ``tokenizer`` says what turns text into
the model's ids: ``char`` or ``bpe`` (trained by the library on the text), ``hf`` (any Hugging
Face ``tokenizer.json``), ``tiktoken`` (an encoding by name, stored converted to a
``tokenizer.json`` with the same ids) or ``ids`` (token ids without a tokenizer)."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from os import PathLike
from typing import Any, Optional, Union

import numpy as np

from . import _native
from .config import GPTConfig
from .data import DEFAULTS, Data
from .model import FrozenTensor, RustGPT, f32, f32_bytes, flatten, unflatten
from .tokens import Tokenizer
from .validate import InputError, integer, seed, text

#: The library's folder marker (``io::folder_kind``) and the line a checkpoint folder's holds.
MARKER, CHECKPOINT_MARK = ".orthoformer", "orthoformer-folder checkpoint"

PathArg = Union[str, "PathLike[str]"]


@dataclasses.dataclass
class Checkpoint:
    """A verified checkpoint folder: its configuration, model, parsed ``state.json`` (step,
    options, tokenizer, data provenance, ...) and AdamW moments by tensor name."""

    config: GPTConfig
    model: RustGPT
    state: dict[str, Any]
    adam_m: dict[str, np.ndarray]
    adam_v: dict[str, np.ndarray]
    folder: Optional[str] = None

    @property
    def params(self) -> dict[str, np.ndarray]:
        """Trainable tensors by name."""
        return self.model.params()

    @property
    def frozen(self) -> dict[str, FrozenTensor]:
        """Frozen projections by name."""
        return self.model.frozen()

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer the checkpoint records, which ``orthoformer generate`` and ``eval``
        use: ``ckpt.tokenizer.decode(ids)``."""
        if self.folder is None:
            raise ValueError("this Checkpoint was not read from a folder: use load_checkpoint(path)")
        return Tokenizer.of_checkpoint(self.state, self.folder)

    @property
    def step(self) -> int:
        """Optimizer steps done."""
        return int(self.state["step"])


def load_checkpoint(path: PathArg) -> Checkpoint:
    """Reads and verifies the checkpoint folder ``path``; ``ValueError`` when it is corrupt,
    incomplete or not a checkpoint, ``OSError`` when it cannot be read."""
    state, model, m, v = _native.load_checkpoint(os.fspath(path))
    rust = RustGPT(None, _native_model=model)  # type: ignore[arg-type]
    table = rust.table
    return Checkpoint(
        config=rust.config,
        model=rust,
        state=json.loads(state),
        adam_m=unflatten(f32(m), table),
        adam_v=unflatten(f32(v), table),
        folder=os.fspath(path),
    )


def save_checkpoint(
    path: PathArg,
    config: GPTConfig,
    params: dict[str, Any],
    *,
    frozen: Optional[dict[str, Any]] = None,
    data: Optional[Data] = None,
    options: Optional[dict[str, Any]] = None,
    step: int = 0,
    model_seed: int = 0,
    metrics: Optional[list] = None,
    adam: Optional[tuple[dict[str, Any], dict[str, Any], int]] = None,
    sampler_word_pos: str = "0",
    tokenizer: Union[str, dict[str, Any], None] = None,
    data_record: Optional[dict[str, Any]] = None,
) -> None:
    """Writes a model trained anywhere as the checkpoint folder ``path`` (created), which
    ``orthoformer eval``, ``generate``, ``theory`` and ``train --resume`` accept.

    ``params`` holds every trainable tensor by name (PyTorch layout). ``frozen`` (optional) are
    the frozen projections; when they differ from the ones the config's seed regenerates they
    are stored in full. ``data`` is the text and tokenizer the model was trained with (default:
    TinyShakespeare, character level); its vocabulary must be the model's. ``options`` are
    training options (default: ``orthoformer train``'s), ``adam`` the AdamW moments ``(m, v,
    t)`` by name (default: zeros, no step taken), ``metrics`` the evaluation records.

    A model trained on token ids rather than on a text the library tokenized passes
    ``tokenizer`` instead of ``data``: ``"ids"`` (no tokenizer: the vocabulary is the
    config's), a path to a Hugging Face ``tokenizer.json``, or a record ``{"kind": "hf",
    "json": TEXT}`` / ``{"kind": "tiktoken", "name": NAME, "json": TEXT}``;
    ``data_record`` (``source``, ``bytes``, ``sha256``) then says where the ids came from.
    """
    # The run record's fields, checked as state.json's readers check them (a negative step or
    # a seed outside u64 would otherwise surface as a serde message about JSON).
    step = integer("step", step, lo=0)
    model_seed = seed("model_seed", model_seed)
    if not (isinstance(sampler_word_pos, str) and sampler_word_pos.isdigit()):
        raise InputError(f"sampler_word_pos must be a decimal string, got {sampler_word_pos!r}")
    model = _native.Gpt.zeroed(config.to_json())
    table = model.tensors()
    model.set_params(flatten(params, table))
    if frozen:
        _import_if_different(model, frozen)
    if tokenizer is not None and data is not None:
        raise ValueError("pass data (a text the library tokenized) or tokenizer (for token ids), not both")
    opts = dict(DEFAULTS["options"]) if options is None else dict(options)
    moments = None
    adam_t = 0
    if adam is not None:
        m, v, adam_t = adam
        moments = (flatten(m, table), flatten(v, table))
    run = {
        "options": opts,
        "model_seed": model_seed,
        "state": {
            "step": step,
            "sampler_word_pos": sampler_word_pos,
            "adam_t": adam_t,
            "window_loss": 0.0,
            "window_steps": 0,
            "metrics": list(metrics or []),
        },
    }
    if tokenizer is not None:
        run["data"] = data_record or {"source": "token ids", "bytes": 0, "sha256": _EMPTY_SHA256}
        spec = tokenizer_spec(tokenizer, config.vocab_size)
        _native.save_token_checkpoint(os.fspath(path), model, json.dumps(spec), json.dumps(run), moments)
        return
    data = data if data is not None else Data(context=config.context)
    _native.save_checkpoint(os.fspath(path), model, data._d, json.dumps(run), moments)


def check_out(flag: str, out: PathArg) -> None:
    """The library's rule for a new checkpoint folder (``io::folder_kind::check``), for the
    runs whose folder the library first sees at their first checkpoint (a token folder's): it
    may be absent, empty, or a checkpoint folder (its marker, or ``state.json`` from before
    markers), never a file, another kind of Orthoformer folder or another program's folder,
    and it must be writable. Checked before training, not after the first ``--eval-every``
    steps."""
    path = pathlib.Path(text(flag, os.fspath(out)))
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path}: is a file, not a folder: choose a folder for the checkpoint")
    if not path.is_dir():
        up = path
        while not up.exists() and up != up.parent:
            up = up.parent
        if not up.is_dir() or not os.access(up, os.W_OK | os.X_OK):
            raise InputError(f"{flag} {path}: cannot be created in {up}: choose another {flag}")
        return
    marker = path / MARKER
    if marker.exists() or marker.is_symlink():
        line = marker.read_text(errors="replace").strip() if marker.is_file() else ""
        if line != CHECKPOINT_MARK:
            raise InputError(
                f"{flag} {path}: its {MARKER} marker says {line[:60]!r}, not a checkpoint: "
                "choose another folder"
            )
    else:
        names = sorted(n for n in os.listdir(path) if not _working_file(n))
        if names and "state.json" not in names:
            raise InputError(
                f"{flag} {path}: is not empty and was not made by Orthoformer (it holds "
                f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''}): choose a new or empty folder"
            )
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: cannot be written (permissions): choose another {flag}")


def _working_file(name: str) -> bool:
    """The library's own working files (a marker's temporary copy, the write probe, a set's
    lock, staged files, commit record), which do not make a folder foreign."""
    if name.startswith(".") and name.lstrip(".").startswith("orthoformer"):
        return True
    if name.startswith(".write-test"):
        return True
    tag, _, kind = name[1:].partition(".") if name.startswith(".") else ("", "", "")
    return bool(tag) and (kind == "lock" or kind.startswith("new.") or kind.startswith("commit"))


_EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def tokenizer_spec(tokenizer: Union[str, dict[str, Any]], vocab_size: int) -> dict[str, Any]:
    """The tokenizer record of ``save_checkpoint``'s ``tokenizer`` argument."""
    if isinstance(tokenizer, dict):
        return tokenizer
    if tokenizer == "ids":
        return {"kind": "ids", "vocab_size": vocab_size}
    with open(tokenizer, encoding="utf-8") as f:
        return {"kind": "hf", "json": f.read()}


def _import_if_different(model: Any, frozen: dict[str, Any]) -> None:
    """Keeps the regenerated frozen weights when ``frozen`` equals them bit for bit (the
    checkpoint then records the generator); otherwise imports all of ``frozen``."""
    regenerated = {r[0]: f32(r[2], tuple(r[1])) for r in model.frozen()}
    extra = sorted(set(frozen) - set(regenerated))
    if extra:
        raise ValueError(f"{extra[0]} is not a frozen tensor of this model")
    given = {k: np.asarray(getattr(v, "value", v), dtype=np.float32) for k, v in frozen.items()}
    if all(np.array_equal(given[k], regenerated[k]) for k in given):
        return
    for name in regenerated:
        value = given.get(name, regenerated[name])
        model.import_frozen(name, f32_bytes(value))

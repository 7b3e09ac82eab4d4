"""A ladder's ``llama`` run (:class:`LlamaRun`) for the project's trainer: the Llama-style
model of :mod:`orthoformer.torch.llama` (RMSNorm, SwiGLU, RoPE, untied head; frozen Q/K of
the variant regenerated from ``frozen_seed`` by the frozen projections, never trained),
initialised from the run's ``model_seed`` (torch's generator, ``N(0, 0.02²)``), and its
checkpoint folder.

The library has no Llama checkpoint, so the folder is this module's: ``model-<step>.safetensors``
(the trainable tensors by name, f32), ``optimizer-<step>.safetensors`` (AdamW's ``m`` and
``v``, flat in the trainer's table order) and ``state.json`` (format
``orthoformer-ladder-llama``: the model's keyword arguments, the options, the seed, the loop
state with its metrics, and the two files' names and SHA-256). Each save stages and fsyncs
the new step's files, renames ``state.json`` into place last and only then deletes the old
files, so a kill at any point leaves a folder whose ``state.json`` names complete files.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import struct
from typing import Any, Optional

import numpy as np

from .torch.runs import read_safetensors
from .validate import InputError

FORMAT = "orthoformer-ladder-llama"
STATE = "state.json"


def write_safetensors(path: pathlib.Path, tensors: list[tuple[str, np.ndarray]]) -> str:
    """Writes f32 ``tensors`` as a safetensors file (staged, fsynced, renamed); returns its
    SHA-256."""
    header, offset = {}, 0
    for name, a in tensors:
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + 4 * a.size]}
        offset += 4 * a.size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    digest = hashlib.sha256()
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for block in (
            struct.pack("<Q", len(raw)),
            raw,
            *(np.ascontiguousarray(a, "<f4").tobytes() for _, a in tensors),
        ):
            f.write(block)
            digest.update(block)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return digest.hexdigest()


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


class _Shape:
    """What the trainer reads of a model's configuration: its context and dropout."""

    def __init__(self, context: int) -> None:
        self.context, self.dropout = context, 0.0


def ladder_llama_class() -> Any:
    """:class:`~orthoformer.torch.llama.Llama` with what the trainer asks of a model."""
    from .torch.llama import Llama

    class LadderLlama(Llama):
        def decay_groups(self) -> tuple[list, list]:
            """2-D tensors decay (weights and embeddings, as the GPT's); norm gains do not."""
            ps = list(self.parameters())
            return [p for p in ps if p.dim() == 2], [p for p in ps if p.dim() != 2]

        def frozen_pinned(self) -> bool:
            return False  # frozen Q/K are always the seed's

        def frozen_buffers(self) -> dict:
            return {}

    return LadderLlama


class LlamaRun:
    """A ``llama`` run of the ladder in folder ``out``, fresh or resumed (:meth:`open`)."""

    def __init__(self, out: pathlib.Path, spec: dict[str, Any], options: dict[str, Any], folder: Any) -> None:
        from .torch.llama_config import LlamaConfig

        self.out, self.folder, self.spec = out, folder, spec
        self.llama_config = LlamaConfig(**spec["model"])
        self.options, self.options_json = options, json.dumps(options)
        self.config = _Shape(spec["context"])
        self.model_seed = int(spec["model_seed"])
        self.flops_per_token = spec["flops_per_step"] // max(spec["tokens_per_step"], 1)
        self.state: dict[str, Any] = {
            "step": 0,
            "sampler_word_pos": "0",
            "adam_t": 0,
            "window_loss": 0.0,
            "window_steps": 0,
            "metrics": [],
            "last_checkpoint": None,
        }
        self.resumed, self._files, self._table = False, None, None

    @classmethod
    def open(cls, out: pathlib.Path, spec: dict[str, Any], options: dict[str, Any], folder: Any) -> LlamaRun:
        """The run in ``out``: resumed from its ``state.json`` when there is one."""
        run = cls(out, spec, options, folder)
        out.mkdir(parents=True, exist_ok=True)
        path = out / STATE
        if not path.exists():
            return run
        try:
            st = json.loads(path.read_text())
            ok = st.get("format") == FORMAT and st["model"] == spec["model"] and st["options"] == options
        except (OSError, ValueError, KeyError) as e:
            raise InputError(f"{path} is unreadable ({e}): delete {out} to train the run again") from None
        if not ok:
            raise InputError(
                f"{out} holds another run than the ladder's: delete the folder to train it again"
            )
        for name, digest in st["sha256"].items():
            if _sha256(out / name) != digest:
                raise InputError(f"{out / name} does not match {path} (SHA-256): delete {out} to train again")
        run.state, run.resumed, run._files = st["state"], True, st["files"]
        run.state["last_checkpoint"] = run.state["step"]
        return run

    def model_class(self) -> Any:
        return ladder_llama_class()

    @property
    def table(self) -> list:
        """``(name, shape, offset, decay)`` of every trainable tensor, in parameter order."""
        if self._table is None:
            import torch

            model = self.model_class()(self.llama_config, device=torch.device("meta"))
            out, offset = [], 0
            for name, p in model.named_parameters():
                out.append((name, tuple(p.shape), offset, p.dim() == 2))
                offset += p.numel()
            self._table = out
        return self._table

    def build_model(self, device: Any, pad_vocab: int = 1) -> Any:
        """The model on ``device``: drawn from the seed, or the checkpoint's weights."""
        import torch

        torch.manual_seed(self.model_seed)
        model = self.model_class()(self.llama_config, device=device)
        if self.resumed:
            params = dict(model.named_parameters())
            with torch.no_grad():
                for name, value in read_safetensors(self.out / self._files["model"]):
                    params.pop(name).copy_(torch.from_numpy(value))
            if params:
                raise InputError(f"{self.out} lacks the tensors {sorted(params)}: delete it to train again")
        return model

    def moments(self) -> tuple[Any, Any]:
        n = 4 * sum(int(np.prod(shape)) for _, shape, _, _ in self.table)
        if not self.resumed:
            return bytearray(n), bytearray(n)
        found = dict(read_safetensors(self.out / self._files["optimizer"]))
        return found["m"].reshape(-1), found["v"].reshape(-1)

    def fingerprint(self) -> list[int]:
        return [self.folder.vocab_size, *(self.folder.lengths[s] for s in ("train", "val"))]

    def release(self) -> None:
        """Nothing to drop: no native model is kept."""

    def record(self, state: dict[str, Any], files: dict[str, str], digests: dict[str, str]) -> dict[str, Any]:
        """``state.json``'s contents for the loop ``state`` and the step's ``files``."""
        return {
            "format": FORMAT,
            "version": 1,
            "model": self.spec["model"],
            "options": self.options,
            "model_seed": self.model_seed,
            "state": state,
            "files": files,
            "sha256": digests,
        }

    def save(
        self, flat: bytes, state: dict[str, Any], m: bytes, v: bytes, frozen: Optional[dict] = None
    ) -> None:
        """Writes the checkpoint of ``state["step"]`` (module doc)."""
        arr = np.frombuffer(flat, dtype="<f4")
        tensors = [(name, arr[o : o + int(np.prod(s))].reshape(s)) for name, s, o, _ in self.table]
        step = int(state["step"])
        files = {"model": f"model-{step}.safetensors", "optimizer": f"optimizer-{step}.safetensors"}
        digests = {
            files["model"]: write_safetensors(self.out / files["model"], tensors),
            files["optimizer"]: write_safetensors(
                self.out / files["optimizer"],
                [("m", np.frombuffer(m, dtype="<f4")), ("v", np.frombuffer(v, dtype="<f4"))],
            ),
        }
        record = self.record(state, files, digests)
        from .ladder_run import write_json

        write_json(self.out / STATE, record)
        keep = set(files.values()) | {STATE}
        for p in self.out.iterdir():
            if p.name not in keep and p.suffix == ".safetensors":
                p.unlink()
        self._files = files

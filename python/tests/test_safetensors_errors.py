"""A truncated or corrupt safetensors file read by the package is one InputError naming the
file (a ValueError), never the safetensors library's own exception and its traceback."""

from __future__ import annotations

import numpy as np
import pytest

from orthoformer.torch import GPT, Llama, LlamaConfig
from orthoformer.validate import InputError, safetensors_file
from helpers import small_config


def truncate(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_truncated_file_is_one_input_error(tmp_path) -> None:
    from safetensors.numpy import save_file

    p = tmp_path / "t.safetensors"
    save_file({"a": np.zeros(100, dtype=np.float32)}, str(p))
    truncate(p)
    for framework in ("numpy", "torch"):
        with pytest.raises(InputError, match="t.safetensors is not a readable safetensors file") as e:
            safetensors_file(p, framework)
        assert "\n" not in str(e.value)


def test_the_hugging_face_readers_refuse_a_truncated_folder_in_one_line(tmp_path) -> None:
    gpt = GPT(small_config("orthogonal", dropout=0.0), seed=1)
    gpt.to_hf(tmp_path / "gpt2")
    truncate(tmp_path / "gpt2" / "model.safetensors")
    with pytest.raises(InputError, match="model.safetensors is not a readable safetensors file"):
        GPT.from_hf(tmp_path / "gpt2")
    cfg = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    llama = Llama(cfg)
    llama.to_hf(tmp_path / "llama")
    truncate(tmp_path / "llama" / "model.safetensors")
    with pytest.raises(InputError, match="model.safetensors is not a readable safetensors file"):
        Llama.from_hf(tmp_path / "llama")

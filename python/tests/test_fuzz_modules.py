"""Hostile inputs to the PyTorch modules and the Hugging Face conversion: seeds out
of the u64 range or not integers, mutated ``frozen_seed`` entries and frozen matrices in a
``state_dict``, malformed ``config.orthoformer`` markers, head counts that do not fit the
weights. Every case is one :class:`~orthoformer.validate.InputError` of one line naming the
field, and nothing changed: module state as it was, no model converted, no folder written."""

from __future__ import annotations

import json
import math

import pytest
import torch

try:
    import transformers
except ImportError as e:  # pragma: no cover - a clear failure, never a skip
    raise ImportError("these tests need transformers: pip install transformers") from e

import orthoformer.torch as ot
from orthoformer.torch import GPT, freeze_qk_
from orthoformer.torch import init as ti
from orthoformer.torch.functional import frozen_orthogonal_weight, head_seed
from orthoformer.torch.nn import FrozenHadamardLinear, FrozenOrthogonalLinear, OrthogonalAttention
from orthoformer.validate import InputError
from helpers import small_config, tiny_llama_family

HOSTILE_SEEDS = [-1, 2**64, 2**70, 3.7, 2.0, float("nan"), "7", True, [1]]

CONSTRUCTORS = {
    "attention": lambda s: OrthogonalAttention(16, 2, seed=s, layer=0),
    "attention-softmax": lambda s: OrthogonalAttention(16, 2, variant="softmax", seed=s),
    "attention-hadamard": lambda s: OrthogonalAttention(
        16, 2, variant="orthogonal-hadamard", seed=s, layer=0
    ),
    "frozen-linear": lambda s: FrozenOrthogonalLinear(16, 2, seed=s),
    "frozen-hadamard": lambda s: FrozenHadamardLinear(16, seed=s),
    "frozen_orthogonal_weight": lambda s: frozen_orthogonal_weight(16, 2, seed=s),
    "head_seed": lambda s: head_seed(s, 0, 0),
    "init.orthogonal_": lambda s: ti.orthogonal_(torch.empty(4, 4), seed=s),
    "init.normal_": lambda s: ti.normal_(torch.empty(3), seed=s),
}


def one_clear_line(e: pytest.ExceptionInfo, field: str) -> None:
    msg = str(e.value)
    assert type(e.value) is InputError, type(e.value)
    assert "\n" not in msg and field in msg, msg


@pytest.mark.parametrize("seed", HOSTILE_SEEDS, ids=repr)
@pytest.mark.parametrize("make", list(CONSTRUCTORS), ids=str)
def test_hostile_seed_at_construction(make, seed) -> None:
    with pytest.raises(InputError) as e:
        CONSTRUCTORS[make](seed)
    one_clear_line(e, "seed")


def snapshot(m: torch.nn.Module) -> dict:
    """Everything a load could change: tensors, seeds, which buffers persist."""
    out: dict = {n: t.detach().clone() for n, t in [*m.named_parameters(), *m.named_buffers()]}
    for name, sub in m.named_modules():
        if hasattr(sub, "pinned"):
            out[f"{name}:seed"] = (sub.seed, sub.pinned, sorted(sub._non_persistent_buffers_set))
    return out


def assert_unchanged(before: dict, after: dict) -> None:
    assert before.keys() == after.keys()
    for k, v in before.items():
        assert torch.equal(v, after[k]) if isinstance(v, torch.Tensor) else v == after[k], k


MODULES = {
    "attention": lambda: OrthogonalAttention(16, 2, seed=3, layer=1, bias=True, learned_temperature=True),
    "attention-hadamard": lambda: OrthogonalAttention(16, 2, variant="orthogonal-hadamard", seed=3, layer=1),
    "frozen-linear": lambda: FrozenOrthogonalLinear(16, 2, bias=True, seed=3),
    "frozen-hadamard": lambda: FrozenHadamardLinear(16, bias=True, seed=3),
}
BAD_STORED_SEEDS = {
    "float 2**70": torch.tensor(2.0**70),
    "float 3.7": torch.tensor(3.7),
    "float 1e19": torch.tensor(1e19, dtype=torch.float64),
    "nan": torch.tensor(float("nan")),
    "bool": torch.tensor(True),
    "vector": torch.tensor([1, 2]),
    "python int": 7,
    "text": "abc",
}


@pytest.mark.parametrize("value", list(BAD_STORED_SEEDS), ids=str)
@pytest.mark.parametrize("make", list(MODULES), ids=str)
def test_hostile_frozen_seed_in_a_state_dict_changes_nothing(make, value) -> None:
    m = MODULES[make]()
    sd = MODULES[make]().state_dict()
    keys = [k for k in sd if k.endswith("frozen_seed")]
    assert keys
    for k in sd:  # every other entry differs, so a partial load would show
        if isinstance(sd[k], torch.Tensor) and sd[k].is_floating_point():
            sd[k] = sd[k] + 1.0
    sd[keys[-1]] = BAD_STORED_SEEDS[value]
    before = snapshot(m)
    with pytest.raises(InputError) as e:
        m.load_state_dict(sd)
    one_clear_line(e, keys[-1])
    assert_unchanged(before, snapshot(m))


@pytest.mark.parametrize("shape", [(8, 16), (16,), (16, 16, 1)], ids=str)
@pytest.mark.parametrize("make", ["attention", "frozen-linear"])
def test_stored_frozen_matrix_of_the_wrong_shape_changes_nothing(make, shape) -> None:
    m = MODULES[make]()
    sd = m.state_dict()
    key = "q.weight" if make == "attention" else "weight"
    sd[key] = torch.zeros(shape)
    before = snapshot(m)
    with pytest.raises(InputError) as e:
        m.load_state_dict(sd)
    one_clear_line(e, key)
    assert_unchanged(before, snapshot(m))


BAD_MARKERS = {
    "no frozen_seed": ({"attention": "orthogonal", "frozen_method": "qr"}, "frozen_seed"),
    "seed text": ({"frozen_seed": "abc"}, "frozen_seed"),
    "seed negative": ({"frozen_seed": -1}, "frozen_seed"),
    "seed float": ({"frozen_seed": 4.0}, "frozen_seed"),
    "seed too big": ({"frozen_seed": 2**64}, "frozen_seed"),
    "seed null": ({"frozen_seed": None}, "frozen_seed"),
    "seed bool": ({"frozen_seed": True}, "frozen_seed"),
    "no attention": ({"frozen_method": "qr", "frozen_seed": 4}, "attention"),
    "attention unknown": ({"attention": "quadratic"}, "attention"),
    "attention softmax": ({"attention": "softmax"}, "attention"),
    "attention list": ({"attention": ["orthogonal"]}, "attention"),
    "no frozen_method": ({"attention": "orthogonal", "frozen_seed": 4}, "frozen_method"),
    "method unknown": ({"frozen_method": "gram-schmidt"}, "frozen_method"),
    "not an object": ("orthogonal", "config.orthoformer"),
    "a list": ([4], "config.orthoformer"),
}


def marked_folder(tmp_path, name: str):
    """A GPT-2 folder written by ``to_hf`` with its marker mutated as ``BAD_MARKERS[name]``."""
    folder = tmp_path / "hf"
    GPT(small_config("orthogonal", frozen_seed=4), seed=0).to_hf(folder)
    cfg = json.loads((folder / "config.json").read_text())
    change, _ = BAD_MARKERS[name]
    if isinstance(change, dict) and len(change) == 1:
        cfg["orthoformer"].update(change)
    else:
        cfg["orthoformer"] = change
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


@pytest.mark.parametrize("name", list(BAD_MARKERS), ids=str)
@pytest.mark.parametrize("reader", ["from_pretrained", "GPT.from_hf", "freeze_qk_"])
def test_malformed_marker_is_one_line_naming_the_field(tmp_path, reader, name) -> None:
    folder = marked_folder(tmp_path, name)
    field = BAD_MARKERS[name][1]
    if reader == "freeze_qk_":
        model = transformers.GPT2LMHeadModel.from_pretrained(folder)
        before = snapshot(model)
        with pytest.raises(InputError) as e:
            freeze_qk_(model)
        assert_unchanged(before, snapshot(model))
        assert isinstance(model.transformer.h[0].attn.c_attn, transformers.pytorch_utils.Conv1D)
    else:
        call = ot.from_pretrained if reader == "from_pretrained" else GPT.from_hf
        with pytest.raises(InputError) as e:
            call(folder)
    one_clear_line(e, field)


@pytest.mark.parametrize(
    "field,value",
    [
        ("frozen_seed", -1),
        ("frozen_seed", "abc"),
        ("frozen_seed", 2.5),
        ("frozen_seed", 2**64),
        ("frozen_method", "x"),
    ],
    ids=str,
)
def test_to_hf_refuses_a_marker_no_reader_accepts_and_writes_nothing(tmp_path, field, value) -> None:
    model = GPT(small_config("orthogonal", frozen_seed=4), seed=0)
    setattr(model.config, field, value)
    with pytest.raises(InputError) as e:
        model.to_hf(tmp_path / "out")
    one_clear_line(e, field)
    assert not (tmp_path / "out").exists()


BAD_CONFIGS = [
    ("num_key_value_heads", 0),
    ("num_key_value_heads", -1),
    ("num_key_value_heads", 3),
    ("num_key_value_heads", 8),
    ("num_key_value_heads", 1),
    ("num_attention_heads", 7),
    ("num_attention_heads", 0),
    ("num_attention_heads", 8),
    ("head_dim", 5),
    ("head_dim", 0),
]


@pytest.mark.parametrize("field,value", BAD_CONFIGS, ids=str)
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_freeze_qk_checks_head_counts_against_the_weights_first(kind, field, value) -> None:
    model = tiny_llama_family(kind)
    setattr(model.config, field, value)
    before = snapshot(model)
    with pytest.raises(InputError) as e:
        freeze_qk_(model, "orthogonal", seed=1)
    one_clear_line(e, field)
    assert_unchanged(before, snapshot(model))
    assert getattr(model.config, "orthoformer", None) is None


BAD_ARGUMENTS = [
    ({"variant": "softmax"}, "variant"),
    ({"variant": "orthogonal-linear"}, "variant"),
    ({"seed": -1}, "seed"),
    ({"seed": 2**64}, "seed"),
    ({"seed": math.pi}, "seed"),
    ({"method": "gram-schmidt"}, "method"),
    ({"variant": "orthogonal-tied"}, "key heads"),  # GQA: 2 key heads for 4 query heads
]


@pytest.mark.parametrize("kwargs,field", BAD_ARGUMENTS, ids=str)
def test_freeze_qk_bad_arguments_change_nothing(kwargs, field) -> None:
    model = tiny_llama_family("llama")
    before = snapshot(model)
    with pytest.raises(InputError) as e:
        freeze_qk_(model, **{"variant": "orthogonal", **kwargs})
    one_clear_line(e, field)
    assert_unchanged(before, snapshot(model))


@pytest.mark.parametrize("field,value", [("n_head", 3), ("n_head", 0), ("n_head", 4)], ids=str)
def test_freeze_qk_checks_gpt2_heads(field, value) -> None:
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=2)
    )
    setattr(model.config, field, value)
    before = snapshot(model)
    with pytest.raises(InputError) as e:
        freeze_qk_(model, "orthogonal", seed=1)
    one_clear_line(e, field)
    assert_unchanged(before, snapshot(model))

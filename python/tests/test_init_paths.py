"""Frozen projections are right under every way of building a module: on
the meta device followed by ``to_empty`` and the standard ``reset_parameters`` loop, FSDP1's
``param_init_fn`` and default materialisation, FSDP2's ``fully_shard``, ``load_state_dict``
with ``assign=True``, ``.to(...)``; the library GPT likewise. Each gives the CPU-built values
bit for bit. And per-layer draws: reusing one seed across modules without ``layer=`` warns,
copies and the library GPT never do."""

from __future__ import annotations

import copy
import gc
import warnings

import pytest
import torch
import torch.distributed as dist
from torch import nn

from orthoformer.torch import GPT
from orthoformer.torch.frozen import FrozenProjection
from orthoformer.torch.functional import frozen_orthogonal_weight
from orthoformer.torch.nn import FrozenHadamardLinear, FrozenOrthogonalLinear, OrthogonalAttention
from helpers import small_config

#: Every variant with a frozen part.
FROZEN_VARIANTS = ["orthogonal", "orthogonal-tied", "orthogonal-hadamard", "orthogonal-linear"]
#: And identity queries (nothing to regenerate, everything else reset alike) and trained Q/K
#: started at the frozen draw (reset to it).
UNTRAINED_Q = [*FROZEN_VARIANTS, "identity-q", "orthogonal-trained"]


def build(variant: str, layer: int, device: str = "cpu") -> OrthogonalAttention:
    """One attention layer, its trainable parts drawn from torch's generator seeded alike."""
    torch.manual_seed(0)
    temp = variant != "orthogonal-linear"
    return OrthogonalAttention(
        16, 2, variant=variant, seed=5, layer=layer, bias=True, learned_temperature=temp, device=device
    )


def init_loop(model: nn.Module) -> None:
    """The standard initialisation loop after ``to_empty``."""
    torch.manual_seed(0)
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()


def everything(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer (frozen ones included), as plain CPU tensors."""
    out = {}
    for n, t in [*model.named_parameters(), *model.named_buffers()]:
        t = t.full_tensor() if hasattr(t, "full_tensor") else t
        out[n] = t.detach().cpu().clone()
    return out


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for n in a:
        assert a[n].dtype == b[n].dtype and torch.equal(a[n], b[n]), n


@pytest.mark.parametrize("variant", [*FROZEN_VARIANTS, "orthogonal-trained"])
def test_meta_build_to_empty_and_init_loop_give_the_cpu_values(variant) -> None:
    direct = build(variant, 1)
    with torch.device("meta"):
        meta = build(variant, 1, device=None)  # type: ignore[arg-type]
    meta.to_empty(device="cpu")
    init_loop(meta)
    assert all(torch.isfinite(t).all() for t in everything(meta).values())
    assert_same(everything(meta), everything(direct))
    x = torch.randn(2, 5, 16)
    assert torch.equal(meta(x), direct(x))


def test_a_model_of_every_variant_built_on_meta_gives_the_cpu_values() -> None:
    def model(device: str) -> nn.Sequential:
        torch.manual_seed(0)
        return nn.Sequential(
            *(
                OrthogonalAttention(16, 2, variant=v, seed=9, layer=i, device=device)
                for i, v in enumerate(UNTRAINED_Q)
            )
        )

    direct, meta = model("cpu"), model("meta")
    meta.to_empty(device="cpu")
    init_loop(meta)
    assert_same(everything(meta), everything(direct))
    x = torch.randn(1, 4, 16)
    assert torch.equal(meta(x), direct(x))


@pytest.mark.parametrize("cls", ["orthogonal", "hadamard"])
def test_frozen_projection_reset_parameters_regenerates_and_zeroes_the_bias(cls) -> None:
    def make(**kw):
        if cls == "hadamard":
            return FrozenHadamardLinear(12, bias=True, seed=3, tensor=2, **kw)
        return FrozenOrthogonalLinear(12, 3, bias=True, method="svd", seed=3, tensor=2, **kw)

    direct, meta = make(), make(device="meta")
    meta.to_empty(device="cpu")
    with torch.no_grad():
        for b in meta.buffers():
            b.fill_(7)  # whatever the allocation left
        meta.bias.fill_(1.0)
    meta.reset_parameters()
    assert_same(everything(meta), everything(direct))


def test_to_empty_alone_and_moves_regenerate_but_stored_values_stay() -> None:
    direct = OrthogonalAttention(16, 2, variant="orthogonal-hadamard", seed=8, layer=2)
    want = dict(direct.named_buffers())
    for moved in (
        copy.deepcopy(direct).to_empty(device="cpu"),
        copy.deepcopy(direct).to("meta").to_empty(device="cpu"),
    ):
        got = dict(moved.named_buffers())
        assert got.keys() == want.keys() and all(torch.equal(got[n], want[n]) for n in want)
    wide = OrthogonalAttention(16, 2, seed=8, layer=2, dtype=torch.float64)
    narrow = OrthogonalAttention(16, 2, seed=8, layer=2).to(torch.float64)
    assert torch.equal(wide.q.weight, narrow.q.weight)
    stored = FrozenOrthogonalLinear(8, 2, seed=1).set_weight_(torch.eye(8))
    assert torch.equal(stored.to(torch.float64).weight, torch.eye(8, dtype=torch.float64))


@pytest.mark.parametrize("variant", ["orthogonal", "orthogonal-hadamard"])
def test_load_state_dict_assign_on_a_meta_module_materialises_the_frozen_state(variant) -> None:
    direct = build(variant, 3)
    meta = build(variant, 3, device="meta")
    meta.load_state_dict(direct.state_dict(), assign=True)
    assert not any(t.is_meta for t in meta.buffers())
    assert_same(everything(meta), everything(direct))


@pytest.mark.parametrize("variant", [*FROZEN_VARIANTS, "orthogonal-trained"])
def test_library_gpt_built_on_meta_then_to_empty_and_init_loop(variant) -> None:
    cfg = small_config(variant, frozen_seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the GPT passes layer= itself: never a seed warning
        direct = GPT(cfg, seed=0)
        meta = GPT(cfg, device="meta")
        meta.to_empty(device="cpu")
        init_loop(meta)
        copy.deepcopy(direct)
    assert meta.frozen_buffers().keys() == direct.frozen_buffers().keys()
    for n, w in direct.frozen_buffers().items():
        assert torch.equal(meta.frozen_buffers()[n], w), n
    meta.init_weights(0)
    assert_same(everything(meta), everything(direct))
    x = torch.randint(0, 65, (2, 8))
    assert torch.equal(meta(x)[0], direct(x)[0])


@pytest.fixture(scope="module")
def gloo(tmp_path_factory):
    """A one-process gloo group (CPU), for FSDP."""
    if not dist.is_available():
        pytest.fail("torch.distributed is unavailable in this torch build")
    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def two_layers(variant: str, device: str = "cpu") -> nn.Sequential:
    return nn.Sequential(build(variant, 0, device), build(variant, 1, device))


@pytest.mark.parametrize("variant", ["orthogonal", "orthogonal-hadamard"])
@pytest.mark.parametrize("with_fn", [True, False])
def test_fsdp1_materialises_a_meta_model_with_the_cpu_values(gloo, variant, with_fn) -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    direct = two_layers(variant)
    meta = two_layers(variant, "meta")

    def param_init_fn(m: nn.Module) -> None:
        # FSDP's documented contract: initialise this module's own states only.
        m.to_empty(device=torch.device("cpu"), recurse=False)
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()

    torch.manual_seed(0)
    kw = {"param_init_fn": param_init_fn} if with_fn else {}
    wrapped = FSDP(meta, device_id=torch.device("cpu"), use_orig_params=True, **kw)
    frozen = [m for m in wrapped.modules() if isinstance(m, FrozenProjection)]
    assert frozen and not any(b.is_meta for m in frozen for b in m.buffers())
    want = {n: b for n, b in direct.named_buffers()}
    got = {n.replace("_fsdp_wrapped_module.", ""): b for n, b in wrapped.named_buffers()}
    assert got.keys() == want.keys()
    for n in want:
        assert torch.equal(got[n], want[n]), n


@pytest.mark.parametrize("variant", ["orthogonal", "orthogonal-tied", "orthogonal-hadamard"])
def test_fsdp2_fully_shard_on_a_meta_model_then_to_empty_and_init_loop(gloo, variant) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    direct = two_layers(variant)
    meta = two_layers(variant, "meta")
    mesh = init_device_mesh("cpu", (1,))
    for layer in meta:
        fully_shard(layer, mesh=mesh)
    fully_shard(meta, mesh=mesh)
    meta.to_empty(device="cpu")
    init_loop(meta)
    # Trainable tensors are DTensors drawn by their own generator; the frozen state is ours.
    want, got = dict(direct.named_buffers()), dict(meta.named_buffers())
    assert got.keys() == want.keys() and not any(b.is_meta for b in got.values())
    for n in want:
        assert torch.equal(got[n], want[n]), n


def test_reusing_a_seed_without_layer_warns_and_copies_do_not() -> None:
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = OrthogonalAttention(16, 2, seed=123456, bias=True)
        # Layer l draws (seed, l): an explicit layer is asked for, never a warning.
        placed = [OrthogonalAttention(16, 2, seed=123456, layer=layer) for layer in range(3)]
        copy.deepcopy(a)
        b = OrthogonalAttention(16, 2, seed=654321, bias=True)
        b.load_state_dict(a.state_dict())
        OrthogonalAttention(16, 2, seed=123456, variant="orthogonal-hadamard")  # other draws
        OrthogonalAttention(16, 2, seed=123456, variant="softmax")  # nothing frozen
        OrthogonalAttention(16, 2)  # a drawn seed
    assert not torch.equal(placed[0].q.weight, placed[1].q.weight)
    assert torch.equal(placed[1].k.weight, frozen_orthogonal_weight(16, 2, seed=123456, tensor=3))
    with pytest.warns(UserWarning, match="pass layer="):
        again = OrthogonalAttention(16, 2, seed=123456)
    assert torch.equal(again.q.weight, a.q.weight)  # what the warning is about
    del a, again
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the earlier ones are gone: nothing is shared now
        OrthogonalAttention(16, 2, seed=123456)

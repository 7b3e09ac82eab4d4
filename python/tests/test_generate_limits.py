"""No unbounded or ignored limits in the Python package: ``generate`` (the library's
and the PyTorch GPT's) refuses a token budget beyond the library's cap instead of running for
years; Ctrl-C stops the library's generation between two tokens (it was ignored until the
native call ended); a checkpoint refuses ``kv_cache`` and ``dot`` by name (they were
ignored); and the engine's thread pool obeys the command line's cap on ``RAYON_NUM_THREADS``
(1,000 workers were started for ``RAYON_NUM_THREADS=1000``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import orthoformer
from helpers import cli_train, small_config
from orthoformer import _native
from orthoformer.generation import MAX_NEW_TOKENS
from orthoformer.torch import GPT
from orthoformer.validate import InputError


@pytest.fixture(scope="module")
def run(cli, tmp_path_factory):
    return cli_train(cli, tmp_path_factory.mktemp("limits"), small_config(context=16), steps=2)


def test_the_token_budget_is_capped(run, cli) -> None:
    assert MAX_NEW_TOKENS == 1 << 20
    for n in (MAX_NEW_TOKENS + 1, 10**12, 2**70, -1):
        with pytest.raises(InputError, match="max_new_tokens"):
            orthoformer.generate("A", checkpoint=run, max_new_tokens=n)
    # The library refuses it too (the value a caller of the native module passes).
    with pytest.raises(ValueError, match="^max_new_tokens 1048577 is more than one generation makes"):
        _native.generate_text("A", str(run), None, MAX_NEW_TOKENS + 1)
    p = cli("generate", "--checkpoint", run, "--max-new-tokens", 10**12, check=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--max-new-tokens" in p.stderr
    # The PyTorch GPT: the same cap, checked before anything runs.
    model = GPT(small_config(context=16), seed=0)
    idx = torch.from_numpy(np.zeros((1, 2), dtype=np.int64))
    with pytest.raises(InputError, match="max_new_tokens"):
        model.generate(idx, 10**12)
    assert model.generate(idx, 3, temperature=0).shape == (1, 5)


def test_a_checkpoint_refuses_kv_cache_and_dot(run) -> None:
    with pytest.raises(ValueError, match="^kv_cache applies to a pretrained model only"):
        orthoformer.generate("A", checkpoint=run, kv_cache="f16")
    with pytest.raises(ValueError, match="^dot applies to a pretrained model only"):
        orthoformer.generate("A", checkpoint=run, dot="q8")
    with pytest.raises(ValueError, match="^kv_cache and dot apply"):
        orthoformer.generate("A", checkpoint=run, kv_cache="f32", dot="f32")
    assert orthoformer.generate("A", checkpoint=run, max_new_tokens=2)["new_tokens"] == 2


CHILD = textwrap.dedent(
    """
    import sys
    import orthoformer
    from orthoformer.generation import MAX_NEW_TOKENS
    print("ready", flush=True)
    try:
        orthoformer.generate("A", checkpoint=sys.argv[1], max_new_tokens=MAX_NEW_TOKENS)
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    """
)


def test_ctrl_c_stops_a_long_generation(cli, tmp_path) -> None:
    # A million tokens take hours on this model (each recomputes a window of 128); Ctrl-C must
    # end the call within the bound (the native loop checks for it between tokens), with a
    # KeyboardInterrupt. Before, the call ran to its end and only then raised.
    cfg = small_config(context=128, d_model=64, n_layer=4)
    run = cli_train(cli, tmp_path, cfg, steps=1)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        # Let the child enter the native call (a signal before it would interrupt Python code).
        try:
            child.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert out == "interrupted\n", (out, err)


def test_the_thread_cap_holds_in_python() -> None:
    # The pool's workers as the engine counts them, and the process's threads as Linux does.
    code = (
        "import os; from orthoformer import _native; "
        "print(_native.pool_threads(), len(os.listdir('/proc/self/task')))"
    )
    env = {**os.environ, "RAYON_NUM_THREADS": "1000"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    workers, threads = map(int, p.stdout.split())
    most = 4 * (os.cpu_count() or 1)
    assert workers <= most < 1000 and threads < 1000, p.stdout
    assert "RuntimeWarning: RAYON_NUM_THREADS=1000 asks for more than 4 workers per core" in p.stderr
    # Within the cap the variable is obeyed as it is.
    env["RAYON_NUM_THREADS"] = "2"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and p.stdout.split()[0] == "2" and "RuntimeWarning" not in p.stderr, p.stderr

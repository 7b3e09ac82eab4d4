"""Shared fixtures: the repository root, the command-line binary (built by cargo when it is
missing, so these tests always compare against the real tool), and a runner for it."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Callable

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def binary() -> pathlib.Path:
    """``ORTHOFORMER_BIN``, else ``target/release/orthoformer`` (built when missing)."""
    env = os.environ.get("ORTHOFORMER_BIN")
    if env:
        return pathlib.Path(env)
    path = ROOT / "target" / "release" / "orthoformer"
    if not path.is_file():
        subprocess.run(["cargo", "build", "--release", "-p", "orthoformer-cli"], cwd=ROOT, check=True)
    return path


@pytest.fixture(scope="session")
def cli() -> Callable[..., subprocess.CompletedProcess]:
    """Runs ``orthoformer ARGS...``; fails the test on a non-zero exit unless ``check=False``."""
    exe = binary()

    def run(*args: Any, check: bool = True, cwd: Any = None) -> subprocess.CompletedProcess:
        p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, cwd=cwd)
        if check and p.returncode != 0:
            raise AssertionError(f"orthoformer {' '.join(map(str, args))} exited {p.returncode}:\n{p.stderr}")
        return p

    return run


@pytest.fixture(scope="session")
def cli_json(cli: Callable[..., subprocess.CompletedProcess]) -> Callable[..., Any]:
    """Runs ``orthoformer ARGS... --json`` and parses its output."""

    def run(*args: Any) -> Any:
        return json.loads(cli(*args, "--json").stdout)

    return run


def python_module(
    module: str, *args: Any, torchrun: int = 0, env: Any = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    """Runs ``python -m MODULE ARGS`` (under ``torchrun`` with that many processes)."""
    if torchrun:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={torchrun}",
            "-m",
            module,
        ]
    else:
        cmd = [sys.executable, "-m", module]
    # One thread per process: the test models are tiny, and OpenMP's spinning threads slow to
    # a crawl when the machine's cores are shared with other processes.
    e = dict(os.environ, OMP_NUM_THREADS="1")
    if env:
        e.update(env)
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, env=e, timeout=timeout)


def smollm2() -> pathlib.Path:
    """The SmolLM2 test model; skipped when absent outside CI, a failure under CI (as the
    Rust tests treat it)."""
    path = pathlib.Path(
        os.environ.get("ORTHOFORMER_SMOLLM2", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    )
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing under CI: run scripts/fetch_smollm2.sh")
        pytest.skip(f"{path} is missing (run scripts/fetch_smollm2.sh)")
    return path

"""Installing from source: without a Rust toolchain (or with one too old) ``pip install
./python`` stops at once with one line naming what to install, downloading nothing (the
package's build backend, ``python/build_backend.py``, checks before maturin runs); the Rust
version it asks for is the one every Cargo.toml declares; the missing-PyTorch message gives a
command that works from the repository."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time

from conftest import ROOT

PACKAGE = ROOT / "python"

# No hang: the check answers in well under a second; pip around it in a few seconds.
FAST_S = 60


def _bin_with(tmp: pathlib.Path, scripts: dict[str, str]) -> str:
    """A PATH of one folder holding this Python (as ``python``) and the given shell scripts."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return str(bin_dir)


def _env(path: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CARGO", "RUSTUP", "MATURIN"))}
    # pip may not fetch anything: a build that needed a download fails here instead of hanging.
    env.update(PATH=path, PIP_NO_INDEX="1", PIP_FIND_LINKS="", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _pip_wheel(tmp: pathlib.Path, path: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", str(PACKAGE), "-w", str(tmp / "w")],
        env=_env(path),
        capture_output=True,
        text=True,
        timeout=FAST_S,
    )
    return p, time.monotonic() - start


def test_pip_without_cargo_fails_at_once_in_one_line(tmp_path: pathlib.Path) -> None:
    p, took = _pip_wheel(tmp_path, _bin_with(tmp_path, {}))
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    lines = [ln for ln in out.splitlines() if "install Rust 1.89 or newer" in ln]
    assert len(lines) == 1, out
    assert "`cargo` is not on PATH" in lines[0] and "https://rustup.rs" in lines[0], lines[0]
    assert "pip install ./python again" in lines[0], lines[0]
    assert "puccinialin" not in out and "Traceback" not in out, out
    assert took < FAST_S, took


def test_a_toolchain_older_than_the_manifests_is_named(tmp_path: pathlib.Path) -> None:
    old = {"cargo": 'echo "cargo 1.80.1 (abc 2024-08-01)"', "rustc": 'echo "rustc 1.80.1 (def 2024-08-01)"'}
    code = "import build_backend; build_backend.get_requires_for_build_wheel()"
    p = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PACKAGE,
        env=_env(_bin_with(tmp_path, old)),
        capture_output=True,
        text=True,
        timeout=FAST_S,
    )
    assert p.returncode == 1, p.stderr
    assert p.stderr.splitlines() == [
        "error: orthoformer needs Rust 1.89 or newer, and `cargo` is 1.80: run rustup update (or "
        "install a newer Rust from https://rustup.rs), then run pip install ./python again"
    ], p.stderr


def test_the_backend_asks_for_the_rust_every_manifest_declares() -> None:
    sys.path.insert(0, str(PACKAGE))
    try:
        import build_backend
    finally:
        sys.path.remove(str(PACKAGE))
    want = ".".join(map(str, build_backend.MIN_RUST))
    root = (ROOT / "Cargo.toml").read_text()
    # [workspace.package] and the root [package]; the members inherit the workspace's.
    assert re.findall(r'^rust-version = "([^"]+)"', root, flags=re.M) == [want, want]
    for member in ("cli", "python"):
        text = (ROOT / member / "Cargo.toml").read_text()
        assert "\nrust-version.workspace = true\n" in text, member
    pyproject = (PACKAGE / "pyproject.toml").read_text()
    assert 'build-backend = "build_backend"' in pyproject and "requires = []" in pyproject


def test_missing_torch_names_a_command_that_works_from_the_repository() -> None:
    code = "import sys; sys.modules['torch'] = None\nimport orthoformer.torch\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=FAST_S)
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 1 and last.startswith("ImportError: orthoformer.torch needs PyTorch"), p.stderr
    # The package is not on PyPI: `pip install 'orthoformer[torch]'` cannot work.
    assert "'orthoformer[" not in last and "pip install './python[torch]'" in last, last
    for path in (PACKAGE / "orthoformer").rglob("*.py"):
        assert "install 'orthoformer[" not in path.read_text(), path

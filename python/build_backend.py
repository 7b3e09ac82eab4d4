"""The package's PEP 517 build backend: checks for a Rust toolchain, then hands every hook to
maturin.

maturin alone, on a machine without ``cargo``, asks pip for ``puccinialin`` and downloads a
toolchain with it; offline, that hangs for minutes before failing. Here a missing or too old
toolchain stops the build at once with one line saying what to install, before anything is
downloaded: the only build requirement (maturin) is asked for by
:func:`get_requires_for_build_wheel` after the check, not listed in ``pyproject.toml``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Any, Mapping, Optional

# The oldest Rust that builds the workspace: the `rust-version` of every Cargo.toml (see the
# root one for why). python/tests/test_install.py keeps the two equal.
MIN_RUST = (1, 89)

# What pip installs into the build environment once the toolchain is found.
MATURIN = "maturin>=1.9.4,<2"

# `cargo --version` answers in milliseconds; a rustup proxy that starts installing a toolchain
# (a rust-toolchain file) must not hang the build either.
VERSION_TIMEOUT_S = 60

INSTALL_RUST = (
    "install Rust {want} or newer (https://rustup.rs, or your distribution's rustc and cargo "
    "packages), then run pip install ./python again"
)


class ToolchainError(Exception):
    """The Rust toolchain is missing or too old; the message is one line."""


def _want() -> str:
    return ".".join(map(str, MIN_RUST))


def _version(tool: str) -> tuple[int, int]:
    """The (major, minor) version ``tool --version`` reports."""
    path = shutil.which(tool)
    if path is None:
        raise ToolchainError(
            f"orthoformer builds its native module from Rust source, and `{tool}` is not on PATH: "
            + INSTALL_RUST.format(want=_want())
        )
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise ToolchainError(
            f"`{tool} --version` failed ({e}): " + INSTALL_RUST.format(want=_want())
        ) from None
    m = re.search(r"(\d+)\.(\d+)\.\d+", out)
    if m is None:
        raise ToolchainError(
            f"`{tool} --version` printed no version ({out.strip()[:80]!r}): "
            + INSTALL_RUST.format(want=_want())
        )
    return int(m.group(1)), int(m.group(2))


def check_toolchain() -> None:
    """Raises :class:`ToolchainError` unless ``cargo`` and ``rustc`` are on PATH and at least
    :data:`MIN_RUST`."""
    for tool in ("cargo", "rustc"):
        found = _version(tool)
        if found < MIN_RUST:
            raise ToolchainError(
                f"orthoformer needs Rust {_want()} or newer, and `{tool}` is {found[0]}.{found[1]}: "
                "run rustup update (or install a newer Rust from https://rustup.rs), then run pip "
                "install ./python again"
            )


def _checked() -> None:
    """The check every hook makes first: one line on stderr and exit status 1 on failure (pip
    shows the line as the build's output, without a traceback)."""
    try:
        check_toolchain()
    except ToolchainError as e:
        sys.stderr.write(f"error: {e}\n")
        sys.stderr.flush()
        raise SystemExit(1) from None
    # maturin must never download a toolchain itself: the check above is the only answer.
    os.environ["MATURIN_NO_INSTALL_RUST"] = "1"


def _maturin() -> Any:
    import maturin

    return maturin


def get_requires_for_build_wheel(config_settings: Optional[Mapping[str, Any]] = None) -> list[str]:
    """maturin, once the toolchain is found."""
    _checked()
    return [MATURIN]


get_requires_for_build_editable = get_requires_for_build_wheel


def get_requires_for_build_sdist(config_settings: Optional[Mapping[str, Any]] = None) -> list[str]:
    """maturin, once the toolchain is found (the source archive lists the crates with cargo)."""
    _checked()
    return [MATURIN]


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Optional[Mapping[str, Any]] = None
) -> str:
    """maturin's metadata hook, after the toolchain check."""
    _checked()
    return _maturin().prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: Optional[Mapping[str, Any]] = None
) -> str:
    """maturin's metadata hook, after the toolchain check."""
    _checked()
    return _maturin().prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Mapping[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """maturin's wheel, after the toolchain check."""
    _checked()
    return _maturin().build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(
    wheel_directory: str,
    config_settings: Optional[Mapping[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """maturin's editable wheel, after the toolchain check."""
    _checked()
    return _maturin().build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Optional[Mapping[str, Any]] = None) -> str:
    """maturin's source archive, after the toolchain check."""
    _checked()
    return _maturin().build_sdist(sdist_directory, config_settings)

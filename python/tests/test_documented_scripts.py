"""Every script the README and ``docs/`` show exists and starts as documented with the package
installed as the README installs it: shell scripts parse (``bash -n``), Python scripts
compile, and those with a command line print their ``--help`` (their imports, the package's
included, succeed) without a traceback. The long work itself is not run here. ``docs/HISTORY.md``
is a record of the past and is not checked."""

from __future__ import annotations

import pathlib
import py_compile
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "HISTORY.md")]
SCRIPT = re.compile(r"scripts/[A-Za-z0-9_./-]+\.(?:sh|py)")


def documented() -> list[str]:
    """The scripts the docs name, each once, in order."""
    seen: dict[str, None] = {}
    for doc in DOCS:
        for m in SCRIPT.findall(doc.read_text(encoding="utf-8")):
            seen.setdefault(m.rstrip("."), None)
    return list(seen)


def test_the_docs_name_scripts_and_every_one_exists() -> None:
    names = documented()
    assert len(names) >= 20, names
    missing = [n for n in names if not (ROOT / n).is_file()]
    assert not missing, f"the docs name scripts that do not exist: {missing}"


@pytest.mark.parametrize("name", documented())
def test_each_documented_script_starts(name: str, tmp_path) -> None:
    path = ROOT / name
    if name.endswith(".sh"):
        r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return
    py_compile.compile(str(path), cfile=str(tmp_path / "x.pyc"), doraise=True)
    if "argparse" not in path.read_text(encoding="utf-8"):
        return
    # From outside the checkout, as a user with the installed package runs it: the script's
    # imports (the package's included) must resolve without the source tree on the path.
    r = subprocess.run(
        [sys.executable, str(path), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert r.returncode == 0 and "usage" in r.stdout.lower(), (r.stdout[-500:], r.stderr[-2000:])

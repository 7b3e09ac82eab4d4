"""The README's Python section runs as written: its Python blocks (the quick start, the peft
recipe) top to bottom in a fresh folder and a fresh interpreter (as a new user would paste
them), and its first trainer command (with ``--steps 2000`` cut to 3 steps and an evaluation
at the end, to stay fast)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

from conftest import ROOT

SECTION = "## Python: the package"


def section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + 1)
    return text[start:end]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(), flags=re.S)


def test_readme_python_block_runs_as_written(tmp_path: pathlib.Path) -> None:
    code = blocks("python")[0]
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr
    assert "trainable;" in p.stdout and "loss" in p.stdout
    # The generations print words after the prompt, not only blank lines: PyTorch's
    # (prompt included), then the same greedy continuation from the Rust engine.
    after = p.stdout.split("ROMEO:", 1)[1]
    half = len(after) // 2
    assert after[:half] == after[half:] and len(re.findall(r"[A-Za-z]", after[:half])) >= 10, p.stdout
    assert (tmp_path / "runs" / "quickstart" / "model.safetensors").is_file()
    assert (tmp_path / "runs" / "quickstart-hf" / "config.json").is_file()


def test_readme_peft_recipe_runs_as_written(tmp_path: pathlib.Path) -> None:
    (code,) = [b for b in blocks("python") if "get_peft_model" in b]
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr
    diff = float(p.stdout.split("merged - adapted:")[1].split()[0])
    assert diff <= 1e-5, p.stdout
    assert (tmp_path / "runs" / "frozen-llama-lora" / "adapter_config.json").is_file()


def test_readme_trainer_command_runs(tmp_path: pathlib.Path) -> None:
    lines = [ln.split("#")[0].split() for b in blocks("sh") for ln in b.splitlines()]
    first = next(ln for ln in lines if ln[:3] == ["python", "-m", "orthoformer.train"])
    args = first[3:]
    args[args.index("--steps") + 1] = "3"
    args += ["--eval-every", "3", "--eval-iters", "1", "--batch", "4"]
    p = subprocess.run(
        [sys.executable, "-m", "orthoformer.train", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "runs" / "ortho-torch" / "state.json").is_file()

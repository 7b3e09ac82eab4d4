"""Every integer and number flag of ``python -m orthoformer.train`` is checked by the parser:
a negative seed, a count past the library's integer types or a non-finite rate is
one line naming the flag, exit status 2, before PyTorch or the library is touched."""

from __future__ import annotations

import pytest

from conftest import python_module
from orthoformer import train
from orthoformer.train_flags import FLOAT_RANGES, INT_RANGES

HUGE = str(10**23)
INT_FLAGS = [flag for flag, *_ in INT_RANGES] + ["--seed", "--model-seed"]


@pytest.mark.parametrize("flag", INT_FLAGS)
@pytest.mark.parametrize("value", ["-1", HUGE, "1.5", "ten"])
def test_every_integer_flag_is_one_line(tmp_path, capsys, flag, value) -> None:
    if value == "-1" and flag in ("--warmup", "--log-every", "--stop-at"):
        value = "-2"
    code = train.main([flag, value, "--out", str(tmp_path / "run"), "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: {flag} must be"), err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flag", [flag for flag, *_ in FLOAT_RANGES])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "x"])
def test_every_number_flag_is_one_line(tmp_path, capsys, flag, value) -> None:
    if value == "-1" and flag == "--min-lr":
        value = "-1e-9"
    code = train.main([f"{flag}={value}", "--out", str(tmp_path / "run"), "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {flag} must be"), err


def test_model_seed_minus_one_as_a_process(tmp_path) -> None:
    p = python_module("orthoformer.train", "--model-seed", "-1", "--out", tmp_path / "run")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "--model-seed must be from 0 to" in p.stderr


def test_the_checkpoint_folder_is_never_an_input(tmp_path, capsys) -> None:
    text = tmp_path / "run" / "notes.txt"
    text.parent.mkdir()
    text.write_text("some text\n" * 100)
    code = train.main(["--data", str(text), "--out", str(tmp_path / "run"), "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and "lies inside --out" in err and text.read_text() == "some text\n" * 100


def test_help_lists_the_exit_statuses_and_an_interrupt_is_not_a_usage_error() -> None:
    """A scheduler tells a pre-empted run (75, resumable) from bad
    arguments (2); ``test_train.py`` checks the status of a real SIGINT."""
    from orthoformer.errors import EXIT_INTERRUPTED

    text = " ".join(train.parser().format_help().split())
    assert EXIT_INTERRUPTED not in (0, 1, 2) and f"{EXIT_INTERRUPTED} interrupted" in text
    assert "2 bad arguments" in text and "--resume" in text

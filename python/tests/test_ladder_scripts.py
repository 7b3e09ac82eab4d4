"""The script that hands a ladder on (scripts/ladder_results.sh) never deletes what it copies."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ladder_results.sh"


def _ladder(root: Path) -> Path:
    src = root / "ladder"
    run = src / "r1" / "seed-0" / "lr-0.001" / "softmax"
    run.mkdir(parents=True)
    (src / "ladder.json").write_text("{}")
    (run / "result.json").write_text("{}")
    (run / "checkpoint.bin").write_text("weights")
    return src


@pytest.mark.parametrize("dest", [".", "./", "r1", "r1/new", ".."])
def test_a_destination_that_is_inside_or_holds_the_ladder_is_refused(tmp_path, dest):
    src = _ladder(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    r = subprocess.run(["bash", str(SCRIPT), str(src), str(src / dest)], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_copy_beside_the_ladder_takes_the_plan_and_results_only(tmp_path):
    src = _ladder(tmp_path)
    dest = tmp_path / "copy"
    r = subprocess.run(["bash", str(SCRIPT), str(src), str(dest)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (dest / "r1/seed-0/lr-0.001/softmax/result.json").is_file()
    assert not (dest / "r1/seed-0/lr-0.001/softmax/checkpoint.bin").exists()
    assert (src / "r1/seed-0/lr-0.001/softmax/checkpoint.bin").is_file()

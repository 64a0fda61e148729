"""Trial 29b F4: ``tripwire inspect RUN --tensors`` redirected cut a tensor's long list of reductions
with "…" (variance, zero_fraction and the histogram were not shown), where docs/cli.md says the
tables are 200 columns wide with whole names and long cells fold. The list folds in its column."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire._cli import main

REDUCTIONS = ["l2", "l1", "mean", "std", "variance", "sum", "min", "max", "abs_min", "abs_max", "abs_mean",
              "zero_fraction", "positive_fraction", "numel", "nonfinite_count", "fraction_gt:0.01",
              "fraction_abs_gt:0.05", "histogram"]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1}, "rules": [],
                           "collections": {"gradients": {"reductions": REDUCTIONS, "histogram_bins": 7},
                                           "losses": {}}}) as s:
        for step in range(3):
            s.step("train", step, {"gradients/a_rather_long_layer_name.weight": (np.linspace(-1, 1, 12), "gradients"),
                                   "loss": (1.0, "losses")})
    return path


def _tensor_rows(out: str) -> str:
    """The rows of the tensors table (from its header on, to the findings)."""
    return out.split(" tensor ", 1)[1].split("findings", 1)[0]


@pytest.mark.parametrize("argv", [[], ["--width", "100"]])
def test_every_reduction_is_shown_redirected(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                            argv: list[str]) -> None:
    assert main(["inspect", str(run_dir), "--tensors", *argv]) == 0
    rows = _tensor_rows(capsys.readouterr().out)
    assert "…" not in rows and "..." not in rows
    shown = re.findall(r"[a-z_0-9.:]+", rows)  # (every cell's words, a folded one's too)
    for reduction in REDUCTIONS:
        assert reduction in shown, (reduction, rows)
    # the tensor's name and its last value stay whole, on its first line
    assert re.search(r"gradients/a_rather_long_layer_name\.weight +│ gradients +│ .* │ l2=[0-9.]+ @ 2", rows), rows

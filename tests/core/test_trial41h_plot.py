"""Trial 41h F1: ``tripwire plot`` of a tensor with a 311-character name failed with "File name too
long" (exit 2) at its default ``--out``, and the legend's label collapsed the figure's layout."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import tripwire
from tripwire._cli import main
from tripwire._plot import default_out

LONG = "metrics/" + "very_long_name_" * 20 + "end"


def test_a_long_name_gets_a_default_file_name_that_fits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    with tripwire.Session(out_dir=tmp_path / "run", save_interval=1, rules=[]) as s:
        for step in range(3):
            s.step("train", step, {"loss": (1.0, "losses"), LONG: (float(step), "metrics")})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (constrained_layout's "axes sizes collapsed to zero")
        assert main(["plot", str(tmp_path / "run"), LONG]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out.is_file() and out.parent == tmp_path / "run" / "plots"
    assert len(out.name.encode()) <= 204 and out.stem.startswith("metrics_very_long_name_")
    assert out == default_out(tmp_path / "run", LONG)
    # two names alike up to the cut get two files
    other = LONG[:-3] + "END"
    assert default_out(tmp_path, other) != default_out(tmp_path, LONG)
    assert default_out(tmp_path, "gradients/fc.weight").name == "gradients_fc.weight.png"  # (a short one: as before)

"""Trial 29b F2: ``loss_not_decreasing``'s ``details["now"]`` held the lowest level, where the message
says the loss went "from its start level X to Y", Y its level now: a table of findings' details read
a rise of 6% as a fall of 3%. ``now`` is the level now and ``lowest`` the lowest level (as
``loss_diverging``'s details name them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire.rules._common import fmt


def _findings(path: Path, losses: list[float]) -> list[tripwire.Finding]:
    with tripwire.Session({"out_dir": str(path), "save": {"interval": 1},
                           "rules": [{"name": "loss_not_decreasing", "num_steps": 50}]}) as s:
        for step, loss in enumerate(losses):
            s.step("train", step, {"loss": (loss, "losses")})
    return [f for f in tripwire.open_run(path).findings if f.rule == "loss_not_decreasing"]


def test_details_now_is_the_level_the_message_calls_now(tmp_path: Path) -> None:
    losses = [1.0 + 0.002 * step for step in range(60)]  # (a loss rising from its first value)
    found = _findings(tmp_path / "run", losses)
    assert len(found) == 1 and found[0].step == 50
    f = found[0]
    now, lowest, start = (float(np.median(losses[46:51])), float(np.median(losses[6:11])),
                          float(np.median(losses[:10])))
    assert f.details["now"] == pytest.approx(now) and f.details["lowest"] == pytest.approx(lowest)
    assert f.details["start"] == pytest.approx(start) and f.details["num_steps"] == 50
    assert f"from its start level {fmt(start)} to {fmt(now)} (the median of its last 5 values)" in f.message
    assert f"lowest median of 5 consecutive values ending after them {fmt(lowest)}" in f.message
    # (read as data: a rise, as the message says)
    assert f.details["now"] > f.details["start"]


def test_details_of_a_flat_loss(tmp_path: Path) -> None:
    """A loss that fell a little and then held: ``now`` its last level, ``lowest`` the lowest."""
    losses = [1.0] * 20 + [0.98] * 20 + [0.99] * 20
    found = _findings(tmp_path / "flat", losses)
    assert len(found) == 1
    f = found[0]
    assert f.details["start"] == pytest.approx(1.0)
    assert f.details["lowest"] == pytest.approx(0.98) and f.details["now"] == pytest.approx(0.99)

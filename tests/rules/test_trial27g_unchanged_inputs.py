"""Trial 27g F9 (follow-up): ``unchanged_tensor`` on the ``inputs`` collection finds a loader that
repeats one batch, but its message named frozen parameters and a missing ``optimizer.step()``:
causes of unchanged weights. For inputs (and labels) it now names the data pipeline."""

from __future__ import annotations

import numpy as np

from tripwire.rules import UnchangedTensor


def _steps(same: bool, kind: str, name: str) -> list:
    rng = np.random.default_rng(0)
    batch = rng.normal(size=(8, 4))
    return [("train", s, {name: (batch if same else rng.normal(size=(8, 4)), kind),
                          "w": (np.full((2, 2), float(s)), "weights")}) for s in range(6)]


def test_an_input_batch_that_never_changes_names_the_loader(feed) -> None:
    found = feed(UnchangedTensor(collection="inputs", num_steps=3), _steps(True, "inputs", "inputs"))
    assert [f.rule for f in found] == ["unchanged_tensor"]
    msg = found[0].message
    assert "the same batch" in msg and "loader" in msg, msg
    assert "optimizer.step()" not in msg and "requires_grad" not in msg, msg


def test_weights_that_never_change_keep_the_parameter_causes(feed) -> None:
    steps = [("train", s, {"w": (np.ones((2, 2)), "weights")}) for s in range(6)]
    found = feed(UnchangedTensor(num_steps=3), steps)
    assert "optimizer.step()" in found[0].message and "loader" not in found[0].message

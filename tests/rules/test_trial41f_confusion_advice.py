"""Trial 41f F2: ``confusion`` on a healthy booster's rare class (AUC 0.88) confused over rounds 7-14
of 300 advised "give start_step or rounds more room": ``rounds: 5`` still fired, ``start_step: 30``
did not. The advice now names a tenth of the training planned."""

from __future__ import annotations

import numpy as np

from tripwire.rules import Confusion


def _message(planned: int | None) -> str:
    rule = Confusion()
    rule._planned = planned
    matrix = np.array([[50, 0, 0], [0, 50, 0], [34, 0, 33]])
    out = rule.judge([0, 1, 2], matrix)
    assert out is not None
    return out[0]


def test_the_advice_names_a_start_step_from_the_training_planned() -> None:
    said = _message(300)
    assert "give start_step a tenth of the training planned (start_step: 30) (trial 41f" in said, said
    assert "rounds more room" not in said
    assert "give start_step a tenth of the training (trial 41f" in _message(None)

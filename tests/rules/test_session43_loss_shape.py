"""Trial 43c F4: a loss offered unreduced (a (4,) tensor: ``reduction='none'``, a ``.mean()``
forgotten) disabled ``loss_not_decreasing`` and ``oscillating_loss`` with "tensor 'loss' has no
reduction 'raw'; stored: none (arrays: raw)", which points at the reductions, not at the mistake.
The rules now say the loss is not one value, its shape, and what to offer."""

from __future__ import annotations

import numpy as np
import pytest

import tripwire


@pytest.mark.parametrize("loss", [np.full(4, 2.0), np.zeros(0)])
def test_a_loss_that_is_not_one_value_is_said_so(loss: np.ndarray) -> None:
    session = tripwire.Session(write=False, save_interval=1, rules=["loss_not_decreasing", "oscillating_loss"],
                               collections=["losses"])
    session.step("train", 0, {"loss": (loss, "losses")})
    errors = [f for f in session.findings if f.severity == "error"]
    assert sorted(f.rule for f in errors) == ["loss_not_decreasing", "oscillating_loss"]
    for f in errors:
        assert (f"the rule raised ConfigError: loss 'loss' is not one value: the training offered it with shape "
                f"{loss.shape} (step 0), stored as an array; a loss rule reads one value a step: offer the loss "
                f"reduced (loss.mean()") in f.message


def test_a_one_element_loss_is_one_value() -> None:
    session = tripwire.Session(write=False, save_interval=1, rules=["loss_not_decreasing", "oscillating_loss"],
                               collections=["losses"])
    for step in range(5):
        session.step("train", step, {"loss": (np.full((1, 1), 2.0 - 0.1 * step), "losses")})
    assert session.findings == []

"""Trial 27f F1: an XGBoost booster at eta=5 had its train logloss jump from 0.137 to 9.05 in two
rounds and hold there; ``loss_not_decreasing`` fired at round 50 saying the loss "has not changed
in 50 steps (it holds 9.05)". Its first value never appeared: the start level is the median of the
first values, already blown up. The message now says the loss rose from its first value, and leads
with a learning rate (eta) far too high."""

from __future__ import annotations

import numpy as np

from tripwire.rules import LossNotDecreasing


def test_a_loss_that_jumped_at_its_first_steps_and_held_says_it_rose(feed, loss_records) -> None:
    values = np.array([0.1366, 0.4575] + [9.0505] * 58)
    found = feed(LossNotDecreasing(num_steps=50), loss_records(values))
    assert [f.rule for f in found] == ["loss_not_decreasing"]
    msg = found[0].message
    assert "has not changed" not in msg, msg
    assert "rose from its first value 0.1366 to 9.05" in msg, msg
    assert msg.index("far too high") < msg.index("far too low") if "far too low" in msg else "far too high" in msg, msg


def test_a_flat_loss_still_says_it_has_not_changed(feed, loss_records) -> None:
    found = feed(LossNotDecreasing(num_steps=50), loss_records(np.full(60, 2.3)))
    msg = found[0].message
    assert "has not changed in" in msg and "rose from its first value" not in msg, msg


def test_a_loss_whose_first_value_is_noise_above_the_rest_is_not_said_to_rise(feed, loss_records) -> None:
    rng = np.random.default_rng(0)
    values = 2.3 + 0.05 * rng.standard_normal(60)
    found = feed(LossNotDecreasing(num_steps=50), loss_records(values))
    assert [f.rule for f in found] == ["loss_not_decreasing"]
    assert "rose from its first value" not in found[0].message, found[0].message

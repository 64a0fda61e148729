"""Session 24: loss_not_decreasing's horizon counts the steps of the training, not the step number."""

from __future__ import annotations

import tripwire
from tripwire.rules import LossNotDecreasing


def _first_finding(start: int) -> int | None:
    session = tripwire.Session(write=False, rules=[LossNotDecreasing()], save_interval=1)
    session.set_planned_steps(500)
    for i in range(200):  # a slow starter on its way down: 0.04% a step, a significant trend
        session.step("train", start + i, {"loss": (1.0 - 0.0004 * i, "losses")})
        if session.findings:
            return session.findings[0].step - start
    return None


def test_a_continued_training_projects_its_fall_as_a_fresh_one() -> None:
    # trial 24a: a training continued from step 2000 (XGBoost's xgb_model=) projected a significant
    # fall over H = max(D, 0.4 * P - s), which the absolute step made D: stopped where a fresh
    # training of the same loss is spared
    fresh = _first_finding(0)
    assert _first_finding(2000) == fresh
    assert fresh is None or fresh > 50

"""Trial 28f finding 5: ``overfit`` said "(0.1267 -> 2.53e-06, medians of its last 5 saves)" of an
XGBoost training metric that had 4 saves (steps 0, 10, 20, 30), where 0.1267 was a single value, not
a median. The numbers were right, the words not: each training value is now said as what it is,
the values it was taken from counted and named by their steps (the condition is unchanged)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tripwire
from tripwire.rules import Overfit

TRAIN = {0: 0.1267, 10: 5.0e-06, 20: 4.6e-08, 30: 4.3e-08}  # the trial's train-logloss, saved every 10 rounds


def _rounds(val: list[float], train: dict[int, float] = TRAIN, **params: float) -> list[tripwire.Finding]:
    """An XGBoost-like run: the validation metric every round, the training metric every 10th."""
    rule = Overfit(train="train-logloss", validation="validation-logloss", **params)
    session = tripwire.Session(write=False, rules=[rule], save_interval=1)
    for r, v in enumerate(val):
        if r in train:
            session.step("train", r, {"train-logloss": (train[r], "metrics")})
        session.step("eval", r, {"validation-logloss": (v, "metrics")})
    return [f for f in session.findings if f.kind == "finding"]


def test_a_single_training_value_is_its_value_and_a_short_window_is_counted() -> None:
    # best validation median at step 6 (only step 0's training value then), fires at step 14 (steps 0
    # and 10 then): "medians of its last 5 saves" was said of one value and of two
    val = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5] + [2.0] * 4
    found = _rounds(val, trend_z=float("inf"))
    assert [(f.step, f.details["test"]) for f in found] == [(14, "level")]
    message = found[0].message
    assert "last 5 saves" not in message, message
    assert ("while train-logloss stayed at or below its value then (0.1267 -> 0.06335: its value at step 0, then "
            "the mean of its values at steps 0 and 10)") in message, message


def test_four_saves_are_four_values_named_by_their_steps() -> None:
    # the trial's case: the training metric's 4 saves (steps 0-30) are all in the latest median
    val = [1.0, 0.9, 0.8, 0.7, 0.6] + [0.5] * 6 + [0.5 + 0.001 * k for k in range(1, 20)] + [2.0] * 4
    found = _rounds(val, trend_z=float("inf"))
    assert [f.step for f in found] == [33]
    message = found[0].message
    said = re.search(r"\(([0-9.e-]+) -> ([0-9.e-]+): its value at step 0, then the median of its 4 values at steps "
                     r"0, 10, 20 and 30\)", message)
    assert said is not None, message
    assert float(said.group(1)) == 0.1267
    assert float(said.group(2)) == pytest.approx(float(np.median(list(TRAIN.values()))), rel=1e-2)


def test_five_saves_keep_the_short_words() -> None:
    # (five values then and now: "medians of its last 5 saves" is what they are)
    train = {r: 1.0 / (r + 1) for r in range(0, 200, 10)}
    val = [1.0 - 0.01 * k for k in range(60)] + [0.41 + 0.1 * k for k in range(1, 6)]
    found = _rounds(val, train, trend_z=float("inf"))
    assert len(found) == 1
    assert re.search(r"\([0-9.e-]+ -> [0-9.e-]+, medians of its last 5 saves\)", found[0].message), found[0].message


def test_no_value_before_the_best_says_the_latest_as_what_it_is() -> None:
    # a validation before any training value (the best): "now X, the median of its last 5 saves" of 1 value
    train = {3: 0.9, 13: 0.5}
    val = [0.5, 0.5, 0.5] + [0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8]
    found = _rounds(val, train, trend_z=float("inf"))
    assert found, "no finding"
    message = found[0].message
    assert "last 5 saves" not in message, message
    assert re.search(r"had no value saved at or before that best, so whether it improved since is not known; now "
                     r"[0-9.e-]+, (its value at step 3|the mean of its values at steps 3 and 13)\)", message), message

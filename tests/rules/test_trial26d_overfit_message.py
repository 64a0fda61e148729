"""Trials 26d (finding 3) and 26c (F9): ``overfit``'s message says which values it compares.

It compared running medians of 3 validation values and said "val_loss has risen to 0.86 from its
best 0.52" where the series' best value was 0.5 and its latest 0.95 (the training side said
"medians of its last 5 saves", the validation side nothing). The condition is unchanged: the
findings come at the same steps with the same ``details``."""

from __future__ import annotations

from typing import Any

import numpy as np

import tripwire
from tripwire.rules import Overfit

# trial 26c's overfit_check.py: medians of 3 reach 0.52 at best (evaluations 3-5), 0.86 at evaluation 11
VALS = [1.0, 0.8, 0.6, 0.5, 0.52, 0.56, 0.62, 0.70, 0.78, 0.86, 0.95, 1.05, 1.15, 1.25]


def _run(rule: Any, val: list[float], vname: str = "val_loss", train: list[float] | None = None,
         per: int = 10, tname: str = "loss") -> list[tripwire.Finding]:
    session = tripwire.Session(write=False, rules=[rule], save_interval=1)
    train = list(np.geomspace(0.5, 0.05, len(val))) if train is None else train
    step = 0
    for e, v in enumerate(val):
        for _ in range(per):
            session.step("train", step, {tname: (float(train[e]), "losses")})
            step += 1
        session.step("eval", e, {vname: (float(v), "losses")})
    return [f for f in session.findings if f.kind == "finding"]


def test_level_message_names_the_medians_and_the_single_values() -> None:
    found = _run(Overfit(trend_z=float("inf")), VALS)
    assert len(found) == 1
    f = found[0]
    assert f.step == 10 and f.details["test"] == "level"  # (the condition as before)
    assert f.details["best"] == 0.52 and f.details["now"] == 0.86
    # (trial 27f: the values are named by their steps, the finding's numbering, not "evaluation N" from 1;
    # the eval steps here count validations, so the train step each came after is said too)
    assert ("val_loss has risen to 0.86 (the median of the values at steps 8-10; the latest value 0.95) from its "
            "best 0.52 (the median of the values at steps 2-4; its lowest value 0.5, at step 3, after train step 39) "
            "(65.38% worse) while loss "
            "stayed at or below its value then") in f.message
    assert "medians of its last 5 saves" in f.message


def test_trend_message_names_the_best_median_and_the_single_values() -> None:
    # falls to 1.0, then climbs 0.02 a value: the trend test fires at the 11th value (index 10)
    val = [1.3, 1.2, 1.1, 1.0] + [1.0 + k * 0.02 for k in range(1, 8)]
    found = _run(Overfit(), val)
    assert len(found) == 1 and found[0].details["test"] == "trend" and found[0].step == 10
    msg = found[0].message
    assert "trend line now at 1.14; the latest value 1.14) from its best 1.02 (the median of the values at steps " \
           "2-4; its lowest value 1, at step 3, after train step 39)" in msg


def test_higher_is_better_says_highest() -> None:
    acc = [0.5, 0.6, 0.7, 0.8, 0.78, 0.74, 0.68, 0.6, 0.52, 0.45, 0.4]
    train = list(np.linspace(0.5, 0.99, len(acc)))
    found = _run(Overfit(train="acc", validation="val_acc", trend_z=float("inf")), acc, vname="val_acc",
                 train=train, tname="acc")
    assert found, "no finding"
    msg = found[0].message
    assert "val_acc has fallen to" in msg and "; the latest value " in msg
    assert ("from its best 0.78 (the median of the values at steps 2-4; its highest value 0.8, at step 3, after "
            "train step 39)") in msg


def test_a_best_in_the_first_evaluations_is_said_as_such() -> None:
    # the best median is the first value alone (no window yet): "the value at step 0"
    val = [0.5, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]
    found = _run(Overfit(trend_z=float("inf")), val)
    assert found and ("from its best 0.5 (the value at step 0; its lowest value 0.5, at step 0, after train step 9)"
                      in found[0].message)

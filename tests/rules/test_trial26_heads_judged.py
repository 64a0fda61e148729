"""Trial 26j's fixer: ``class_imbalance`` and ``confusion`` judged only the first labels and
predictions tensors, so on a model of several heads a second classifier head was never judged, and
a regression head captured first hid a classifier head. Each head (``labels/<head>`` with
``predictions/<head>``) is now judged on its own."""

from __future__ import annotations

from typing import Any

import numpy as np
from test_trial26j_heads import _confused, _healthy, _neglected, _rounds

from tripwire.rules import ClassImbalance, Confusion


def _regression(rng: np.random.Generator, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    target = rng.normal(50.0, 10.0, n)
    return target, target + rng.normal(0.0, 1.0, n)


def test_a_second_classifier_head_is_judged(feed, rng: np.random.Generator) -> None:
    # the healthy head captured first (its name sorts first too): before, only it was judged
    found = feed(ClassImbalance(), _rounds({"a_cls": _healthy(rng), "b_aux": _neglected(rng)}))
    assert [(f.rule, f.tensors) for f in found] == [("class_imbalance", ("labels/b_aux", "predictions/b_aux"))]


def test_a_regression_head_first_does_not_hide_a_classifier_head(feed, rng: np.random.Generator) -> None:
    found = feed(ClassImbalance(), _rounds({"a_reg": _regression(rng), "b_cls": _neglected(rng)}))
    assert [f.tensors for f in found] == [("labels/b_cls", "predictions/b_cls")]
    found = feed(Confusion(), _rounds({"a_reg": _regression(rng), "b_cls": _confused(rng)}))
    assert [f.tensors for f in found] == [("labels/b_cls", "predictions/b_cls")]


def test_a_state_saved_before_heads_were_judged_apart_goes_to_the_first_head(feed, rng: np.random.Generator) -> None:
    rule = ClassImbalance()
    feed(rule, _rounds({"": _neglected(rng)}, rounds=1))
    state = rule.state_dict()
    assert list(state["rounds_state"]) == ["0|labels"]
    legacy: dict[str, Any] = {**state, "rounds_state": {"0": state["rounds_state"]["0|labels"]}}
    again = ClassImbalance()
    again.load_state_dict(legacy)
    assert again._accumulator(0, "labels").state_dict() == state["rounds_state"]["0|labels"]

"""weight_update_ratio's low-ratio message when no parameter moves at all (trial 27e, finding 7).

SGD at lr=3 blew the weights up within 10 steps and killed the ReLUs: from then on every gradient
was exactly 0 and so was every update ratio, and the rule said "Usual causes: a learning rate of
~0" for a learning rate of 3. A ratio of exactly 0 after earlier updates (or with every gradient
norm exactly 0) names gradients that became 0 (dead units, often after a learning rate far too
high); a learning rate recorded as 0, or ratios that were never above the limit, keep the usual
message."""

from __future__ import annotations

from typing import Any

import numpy as np

from tripwire.rules import WeightUpdateRatio

LR_ZERO = "a learning rate of ~0"
DEAD = "dead units"
COLLECTIONS = ["optimizer", "gradients"]


def _records(ratios: list[float], lr: float | None = None, grad: float | None = None) -> list[Any]:
    out = []
    for s, r in enumerate(ratios):
        tensors: dict[str, Any] = {"update_ratio/fc.weight": (r, "optimizer")}
        if lr is not None:
            tensors["lr/0"] = (lr, "optimizer")
        if grad is not None:
            tensors["gradients/fc.weight"] = (np.full((4, 4), grad), "gradients")
        out.append(("train", s, tensors))
    return out


def test_a_ratio_of_0_after_updates_names_dead_units_not_a_learning_rate_of_0(feed) -> None:
    found = feed(WeightUpdateRatio(), _records([2.0e-3, 5e-2, 0.0, 0.0, 0.0, 0.0, 0.0], lr=3.0), collections=COLLECTIONS)
    assert [f.step for f in found] == [6]
    message = found[0].message
    assert LR_ZERO not in message
    assert DEAD in message and "learning rate far too high" in message and "gradients have become exactly 0" in message
    assert "after updates of up to 0.05 times their size" in message and "(learning rate 3)" in message
    assert message.startswith("the largest update/weight ratio is 0 (update_ratio/fc.weight; limit 1e-08) for 5 saves in a row, after updates")


def test_gradients_exactly_0_name_dead_units_from_the_start(feed) -> None:
    # a network dead from its first step (a large negative bias): never an update, every gradient 0
    found = feed(WeightUpdateRatio(), _records([0.0] * 5, grad=0.0), collections=COLLECTIONS)
    assert len(found) == 1 and LR_ZERO not in found[0].message
    assert DEAD in found[0].message and "every recorded gradient norm is exactly 0 here" in found[0].message


def test_a_learning_rate_of_0_keeps_the_usual_message(feed) -> None:
    # (a schedule that ends at exactly 0 after earlier updates: the learning rate is the cause)
    found = feed(WeightUpdateRatio(), _records([1e-3, 1e-3, 0.0, 0.0, 0.0, 0.0, 0.0], lr=0.0, grad=0.5),
                 collections=COLLECTIONS)
    assert len(found) == 1 and LR_ZERO in found[0].message and DEAD not in found[0].message


def test_no_earlier_update_and_gradients_not_0_keep_the_usual_message(feed) -> None:
    # lr=0 from the start, the learning rate not recorded: nothing says the gradients are 0
    found = feed(WeightUpdateRatio(), _records([0.0] * 5, grad=0.5), collections=COLLECTIONS)
    assert len(found) == 1 and LR_ZERO in found[0].message and DEAD not in found[0].message
    # a tiny ratio that is not 0 (a learning rate decayed to ~1e-12) after updates: the usual message
    found = feed(WeightUpdateRatio(), _records([1e-3, 1e-3] + [1e-12] * 5), collections=COLLECTIONS)
    assert len(found) == 1 and LR_ZERO in found[0].message and DEAD not in found[0].message

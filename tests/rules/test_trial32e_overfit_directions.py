"""Trial 32e, finding 1: ``overfit`` reads each metric in its own direction.

One direction, the validation metric's, was read for both: beside ``validation="val_acc"`` the
default ``train="loss"`` was read as better high, so its fall counted as "training got worse" and the
gap clause compared a loss with an accuracy; the rule could never fire, silently, on a 44% accuracy
drop."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tripwire.rules import Overfit
from tripwire.rules._common import higher_is_better


def names(findings: list[Any]) -> list[str]:
    return [f.rule for f in findings if f.kind == "finding"]


def _records(train: list[float], val: list[float], tname: str, vname: str, per: int = 5) -> list[Any]:
    """``per`` training values (``train[e]``, linearly towards ``train[e + 1]``) before each validation value."""
    recs: list[Any] = []
    step = 0
    for e, v in enumerate(val):
        nxt = train[min(e + 1, len(train) - 1)]
        for j in range(per):
            t = train[e] + (nxt - train[e]) * j / per
            recs.append(("train", step, {tname: (float(t), "losses" if "loss" in tname else "metrics")}))
            step += 1
        recs.append(("eval", e, {vname: (float(v), "losses" if "loss" in vname else "metrics")}))
    return recs


VAL_ACC_DROPS = [0.9] * 5 + [0.5] * 8
LOSS_FALLS = list(np.geomspace(2.0, 1.2, len(VAL_ACC_DROPS)))  # (values above the accuracy's: the gap would veto)
LOSS_RISES = list(np.linspace(1.2, 2.0, len(VAL_ACC_DROPS)))


def test_val_acc_falling_beside_the_default_training_loss_fires(feed) -> None:
    # the trial's case: a falling training loss, the validation accuracy 0.9 -> 0.5
    found = feed(Overfit(validation="val_acc"), _records(LOSS_FALLS, VAL_ACC_DROPS, "loss", "val_acc"))
    assert names(found) == ["overfit"]
    msg = found[0].message
    assert msg.startswith("val_acc has fallen to 0.5") and "while loss stayed at or below its value then" in msg
    assert found[0].tensors == ("val_acc", "loss")


def test_val_acc_falling_while_the_training_loss_rises_is_quiet(feed) -> None:
    # both get worse: divergence, not overfitting (the training loss read as lower-is-better)
    assert feed(Overfit(validation="val_acc"), _records(LOSS_RISES, VAL_ACC_DROPS, "loss", "val_acc")) == []


def test_val_acc_improving_beside_a_falling_loss_is_quiet(feed) -> None:
    val = [0.5] * 5 + [0.9] * 8
    assert feed(Overfit(validation="val_acc"), _records(LOSS_FALLS, val, "loss", "val_acc")) == []


def test_val_loss_rising_beside_a_rising_training_accuracy_fires(feed) -> None:
    # the mirror pair: the validation read as lower-is-better, the training accuracy as higher
    val = [0.5] * 5 + [0.9] * 8
    acc = list(np.linspace(0.6, 0.95, len(val)))
    found = feed(Overfit(train="train_acc"), _records(acc, val, "train_acc", "val_loss"))
    assert names(found) == ["overfit"]
    assert "val_loss has risen to 0.9" in found[0].message and "train_acc stayed at or above" in found[0].message
    # and with the training accuracy falling too: both worse, quiet
    assert feed(Overfit(train="train_acc"), _records(acc[::-1], val, "train_acc", "val_loss")) == []


def test_trend_test_on_a_pair_of_different_directions(feed) -> None:
    # a slow, steady fall of the validation accuracy (the trend test alone: the level test off by a huge
    # tolerance), beside a training loss whose values lie above it
    val = [0.9, 0.91, 0.92] + [0.92 - 0.02 * i for i in range(1, 12)]
    loss = list(np.geomspace(3.0, 2.0, len(val)))
    rule = Overfit(validation="val_acc", tolerance=0.1, confirm=50)
    found = feed(rule, _records(loss, val, "loss", "val_acc"))
    assert names(found) == ["overfit"] and found[0].details["test"] == "trend"
    assert feed(Overfit(validation="val_acc", confirm=50), _records(loss[::-1], val, "loss", "val_acc")) == []


def test_the_gap_still_applies_to_a_pair_read_in_the_same_direction(feed) -> None:
    # train_acc / val_acc: a validation accuracy that fell from its best but stays above the training
    # accuracy is no overfitting (the gap clause), as before
    val = [0.95] * 5 + [0.8] * 8
    acc = list(np.linspace(0.5, 0.7, len(val)))
    assert feed(Overfit(train="train_acc", validation="val_acc"), _records(acc, val, "train_acc", "val_acc")) == []
    acc_high = list(np.linspace(0.9, 0.99, len(val)))
    found = feed(Overfit(train="train_acc", validation="val_acc"), _records(acc_high, val, "train_acc", "val_acc"))
    assert names(found) == ["overfit"]


def test_explicit_higher_is_better_sets_the_validation_metric_alone(feed) -> None:
    # a validation metric whose name tells no direction, made better-high; the default training loss
    # keeps its own (lower) direction
    recs = _records(LOSS_FALLS, VAL_ACC_DROPS, "loss", "val_skill")
    found = feed(Overfit(validation="val_skill", higher_is_better=True), recs)
    assert names(found) == ["overfit"] and "while loss stayed at or below" in found[0].message
    # a training metric whose name tells no direction takes the given one
    recs = _records(list(np.linspace(0.6, 0.95, 13)), VAL_ACC_DROPS, "train_skill", "val_skill")
    found = feed(Overfit(train="train_skill", validation="val_skill", higher_is_better=True), recs)
    assert names(found) == ["overfit"] and "while train_skill stayed at or above" in found[0].message


def test_a_validation_name_that_tells_nothing_takes_the_training_metrics_direction(feed) -> None:
    recs = _records(list(np.linspace(0.6, 0.95, 13)), VAL_ACC_DROPS, "train_acc", "val_skill")
    found = feed(Overfit(train="train_acc", validation="val_skill"), recs)
    assert names(found) == ["overfit"] and found[0].message.startswith("val_skill has fallen to 0.5")


def test_directions() -> None:
    rule = Overfit(validation="val_acc")
    assert rule.directions("val_acc", "loss") == (True, False)
    assert rule.directions("val_acc", "train_acc") == (True, True)
    assert rule.directions("val_acc", "train_skill") == (True, True)
    assert rule.directions("val_skill", "loss") == (False, False)
    assert rule.directions("val_skill", "train_auc") == (True, True)
    assert rule.directions("val_skill", "train_skill") == (False, False)
    assert rule.directions("val_skill", None) == (False, False)
    explicit = Overfit(validation="val_acc", higher_is_better=False)
    assert explicit.directions("val_acc", "train_acc") == (False, True)
    assert explicit.directions("val_acc", "train_skill") == (False, False)


@pytest.mark.parametrize("name", ["loss", "val_loss", "train-logloss", "validation-auc", "val_accuracy", "f1", "ndcg@5",
                                  "val_skill", "train/score", "map@5-", "rmse", "pre@3", "x"])
def test_told_direction_agrees_with_higher_is_better(name: str) -> None:
    from tripwire.rules.overfit import told_direction

    told = told_direction(name)
    assert bool(told) == higher_is_better(name)


def test_told_direction_of_a_name_that_tells_nothing_is_none() -> None:
    from tripwire.rules.overfit import told_direction

    assert told_direction("val_skill") is None and told_direction("loss") is False and told_direction("val_auc") is True


def test_assess_reads_the_training_metric_in_its_own_direction() -> None:
    val = np.asarray(VAL_ACC_DROPS)
    walls = np.arange(len(val), dtype=float) + 0.5
    loss = np.geomspace(2.0, 1.2, len(val))
    train = (walls - 0.25, loss, np.arange(len(val)), 1)
    assert Overfit().assess(val, walls, train, True, False) is not None
    assert Overfit().assess(val, walls, train, True) is None  # (None: the validation metric's direction)
    assert Overfit().assess(val, walls, (walls - 0.25, loss[::-1], np.arange(len(val)), 1), True, False) is None

"""Trial 32e, finding 1's twin in ``overtraining``: the training metric was read in the validation
metric's direction, so beside ``validation="val_acc"`` the default ``train="loss"`` read a falling
loss as "flat" (not improving), and the rule said "neither improves any more" of a training whose
loss was still falling. Each metric is now read in its own direction, as in ``overfit``."""

from __future__ import annotations

from typing import Any

import numpy as np

from tripwire.rules import Overtraining


def _records(train: list[float], val: list[float], per: int = 4) -> list[Any]:
    recs: list[Any] = []
    step = 0
    for e, v in enumerate(val):
        for _ in range(per):
            recs.append(("train", step, {"loss": (float(train[step]), "losses")}))
            step += 1
        recs.append(("eval", e, {"val_acc": (float(v), "metrics")}))
    return recs


N_VAL = 30
VAL_ACC_STALLS = [0.5, 0.7] + [0.8] * (N_VAL - 2)  # improves, then not for 28 validations


def _rule() -> Overtraining:
    return Overtraining(validation="val_acc", val_patience=5, window=5)


def test_a_stalled_val_acc_beside_a_falling_loss_is_quiet(feed) -> None:
    loss = list(np.geomspace(2.0, 0.2, 4 * N_VAL))  # training still improves
    assert feed(_rule(), _records(loss, VAL_ACC_STALLS)) == []


def test_a_stalled_val_acc_beside_a_flat_loss_fires(feed) -> None:
    loss = list(np.geomspace(2.0, 0.5, 20)) + [0.5] * (4 * N_VAL - 20)
    found = [f for f in feed(_rule(), _records(loss, VAL_ACC_STALLS)) if f.kind == "finding"]
    assert found and found[0].rule == "overtraining"
    assert "val_acc has not improved" in found[0].message and "loss is flat (0.5 -> 0.5" in found[0].message

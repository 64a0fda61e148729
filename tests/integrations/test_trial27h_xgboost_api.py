"""Trial 27h F8: the integrations' result attributes differed (``history`` and ``trial_stopped``
existed on some only). The XGBoost callback now has both, as the Lightning and Keras callbacks do:
``history`` (the last training's :class:`tripwire.History`, None before one) and ``trial_stopped``
(the tuner stopped the last training)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402


def _data() -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 5))
    y = (x[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(float)
    return xgb.DMatrix(x[:200], y[:200]), xgb.DMatrix(x[200:], y[200:])


class _StopAt:
    """A trial whose scheduler stops it at its ``stop``-th report."""

    max_resource = 100
    min_resource = 1

    def __init__(self, stop: int) -> None:
        self.stop, self.reports = stop, []

    def report(self, step: int, value: float) -> bool:
        self.reports.append((step, value))
        return len(self.reports) >= self.stop


def test_history_is_the_last_trainings_and_none_before_one(tmp_path: Path) -> None:
    dtrain, dvalid = _data()
    cb = TripwireCallback(out_dir=str(tmp_path / "run"))
    assert cb.history is None and cb.trial_stopped is False
    xgb.train({"max_depth": 2}, dtrain, 5, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb],
              verbose_eval=False)
    assert isinstance(cb.history, tripwire.History)
    steps, values = cb.history.series("validation-rmse", "raw", "eval")
    assert steps.tolist()[0] == 0 and steps.tolist()[-1] == 4 and np.all(np.isfinite(values))
    assert cb.trial_stopped is False and cb.stop_reason is None


def test_trial_stopped_says_the_tuner_stopped_the_training(tmp_path: Path) -> None:
    dtrain, dvalid = _data()
    trial = _StopAt(3)
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), trial=trial, trial_metric="validation-rmse")
    booster = xgb.train({"max_depth": 2}, dtrain, 20, evals=[(dtrain, "train"), (dvalid, "validation")],
                        callbacks=[cb], verbose_eval=False)
    assert booster.num_boosted_rounds() == 3 and cb.trial_stopped is True
    assert cb.stopped_by is None and "tuner" in (cb.stop_reason or "")
    # a later training of the same callback starts with it False again
    trial.stop = 10**6
    xgb.train({"max_depth": 2}, dtrain, 2, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb],
              verbose_eval=False)
    assert cb.trial_stopped is False

"""Trial 28i F2, XGBoost: one callback trained twice.

- The second fit's ``eval_is_train`` was left out of the run: a check's finding the run held already
  was held for any session appending to the run; now only for one that continues it (``xgb_model=``,
  ``load_state_dict``).
- ``cb.findings`` held only the last direct fit's findings, while sklearn's clones gave every fold's,
  sorted by round across the folds: now every training's, in training order, both ways.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.model_selection import KFold, cross_val_score  # noqa: E402

import tripwire  # noqa: E402
from tripwire import Finding  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402
from tripwire.rules import FunctionRule  # noqa: E402

PARAMS = {"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 2, "eta": 0.1, "nthread": 1}
FIRE_AT: list[int] = []
"""The round at which :func:`fires` fires, one per training (each training's first round takes the next)."""
_AT: dict[str, int] = {}


def fires(history: Any, step: int, mode: str) -> str | None:
    if step == 0:
        _AT["at"] = FIRE_AT.pop(0)
    return f"round {step}" if step == _AT["at"] else None


def _data() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    return X[:300], y[:300]


def test_two_fits_of_one_callback_record_each_fits_eval_is_train(tmp_path: Path) -> None:
    X, y = _data()
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[])
    model = xgb.XGBClassifier(n_estimators=3, max_depth=2, n_jobs=1, callbacks=[cb])
    for _ in range(2):
        model.fit(X, y, eval_set=[(X, y)], verbose=False)  # (the training data as the evaluation set)
    held = [(f.rule, f.step) for f in tripwire.open_run(cb.out_dir).findings]
    assert held == [("eval_is_train", 0), ("eval_is_train", 0)]
    assert [(f.rule, f.step) for f in cb.findings] == held  # (both fits' findings, as the run holds them)


def test_a_continued_training_does_not_record_a_held_check_again(tmp_path: Path) -> None:
    X, y = _data()
    dtrain = xgb.DMatrix(X, label=y)
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[])
    booster = xgb.train(PARAMS, dtrain, 3, evals=[(dtrain, "validation")], callbacks=[cb], verbose_eval=False)
    xgb.train(PARAMS, dtrain, 3, evals=[(dtrain, "validation")], callbacks=[cb], verbose_eval=False,
              xgb_model=booster)  # (continues the run: its rounds count on from 3)
    assert [(f.rule, f.step) for f in tripwire.open_run(cb.out_dir).findings] == [("eval_is_train", 0)]
    assert [(f.rule, f.step) for f in cb.findings] == [("eval_is_train", 0), ("eval_is_train", 3)]


def test_findings_of_direct_fits_and_of_clones_are_in_training_order(tmp_path: Path) -> None:
    X, y = _data()
    Xt, yt, Xv, yv = X[:200], y[:200], X[200:], y[200:]
    dtrain, dvalid = xgb.DMatrix(Xt, label=yt), xgb.DMatrix(Xv, label=yv)
    def rule() -> FunctionRule:  # (one per callback: a rule object given is used as it is, with its state)
        return FunctionRule(fires, name="fires", modes=["eval"], actions=["record"])

    FIRE_AT[:] = [3, 0]
    cb = TripwireCallback(out_dir=tmp_path / "direct", rules=[rule()], save_interval=1)
    for _ in range(2):
        xgb.train(PARAMS, dtrain, 5, evals=[(dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    assert [f.step for f in cb.findings] == [3, 0]  # (both trainings', the first's first)
    assert [f.step for f in copy.deepcopy(cb).findings] == [3, 0]  # (a copy reads them from the run)

    FIRE_AT[:] = [3, 0]
    cb = TripwireCallback(out_dir=tmp_path / "clones", rules=[rule()], save_interval=1)
    model = xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1, callbacks=[cb])
    # (clones: the callback itself never trains)
    cross_val_score(model, Xt, yt, cv=KFold(2), params={"eval_set": [(Xv, yv)], "verbose": False}, error_score="raise")
    assert [f.step for f in cb.findings] == [3, 0]  # (fold after fold, not sorted by round)
    assert all(isinstance(f, Finding) and f.rule == "fires" and f.mode == "eval" for f in cb.findings)

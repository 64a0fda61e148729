"""Trial 41e F1: a healthy logistic objective of one's own (``obj=``) with no objective and no
``eval_metric`` in params: XGBoost names the booster's objective ``reg:squarederror`` and logs only
``rmse``, of the raw margins (logits) against 0/1 labels. It rose from 0.42 to 2.7 while the
log-loss of the sigmoid of the margin fell from 0.46 to 0.18, and ``loss_not_decreasing`` (in
``default``) stopped the booster at round 50. Where params name no objective and every training label
is 0 or 1, the value metrics (``rmse``, ``mae``, ...) are now left out of the rules' defaults as the
link metrics are, with the same one WARNING; a regression of one's own keeps its ``rmse``."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")
from sklearn.datasets import load_digits  # noqa: E402

from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402

WARNING = "computes its built-in rmse on the raw margins; the training's labels are all 0 or 1"


def logistic(margin: np.ndarray, dm: xgb.DMatrix) -> tuple[np.ndarray, np.ndarray]:
    p = 1 / (1 + np.exp(-margin))
    return p - dm.get_label(), p * (1 - p)


def squared(pred: np.ndarray, dm: xgb.DMatrix) -> tuple[np.ndarray, np.ndarray]:
    return pred - dm.get_label(), np.ones_like(pred)


def _digits(binary: bool) -> tuple[xgb.DMatrix, xgb.DMatrix]:
    X, y = load_digits(return_X_y=True)
    y = (y % 2).astype(float) if binary else y.astype(float) / 3.0
    return xgb.DMatrix(X[:1200], label=y[:1200]), xgb.DMatrix(X[1200:], label=y[1200:])


def _messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level and r.name.startswith("tripwire")]


def test_the_trial_healthy_logistic_objective_is_not_stopped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtr, dva = _digits(binary=True)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=["default"],
                          actions=["log", "stop_training"])
    ev: dict = {}
    with caplog.at_level(logging.INFO, logger="tripwire"):
        b = xgb.train({"max_depth": 3, "eta": 0.1, "nthread": 1}, dtr, 80, obj=logistic, evals_result=ev,
                      evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    rmse = np.asarray(ev["train"]["rmse"])
    assert rmse[-1] > 3 * rmse[0]  # (the margins' rmse rose, as in the trial: what the rule read)
    assert b.num_boosted_rounds() == 80 and cb.stopped_by is None and cb.findings == []
    (w,) = [m for m in _messages(caplog, logging.WARNING) if "raw margins" in m]
    assert WARNING in w and "train-rmse and validation-rmse mean nothing" in w, w
    assert "loss_not_decreasing (loss) reads nothing" in w
    assert "{name: loss_not_decreasing, loss: train-rmse}" in w
    assert not [m for m in _messages(caplog, logging.INFO) if "reads loss='train-rmse'" in m]


def test_a_named_rmse_is_still_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtr, dva = _digits(binary=True)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, actions=["log"],
                          rules=[{"name": "loss_not_decreasing", "loss": "train-rmse"}])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        xgb.train({"max_depth": 3, "eta": 0.1, "nthread": 1}, dtr, 60, obj=logistic,
                  evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    (w,) = [m for m in _messages(caplog, logging.WARNING) if "raw margins" in m]
    assert "rule 'loss_not_decreasing' names 'train-rmse' itself and reads it as logged" in w
    assert [f.rule for f in cb.findings] == ["loss_not_decreasing"]  # (read as logged: it rose)


@pytest.mark.parametrize("case", ["regression", "named objective"])
def test_a_regression_of_ones_own_keeps_its_rmse(tmp_path: Path, caplog: pytest.LogCaptureFixture, case: str) -> None:
    # continuous labels, or 0/1 labels under an objective that params name: rmse is a value's metric
    dtr, dva = _digits(binary=case == "named objective")
    params = {"max_depth": 3, "eta": 0.1, "nthread": 1}
    if case == "named objective":
        params["objective"] = "reg:squarederror"
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=["default"], actions=["log"])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        xgb.train(params, dtr, 20, obj=squared, evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb],
                  verbose_eval=False)
    assert not [m for m in _messages(caplog, logging.WARNING) if "raw margins" in m]
    assert [m for m in _messages(caplog, logging.INFO) if "reads loss='train-rmse'" in m]
    assert cb.findings == []


def test_the_sklearn_regressor_of_a_logistic_objective_on_0_1_labels(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Trial 41k F4: XGBRegressor(objective=callable) names reg:squarederror in the params itself, so
    the logistic objective of trial 41e was still stopped at round 50 through the sklearn API."""
    X, y = load_digits(return_X_y=True)
    yb = (y >= 5).astype(int)

    def logistic_sk(labels: np.ndarray, margin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = 1 / (1 + np.exp(-margin))
        return p - labels, p * (1 - p)

    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=["log", "stop_training"])
    model = xgb.XGBRegressor(n_estimators=80, max_depth=3, learning_rate=0.3, objective=logistic_sk, n_jobs=1,
                             callbacks=[cb])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X[:1300], yb[:1300], eval_set=[(X[:1300], yb[:1300]), (X[1300:], yb[1300:])], verbose=False)
    assert model.get_booster().num_boosted_rounds() == 80 and cb.stopped_by is None
    assert [m for m in _messages(caplog, logging.WARNING) if WARNING in m]

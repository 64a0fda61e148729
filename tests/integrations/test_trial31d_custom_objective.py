"""Trial 31d F1: with an objective of its own (``xgb.train(obj=...)``) a booster's objective is
``reg:squarederror``, which applies no link, and XGBoost computes its built-in ``logloss`` on the raw
margins: it rose (1.41 -> 2.28) while the true log-loss fell (0.53 -> 0.29), and ``overfit``, reading
it by default, stopped a healthy booster at round 7. Such metrics are now left out of the rules'
defaults, with one WARNING that names them and the fix; a custom metric on the transformed
prediction still catches a real overfit."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")
from sklearn.datasets import make_classification  # noqa: E402

from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402

RULES = ["default", {"name": "overfit", "actions": ["stop_training"]}]
MARGIN_WARNING = "computes its built-in logloss on the raw margins"


def logobj(preds: np.ndarray, dm: xgb.DMatrix) -> tuple[np.ndarray, np.ndarray]:
    lab = dm.get_label()
    p = 1 / (1 + np.exp(-preds))
    return p - lab, p * (1 - p)


def plogloss(preds: np.ndarray, dm: xgb.DMatrix) -> tuple[str, float]:
    lab = dm.get_label()
    p = np.clip(1 / (1 + np.exp(-preds)), 1e-15, 1 - 1e-15)
    return "plogloss", float(-np.mean(lab * np.log(p) + (1 - lab) * np.log(1 - p)))


def _healthy() -> tuple[xgb.DMatrix, xgb.DMatrix]:
    X, y = make_classification(n_samples=1500, n_features=8, n_informative=4, random_state=0)
    return xgb.DMatrix(X[:900], label=y[:900]), xgb.DMatrix(X[900:], label=y[900:])


def _overfitting() -> tuple[xgb.DMatrix, xgb.DMatrix]:
    X, y = make_classification(n_samples=1300, n_features=10, n_informative=4, flip_y=0.3, random_state=0)
    return xgb.DMatrix(X[:300], label=y[:300]), xgb.DMatrix(X[300:], label=y[300:])


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("tripwire")]


def test_the_trial_healthy_booster_is_not_stopped_and_the_margin_metric_is_named(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtr, dva = _healthy()
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=RULES)
    ev: dict = {}
    with caplog.at_level(logging.INFO, logger="tripwire"):
        b = xgb.train({"eval_metric": "logloss", "max_depth": 4, "eta": 0.3, "nthread": 1}, dtr, 30, obj=logobj,
                      evals=[(dtr, "train"), (dva, "validation")], evals_result=ev, callbacks=[cb], verbose_eval=False)
    v = np.asarray(ev["validation"]["logloss"])
    assert v[7] > v[0]  # (XGBoost's logloss on the margins rose: what overfit read)
    assert b.num_boosted_rounds() == 30 and cb.findings == [] and cb.stopped_by is None
    said = _warnings(caplog)
    assert len(said) == 1, said  # (no "reads nothing" for the defaults left unbound, at the start or the end)
    w = said[0]
    assert MARGIN_WARNING in w and "train-logloss and validation-logloss mean nothing" in w, w
    assert "its booster's objective is 'reg:squarederror'" in w
    assert "overfit (train, validation) reads nothing" in w and "loss_not_decreasing (loss) reads nothing" in w
    assert "custom_metric=" in w and "disable_default_eval_metric=1" in w and "'binary:logistic'" in w


@pytest.mark.parametrize("disable", [True, False])
def test_a_real_overfit_is_caught_on_a_custom_metric(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                      disable: bool) -> None:
    dtr, dva = _overfitting()
    params = {"max_depth": 8, "eta": 0.5, "nthread": 1}
    params.update({"disable_default_eval_metric": 1} if disable else {"eval_metric": "logloss"})
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=RULES)
    with caplog.at_level(logging.INFO, logger="tripwire"):
        b = xgb.train(params, dtr, 200, obj=logobj, custom_metric=plogloss, evals=[(dtr, "train"), (dva, "validation")],
                      callbacks=[cb], verbose_eval=False)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "overfit", cb.findings
    assert "validation-plogloss" in cb.stopped_by.message
    assert b.num_boosted_rounds() < 40
    margin = [m for m in _warnings(caplog) if MARGIN_WARNING in m]
    if disable:
        assert margin == []  # (no built-in metric logged)
    else:
        assert len(margin) == 1
        assert "overfit (train, validation) reads train='train-plogloss', validation='validation-plogloss' instead" \
            in margin[0]


def test_a_named_margin_metric_is_read_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtr, dva = _healthy()
    rules = [{"name": "overfit", "train": "train-logloss", "validation": "validation-logloss", "actions": ["log"]}]
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=rules)
    with caplog.at_level(logging.INFO, logger="tripwire"):
        xgb.train({"eval_metric": "logloss", "max_depth": 4, "eta": 0.3, "nthread": 1}, dtr, 10, obj=logobj,
                  evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    (w,) = [m for m in _warnings(caplog) if MARGIN_WARNING in m]
    assert "rule 'overfit' names 'validation-logloss' itself and reads it as logged" in w
    assert cb.history.latest("validation-logloss", mode="eval") is not None


def test_a_rank_metric_is_read_instead(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtr, dva = _healthy()
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=RULES)
    with caplog.at_level(logging.INFO, logger="tripwire"):
        xgb.train({"eval_metric": ["logloss", "auc"], "max_depth": 4, "eta": 0.3, "nthread": 1}, dtr, 10, obj=logobj,
                  evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    (w,) = [m for m in _warnings(caplog) if MARGIN_WARNING in m]
    assert "overfit (train, validation) reads train='train-auc', validation='validation-auc' instead" in w, w


@pytest.mark.parametrize("how", ["params objective", "sklearn classifier", "sklearn regressor"])
def test_a_linked_objective_keeps_its_metrics(tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str) -> None:
    # binary:logistic in params (or the sklearn classifier's, with a callable objective): XGBoost applies
    # the sigmoid before its metrics, which are right; a regressor's rmse is a value's metric
    X, y = make_classification(n_samples=600, n_features=6, random_state=0)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=RULES)

    def skl_obj(labels: np.ndarray, preds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = 1 / (1 + np.exp(-preds))
        return p - labels, p * (1 - p)

    with caplog.at_level(logging.INFO, logger="tripwire"):
        if how == "params objective":
            d, dv = xgb.DMatrix(X[:400], label=y[:400]), xgb.DMatrix(X[400:], label=y[400:])
            xgb.train({"objective": "binary:logistic", "eval_metric": "logloss", "nthread": 1}, d, 5, obj=logobj,
                      evals=[(d, "train"), (dv, "validation")], callbacks=[cb], verbose_eval=False)
        elif how == "sklearn classifier":
            xgb.XGBClassifier(objective=skl_obj, eval_metric="logloss", n_estimators=5, n_jobs=1, callbacks=[cb]).fit(
                X[:400], y[:400], eval_set=[(X[:400], y[:400]), (X[400:], y[400:])], verbose=False)
        else:  # (a value's target: on labels all 0 or 1 the objective is taken to fit logits, trial 41k)
            t = y * 3.0 + X[:, 0]
            xgb.XGBRegressor(objective=lambda t, p: (p - t, np.ones_like(p)), n_estimators=5, n_jobs=1,
                             callbacks=[cb]).fit(X[:400], t[:400], eval_set=[(X[:400], t[:400]), (X[400:], t[400:])],
                                                 verbose=False)
    assert [m for m in _warnings(caplog) if MARGIN_WARNING in m or "raw margins" in m and "computes" in m] == []
    infos = [r.getMessage() for r in caplog.records if "rule 'overfit' reads" in r.getMessage()]
    metric = "rmse" if how == "sklearn regressor" else "logloss"
    assert infos and f"validation='validation-{metric}'" in infos[0], infos

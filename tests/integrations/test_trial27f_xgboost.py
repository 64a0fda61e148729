"""Trial 27f, XGBoost: an evaluation set that is the training data (finding 2: the same DMatrix under
two names, sklearn's ``eval_set=[(X_train, y_train)]``; finding 3: the training rows reordered) is
said in one WARNING and recorded as the finding ``eval_is_train`` (no action), and a validation name
that matches nothing is never pointed at a training metric; ``overfit``'s message names XGBoost's
round of its best value (finding 7)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

from sklearn.datasets import load_breast_cancer, make_classification  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402
from tripwire.integrations.xgboost._evals import EvalSet, train_data_as_held_out  # noqa: E402
from tripwire.rules._common import fmt  # noqa: E402

PARAMS = {"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 3, "eta": 0.1, "nthread": 1}
# docs/xgboost.md's recommended rules ("Rules for XGBoost")
RECOMMENDED: dict[str, Any] = {
    "save": {"interval": 1},
    "rules": [
        {"name": "default", "actions": ["log", "stop_training"]},
        {"name": "tree_depth", "max_depth": 8, "actions": ["stop_training"]},
        {"name": "feature_importance_overweight", "threshold": 0.9, "actions": ["log"]},
        {"name": "overfit", "actions": ["stop_training"]},
        {"name": "class_imbalance", "actions": ["log"]},
    ],
}


def _bc() -> tuple[np.ndarray, ...]:
    X, y = load_breast_cancer(return_X_y=True)
    return tuple(train_test_split(X, y, test_size=0.3, random_state=0, stratify=y))


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name == "tripwire"]


def _train(tmp_path: Path, dtr: Any, evals: list[tuple[Any, str]], rounds: int, config: Any = None,
           params: dict[str, Any] | None = None, **kw: Any) -> tuple[Any, TripwireCallback, dict[str, Any]]:
    cb = TripwireCallback(RECOMMENDED if config is None else config, out_dir=str(tmp_path / "run"), **kw)
    result: dict[str, Any] = {}
    booster = xgb.train(params or PARAMS, dtr, rounds, evals=evals, evals_result=result, callbacks=[cb],
                        verbose_eval=False)
    return booster, cb, result


def _leaks(cb: TripwireCallback) -> list[tripwire.Finding]:
    return [f for f in cb.findings if f.rule == "eval_is_train"]


# ------------------------------------------------------------------- finding 2: the same data
def test_the_training_dmatrix_as_validation_set_is_said_and_recorded(tmp_path: Path, caplog) -> None:
    Xtr, _, ytr, _ = _bc()
    dtr = xgb.DMatrix(Xtr, label=ytr)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        booster, cb, _ = _train(tmp_path, dtr, [(dtr, "train"), (dtr, "validation")], 40)
    assert booster.num_boosted_rounds() == 40  # (a WARNING and a finding: no action)
    [f] = _leaks(cb)
    assert (f.step, f.mode, f.severity) == (0, "train", "warning")
    assert f.details["sets"] == ["validation"] and f.details["evidence"] == "same_data"
    assert f.message.startswith("the evaluation set 'validation' is the training data (the DMatrix given as dtrain)")
    assert "no held-out data" in f.message and '"validation" numbers is a training number' in f.message
    assert "overfit reads no validation metric" in f.message and "class_imbalance gets no validation labels" in f.message
    assert "evals=[(dtrain, 'train'), (dvalid, 'validation')]" in f.message
    said = _warnings(caplog)
    assert sum("is the training data" in m for m in said) == 1
    # nothing blames names the user never wrote, and nothing points overfit at a training metric
    assert not [m for m in said if "did you mean" in m or "train='loss'" in m or "val_loss" in m], said
    assert not [m for m in said if "no validation DMatrix" in m], said  # (said by the eval_is_train WARNING)
    run = tripwire.open_run(str(tmp_path / "run"))
    assert [(x.rule, x.step) for x in run.findings if x.rule == "eval_is_train"] == [("eval_is_train", 0)]
    assert run.status == "complete"


def test_sklearn_eval_set_of_the_training_arrays_alone_is_said(tmp_path: Path, caplog) -> None:
    Xtr, _, ytr, _ = _bc()
    cb = TripwireCallback(RECOMMENDED, out_dir=str(tmp_path / "run"))
    model = xgb.XGBClassifier(n_estimators=30, max_depth=3, learning_rate=0.3, n_jobs=1, callbacks=[cb])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(Xtr, ytr, eval_set=[(Xtr, ytr)], verbose=False)
    [f] = _leaks(cb)
    assert f.step == 0 and f.details["sets"] == ["train"]
    assert f.message.startswith("the evaluation set 'validation_0' (recorded as 'train') is the training data "
                                "(the data given to fit)")
    assert "fit(X_train, y_train, eval_set=[(X_train, y_train), (X_valid, y_valid)])" in f.message
    said = _warnings(caplog)
    assert not [m for m in said if "did you mean 'train-logloss'" in m or "train='loss'" in m], said


@pytest.mark.parametrize("case", ["held_out", "sklearn_pair", "train_alone", "dtrain_alone"])
def test_a_training_set_beside_or_without_held_out_data_is_not_flagged(tmp_path: Path, case: str) -> None:
    Xtr, Xva, ytr, yva = _bc()
    if case == "sklearn_pair":
        cb = TripwireCallback(RECOMMENDED, out_dir=str(tmp_path / "run"))
        xgb.XGBClassifier(n_estimators=20, max_depth=3, n_jobs=1, callbacks=[cb]).fit(
            Xtr, ytr, eval_set=[(Xtr, ytr), (Xva, yva)], verbose=False)
    else:
        dtr, dva = xgb.DMatrix(Xtr, label=ytr), xgb.DMatrix(Xva, label=yva)
        evals = {"held_out": [(dtr, "train"), (dva, "validation")], "train_alone": [(dtr, "train")],
                 "dtrain_alone": [(dtr, "dtrain")]}[case]
        _, cb, _ = _train(tmp_path, dtr, evals, 20)
    assert _leaks(cb) == []


def test_which_sets_count_as_held_out_data_meant() -> None:
    def sets(*spec: tuple[str, str, str, bool]) -> list[EvalSet]:
        return [EvalSet(raw, name, mode, i, is_train) for i, (raw, name, mode, is_train) in enumerate(spec)]

    flagged = train_data_as_held_out
    assert [s.raw for s in flagged(sets(("train", "train", "train", True), ("validation", "validation", "train", True)))] \
        == ["validation"]
    assert [s.raw for s in flagged(sets(("dtrain", "dtrain", "train", True), ("dtest", "dtest", "train", True)))] \
        == ["dtrain", "dtest"]
    # a set named for held-out data is flagged beside a real held-out set too
    assert [s.raw for s in flagged(sets(("train", "train", "train", True), ("valid", "valid", "eval", False),
                                        ("test", "test", "train", True)))] == ["test"]
    # eval_names renamed the training data 'validation'
    assert [s.raw for s in flagged(sets(("validation_0", "validation", "train", True)))] == ["validation_0"]
    assert flagged(sets(("validation_0", "train", "train", True), ("validation_1", "validation", "eval", False))) == []
    assert flagged(sets(("train", "train", "train", True))) == []
    assert flagged(sets(("training", "training", "train", True))) == []
    assert flagged(sets(("valid", "valid", "eval", None))) == []  # (not known to be the training data)


# ------------------------------------------------------------- finding 3: the rows reordered
def test_the_training_rows_reordered_as_validation_are_said_once(tmp_path: Path, caplog) -> None:
    Xtr, _, ytr, _ = _bc()
    p = np.random.default_rng(0).permutation(len(ytr))
    dtr, dval = xgb.DMatrix(Xtr, label=ytr), xgb.DMatrix(Xtr[p], label=ytr[p])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        booster, cb, result = _train(tmp_path, dtr, [(dtr, "train"), (dval, "validation")], 60,
                                     params={**PARAMS, "max_depth": 6, "eta": 0.3})
    assert booster.num_boosted_rounds() == 60
    [f] = _leaks(cb)
    assert f.step == 4 and f.details["evidence"] == "same_metrics" and f.details["rounds"] == 5
    assert f.details["metrics"] == ["validation-logloss"]
    assert f.message.startswith("the evaluation set 'validation' holds the training data: its metrics equal those of "
                                "the training set 'train' (to 1e-6 relative) at every round so far, rounds 0-4")
    assert f"it has the training set's {len(ytr)} rows and labels in another order" in f.message
    assert "overfit compares the training metric with itself and can never fire" in f.message
    assert "no held-out data" in f.message  # (the same family as finding 2's)
    assert sum("holds the training data" in m for m in _warnings(caplog)) == 1


def test_a_healthy_booster_whose_validation_loss_tracks_training_closely_is_not_flagged(tmp_path: Path) -> None:
    # 40,000 rows, stumps: the validation logloss stays within about 1% of the training one
    X, y = make_classification(n_samples=40000, n_features=10, n_informative=5, random_state=0)
    dtr, dva = xgb.DMatrix(X[:20000], label=y[:20000]), xgb.DMatrix(X[20000:], label=y[20000:])
    _, cb, result = _train(tmp_path, dtr, [(dtr, "train"), (dva, "validation")], 30,
                           params={**PARAMS, "max_depth": 1, "eta": 0.1})
    t, v = np.asarray(result["train"]["logloss"]), np.asarray(result["validation"]["logloss"])
    assert np.max(np.abs(t - v) / t) < 0.02  # (the case: close tracking)
    assert _leaks(cb) == []


def test_equal_metrics_without_the_training_rows_are_not_flagged(tmp_path: Path) -> None:
    # no feature to split on and the same class balance: a constant model's logloss is the same on both
    # sets at every round, but the validation set has its own rows (another count)
    y_tr, y_va = np.tile([0.0, 1.0], 200), np.tile([0.0, 1.0], 100)
    dtr = xgb.DMatrix(np.full((400, 3), np.nan), label=y_tr)
    dva = xgb.DMatrix(np.full((200, 3), np.nan), label=y_va)
    _, cb, result = _train(tmp_path, dtr, [(dtr, "train"), (dva, "validation")], 10,
                           config={"rules": [{"name": "overfit"}]})
    assert result["train"]["logloss"] == result["validation"]["logloss"]  # (the case: equal at every round)
    assert _leaks(cb) == []


# -------------------------------------------------------------- the unread-name "did you mean"
def test_a_validation_name_is_never_pointed_at_a_training_metric(tmp_path: Path, caplog) -> None:
    Xtr, Xva, ytr, yva = _bc()
    dtr, dva = xgb.DMatrix(Xtr, label=ytr), xgb.DMatrix(Xva, label=yva)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _train(tmp_path, dtr, [(dtr, "train"), (dva, "holdout")], 3,
               config={"rules": [{"name": "overfit", "validation": "logloss"}]})
    [said] = [m for m in _warnings(caplog) if "validation='logloss'" in m]
    assert "matches no loss or metric of this run" in said and "did you mean 'train-" not in said
    assert "holdout-logloss" in said


def test_without_held_out_data_the_defaults_are_said_as_such(tmp_path: Path, caplog) -> None:
    Xtr, _, ytr, _ = _bc()
    dtr = xgb.DMatrix(Xtr, label=ytr)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _, cb, _ = _train(tmp_path, dtr, [(dtr, "train")], 3, config={"rules": [{"name": "overfit"}]})
    said = [m for m in _warnings(caplog) if "overfit" in m]
    assert len(said) == 1, said
    assert ("rule 'overfit' reads nothing: no evaluation set is held out (evaluation sets: train, all of them the "
            "training data), so XGBoost logs no validation metric for its defaults (train='loss', "
            "validation='val_loss')") in said[0]
    assert "did you mean" not in said[0] and "evals=[(dtrain, 'train'), (dvalid, 'validation')]" in said[0]
    assert _leaks(cb) == []


# ------------------------------------------------------------------ finding 7: overfit's steps
def test_overfit_names_the_round_of_the_best_validation_value(tmp_path: Path) -> None:
    X, y = make_classification(n_samples=1500, n_features=20, n_informative=5, flip_y=0.25, random_state=0)
    dtr, dva = xgb.DMatrix(X[:1000], label=y[:1000]), xgb.DMatrix(X[1000:], label=y[1000:])
    booster, cb, result = _train(tmp_path, dtr, [(dtr, "train"), (dva, "validation")], 300,
                                 config={"save": {"interval": 1}, "rules": [{"name": "overfit", "actions": ["stop_training"]}]},
                                 params={**PARAMS, "max_depth": 6, "eta": 0.3})
    f = cb.stopped_by
    assert f is not None and f.rule == "overfit"
    val = np.asarray(result["validation"]["logloss"][: f.step + 1])
    best = int(np.argmin(val))
    assert f"its lowest value {fmt(val[best])}, at step {best})" in f.message
    assert "evaluation" not in f.message.split("Usual fixes")[0]

"""Trial 27w, follow-up of trial 27f: ``tripwire watch`` on an XGBoost run that evaluated no held-out
data said overfit's ``train='loss'`` matched no loss or metric (and ``validation='val_loss'`` read
nothing, no evaluation recorded), where the training's callback had pointed no default at XGBoost's
metrics and said one WARNING: no evaluation set is held out (or, where a set meant as held-out data
was the training data, its ``eval_is_train`` finding). The watch now says what the callback says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

from sklearn.datasets import load_breast_cancer  # noqa: E402

import tripwire  # noqa: E402
from tripwire._cli import main  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402

CONFIG = {"save": {"interval": 1}, "rules": [{"name": "overfit"}, {"name": "class_imbalance", "actions": ["log"]}]}


def _data() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    return X[:300], y[:300]


def _unmatched_loss(err: str) -> list[str]:
    return [line for line in err.splitlines() if "train='loss' matches no" in line or "read nothing: no evaluation "
            "(mode eval)" in line or "did you mean" in line]


def test_sklearn_eval_set_of_the_training_data_is_said_as_the_callback_says_it(tmp_path: Path, capsys) -> None:
    X, y = _data()
    cb = TripwireCallback(CONFIG, out_dir=str(tmp_path / "run"))
    xgb.XGBClassifier(n_estimators=20, max_depth=3, n_jobs=1, callbacks=[cb]).fit(X, y, eval_set=[(X, y)],
                                                                                  verbose=False)
    assert [f.rule for f in cb.findings] == ["eval_is_train"]
    assert main(["watch", str(tmp_path / "run"), "--once"]) == 1  # (the check: severity warning)
    err = capsys.readouterr().err
    assert _unmatched_loss(err) == [], err
    assert ("tripwire watch: rule 'overfit' reads nothing: no evaluation set is held out (evaluation sets: train, all "
            "of them the training data), so XGBoost logged no validation metric for its defaults (train='loss', "
            "validation='val_loss'); the training's eval_is_train check (above) names the evaluation set that is the "
            "training data, and the fix") in err.splitlines(), err
    # class_imbalance: not "capture it in the training's config" (the callback captures labels of held-out data)
    [labels] = [line for line in err.splitlines() if "'class_imbalance'" in line]
    assert "capture it in the training's config" not in labels
    assert labels.endswith("the XGBoost integration captures labels and predictions of a held-out evaluation set only, "
                           "and no evaluation set is held out (evaluation sets: train, all of them the training data); "
                           "the training's eval_is_train check (above) names the evaluation set that is the training "
                           "data, and the fix"), labels


def test_xgb_train_with_the_training_data_alone_says_how_to_hold_data_out(tmp_path: Path, capsys) -> None:
    X, y = _data()
    dtr = xgb.DMatrix(X, label=y)
    cb = TripwireCallback({"save": {"interval": 1}, "rules": [{"name": "overfit"}]}, out_dir=str(tmp_path / "run"))
    xgb.train({"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 3, "nthread": 1}, dtr, 10,
              evals=[(dtr, "train")], callbacks=[cb], verbose_eval=False)
    assert cb.findings == []
    assert main(["watch", str(tmp_path / "run"), "--once"]) == 3
    captured = capsys.readouterr()
    assert _unmatched_loss(captured.err) == [], captured.err
    assert ("tripwire watch: rule 'overfit' reads nothing: no evaluation set is held out (evaluation sets: train, all "
            "of them the training data), so XGBoost logged no validation metric for its defaults (train='loss', "
            "validation='val_loss'); evaluate data left out of training: xgb.train(..., evals=[(dtrain, 'train'), "
            "(dvalid, 'validation')])") in captured.err, captured.err
    assert captured.out.rstrip().endswith("not everything judged (stderr says why); exit status 3")


def test_a_held_out_set_keeps_the_usual_unmatched_names(tmp_path: Path, capsys) -> None:
    # with held-out data the callback bound overfit's defaults: nothing unmatched, nothing said of held-out data
    X, y = _data()
    dtr, dva = xgb.DMatrix(X[:200], label=y[:200]), xgb.DMatrix(X[200:], label=y[200:])
    cb = TripwireCallback({"save": {"interval": 1}, "rules": [{"name": "overfit"}]}, out_dir=str(tmp_path / "run"))
    xgb.train({"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 3, "nthread": 1}, dtr, 10,
              evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    assert main(["watch", str(tmp_path / "run"), "--once"]) == 0
    assert "held out" not in capsys.readouterr().err
    # a validation name of the user's that matches nothing is still said as such
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rules: [{name: overfit, validation: holdout-logloss}]\n")
    assert main(["watch", str(tmp_path / "run"), "--once", "--config", str(cfg)]) == 3
    assert "validation='holdout-logloss' matches no loss or metric" in capsys.readouterr().err
    assert tripwire.open_run(tmp_path / "run").status == "complete"

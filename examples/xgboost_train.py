"""tripwire with XGBoost: a planted fault stops boosting early; its healthy twin runs to the end.

    python examples/xgboost_train.py          # a few seconds; runs go to ./tripwire-runs/xgb-*-<date>-<time>

Needs: pip install -e ".[xgboost]" (or ".[xgboost-cpu]"; in a clone: XGBoost, scikit-learn for part 2's
sklearn API)

1. ``xgb.train`` with ``max_depth=12`` on noisy labels: the ``tree_depth`` rule stops it.
2. The sklearn API with a feature that leaks the label: ``feature_importance_overweight`` stops it
   (``eval_set=[(X, y), (Xv, yv)]`` is recorded as ``train-*`` and ``validation-*``).
3. The healthy twin of 1 (``max_depth=2``, ``eta=0.1``) trains all its rounds.
"""

from __future__ import annotations

import time

import numpy as np
import xgboost as xgb

import tripwire
from tripwire.integrations.xgboost import TripwireCallback

STOP = ["stop_training"]


def noisy(n: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    y = ((X[:, 0] + rng.normal(scale=1.5, size=n)) > 0).astype(float)
    return X, y


def deep_trees(max_depth: int, eta: float, out_dir: str) -> None:
    X, y = noisy()
    dtrain, dvalid = xgb.DMatrix(X[:800], label=y[:800]), xgb.DMatrix(X[800:], label=y[800:])
    cb = TripwireCallback(out_dir=out_dir, save_interval=1, rules=[
        {"name": "tree_depth", "max_depth": 6, "actions": STOP},
        {"name": "overfit", "train": "train-logloss", "validation": "validation-logloss", "actions": STOP},
    ])
    booster = xgb.train({"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": max_depth,
                         "eta": eta, "nthread": 1}, dtrain, 50, evals=[(dtrain, "train"), (dvalid, "validation")],
                        callbacks=[cb], verbose_eval=False)
    print(f"max_depth={max_depth}: {booster.num_boosted_rounds()} of 50 rounds; stopped by: {cb.stopped_by}")


def leaking_feature(out_dir: str) -> None:
    X, y = noisy()
    X = np.column_stack([X, y + np.random.default_rng(1).normal(scale=0.05, size=len(y))])  # the leak
    cb = TripwireCallback(out_dir=out_dir, save_interval=1,
                          rules=[{"name": "feature_importance_overweight", "start_step": 2, "actions": STOP}])
    model = xgb.XGBClassifier(n_estimators=50, max_depth=3, n_jobs=1, callbacks=[cb])
    X_train, y_train, X_valid, y_valid = X[:800], y[:800], X[800:], y[800:]
    # the same X_train/y_train objects as in fit(): XGBoost reuses the training DMatrix, and tripwire
    # records validation_0 as train-* and validation_1 as validation-*
    model.fit(X_train, y_train, eval_set=[(X_train, y_train), (X_valid, y_valid)], verbose=False)
    run = tripwire.open_run(out_dir)
    print(f"sklearn API: {model.get_booster().num_boosted_rounds()} of 50 rounds; metrics recorded: "
          f"{run.tensor_names(collection='metrics')}; stopped by: {cb.stopped_by}")


if __name__ == "__main__":
    stamp = time.strftime("%Y%m%d-%H%M%S")  # a new run each time (a second run would append to the first)
    deep_trees(12, 0.3, f"tripwire-runs/xgb-deep-{stamp}")
    leaking_feature(f"tripwire-runs/xgb-leak-{stamp}")
    deep_trees(2, 0.1, f"tripwire-runs/xgb-healthy-{stamp}")

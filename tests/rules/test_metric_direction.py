"""Which metrics are better high: what overfit, overtraining and the XGBoost callback infer from a
metric's name (XGBoost's and Keras's names, sklearn's scorers)."""

from __future__ import annotations

import pytest

from tripwire.rules._common import higher_is_better

HIGH = ["auc", "validation-auc", "train-aucpr", "map", "map@5", "map@5-", "ndcg", "ndcg@10", "validation-ndcg@32",
        "pre", "pre@5", "validation-pre@10", "accuracy", "val_accuracy", "f1", "val_f1_score", "recall", "precision",
        "interval-regression-accuracy", "r2", "balanced_accuracy_score", "top_5", "spearman"]
LOW = ["logloss", "validation-logloss", "mlogloss", "rmse", "mae", "error", "error@0.7", "merror", "rmsle", "mape",
       "mphe", "poisson-nloglik", "gamma-deviance", "tweedie-nloglik@1.5", "cox-nloglik", "aft-nloglik", "loss",
       "val_loss", "mean_squared_error", "prediction_error", "unknown_metric"]


@pytest.mark.parametrize("name", HIGH)
def test_better_high(name: str) -> None:
    assert higher_is_better(name), name


@pytest.mark.parametrize("name", LOW)
def test_better_low(name: str) -> None:
    assert not higher_is_better(name), name

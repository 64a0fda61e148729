"""Tune XGBoost on an imbalanced generated set (~11% positives) with asynchronous Hyperband.

    python examples/tune_xgboost.py        # about a minute on 2 cores; writes tune_xgboost.db
    tripwire tune-report tune_xgboost.db
"""

from __future__ import annotations

from typing import Any

from tripwire.tune import Continuous, Hyperband, Integer, Tuner


def load_data() -> dict[str, Any]:
    """Runs once per worker process; the result is ``trial.context``."""
    import xgboost as xgb
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=4000, n_features=20, n_informative=8, weights=[0.89], random_state=0)
    return {"dtrain": xgb.DMatrix(X[:3000], label=y[:3000]), "dvalid": xgb.DMatrix(X[3000:], label=y[3000:])}


def train(params: dict[str, Any], trial: Any) -> float:
    import xgboost as xgb

    class Report(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: dict[str, Any]) -> bool:
            return bool(trial.report(step=epoch + 1, value=evals_log["valid"]["auc"][-1]))

    log: dict[str, Any] = {}
    xgb.train({"objective": "binary:logistic", "eval_metric": "auc", "nthread": 1, **params},
              trial.context["dtrain"], num_boost_round=trial.max_resource,
              evals=[(trial.context["dvalid"], "valid")], evals_result=log, callbacks=[Report()],
              verbose_eval=False)
    return float(log["valid"]["auc"][-1])


if __name__ == "__main__":
    tuner = Tuner(train, space={"eta": Continuous(0.01, 0.5, scale="log"), "max_depth": Integer(1, 8),
                                "subsample": Continuous(0.5, 1.0)},
                  objective="validation:auc", mode="max", setup=load_data,
                  strategy=Hyperband(min_resource=1, max_resource=81, reduction_factor=3),
                  max_jobs=40, max_parallel_jobs=2, seed=0, journal="tune_xgboost.db")
    result = tuner.fit()
    print(result.summary())

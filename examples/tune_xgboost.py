"""Tune XGBoost on an imbalanced generated set (~11% positives) with asynchronous Hyperband.

tripwire's XGBoost callback reports the validation AUC to the tuner every boosting round and stops
boosting when the scheduler stops the trial; the training code has no tuning logic of its own.

    python examples/tune_xgboost.py          # seconds to a minute on 2 cores; writes tune_xgboost.db
                                             # and each trial's run, tune_xgboost_runs/trial-<number>-<attempt>
    python examples/tune_xgboost.py --tpe    # BOHB-style sampler (pip install 'tripwire[bohb]')
    tripwire tune-report tune_xgboost.db

Needs: pip install -e ".[xgboost]" (or ".[xgboost-cpu]"; in a clone: XGBoost, scikit-learn for the data);
--tpe needs the bohb extra too.

Run it again after killing it (even with kill -9): it resumes from the journal with
``Tuner.resume("tune_xgboost.db").fit()``, which finds the journaled ``__main__:train`` and
``__main__:setup`` in this script (another script or a notebook passes them:
``Tuner.resume("tune_xgboost.db", train=train, setup=load_data)``); a finished job just
returns its result.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tripwire.tune import Continuous, Hyperband, Integer, Tuner

JOURNAL = "tune_xgboost_tpe.db" if "--tpe" in sys.argv else "tune_xgboost.db"  # one journal per sampler
RUNS = JOURNAL.removesuffix(".db") + "_runs"  # each trial's tripwire run: RUNS/trial-<number>-<attempt>


def load_data() -> dict[str, Any]:
    """Runs once per worker process; the result is ``trial.context``."""
    import xgboost as xgb
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=4000, n_features=20, n_informative=8, weights=[0.89], random_state=0)
    return {"dtrain": xgb.DMatrix(X[:3000], label=y[:3000]), "dvalid": xgb.DMatrix(X[3000:], label=y[3000:])}


def train(params: dict[str, Any], trial: Any) -> None:
    # (a no-op here: load_data() imported xgboost in this worker before its first trial. A trial_timeout
    # counts the imports done inside train: import a framework in setup() or at module level)
    import xgboost as xgb

    from tripwire.integrations.xgboost import TripwireCallback

    xgb.train({"objective": "binary:logistic", "eval_metric": "auc", "nthread": 1, **params},
              trial.context["dtrain"], num_boost_round=trial.max_resource,
              evals=[(trial.context["dvalid"], "validation")], verbose_eval=False,
              callbacks=[TripwireCallback(trial=trial, trial_metric="validation-auc",
                                          # a rerun (resume after a kill) is a new attempt: its own
                                          # run, not appended to the killed attempt's (repeated steps)
                                          out_dir=f"{RUNS}/trial-{trial.number}-{trial.attempt}")])
    return None  # the last reported AUC is the objective


if __name__ == "__main__":
    if os.path.exists(JOURNAL):
        # (the journal names __main__:train and __main__:setup: resumed in this script, it finds them here)
        result = Tuner.resume(JOURNAL).fit()
    else:
        tuner = Tuner(train, space={"eta": Continuous(0.01, 0.5, scale="log"), "max_depth": Integer(1, 8),
                                    "subsample": Continuous(0.5, 1.0)},
                      objective="validation-auc", mode="max", setup=load_data,
                      strategy=Hyperband(min_resource=1, max_resource=81, reduction_factor=3,
                                         sampler="tpe" if "--tpe" in sys.argv else "random"),
                      max_jobs=40, max_parallel_jobs=2, seed=0, journal=JOURNAL)
        result = tuner.fit()
    print(result.summary())

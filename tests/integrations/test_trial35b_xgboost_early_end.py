"""Trial 35b: a tuned XGBoost trial that XGBoost's ``EarlyStopping`` ended was journaled as a bare
``completed`` below ``max_resource``, though the callback knew why boosting stopped (its run's stop
reason). The callback given ``trial=`` tells the trial (``Trial.note_early_end``), as the Lightning
and Keras callbacks do; a trial that ran every round is told nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire.tune import Categorical, RandomSearch, Tuner  # noqa: E402


def train(params: dict[str, Any], trial: Any) -> None:
    from tripwire.integrations.xgboost import TripwireCallback

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 5))
    y = (x[:, 0] + rng.normal(scale=2.0, size=300) > 0).astype(int)
    dtrain, dvalid = xgb.DMatrix(x[:200], label=y[:200]), xgb.DMatrix(x[200:], label=y[200:])
    more = [xgb.callback.EarlyStopping(rounds=1, min_delta=10.0)] if params["early"] else []
    out = Path(os.environ["S35B_OUT"]) / f"trial-{trial.number}-{trial.attempt}"
    xgb.train({"objective": "binary:logistic", "eval_metric": "logloss", "nthread": 1, "max_depth": 2}, dtrain,
              num_boost_round=trial.max_resource, evals=[(dvalid, "validation")], verbose_eval=False,
              callbacks=[*more, TripwireCallback(out_dir=out, trial=trial, trial_metric="validation-logloss")])


def test_an_xgboost_trial_early_stopping_ended_says_so_in_its_reason(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("S35B_OUT", str(tmp_path))  # (the spawned workers inherit it)
    result = Tuner(train, {"early": Categorical([True, False])}, objective="validation-logloss", mode="min",
                   strategy=RandomSearch(max_resource=8), max_jobs=4, seed=3, journal=str(tmp_path / "j.db")).fit()
    assert all(t.status == "completed" for t in result.trials), [(t.status, t.error) for t in result.trials]
    early = [t for t in result.trials if t.params["early"]]
    full = [t for t in result.trials if not t.params["early"]]
    assert early and full, [t.params for t in result.trials]
    for t in early:
        assert t.resource < 8, (t.resource, t.reason)
        assert t.reason.startswith("completed: EarlyStopping(data_name='validation', metric_name='logloss'): "), t.reason
        run = tripwire.open_run(tmp_path / f"trial-{t.number}-1")
        assert t.reason[len("completed: "):].removesuffix("...") in run.stop_reasons[0], (run.stop_reasons, t.reason)
    for t in full:
        assert t.resource == 8 and t.reason == "reached max_resource=8", t.reason

"""Trial 33c F1: a round that XGBoost's ``EarlyStopping`` listed before tripwire ended (XGBoost calls the
callbacks until the first that asks to stop, so tripwire's ``after_iteration`` never saw it) is reported
to the tuner's trial when training ends; F4 (33zeta F3): ``trial_stopped`` is True once a report returned
True, also at ``max_resource``."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

xgb = pytest.importorskip("xgboost")
sklearn_datasets = pytest.importorskip("sklearn.datasets")

import tripwire  # noqa: E402
import tripwire.tune  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402

PARAMS = {"objective": "binary:logistic", "eval_metric": "auc", "nthread": 1, "max_depth": 3, "eta": 0.9}


def _data() -> tuple[Any, Any, Any, Any]:
    X, y = sklearn_datasets.make_classification(1500, 20, n_informative=6, flip_y=0.1, random_state=0)
    return X[:1050], X[1050:], y[:1050], y[1050:]


def _train(cb: TripwireCallback, rounds: int, evals_result: dict[str, Any]) -> Any:
    Xtr, Xva, ytr, yva = _data()
    es = xgb.callback.EarlyStopping(rounds=2, metric_name="auc", data_name="validation")
    dtrain = xgb.DMatrix(Xtr, label=ytr)
    return xgb.train(PARAMS, dtrain, rounds, evals=[(dtrain, "train"), (xgb.DMatrix(Xva, label=yva), "validation")],
                     callbacks=[es, cb], evals_result=evals_result, verbose_eval=False)


def train_for_tuner(params: dict[str, Any], trial: Any) -> float:
    out = Path(os.environ["TRIPWIRE_T33ZETA_OUT"])  # (spawned workers inherit it)
    er: dict[str, Any] = {}
    cb = TripwireCallback(trial=trial, trial_metric="validation-auc", out_dir=out / f"t{trial.number}")
    b = _train(cb, trial.max_resource, er)
    (out / f"t{trial.number}.json").write_text(json.dumps(
        {"rounds": b.num_boosted_rounds(), "auc": er["validation"]["auc"], "trial_stopped": cb.trial_stopped,
         "stop_reason": cb.stop_reason}))
    return er["validation"]["auc"][-1]


def test_trial33zeta_early_stopped_round_is_reported_to_the_journal(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIPWIRE_T33ZETA_OUT", str(tmp_path))
    journal = tmp_path / "j.db"
    result = tripwire.tune.Tuner(
        train_for_tuner, space={"eta": tripwire.tune.Continuous(0.8, 1.0)}, objective="validation:auc", mode="max",
        strategy=tripwire.tune.Hyperband(min_resource=1, max_resource=30, reduction_factor=3),
        max_jobs=1, max_parallel_jobs=1, seed=0, journal=str(journal)).fit()
    assert [t.status for t in result.trials] == ["completed"], [t.error for t in result.trials]
    trained = json.loads((tmp_path / "t0.json").read_text())
    rounds = trained["rounds"]
    assert rounds < 30 and "EarlyStopping" in trained["stop_reason"]  # EarlyStopping ended it
    assert trained["trial_stopped"] is False  # not the tuner
    with sqlite3.connect(journal) as c:
        reports = c.execute("select step, value from reports where trial=0 order by step").fetchall()
    # every round trained is reported, the last one (ended by EarlyStopping) too, with its own value
    assert [s for s, _ in reports] == list(range(1, rounds + 1))
    assert [v for _, v in reports] == pytest.approx(trained["auc"])
    assert result.trials[0].resource == rounds and result.resource_used == rounds
    assert result.trials[0].value == pytest.approx(reports[-1][1])
    assert tripwire.open_run(tmp_path / "t0").status == "stopped"


def test_trial33zeta_early_stopped_round_reported_sklearn_api(tmp_path: Path) -> None:
    Xtr, Xva, ytr, yva = _data()
    # EarlyStopping passed before tripwire (docs/xgboost.md): its last round reaches the trial at the end
    trial = tripwire.tune.Trial(0, {}, min_resource=1, max_resource=30)
    cb = TripwireCallback(trial=trial, trial_metric="validation-auc", out_dir=tmp_path / "a")
    model = xgb.XGBClassifier(n_estimators=30, max_depth=3, learning_rate=0.9, n_jobs=1, eval_metric="auc",
                              callbacks=[xgb.callback.EarlyStopping(rounds=2), cb])
    model.fit(Xtr, ytr, eval_set=[(Xtr, ytr), (Xva, yva)], verbose=False)
    rounds = model.get_booster().num_boosted_rounds()
    assert rounds < 30 and trial.last_step == rounds
    # early_stopping_rounds= adds EarlyStopping after tripwire: every round was reported already
    trial = tripwire.tune.Trial(1, {}, min_resource=1, max_resource=30)
    cb = TripwireCallback(trial=trial, trial_metric="validation-auc", out_dir=tmp_path / "b")
    model = xgb.XGBClassifier(n_estimators=30, max_depth=3, learning_rate=0.9, n_jobs=1, eval_metric="auc",
                              early_stopping_rounds=2, callbacks=[cb])
    model.fit(Xtr, ytr, eval_set=[(Xtr, ytr), (Xva, yva)], verbose=False)
    rounds = model.get_booster().num_boosted_rounds()
    assert rounds < 30 and trial.last_step == rounds


def test_trial33zeta_catch_up_report_at_max_resource_sets_trial_stopped(tmp_path: Path) -> None:
    rounds = _train(TripwireCallback(out_dir=tmp_path / "free"), 30, {}).num_boosted_rounds()
    assert rounds < 30
    # the trial's budget is the round EarlyStopping ends at: its report (made when training ends)
    # returns True (reached max_resource), and trial_stopped says so
    trial = tripwire.tune.Trial(0, {}, min_resource=1, max_resource=rounds)
    cb = TripwireCallback(trial=trial, trial_metric="validation-auc", out_dir=tmp_path / "t")
    er: dict[str, Any] = {}
    assert _train(cb, 30, er).num_boosted_rounds() == rounds
    assert trial.last_step == rounds and trial.stop_reason == f"reached max_resource={rounds}"
    assert cb.trial_stopped is True
    assert "EarlyStopping" in cb.stop_reason  # the training's own stop reason is kept

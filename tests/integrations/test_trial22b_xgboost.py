"""Trial 22b's XGBoost finding: ``trial_metric`` given as a metric name alone (``"auc"``, as
XGBoost's ``eval_metric`` names it) was refused by the constructor, with an example
(``validation-auc``) of a set the training did not have. It now reads that metric of the
validation set (``validation_set``, by default the last set that is not the training data, the one
XGBoost's early stopping watches) and says which name it read; a name that matches nothing fails
at the first round with the available names and an example from this training.
``<evalset>-<metric>`` works as before."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import tripwire  # noqa: E402
from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402

PARAMS = {"objective": "binary:logistic", "eval_metric": ["logloss", "auc"], "max_depth": 2, "nthread": 1, "seed": 0}


class Recorder:
    """A trial that records what it is told and never stops."""

    def __init__(self) -> None:
        self.reports: list[tuple[int, float]] = []

    def report(self, step: int, value: float) -> bool:
        self.reports.append((step, value))
        return False


def _data(n: int = 300) -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + rng.normal(scale=0.8, size=n) > 0).astype(np.float64)
    return xgb.DMatrix(X[:200], label=y[:200]), xgb.DMatrix(X[200:], label=y[200:])


def _train(cb: TripwireCallback, evals: list[tuple[Any, str]], params: dict[str, Any] | None = None,
           dtrain: Any = None) -> dict[str, Any]:
    result: dict[str, Any] = {}
    xgb.train(params or PARAMS, dtrain if dtrain is not None else evals[0][0], num_boost_round=3, evals=evals,
              evals_result=result, verbose_eval=False, callbacks=[cb])
    return result


def test_a_metric_name_alone_reads_the_validation_set_and_says_so(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    dtrain, dvalid = _data()
    trial = Recorder()
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=trial, trial_metric="auc")
    with caplog.at_level(logging.INFO, logger="tripwire"):
        result = _train(cb, [(dtrain, "train"), (dvalid, "valid")])
    assert [s for s, _ in trial.reports] == [1, 2, 3]
    assert [v for _, v in trial.reports] == pytest.approx(result["valid"]["auc"])
    said = [r.getMessage() for r in caplog.records if "the trial is told" in r.getMessage()]
    assert said == ["tripwire: the trial is told valid-auc every round (trial_metric 'auc': that metric of the "
                    "validation set)"]
    assert tripwire.open_run(tmp_path / "run").trial["metric"] == "valid-auc"


def test_the_default_metric_is_named_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtrain, dvalid = _data()
    trial = Recorder()
    with caplog.at_level(logging.INFO, logger="tripwire"):
        result = _train(TripwireCallback(out_dir=tmp_path / "run", trial=trial), [(dtrain, "train"), (dvalid, "valid")])
    assert [v for _, v in trial.reports] == pytest.approx(result["valid"]["auc"])  # as before
    said = [r.getMessage() for r in caplog.records if "the trial is told" in r.getMessage()]
    assert said == ["tripwire: the trial is told valid-auc every round (trial_metric not given: the last metric of "
                    "the last evaluation set, XGBoost's early-stopping convention)"]
    assert tripwire.open_run(tmp_path / "run").trial["metric"] == "valid-auc"


def test_a_metric_name_alone_skips_a_training_set_listed_last(tmp_path: Path) -> None:
    """The validation set is the last set that is not the training data (XGBoost lists sets in any order)."""
    dtrain, dvalid = _data()
    trial = Recorder()
    result = _train(TripwireCallback(out_dir=tmp_path / "a", trial=trial, trial_metric="logloss"),
                    [(dvalid, "valid"), (dtrain, "train")], dtrain=dtrain)
    assert [v for _, v in trial.reports] == pytest.approx(result["valid"]["logloss"])
    # validation_set= names the set
    trial = Recorder()
    result = _train(TripwireCallback(out_dir=tmp_path / "b", trial=trial, trial_metric="auc", validation_set="second"),
                    [(dtrain, "train"), (dvalid, "second"), (dvalid, "third")], dtrain=dtrain)
    assert [v for _, v in trial.reports] == pytest.approx(result["second"]["auc"])


def test_a_metric_name_with_a_dash(tmp_path: Path) -> None:
    """XGBoost's own names may hold a '-' (poisson-nloglik): read as the validation set's metric."""
    dtrain, dvalid = _data()
    trial = Recorder()
    params = {"objective": "count:poisson", "eval_metric": "poisson-nloglik", "nthread": 1, "max_depth": 2}
    result = _train(TripwireCallback(out_dir=tmp_path / "run", trial=trial, trial_metric="poisson-nloglik"),
                    [(dtrain, "train"), (dvalid, "valid")], params)
    assert [v for _, v in trial.reports] == pytest.approx(result["valid"]["poisson-nloglik"])


@pytest.mark.parametrize(
    ("metric", "match"),
    [
        ("acc", r"trial_metric: got 'acc'; did you mean 'auc'\?; accepted: a metric of the validation set 'valid' "
                r"such as 'auc', or '<evalset>-<metric>' such as 'valid-auc'; available: train-logloss, train-auc, "
                r"valid-logloss, valid-auc$"),
        ("error", r"trial_metric: got 'error'.*such as 'auc'.*such as 'valid-auc'; available: train-logloss, "),
        ("validation-auc", r"trial_metric: got 'validation-auc'; did you mean 'valid-auc'\?.*available: "),
    ],
)
def test_a_name_that_matches_nothing_lists_this_trainings_names(tmp_path: Path, metric: str, match: str) -> None:
    dtrain, dvalid = _data()
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=Recorder(), trial_metric=metric)  # not refused here
    with pytest.raises(ConfigError, match=match) as info:
        _train(cb, [(dtrain, "train"), (dvalid, "valid")])
    assert "such as 'validation-auc'" not in str(info.value)  # no set of that name here
    assert tripwire.open_run(tmp_path / "run").status == "failed"


def test_only_the_training_data_reads_its_metric_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtrain, _ = _data()
    trial = Recorder()
    with caplog.at_level(logging.INFO, logger="tripwire"):
        cb = TripwireCallback(out_dir=tmp_path / "run", trial=trial, trial_metric="auc")
        result = _train(cb, [(dtrain, "train")])
    assert [v for _, v in trial.reports] == pytest.approx(result["train"]["auc"])
    assert "the trial is told train-auc every round (trial_metric 'auc': that metric of the last set, the training " \
           "data: no other set)" in caplog.text


def test_no_evaluation_sets(tmp_path: Path) -> None:
    dtrain, _ = _data()
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=Recorder(), trial_metric="auc")
    with pytest.raises(ConfigError, match="trial_metric: got 'auc', but the training has no evaluation sets.*evals="):
        _train(cb, [], dtrain=dtrain)


def test_evalset_dash_metric_works_as_before(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dtrain, dvalid = _data()
    trial = Recorder()
    with caplog.at_level(logging.INFO, logger="tripwire"):
        result = _train(TripwireCallback(out_dir=tmp_path / "a", trial=trial, trial_metric="train-auc"),
                        [(dtrain, "train"), (dvalid, "valid")])
    assert [v for _, v in trial.reports] == pytest.approx(result["train"]["auc"])
    assert not [r for r in caplog.records if "the trial is told" in r.getMessage()]
    assert tripwire.open_run(tmp_path / "a").trial["metric"] == "train-auc"  # as given
    # XGBoost's set name and tripwire's (eval_names renames it)
    for i, given in enumerate(["valid-logloss", "holdout-logloss"]):
        trial = Recorder()
        result = _train(TripwireCallback(out_dir=tmp_path / f"b{i}", trial=trial, trial_metric=given,
                                         eval_names={"valid": "holdout"}), [(dtrain, "train"), (dvalid, "valid")])
        assert [v for _, v in trial.reports] == pytest.approx(result["valid"]["logloss"])


def train_for_tuner(params: dict[str, Any], trial: Any) -> None:
    dtrain, dvalid = _data()
    xgb.train({**PARAMS, **params, "eval_metric": "auc"}, dtrain, num_boost_round=trial.max_resource,
              evals=[(dvalid, "valid")], verbose_eval=False,
              callbacks=[TripwireCallback(trial=trial, trial_metric="auc",
                                          out_dir=str(Path(os.environ["TRIPWIRE_T22B_OUT"]) / f"t{trial.number}"))])


def test_issue_8_metric_name_under_the_tuner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repro of trial 22b (t34_xgb_metric_names.py auc): every trial failed with the ConfigError."""
    from tripwire.tune import Continuous, Hyperband, Tuner

    monkeypatch.setenv("TRIPWIRE_T22B_OUT", str(tmp_path))  # spawned workers inherit it
    result = Tuner(train_for_tuner, space={"eta": Continuous(0.05, 1, scale="log")}, objective="auc",
                   strategy=Hyperband(1, 3, 3), max_jobs=2, max_parallel_jobs=1, seed=0).fit()
    assert [t.status for t in result.trials] == ["completed", "completed"], [t.error for t in result.trials]
    assert tripwire.open_run(tmp_path / "t0").trial["metric"] == "valid-auc"

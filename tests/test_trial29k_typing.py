"""Trial 29k F4: the README's Tune example type-checks (``mypy --strict``): ``trial.budget`` is
``max_resource`` as an ``int`` (``max_resource`` is ``int | None``: None only under a strategy without
one, where ``budget`` is a ConfigError that says so); the framework callbacks' ``trial=`` is typed
(``TrialLike | None``: a tuner Trial or anything with ``report(step, value) -> bool``), not ``Any``."""

from __future__ import annotations

import importlib
import typing
from pathlib import Path
from typing import Any

import pytest

from tripwire import ConfigError
from tripwire.tune import Continuous, Hyperband, RandomSearch, Trial, Tuner
from tripwire.tune._trial import TrialLike


def train_for_the_budget(params: dict[str, Any], trial: Trial) -> float:
    """The README's loop, written with ``trial.budget``."""
    value = 0.0
    for epoch in range(1, trial.budget + 1):
        value = params["x"] * epoch
        if trial.report(step=epoch, value=value):
            break
    return value


def test_budget_is_max_resource_as_an_int() -> None:
    assert Trial(0, {}, min_resource=1, max_resource=9).budget == 9
    assert typing.get_type_hints(Trial.budget.fget)["return"] is int
    with pytest.raises(ConfigError, match=r"trial 3: trial\.budget: this strategy has no max_resource \(trial\."
                                          r"max_resource is None\); accepted: .*RandomSearch\(max_resource=N\)"):
        Trial(3, {}).budget


def test_a_hyperband_job_trains_each_trial_for_its_budget(tmp_path: Path) -> None:
    result = Tuner(train_for_the_budget, {"x": Continuous(0.1, 1.0)}, strategy=Hyperband(1, 9, 3), max_jobs=4,
                   max_parallel_jobs=2, seed=0, journal=str(tmp_path / "hb.db")).fit()
    assert result.counts()["failed"] == 0 and result.counts()["completed"] >= 1
    assert max(t.resource for t in result.trials) == 9


def test_budget_without_a_max_resource_fails_the_job_naming_it(tmp_path: Path) -> None:
    tuner = Tuner(train_for_the_budget, {"x": Continuous(0.1, 1.0)}, strategy=RandomSearch(), max_jobs=3,
                  max_parallel_jobs=1, seed=0, journal=str(tmp_path / "rs.db"))
    result = tuner.fit()  # (fail fast: the same ConfigError twice before any trial succeeded)
    assert result.counts()["failed"] == len(result.trials) == 2
    for trial in result.trials:
        assert trial.error is not None and trial.error.splitlines()[-1] == (
            f"tripwire._errors.ConfigError: trial {trial.number}: trial.budget: this strategy has no max_resource "
            "(trial.max_resource is None); accepted: a strategy with one: Hyperband, or RandomSearch(max_resource=N) "
            "or GridSearch(max_resource=N)")


@pytest.mark.parametrize("framework", ["lightning", "keras", "xgboost"])
def test_the_callbacks_trial_parameter_is_typed(framework: str) -> None:
    pytest.importorskip(framework)
    module = importlib.import_module(f"tripwire.integrations.{framework}")
    hints = typing.get_type_hints(module.TripwireCallback.__init__)
    assert hints["trial"] == TrialLike | None

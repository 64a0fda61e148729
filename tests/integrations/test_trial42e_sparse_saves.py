"""Trial 42e F1: ``loss_not_decreasing`` stopped healthy boosters whose train metric it judged on two
or three saved values: docs/xgboost.md's own entry ``{num_steps: 20}`` at the default save interval
(logloss 0.619 -> 0.289 -> 0.177, "fallen 71.43% in 20 steps, within the noise of its values"), and
the default rule set at ``save_interval`` 25 or 50 ("fallen 92.26%"). Two values hold no noise to
weigh a fall against, and three falling values are a falling trend (Mann-Kendall z -1.04): the fall
counts. A booster that learns nothing is still stopped, at the same round."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")
pytest.importorskip("sklearn")

from sklearn.datasets import make_classification  # noqa: E402

import tripwire  # noqa: E402


def _fit(tmp_path: Path, eta: float, rounds: int, save_interval: int, rule: object) -> tuple[list, int]:
    from tripwire.integrations.xgboost import TripwireCallback

    x, y = make_classification(n_samples=600, n_features=10, n_informative=5, random_state=0)
    dtr, dva = xgb.DMatrix(x[:400], y[:400]), xgb.DMatrix(x[400:], y[400:])
    cb = TripwireCallback(out_dir=tmp_path / f"run-{eta}-{save_interval}", rules=[rule], save_interval=save_interval)
    booster = xgb.train({"nthread": 1, "max_depth": 3, "eta": eta, "objective": "binary:logistic"}, dtr, rounds,
                        evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    return cb.findings, booster.num_boosted_rounds()


FIXED = {"name": "loss_not_decreasing", "num_steps": 20, "actions": ["log", "stop_training"]}
DEFAULT = {"name": "default", "actions": ["log", "stop_training"]}


@pytest.mark.parametrize(("rule", "save_interval", "rounds"), [(FIXED, 10, 60), (DEFAULT, 50, 200)])
def test_a_healthy_booster_saved_sparsely_is_not_stopped(tmp_path: Path, rule: dict, save_interval: int,
                                                        rounds: int) -> None:
    findings, trained = _fit(tmp_path, 0.1, rounds, save_interval, rule)
    assert [(f.rule, f.step, f.message[:80]) for f in findings] == [] and trained == rounds


@pytest.mark.parametrize(("save_interval", "stop_round"), [(10, 20), (50, 50)])
def test_a_booster_that_learns_nothing_is_still_stopped(tmp_path: Path, save_interval: int, stop_round: int) -> None:
    rule = {**FIXED, "num_steps": 20 if save_interval == 10 else 50}
    findings, trained = _fit(tmp_path, 1e-6, 200, save_interval, rule)
    assert [(f.rule, f.step) for f in findings] == [("loss_not_decreasing", stop_round)]
    assert trained == stop_round + 1


def _judge(values: list[float], steps: list[int]) -> list:
    """The findings of ``loss_not_decreasing`` judging at the last step (``num_steps``: its span)."""
    session = tripwire.Session(write=False, save_interval=1, collections=["metrics"],
                               rules=[{"name": "loss_not_decreasing", "loss": "train-logloss", "num_steps": steps[-1]}])
    for s, v in zip(steps, values):
        session.step("train", s, {"train-logloss": (np.float64(v), "metrics")})
    return session.findings


def test_two_or_three_values_that_fall_count_and_flat_ones_do_not() -> None:
    assert _judge([0.619, 0.289], [0, 50]) == []
    assert _judge([0.619, 0.289, 0.177], [0, 10, 20]) == []
    assert [f.rule for f in _judge([0.62, 0.619], [0, 50])] == ["loss_not_decreasing"]
    # (trial 42i: a noisy loss that fell and held; three values hold no measure of their noise apart from the fall)
    assert _judge([1.408, 0.193, 0.339], [0, 10, 20]) == []
    # (a value back above the start's threshold: no fall that held)
    assert [f.rule for f in _judge([0.619, 0.177, 0.60], [0, 10, 20])] == ["loss_not_decreasing"]
    assert [f.rule for f in _judge([1.0, 0.97, 0.98], [0, 10, 20])] == ["loss_not_decreasing"]
    # (trial 42l: a slow starter, flat and then falling, is spared; one that fell and came back is not)
    assert _judge([1.0, 1.0, 0.1], [0, 10, 20]) == []
    found = _judge([1.0, 0.1, 1.0], [0, 10, 20])
    assert [f.rule for f in found] == ["loss_not_decreasing"]
    # (trial 42m: the message said a Mann-Kendall trend and "many noisy values" of three values)
    assert ("3 values give no measure of their noise apart from the fall, so a fall counts where the last value is 5% "
            "below the first; here it is 1, against 1") in found[0].message

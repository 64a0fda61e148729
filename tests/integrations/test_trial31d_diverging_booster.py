"""Trial 31d F4 (documented, docs/xgboost.md "A booster that diverges from its first round"): a booster
at an eta far too high is found by the default set's loss_not_decreasing at 10% of the planned
rounds (not before round 50); an entry with ``num_steps: 20`` finds it at round 20 and spares a healthy booster; the opt-in
loss_diverging does not read a metric that rose from its first value as a fall."""

from __future__ import annotations

from pathlib import Path

import pytest

xgb = pytest.importorskip("xgboost")
from sklearn.datasets import load_breast_cancer  # noqa: E402

from tripwire.integrations.xgboost import TripwireCallback  # noqa: E402

RECOMMENDED = [{"name": "default", "actions": ["log", "stop_training"]},
               {"name": "tree_depth", "max_depth": 8, "actions": ["stop_training"]},
               {"name": "overfit", "actions": ["stop_training"]}]
SOONER = {"name": "loss_not_decreasing", "num_steps": 20, "actions": ["log", "stop_training"]}


def _fit(tmp_path: Path, eta: float, rules: list) -> tuple[int, list]:
    X, y = load_breast_cancer(return_X_y=True)
    d, dv = xgb.DMatrix(X[:420], label=y[:420]), xgb.DMatrix(X[420:], label=y[420:])
    cb = TripwireCallback(out_dir=tmp_path / f"run-{eta}-{len(rules)}", save_interval=1, rules=rules)
    b = xgb.train({"objective": "binary:logistic", "eta": eta, "max_depth": 3, "nthread": 1}, d, 300,
                  evals=[(d, "train"), (dv, "validation")], callbacks=[cb], verbose_eval=False)
    return b.num_boosted_rounds(), cb.findings


def test_the_recommended_config_finds_it_at_a_tenth_of_the_rounds(tmp_path: Path) -> None:
    rounds, found = _fit(tmp_path, 50.0, RECOMMENDED + [{"name": "loss_diverging", "actions": ["log"]}])
    assert [(f.rule, f.step) for f in found] == [("loss_not_decreasing", 50)], found
    assert rounds == 51


def test_a_fixed_window_finds_it_at_round_20_and_spares_a_healthy_booster(tmp_path: Path) -> None:
    rounds, found = _fit(tmp_path, 50.0, RECOMMENDED + [SOONER])
    assert [(f.rule, f.step) for f in found] == [("loss_not_decreasing", 20)] and rounds == 21, found
    rounds, found = _fit(tmp_path, 0.05, RECOMMENDED + [SOONER])
    assert (rounds, found) == (300, [])

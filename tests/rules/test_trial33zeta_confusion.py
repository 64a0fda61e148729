"""Trial 33c F3 (33zeta F2): ``confusion`` let off a class the model ranks well (AUC >= max_auc) in every
round, so a confusion that lasted the whole training never fired; the let-off is for a booster's first
rounds: the first rounds of the confusion, and after them while the class is on its way out of it."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire.rules.confusion import Confusion

xgb = pytest.importorskip("xgboost")
sklearn_datasets = pytest.importorskip("sklearn.datasets")
model_selection = pytest.importorskip("sklearn.model_selection")


def _boost(tmp_path: Any, relabel: float, rounds: int, eta: float, ncls: int = 4, weights: Any = None, sep: float = 2.0,
           seed: int = 5) -> tuple[Any, Any]:
    X, y = sklearn_datasets.make_classification(4000, 10, n_informative=6, n_classes=ncls, n_clusters_per_class=1,
                                                class_sep=sep, weights=weights, random_state=seed)
    Xtr, Xva, ytr, yva = model_selection.train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    rng = np.random.default_rng(0)
    ytr = ytr.copy()
    ytr[(ytr == 1) & (rng.random(len(ytr)) < relabel)] = 2  # (the training labels only: validation is clean)
    from tripwire.integrations.xgboost import TripwireCallback

    cb = TripwireCallback(rules=[{"name": "confusion", "actions": ["stop_training"]}], out_dir=tmp_path / "run")
    dtrain = xgb.DMatrix(Xtr, label=ytr)
    booster = xgb.train({"objective": "multi:softprob", "num_class": ncls, "max_depth": 3, "eta": eta, "nthread": 1},
                        dtrain, rounds, evals=[(dtrain, "train"), (xgb.DMatrix(Xva, label=yva), "validation")],
                        callbacks=[cb], verbose_eval=False)
    return cb, booster


def test_trial33zeta_a_confusion_ranked_well_that_stays_fires(tmp_path: Any) -> None:
    # 90% of class 1's training labels are class 2: ~95% of class 1 is predicted as 2 at every round,
    # while class 1's one-vs-rest AUC is 0.97 (it was let off in every round)
    cb, booster = _boost(tmp_path, 0.9, 60, 0.3)
    assert booster.num_boosted_rounds() < 60
    assert cb.stopped_by is not None and cb.stopped_by.rule == "confusion"
    message = cb.stopped_by.message
    assert re.search(r"of class 1 are predicted as class 2 .*class 1 is ranked well \(AUC 0\.9\d+, max_auc 0\.9\) but has "
                     r"been confused for \d+ rounds in a row", message), message
    # its first rounds are let off (FIRST_ROUNDS), then 3 rounds in a row (rounds=3)
    assert cb.stopped_by.step >= 5


def test_trial33zeta_healthy_boosters_stay_silent(tmp_path: Any) -> None:
    cb, booster = _boost(tmp_path / "a", 0.0, 60, 0.3)
    assert booster.num_boosted_rounds() == 60 and cb.findings == []
    # a rare class ranked well (AUC > 0.9) and predicted as a common one for its first ~85 of 150 rounds
    # at eta 0.01, learnt later: on its way all along
    cb, booster = _boost(tmp_path / "b", 0.0, 150, 0.01, weights=[0.55, 0.25, 0.15, 0.05], seed=0)
    assert booster.num_boosted_rounds() == 150 and [f.rule for f in cb.findings] == [], cb.findings


def _round(step: int, share_as_2: float, n: int = 400) -> list[Any]:
    """A train record, then one evaluation of 4 classes (100 samples each): class 1 predicted as class 2
    for ``share_as_2`` of its samples, its own score still ranking it first among the others (AUC 1)."""
    labels = np.repeat(np.arange(4), n // 4)
    scores = np.full((n, 4), 0.1)
    scores[np.arange(n), labels] = 0.7
    ones = np.flatnonzero(labels == 1)
    confused = ones[: int(round(share_as_2 * len(ones)))]
    scores[confused] = [0.02, 0.3, 0.66, 0.02]  # class 2 wins; class 1 still above every other sample's
    scores[ones[len(confused):]] = [0.02, 0.66, 0.3, 0.02]
    return [("train", step, {"loss": (np.float64(1.0), "losses")}),
            ("eval", step, {"labels": (labels, "labels"), "predictions": (scores, "predictions")})]


def _judge(shares: list[float], planned: int | None) -> list[tripwire.Finding]:
    session = tripwire.Session(write=False, rules=[Confusion()], save_interval=1)
    if planned is not None:
        session.set_planned_steps(planned)
    for step, share in enumerate(shares):
        for mode, s, tensors in _round(step, share):
            session.step(mode, s, dict(tensors))
    return session.findings


def test_trial33zeta_let_off_rounds_pace_and_planned_length() -> None:
    # the same confusion at every round: judged after its first 3 rounds, fires 3 rounds later
    found = _judge([0.95] * 20, planned=100)
    assert [f.rule for f in found][:1] == ["confusion"] and found[0].step == 5
    assert "has been confused for 6 rounds in a row" in found[0].message
    # falling fast enough to be undone within the training still planned: let off
    assert _judge([0.95 - 0.02 * k for k in range(20)], planned=100) == []
    # falling, but too slowly for the 30 rounds planned: judged
    assert [f.rule for f in _judge([0.95 - 0.002 * k for k in range(20)], planned=30)][:1] == ["confusion"]
    # without the planned length a class ranked well is let off in every round (as before)
    assert _judge([0.95] * 20, planned=None) == []
    # max_auc=1.0: the counts alone decide, from the first rounds (rounds=3)
    session = tripwire.Session(write=False, rules=[Confusion(max_auc=1.0)], save_interval=1)
    for step in range(5):
        for mode, s, tensors in _round(step, 0.95):
            session.step(mode, s, dict(tensors))
    assert [f.step for f in session.findings][:1] == [2]

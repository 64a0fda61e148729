"""Trial 24a: ``class_imbalance`` stopped healthy boosters at round 1. A 90:10 booster at eta 0.1
(max_depth 4) predicts about the class prior for every sample in its first rounds: minority recall 0
while its one-vs-rest AUC is 0.73-0.86, below ``max_auc=0.9``, so the AUC did not spare it, and 5 of
6 seeds were stopped at round 1 (minority recall 0.42-0.64 at the end). A class on course to cross
the decision threshold (its recall, or its scores, rising fast enough to get there within half the
training still planned) is not neglected; one whose scores do not move is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire.rules import ClassImbalance


def names(findings: list[tripwire.Finding]) -> list[str]:
    return [f.rule for f in findings if f.kind == "finding"]


def run(rule: Any, records: list[Any], planned: int | None = 150) -> list[tripwire.Finding]:
    session = tripwire.Session(write=False, rules=[rule], save_interval=1)
    if planned is not None:
        session.set_planned_steps(planned)  # (what the XGBoost, Lightning and Keras callbacks tell it)
    for mode, step, tensors in records:
        session.step(mode, step, dict(tensors))
    return session.findings


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# 540:60 validation labels; a feature that ranks the minority at AUC ~0.8 (it does not change: the
# scores below are a monotone function of it at every round)
LABELS = np.r_[np.zeros(540, dtype=np.int64), np.ones(60, dtype=np.int64)]
_Z = np.random.default_rng(0).normal(size=600) + 1.2 * LABELS
PRIOR = float(np.log(0.1 / 0.9))


def booster(pace: float, rounds: int = 30, train_every: int = 1) -> list[Any]:
    """A booster's rounds: margin ``PRIOR + (0.3 + pace * r) * z`` at round ``r`` (every sample
    about the prior at first; the minority's scores rise by ``1.2 * pace`` a round); one evaluation
    record per round over the whole validation set, training saved every ``train_every`` rounds."""
    recs: list[Any] = []
    for r in range(rounds):
        if r % train_every == 0:
            recs.append(("train", r, {"loss": (0.5, "losses")}))
        p = sigmoid(PRIOR + (0.3 + pace * r) * _Z)
        recs.append(("eval", r, {"labels": (LABELS, "labels"), "predictions": (p, "predictions")}))
    return recs


def test_the_synthetic_booster_is_what_the_trial_saw() -> None:
    from sklearn.metrics import roc_auc_score

    p1 = sigmoid(PRIOR + (0.3 + 0.05) * _Z)
    assert (p1[LABELS == 1] > 0.5).mean() == 0 and 0.75 < roc_auc_score(LABELS, p1) < 0.9  # recall 0, AUC below max_auc
    late = sigmoid(PRIOR + (0.3 + 0.05 * 29) * _Z)
    assert (late[LABELS == 1] > 0.5).mean() > 0.3  # learnt: recall above min_recall by round 29


@pytest.mark.parametrize("train_every", [1, 10])
def test_a_booster_whose_minority_scores_rise_is_not_stopped_at_round_1(train_every: int) -> None:
    # trial 24a: recall 0 and AUC 0.8 at rounds 0 and 1: "minority class 1 has recall 0: the model
    # neglects it" at round 1. The minority's scores rise 0.06 a round: 27 rounds to cross, within
    # half of the 148 still planned. (train_every=10: XGBoost's evaluation every round with training
    # saved every 10; the rounds are one step apart)
    assert run(ClassImbalance(), booster(0.05, train_every=train_every)) == []


@pytest.mark.parametrize("train_every", [1, 10])
def test_a_booster_whose_minority_scores_barely_move_is_still_found_at_round_1(train_every: int) -> None:
    # the same ranking, but the scores rise 0.006 a round: 270 rounds to cross, past the training
    found = run(ClassImbalance(), booster(0.005, train_every=train_every))
    assert names(found) == ["class_imbalance"] and found[0].step == 1
    # a shorter training: 27 rounds to cross are more than half of the 18 still planned
    found = run(ClassImbalance(), booster(0.05, rounds=20), planned=20)
    assert names(found) == ["class_imbalance"] and found[0].step == 1


def test_the_pace_needs_the_planned_length_and_max_auc_below_1() -> None:
    # without a planned length nothing tells how far the training goes: recall and AUC decide
    assert [f.step for f in run(ClassImbalance(), booster(0.05), planned=None)] == [1]
    # max_auc=1.0: recall alone decides, as documented
    assert [f.step for f in run(ClassImbalance(max_auc=1.0), booster(0.05))] == [1]


def test_a_falling_minority_is_not_on_course() -> None:
    # a network learning the prior: the minority's scores fall (the detection suite's torch faults)
    recs: list[Any] = []
    for r in range(4):
        recs.append(("train", 50 * r + 49, {"loss": (0.5, "losses")}))
        p = sigmoid(PRIOR + 1.0 - 0.3 * r + 0.3 * _Z)
        recs.append(("eval", r, {"labels": (LABELS, "labels"), "predictions": (p, "predictions")}))
    found = run(ClassImbalance(), recs, planned=2000)
    assert names(found) == ["class_imbalance"] and found[0].details["train_step"] == 99


def test_a_network_whose_minority_recall_rises_is_not_stopped() -> None:
    # a network spreading the minority's scores: the best cross (recall 0.1, 0.2 ...) while their
    # mean stays put; softmax columns. Two rounds 47 steps apart, recall +0.1 a round: on course.
    maj = -2.5 + np.random.default_rng(1).normal(size=540)  # (AUC 0.70-0.89: not ranked well)

    def epoch(recall: float) -> np.ndarray:
        k = int(round(60 * recall))
        low = (-1.5 * 60 - 0.5 * k) / (60 - k)  # (the minority's mean margin: -1.5 every epoch)
        logit = np.r_[maj, np.full(k, 0.5), np.full(60 - k, low)]
        return np.stack([np.zeros(600), logit], axis=1)  # (logits per class: class 1's margin is `logit`)

    def recs(recalls: list[float]) -> list[Any]:
        out: list[Any] = []
        for e, rec in enumerate(recalls):
            out.append(("train", 47 * e + 46, {"loss": (0.5, "losses")}))
            out.append(("eval", e, {"labels": (LABELS, "labels"), "predictions": (epoch(rec), "predictions")}))
        return out

    assert run(ClassImbalance(), recs([0.0, 0.1, 0.2, 0.3]), planned=705) == []
    # the control: recall stuck at 0.1
    assert [f.step for f in run(ClassImbalance(), recs([0.1, 0.1, 0.1]), planned=705)] == [1]


# ------------------------------------------------------------------------------ real boosters
def _xgb(X: np.ndarray, y: np.ndarray, rounds: int, tmp_path: Path, seed: int = 0, **params: Any) -> tuple[Any, Any]:
    xgb = pytest.importorskip("xgboost")
    from sklearn.model_selection import train_test_split

    from tripwire.integrations.xgboost import TripwireCallback

    Xtr, Xva, ytr, yva = train_test_split(X, y, test_size=0.3, random_state=seed)
    dtr, dva = xgb.DMatrix(Xtr, label=ytr), xgb.DMatrix(Xva, label=yva)
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1,
                          rules=[{"name": "class_imbalance", "actions": ["stop_training"]}])
    booster = xgb.train({"objective": "binary:logistic", "nthread": 1, "seed": 0, **params}, dtr, rounds,
                        evals=[(dtr, "train"), (dva, "validation")], callbacks=[cb], verbose_eval=False)
    return cb, booster


def test_the_trials_healthy_booster_trains_to_its_end(tmp_path: Path) -> None:
    from sklearn.datasets import make_classification

    # trial 24a's repro, seed 0 (minority recall 0 at rounds 0-5, 0.58 at the end): stopped at round 1
    X, y = make_classification(n_samples=800, n_features=12, n_informative=5, weights=[0.9, 0.1], random_state=0)
    cb, booster = _xgb(X, y, 150, tmp_path / "healthy", eta=0.1, max_depth=4)
    assert cb.findings == [] and booster.num_boosted_rounds() == 150
    # the detection suite's fault (95:5, a hard boundary, no scale_pos_weight): still stopped at round 1
    X, y = make_classification(n_samples=3000, n_features=20, n_informative=8, n_redundant=2, weights=[0.95, 0.05],
                               class_sep=0.3, flip_y=0.02, random_state=0)
    cb, booster = _xgb(X, y, 60, tmp_path / "fault", eta=0.1, max_depth=3)
    assert [(f.rule, f.step) for f in cb.findings] == [("class_imbalance", 1)] and booster.num_boosted_rounds() == 2

"""Class imbalance: the classes are imbalanced and the model neglects a minority class.

Condition, per evaluation round with at least ``min_samples`` labels: ``max_c n_c / min_c n_c > ratio`` and
``recall_c < min_recall`` for some class ``c`` with ``n_c * ratio <= max n`` and ``n_c >= min_class_samples``
and, where the predictions carry scores (probabilities or logits), ``AUC_c < max_auc`` (one-vs-rest
AUC of class ``c``'s score over the round's first 2048 samples); on ``rounds`` consecutive rounds.
Imbalance that the training handles (class weights, resampling) does not fire: minority recall stays
up. Nor does a class the model already ranks well but whose scores have not yet crossed the decision
threshold: a booster's first rounds predict about the class prior for every sample (minority recall
0 for the first 5-20 rounds at eta 0.05-0.1, AUC above 0.98), a neglected class is one the model
cannot tell apart (AUC 0.6-0.8 in the XGBoost fault of the detection suite). A round is the evaluation between two stretches of saved
training, or one pass over the validation data when training is saved more sparsely than it is
evaluated (a pass starts over with the labels its first record had, where that record holds two classes
or more; one of a single class recurs within a pass): with XGBoost's evaluation every
round and training saved every 10, the two rounds are two boosting rounds, not 10 (which would need
more than 10% of a 60-round training to fire). The rule fires as soon as the round in progress holds
``min_samples`` labels and meets the condition (so a verdict may rest on the first ``min_samples``
labels of a pass: a handful of minority samples), provided the ``rounds - 1`` complete rounds before
it met it too: with ``rounds=1`` that first part of a pass alone decides. A sample whose prediction
(any of its scores) or label is not finite is left out of the round (counts, ``min_samples`` and AUC
alike): a NaN score predicts no class, so a model whose predictions are all NaN has no round to judge
and the rule stays silent; the NaN is ``exploding_tensor``'s finding (predictions are stored whole).

Defaults: ``labels="labels"``, ``predictions="predictions"`` (names, or regexes found in the names, of
the ``labels`` and ``predictions`` collections: ``labels`` finds a multi-output model's ``labels/0``;
one that matches nothing is named in a WARNING at the end; indices, one-hot rows, per-class scores or
binary probabilities),
``ratio=5.0``, ``min_recall=0.3``, ``min_samples=100``, ``min_class_samples=5``, ``rounds=2``,
``max_auc=0.9`` (1.0: recall alone decides), mode ``eval``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import check_float, check_int
from ._classes import ClassRoundRule
from ._common import RoundAccumulator, fmt
from ._registry import register_rule


@register_rule
class ClassImbalance(ClassRoundRule):
    """Imbalanced classes with a neglected minority class (see the module docstring)."""

    name = "class_imbalance"
    summary = "the classes are imbalanced and the model neglects a minority class"

    def __init__(self, labels: str = "labels", predictions: str = "predictions", ratio: float = 5.0,
                 min_recall: float = 0.3, min_samples: int = 100, min_class_samples: int = 5, rounds: int = 2,
                 max_auc: float = 0.9, **common: Any) -> None:
        super().__init__(labels, predictions, min_samples, rounds, **common)
        self.max_auc = check_float(max_auc, f"{self.name}.max_auc", minimum=0.5, maximum=1.0)
        self.ratio = check_float(ratio, f"{self.name}.ratio", minimum=1.0, min_inclusive=False)
        self.min_recall = check_float(min_recall, f"{self.name}.min_recall", minimum=0.0, maximum=1.0)
        self.min_class_samples = check_int(min_class_samples, f"{self.name}.min_class_samples", minimum=1)

    def judge(self, classes: list[int], matrix: np.ndarray, acc: RoundAccumulator | None = None) -> tuple[str, list[str]] | None:
        n = matrix.sum(axis=1)
        present = n > 0
        if present.sum() < 2:
            return None
        nmax, nmin = int(n[present].max()), int(n[present].min())
        if nmax / nmin <= self.ratio:
            return None
        worst = None
        for i, c in enumerate(classes):
            if n[i] < self.min_class_samples or n[i] * self.ratio > nmax:
                continue
            recall = matrix[i, i] / n[i]
            if recall < self.min_recall and (worst is None or recall < worst[1]):
                if self.ranked_well(acc, c):
                    continue
                worst = (c, float(recall), int(n[i]))
        if worst is None:
            return None
        c, recall, nc = worst
        return (
            f"the classes are imbalanced ({nmax} vs {nc} samples of the evaluation round so far, {fmt(nmax / nc)}:1; "
            f"limit {fmt(self.ratio)}:1) "
            f"and minority class {c} ({nc} samples) has recall {fmt(recall)} (limit {fmt(self.min_recall)}): the model "
            "neglects it. Usual fixes: class weights in the loss (scale_pos_weight in XGBoost), resampling, "
            "a metric that sees the minority class (F1, AUC-PR), or a tuned decision threshold.",
            [],
        )

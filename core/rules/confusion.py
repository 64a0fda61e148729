"""Confusion: most samples of one class are predicted as another class.

Condition, per evaluation round with at least ``min_samples`` samples: ``M[i, j] / n_i > max_confusion``
for some ``i != j`` with ``n_i >= min_class_samples``, while the accuracy over the classes other than
``i`` and ``j`` is at least ``min_accuracy`` (``M``: confusion matrix, rows true classes; a model still
guessing at the start of training confuses everything, which is not this rule's business, and one that
predicts ``j`` for every sample has ``j``'s own samples right, so they do not count) and at least ``min_classes`` classes
are present (with two classes, "confused" is the decision threshold: see ``class_imbalance``); on
``rounds`` consecutive rounds (a round: the evaluation between two stretches of saved training, or
one pass over the validation data, judged from its first ``min_samples`` samples on, as in
``class_imbalance``); where the predictions carry scores, a class ``i`` the model ranks well
(one-vs-rest AUC of its score ``>= max_auc``) is not judged: a booster's first rounds predict the
common classes for every sample while ranking the rare ones well (recall 0.27-0.77 later). A sample
whose prediction or label is not finite is left out of the round, as in ``class_imbalance``.

Defaults: ``labels="labels"``, ``predictions="predictions"`` (as in ``class_imbalance``), ``max_confusion=0.5``, ``min_samples=100``,
``min_class_samples=10``, ``min_accuracy=0.5``, ``min_classes=3``, ``rounds=3``, ``max_auc=0.9`` (1.0: the
counts alone decide), mode ``eval``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import check_float, check_int
from ._classes import ClassRoundRule
from ._common import RoundAccumulator, fmt
from ._registry import register_rule


@register_rule
class Confusion(ClassRoundRule):
    """A class mostly predicted as another (see the module docstring)."""

    name = "confusion"
    summary = "most samples of one class are predicted as another class"

    def __init__(self, labels: str = "labels", predictions: str = "predictions", max_confusion: float = 0.5,
                 min_samples: int = 100, min_class_samples: int = 10, min_accuracy: float = 0.5, min_classes: int = 3, rounds: int = 3,
                 max_auc: float = 0.9, **common: Any) -> None:
        super().__init__(labels, predictions, min_samples, rounds, **common)
        self.max_confusion = check_float(max_confusion, f"{self.name}.max_confusion", minimum=0.0, maximum=1.0, max_inclusive=False)
        self.min_class_samples = check_int(min_class_samples, f"{self.name}.min_class_samples", minimum=1)
        self.min_accuracy = check_float(min_accuracy, f"{self.name}.min_accuracy", minimum=0.0, maximum=1.0)
        self.min_classes = check_int(min_classes, f"{self.name}.min_classes", minimum=2)
        self.max_auc = check_float(max_auc, f"{self.name}.max_auc", minimum=0.5, maximum=1.0)

    def judge(self, classes: list[int], matrix: np.ndarray, acc: RoundAccumulator | None = None,
              tensors: tuple[str, str] | None = None) -> tuple[str, list[str]] | None:
        n = matrix.sum(axis=1)
        if int(np.count_nonzero(n)) < self.min_classes:
            return None
        worst = None
        for i in range(len(classes)):
            if n[i] < self.min_class_samples:
                continue
            row = matrix[i].astype(np.float64) / n[i]
            row[i] = -1.0
            j = int(row.argmax())
            # the guard reads the classes other than i and j: j's own samples are right when the model
            # predicts j for everything (a 3-class model's first evaluations: "the other classes" were
            # j, all right, and one class all wrong, 55% together)
            others = (np.arange(len(classes)) != i) & (np.arange(len(classes)) != j)
            n_other = int(n[others].sum())
            other_acc = float(np.trace(matrix[np.ix_(others, others)])) / n_other if n_other else 0.0
            if other_acc < self.min_accuracy:
                continue
            if row[j] > self.max_confusion and (worst is None or row[j] > worst[2]):
                if self.ranked_well(acc, classes[i]):
                    continue
                worst = (classes[i], classes[j], float(row[j]), int(n[i]), other_acc)
        if worst is None:
            return None
        ci, cj, share, ni, other_acc = worst
        acc = float(np.trace(matrix)) / max(1, int(matrix.sum()))
        # (the accuracy the min_accuracy guard read, beside the overall one: "overall accuracy 36%"
        # read as if the rule fired below its own floor; a model early in its training is named too,
        # trial 17h: a 3-class model predicting one class at its first evaluations)
        # (a model of several heads: the labels and predictions judged named, trial 26j)
        of, by = (f" in {tensors[0]}", f" in {tensors[1]}") if tensors is not None else ("", "")
        return (
            f"{fmt(share * 100)}% of the {ni} samples of class {ci}{of} are predicted as class {cj}{by} (limit "
            f"{fmt(self.max_confusion * 100)}%; accuracy over the classes other than {ci} and {cj} {fmt(other_acc * 100)}%, "
            f"min_accuracy {fmt(self.min_accuracy * 100)}%; overall {fmt(acc * 100)}%). Usual causes: mislabelled or "
            "swapped labels, classes the inputs cannot tell apart, class imbalance, or a model that collapsed "
            "onto a few classes; check the labels of these two classes and the class balance. Not a fault: a model "
            "still early in its training, before it has learnt every class (give start_step or rounds more room).",
            [],
        )

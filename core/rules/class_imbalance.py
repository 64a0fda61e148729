"""Class imbalance: the classes are imbalanced and the model neglects a minority class.

Condition, per evaluation round with at least ``min_samples`` labels: ``max_c n_c / min_c n_c > ratio`` and
``recall_c < min_recall`` for some class ``c`` with ``n_c * ratio <= max n`` and ``n_c >= min_class_samples``
and, where the predictions carry scores (probabilities or logits), neither ``AUC_c >= max_auc``
(one-vs-rest AUC of class ``c``'s score over the round's first 2048 samples) nor ``c`` on course to
cross the decision threshold (below); on ``rounds`` consecutive rounds.
Imbalance that the training handles (class weights, resampling) does not fire: minority recall stays
up. Nor does a class on its way past the decision threshold: a booster's first rounds predict about
the class prior for every sample, so a minority class has recall 0 for the first 5-20 rounds at eta
0.05-0.1 however well it is learnt later. An easy class is ranked well from the first round (AUC 0.94
and above); a harder one is not (trial 24a: a 90:10 booster at eta 0.1, AUC 0.73-0.91 after two
rounds, minority recall 0.42-0.73 at the end, was stopped at round 1), and is told from a neglected
one by its pace. With the planned training length ``P`` known (XGBoost's ``num_boost_round``,
Lightning, Keras, ``Session.set_planned_steps``), class ``c`` is on course when, at its pace since the
previous round (per train step), it reaches ``min_recall`` within half the training still planned
(``0.5 * (P - 1 - s)`` steps at train step ``s``): its recall rising to ``min_recall`` (a network
spreading the class's scores, whose best samples cross while the mean stays put), or the mean of its
samples' margins rising and carrying the ``1 - min_recall`` quantile of the margins (the sample whose
crossing lifts recall to ``min_recall``) to 0 (a booster's first rounds: recall 0, every score near
the prior, the class's all rising). A sample's margin is its own class's score minus the highest other
score, in log-odds (logits; logs of probabilities; a binary probability's logit); it is above 0 where
the sample is predicted right. The half allows for a booster slowing down: a straight line from its
first rounds reaches the threshold too early. At round 1 the trial's boosters were on course to cross
within 5-26 of their 150 rounds; the XGBoost fault of the detection suite (95:5, AUC 0.63-0.73,
minority recall below 0.1 after its 60 rounds) within 49-76, and is found at round 1 as before. A
network still learning the prior (its first evaluations) lowers the minority's scores: not on course,
as in the suite's torch faults. The pace compares the round's kept samples (its first 2048) with as
many of the previous round's; the first round judged (and the first after a resume from a
checkpoint) has none to compare with. Rounds without a train record between them (XGBoost's
validation labels and predictions, which the rule has saved every round, with training saved every 10) are one step apart, until the next train record
spreads its steps over them.
A round is the evaluation between two stretches of saved
training, or one pass over the validation data when training is saved more sparsely than it is
evaluated (a pass starts over with the labels its first record had, where that record holds two classes
or more; one of a single class recurs within a pass): with XGBoost's labels and predictions saved every
round (as the rule has them saved) and training every 10, the two rounds are two boosting rounds, not 10 (which would need
more than 10% of a 60-round training to fire). The rule fires as soon as the round in progress holds
``min_samples`` labels and meets the condition (so a verdict may rest on the first ``min_samples``
labels of a pass: a handful of minority samples), provided the ``rounds - 1`` complete rounds before
it met it too: with ``rounds=1`` that first part of a pass alone decides. A sample whose prediction
(any of its scores) or label is not finite is left out of the round (counts, ``min_samples`` and AUC
alike): a NaN score predicts no class, so a model whose predictions are all NaN has no round to judge
and the rule stays silent; the NaN is ``exploding_tensor``'s finding (predictions are stored whole).
A minority class with fewer than ``min_class_samples`` samples in every round, or rounds that all
hold fewer than ``min_samples`` samples, are never judged: the rule says so when the training ends (a WARNING naming the class, its samples and the
``min_class_samples`` that would judge it), and ``tripwire watch`` counts the rule as not judged, exit 3
(trial 41g: a 99:1 task with 4 positives among 368 validation rows, minority recall 0 at every
epoch, had no finding and passed the watch).

Defaults: ``labels="labels"``, ``predictions="predictions"`` (names, or regexes found in the names, of
the ``labels`` and ``predictions`` collections: ``labels`` finds a multi-output model's ``labels/0``,
and where several match, each ``labels/<head>`` is judged with ``predictions/<head>`` on its own;
one that matches nothing is named in a WARNING at the end; indices, one-hot rows, per-class scores or
binary probabilities),
``ratio=5.0``, ``min_recall=0.3``, ``min_samples=100``, ``min_class_samples=5``, ``rounds=2``,
``max_auc=0.9`` (1.0: recall alone decides, neither the AUC nor the pace spares a class; without ``P``
the pace spares none), mode ``eval``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import check_float, check_int
from ._classes import ClassRoundRule, Pace
from ._common import RoundAccumulator, fmt
from ._registry import register_rule

#: A class is on course to cross the decision threshold when, at its pace, it crosses within this
#: share of the training still planned (trial 24a; a booster slows down, so a straight line from its
#: first rounds reaches the threshold too early).
HORIZON = 0.5


@register_rule
class ClassImbalance(ClassRoundRule):
    """Imbalanced classes with a neglected minority class (see the module docstring)."""

    tracker = Pace

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
        # a minority class left unjudged for too few samples, (class, samples, majority samples), and
        # whether a minority class was ever judged (see unjudged; trial 41g)
        self._too_few: tuple[int, int, int] | None = None
        self._judged_minority = False

    def unjudged(self) -> str | None:
        """A minority class that every round held fewer than ``min_class_samples`` samples of, where
        no minority class was judged (trial 41g: a 99:1 task with 4 positives among 368 validation
        rows, minority recall 0 at every epoch, no finding, and ``tripwire watch`` exited 0)."""
        short = super().unjudged()
        if short is not None or self._too_few is None or self._judged_minority:
            return short
        c, n, nmax = self._too_few
        return (f"the classes are imbalanced ({nmax} vs {n} samples in an evaluation round), and minority class {c} "
                f"had {n} samples, fewer than min_class_samples={self.min_class_samples}, in every round: its recall "
                f"was never judged; give it min_class_samples={max(1, n)} (a verdict on {n} samples), or evaluate on "
                f"more data")

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "too_few": list(self._too_few) if self._too_few is not None else None,
                "judged_minority": self._judged_minority}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        few = state.get("too_few")
        self._too_few = (int(few[0]), int(few[1]), int(few[2])) if isinstance(few, (list, tuple)) and len(few) == 3 \
            else None
        self._judged_minority = bool(state.get("judged_minority", False))

    def on_course(self, acc: RoundAccumulator | None, c: int) -> bool:
        """Whether class ``c``, at its pace since the previous round, reaches ``min_recall`` within
        :data:`HORIZON` of the training still planned: its recall rising, or its margins' mean rising
        (trial 24a: a healthy booster's first rounds; see the module docstring)."""
        if acc is None or self.max_auc >= 1.0 or self._planned is None:
            return False
        pace = self._trackers.get(acc)
        if pace is None or pace.round is None or pace.previous is None or not acc.scores:
            return False
        lab, margin = pace.margins(pace.round)
        plab, pmargin = pace.margins(pace.previous)
        n = min(len(lab), len(plab))  # (as many samples of the previous round)
        mine, theirs = margin[lab == c], pmargin[:n][plab[:n] == c]
        if not len(mine) or not len(theirs):
            return False
        steps = pace.per_round or 1.0
        horizon = HORIZON * max(0.0, self._planned - 1 - pace.step)
        # the samples that crossed: recall rising to min_recall (a network spreading the class's
        # scores: their mean may stay put while its best samples cross)
        recall, before = float((mine > 0.0).mean()), float((theirs > 0.0).mean())
        if recall > before and max(0.0, self.min_recall - recall) / ((recall - before) / steps) <= horizon:
            return True
        # the samples still short of it: their mean margin rising, carrying the sample whose crossing
        # lifts recall to min_recall to the threshold (a booster's first rounds: recall 0, every
        # score about the prior, all of them rising)
        speed = (float(mine.mean()) - float(theirs.mean())) / steps
        gap = max(0.0, -float(np.quantile(mine, 1.0 - self.min_recall)))
        return speed > 0.0 and gap / speed <= horizon

    def judge(self, classes: list[int], matrix: np.ndarray, acc: RoundAccumulator | None = None,
              tensors: tuple[str, str] | None = None) -> tuple[str, list[str]] | None:
        if acc is not None and acc.scores:
            self.track(acc)
        n = matrix.sum(axis=1)
        present = n > 0
        if present.sum() < 2:
            return None
        nmax, nmin = int(n[present].max()), int(n[present].min())
        if nmax / nmin <= self.ratio:
            return None
        worst = None
        for i, c in enumerate(classes):
            if n[i] * self.ratio > nmax:
                continue
            if n[i] < self.min_class_samples:
                if n[i] > 0 and (self._too_few is None or n[i] >= self._too_few[1]):
                    self._too_few = (int(c), int(n[i]), nmax)
                continue
            self._judged_minority = True
            recall = matrix[i, i] / n[i]
            if recall < self.min_recall and (worst is None or recall < worst[1]):
                if self.ranked_well(acc, c) or self.on_course(acc, c):
                    continue
                worst = (c, float(recall), int(n[i]))
        if worst is None:
            return None
        c, recall, nc = worst
        # (a model of several heads: the labels and predictions judged named, trial 26j)
        of, by = (f" of {tensors[0]}", f" in {tensors[1]}") if tensors is not None else ("", "")
        return (
            f"the classes{of} are imbalanced ({nmax} vs {nc} samples of the evaluation round so far, {fmt(nmax / nc)}:1; "
            f"limit {fmt(self.ratio)}:1) "
            f"and minority class {c} ({nc} samples) has recall {fmt(recall)}{by} (limit {fmt(self.min_recall)}): the model "
            "neglects it. Usual fixes: class weights in the loss (scale_pos_weight in XGBoost), resampling, "
            "a metric that sees the minority class (F1, AUC-PR), or a tuned decision threshold.",
            [],
        )

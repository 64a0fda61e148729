"""Shared machinery of ``class_imbalance`` and ``confusion`` (private)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from .._history import History
from .._validate import check_int
from ._base import Requirement
from ._common import (
    NO_DATA,
    BuiltinRule,
    RoundAccumulator,
    are_class_labels,
    are_class_predictions,
    check_regex,
    class_scores,
    finite_samples,
    first_tensor,
    in_capture_order,
    matching_tensors,
    names_in,
    planned_steps,
    prediction_kind,
    read_pair,
    to_classes,
    train_marker,
)


class ClassRoundRule(BuiltinRule):
    """Accumulates labels and predictions per evaluation round and judges each round once.

    A round is the run of ``mode`` records between two stretches of training, or one pass over the
    validation data when training is saved more sparsely than it is evaluated (a pass starts over
    with the labels its first record had, where that record holds two classes or more; in mode ``train``: a block of consecutive records holding
    ``min_samples`` samples). A complete round with at least ``min_samples`` samples gets a verdict
    (:meth:`judge`); the rule fires at a record where the current
    round (so far, at least ``min_samples`` samples) meets the condition and so did the ``rounds - 1``
    complete rounds before it."""

    default_modes = ("eval",)
    input_collections = ("labels", "predictions")
    input_match = "search"  # (first_tensor: "labels" finds a multi-output model's labels/0)

    def __init__(self, labels: str, predictions: str, min_samples: int, rounds: int, **common: Any) -> None:
        super().__init__(**common)
        self.labels = check_regex(labels, f"{self.name}.labels")
        self.predictions = check_regex(predictions, f"{self.name}.predictions")
        self.min_samples = check_int(min_samples, f"{self.name}.min_samples", minimum=1)
        self.rounds = check_int(rounds, f"{self.name}.rounds", minimum=1)
        self._acc: dict[tuple[int, str | None], RoundAccumulator] = {}  # (worker, labels tensor)
        # per round accumulator, what :meth:`track` keeps of its rounds' pace (not part of the state: as
        # the kept scores), and where each check is: the train step and the planned length
        self._trackers: weakref.WeakKeyDictionary[RoundAccumulator, Any] = weakref.WeakKeyDictionary()
        self._train_step = -1
        self._planned: int | None = None
        # the most samples a round held, where none reached min_samples (None: one did, or none came):
        # see unjudged (trial 41j: 50 validation samples, min_samples 100, passed without a word)
        self._short_rounds: int | None = None

    def named_inputs(self) -> dict[str, str]:
        return {"labels": self.labels, "predictions": self.predictions}

    def restart(self) -> None:
        super().restart()
        self._acc = {}  # (the earlier trainings' rounds and verdicts)
        self._trackers = weakref.WeakKeyDictionary()

    #: what a subclass keeps of each accumulator's rounds to judge their pace (:class:`Pace`, or an
    #: object holding one, with ``observe(acc, train_step)``); None: no pace, no per-check lookups
    tracker: ClassVar[Callable[[], Any] | None] = None

    def track(self, acc: RoundAccumulator) -> Any:
        """The :attr:`tracker` of ``acc``'s rounds, told of the round in progress."""
        assert self.tracker is not None  # (a subclass that calls it sets it)
        tracked = self._trackers.get(acc)
        if tracked is None:
            tracked = self._trackers[acc] = self.tracker()
        tracked.observe(acc, self._train_step)
        return tracked

    def requirements(self) -> list[Requirement]:
        return [
            Requirement("labels", raw_arrays=True, modes=self.modes, max_interval=1),
            Requirement("predictions", raw_arrays=True, modes=self.modes, max_interval=1),
        ]

    max_auc: float = 1.0  # (subclasses that take it as a parameter: see ranked_well)

    def ranked_well(self, acc: RoundAccumulator | None, c: int) -> bool:
        """Whether the model ranks class ``c`` well in this round (one-vs-rest AUC of its score
        ``>= max_auc``, where the predictions carry scores): its samples are on their way past the
        decision threshold (a booster's first rounds), not neglected or confused."""
        auc = acc.class_auc(c) if acc is not None and self.max_auc < 1.0 else None
        return auc is not None and auc >= self.max_auc

    def judge(self, classes: list[int], matrix: np.ndarray, acc: RoundAccumulator | None = None,
              tensors: tuple[str, str] | None = None) -> tuple[str, list[str]] | None:
        """A message and extra details when the round's confusion matrix meets the condition
        (``acc``: the round, for what the counts do not hold: its scores). ``tensors``: the labels
        and predictions tensors judged, for the message to name (see :meth:`named_tensors`)."""
        raise NotImplementedError

    @staticmethod
    def named_tensors(history: History, labels: str, predictions: str) -> tuple[str, str] | None:
        """``(labels, predictions)``, the tensors the rule judges, where the run holds more than one
        tensor of either collection (a model with several heads: ``labels/aux`` beside
        ``labels/cls``), for the message to say which head its classes are of (trial 26j: "minority
        class 1" where both heads had a class 1); None where each collection holds one, whose
        message names none (the tensors are the finding's ``tensors`` as ever)."""
        if len(names_in(history, "labels")) > 1 or len(names_in(history, "predictions")) > 1:
            return labels, predictions
        return None

    def heads(self, history: History) -> list[tuple[str, str]]:
        """The ``(labels, predictions)`` pairs judged: the labels and predictions tensors matching the
        rule's patterns, one pair each; where there are several, paired by the name after the
        collection's (``labels/aux`` with ``predictions/aux``: a model with several heads, each judged
        on its own; trial 26j: only the first pair was judged, so a second classifier head never was,
        and a regression head listed first hid a classifier head), else the first of each."""
        lnames = matching_tensors(history, self.labels, ["labels"], search=True)
        pnames = matching_tensors(history, self.predictions, ["predictions"], search=True)
        if len(lnames) > 1 or len(pnames) > 1:
            def head(name: str) -> str:
                return name.split("/", 1)[1] if "/" in name else ""

            by_head = {head(p): p for p in pnames}
            pairs = [(n, by_head[head(n)]) for n in in_capture_order(history, lnames) if head(n) in by_head]
            if pairs:
                return pairs
        lname = first_tensor(history, "labels", self.labels)
        pname = first_tensor(history, "predictions", self.predictions)
        return [] if lname is None or pname is None else [(lname, pname)]

    def check(self, history: History, step: int, mode: str) -> Any:
        if self.tracker is not None:  # (the rounds' train step and the planned length, for the pace)
            train = history.wall_times("train", self.worker)[0]
            self._train_step = int(train[-1]) if len(train) else -1
            self._planned = planned_steps(history)
        pairs = self.heads(history)
        if not pairs:
            return NO_DATA
        found = []
        seen = False
        for lname, pname in pairs:
            got = self._check_head(history, step, mode, lname, pname)
            if got is not NO_DATA:
                seen = True
                found += got
        return found if seen else NO_DATA

    def _check_head(self, history: History, step: int, mode: str, lname: str, pname: str) -> Any:
        """:meth:`check` of one head (its labels and predictions tensors)."""
        found = []
        seen = False
        tensors = self.named_tensors(history, lname, pname)
        for worker in self.workers(history):
            pair = read_pair(history, lname, pname, step, mode, worker)
            if pair is None or not are_class_labels(pair[0]) or not are_class_predictions(pair[1]):
                # (no labels, or a regression target; or a regressor's output: a count model's rates)
                continue
            # samples with a non-finite label or prediction are left out: a NaN score predicts no
            # class (trial 23m: all-NaN predictions read as class 0, "the model neglects class 1")
            lab_f, pred_f = finite_samples(*pair)
            acc = self._accumulator(worker, lname)
            if mode == "train":  # a block of consecutive records holding min_samples samples
                marker, new_round = acc.train_marker + 1, acc.decided
            else:  # training made progress, or (train records sparser than evaluations) the
                # validation data started over
                marker = train_marker(history, worker)
                new_round = marker != acc.train_marker or acc.starts_over(pair[0])
            if new_round:
                if acc.samples >= self.min_samples:  # the previous round is complete: keep its verdict
                    classes, m = acc.matrix()
                    acc.verdicts = (acc.verdicts + [self.judge(classes, m, acc) is not None])[-self.rounds :]
                acc.start_round(marker)
            seen = True
            if not len(lab_f):
                continue
            lab, pred = to_classes(lab_f, pred_f)
            acc.add(lab, pred, pair[0], class_scores(pred_f))  # type: ignore[arg-type]
            if acc.samples < self.min_samples:
                if self._short_rounds != -1:
                    self._short_rounds = max(self._short_rounds or 0, acc.samples)
                continue
            self._short_rounds = -1  # (a round reached min_samples: judged)
            acc.decided = True  # in mode train, the next record starts a new block
            classes, m = acc.matrix()
            verdict = self.judge(classes, m, acc, tensors)
            earlier = acc.verdicts[-(self.rounds - 1) :] if self.rounds > 1 else []
            if verdict is not None and len(earlier) == self.rounds - 1 and all(earlier):
                msg, _ = verdict
                found.append(self.finding(step, mode, msg, tensors=[lname, pname], worker=worker,
                                          samples=acc.samples, classes=classes, matrix=m.tolist()))
        if not seen:
            return NO_DATA
        return found

    def _accumulator(self, worker: int, labels: str) -> RoundAccumulator:
        """The rounds of one head of ``worker`` (a state saved before heads were judged apart, keyed
        by the worker alone, goes to the first head judged)."""
        key = (worker, labels)
        acc = self._acc.get(key)
        if acc is None:
            legacy = self._acc.pop((worker, None), None)
            acc = self._acc[key] = legacy if legacy is not None else RoundAccumulator()
        return acc

    def unjudged(self) -> str | None:
        """Every evaluation round held fewer than ``min_samples`` samples: no round was judged."""
        if self._short_rounds is None or self._short_rounds < 0:
            return None
        n = self._short_rounds
        return (f"every round held fewer samples than min_samples={self.min_samples} (at most {n}), so no round was "
                f"judged; give it min_samples={n} (a verdict on {n} samples), or evaluate on more data")

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "short_rounds": self._short_rounds,
                "rounds_state": {f"{w}|{head}": a.state_dict() for (w, head), a in self._acc.items() if head is not None}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        short = state.get("short_rounds")
        self._short_rounds = short if isinstance(short, int) and not isinstance(short, bool) else None
        self._trackers = weakref.WeakKeyDictionary()
        self._acc = {}
        for key, s in state.get("rounds_state", {}).items():
            acc = RoundAccumulator()
            acc.load_state_dict(s)
            worker, _, head = str(key).partition("|")
            self._acc[(int(worker), head or None)] = acc


def log_odds(scores: np.ndarray) -> np.ndarray:
    """A round's scores (float64) in log-odds: a matrix of class scores as it is, of class
    probabilities (rows in [0, 1] summing to 1) as their logs; one binary score a sample (flattened)
    as it is, a binary probability as its logit."""
    if scores.ndim == 2 and scores.shape[1] > 1:
        if np.all((scores >= 0.0) & (scores <= 1.0)) and np.allclose(scores.sum(axis=1), 1.0, atol=1e-3):
            return np.log(np.clip(scores, 1e-12, 1.0))  # (probabilities: log-odds between classes)
        return scores
    flat = scores.reshape(-1)
    if prediction_kind(flat) == "probability":
        p = np.clip(flat, 1e-12, 1.0 - 1e-12)
        return np.log(p) - np.log1p(-p)
    return flat


def _margins(labels: list[np.ndarray], scores: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Labels and margins of a round's kept samples: each sample's own class's score minus the
    highest other score, in log-odds (:func:`log_odds`; class 0's the negative of class 1's)."""
    lab = np.concatenate(labels).astype(np.int64)
    sc = log_odds(np.concatenate(scores).astype(np.float64))
    if sc.ndim == 2:
        keep = (lab >= 0) & (lab < sc.shape[1])
        lab, sc = lab[keep], sc[keep]
        own = sc[np.arange(len(lab)), lab]
        other = sc.copy()
        other[np.arange(len(lab)), lab] = -np.inf
        margin = own - other.max(axis=1)
    else:
        margin = np.where(lab == 1, sc, -sc)
    return lab, margin


class Pace:
    """One worker's rounds, as ``class_imbalance`` and ``confusion`` read them: the kept samples of the
    round in progress and of the one before, and where in the training they were evaluated."""

    def __init__(self) -> None:
        self.round: tuple[list[np.ndarray], list[np.ndarray]] | None = None  # (acc.score_labels, acc.scores)
        self.previous: tuple[list[np.ndarray], list[np.ndarray]] | None = None
        self.anchor: int | None = None  # the last train step seen to change
        self.since = 0  # rounds since it changed
        self.per_round: float | None = None  # train steps per round, once the train step changed
        self.cache: dict[int, tuple[int, tuple[np.ndarray, np.ndarray]]] = {}

    def observe(self, acc: RoundAccumulator, train_step: int) -> None:
        """Note the round in progress (a new one: the accumulator's kept lists were replaced)."""
        if self.round is not None and acc.scores is self.round[1]:
            return
        if self.round is not None:
            self.previous = self.round
        self.round = (acc.score_labels, acc.scores)
        # (margins cached by the id of a kept list this holds: the previous round's stay)
        keep = id(self.previous[1]) if self.previous is not None else None
        self.cache = {k: v for k, v in self.cache.items() if k == keep}
        if self.anchor is None:
            self.anchor, self.since = train_step, 0
        elif train_step != self.anchor:  # the steps since the last change spread over the rounds since
            self.per_round = (train_step - self.anchor) / (self.since + 1)
            self.anchor, self.since = train_step, 0
        else:
            self.since += 1

    @property
    def step(self) -> float:
        """The train step of the round in progress (the last train record, and as many steps per
        round after it as the records so far came apart)."""
        return (self.anchor or 0) + self.since * (self.per_round or 1.0)

    def margins(self, which: tuple[list[np.ndarray], list[np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        key = id(which[1])
        cached = self.cache.get(key)
        if cached is None or cached[0] != len(which[1]):
            cached = self.cache[key] = (len(which[1]), _margins(*which))
        return cached[1]

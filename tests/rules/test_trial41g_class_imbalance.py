"""Trial 41g F2: ``class_imbalance`` skipped a minority class with fewer than ``min_class_samples``
samples without a word: a 99:1 task with 4 positives among 368 validation rows, minority recall 0 at
every epoch, made no finding, and ``tripwire watch`` exited 0. The rule now says it never judged that
class (:meth:`Rule.unjudged`): a WARNING at the session's end, and the watch counts it as not judged
(exit 3)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire._cli import main
from tripwire.rules import ClassImbalance


def _training(out: Path, positives: int, rules: list) -> tripwire.Session:
    rng = np.random.default_rng(0)
    labels = np.zeros(368, dtype=np.int64)
    labels[:positives] = 1
    cfg = {"out_dir": str(out), "collections": ["losses", "labels", "predictions"],
           "save": {"interval": 1}}
    with tripwire.Session(cfg, rules=rules) as s:
        step = 0
        for epoch in range(4):
            for _ in range(5):
                s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
                step += 1
            for b in range(0, 368, 92):
                probs = np.column_stack([np.full(92, 0.98), np.full(92, 0.02)]) + rng.normal(0, 1e-3, (92, 2))
                s.step("eval", epoch * 4 + b // 92, {"labels": (labels[b:b + 92], "labels"),
                                                     "predictions": (probs, "predictions")})
    return s


def test_a_minority_class_of_too_few_samples_is_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = _training(tmp_path / "run", 4, [{"name": "class_imbalance", "actions": ["log"]}])
    assert s.findings == []
    said = [r.getMessage() for r in caplog.records if "class_imbalance' judged nothing" in r.getMessage()]
    assert len(said) == 1 and ("minority class 1 had 4 samples, fewer than min_class_samples=5, in every round: its "
                               "recall was never judged; give it min_class_samples=4") in said[0], said
    assert main(["watch", str(tmp_path / "run"), "--once", "--no-record"]) == 3  # (its config: class_imbalance)


def test_enough_samples_are_judged_and_nothing_more_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        s = _training(tmp_path / "run", 12, [{"name": "class_imbalance", "actions": ["log"]}])
    assert [f.rule for f in s.findings] == ["class_imbalance"]
    assert not [r for r in caplog.records if "judged nothing" in r.getMessage()]


def test_the_state_carries_it() -> None:
    rule = ClassImbalance()
    rule.judge([0, 1], np.array([[360, 0], [4, 0]]))
    assert rule.unjudged() is not None
    again = ClassImbalance()
    again.load_state_dict(rule.state_dict())
    assert again.unjudged() == rule.unjudged()
    rule.judge([0, 1], np.array([[300, 0], [10, 0]]))
    assert rule.unjudged() is None


def test_an_unjudged_that_raises_or_returns_no_str_is_the_reason() -> None:
    """Trial 41j F7: a rule whose unjudged() raised passed as judged (watch exit 0), and one returning
    True was printed as "judged nothing: True"."""
    from tripwire.rules._base import unjudged_reason

    class Raises(ClassImbalance):
        def unjudged(self) -> str | None:
            raise KeyError("state")

    class Bool(ClassImbalance):
        def unjudged(self) -> str | None:
            return True  # type: ignore[return-value]

    assert unjudged_reason(Raises()) == "its unjudged() raised KeyError: 'state', so whether it judged is not known"
    assert unjudged_reason(Bool()) == "its unjudged() returned True; accepted: a str (why it could not judge) or None"
    assert unjudged_reason(ClassImbalance()) is None


def test_rounds_below_min_samples_are_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Trial 41j F8: 50 validation samples a round, min_samples 100: no round judged, no word."""
    rule = ClassImbalance()

    labels = np.zeros(50, dtype=np.int64)
    labels[:4] = 1
    cfg = {"out_dir": str(tmp_path / "run"), "collections": ["losses", "labels", "predictions"],
           "save": {"interval": 1}}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        with tripwire.Session(cfg, rules=[{"name": "class_imbalance", "actions": ["log"]}]) as s:
            for epoch in range(3):
                s.step("train", epoch, {"loss": (1.0, "losses")})
                probs = np.column_stack([np.full(50, 0.98), np.full(50, 0.02)])
                s.step("eval", epoch, {"labels": (labels, "labels"), "predictions": (probs, "predictions")})
    said = [r.getMessage() for r in caplog.records if "judged nothing" in r.getMessage()]
    assert len(said) == 1 and ("every round held fewer samples than min_samples=100 (at most 50), so no round was "
                               "judged; give it min_samples=50") in said[0], said
    again = ClassImbalance()
    again.load_state_dict(s.rules[0].state_dict())
    assert again.unjudged() == s.rules[0].unjudged()
    assert rule.unjudged() is None

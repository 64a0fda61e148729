"""Trial 26j finding 2: class_imbalance's (and confusion's) finding on a model with two classifier
heads said "minority class 1" where both heads had a class 1; which head it judged was only in the
finding's ``tensors``. Where the run holds more than one labels or predictions tensor the message
now names the two it judged; a single-head run's message is as before. The rules' conditions are
unchanged."""

from __future__ import annotations

from typing import Any

import numpy as np

from tripwire.rules import ClassImbalance, Confusion


def _rounds(heads: dict[str, tuple[np.ndarray, np.ndarray]], rounds: int = 3, batches: int = 2) -> list[Any]:
    """``rounds`` evaluation rounds after a train step each, every head's labels and predictions
    (``{head: (labels, predictions)}``; head "" stores plain ``labels``/``predictions``) in each
    eval record."""
    out: list[Any] = []
    for r in range(rounds):
        out.append(("train", r, {"loss": (1.0, "losses")}))
        split = {h: (np.array_split(lab, batches), np.array_split(pred, batches)) for h, (lab, pred) in heads.items()}
        for b in range(batches):
            record: dict[str, Any] = {}
            for h, (labs, preds) in split.items():
                suffix = f"/{h}" if h else ""
                record[f"labels{suffix}"] = (labs[b], "labels")
                record[f"predictions{suffix}"] = (preds[b], "predictions")
            out.append(("eval", r * 10 + b, record))
    return out


def _neglected(rng: np.random.Generator, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Two classes, 95:5, the minority never predicted."""
    labels = (rng.random(n) < 0.05).astype(np.int64)
    return labels, np.zeros(n, dtype=np.int64)


def _healthy(rng: np.random.Generator, n: int = 400, k: int = 3) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, k, n)
    return labels, labels.copy()


def _confused(rng: np.random.Generator, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Three classes, class 1 predicted as class 0, the others right."""
    labels = rng.integers(0, 3, n)
    return labels, np.where(labels == 1, 0, labels)


def test_class_imbalance_names_the_head_it_judged_on_a_model_of_two_heads(feed, rng) -> None:
    found = feed(ClassImbalance(), _rounds({"aux": _neglected(rng), "cls": _healthy(rng)}))
    assert [f.rule for f in found] == ["class_imbalance"]
    message = found[0].message
    assert message.startswith("the classes of labels/aux are imbalanced (")
    assert "minority class 1 (" in message and "has recall 0 in predictions/aux (limit 0.3)" in message
    assert list(found[0].tensors) == ["labels/aux", "predictions/aux"]


def test_class_imbalance_on_a_single_head_names_no_tensor(feed, rng) -> None:
    found = feed(ClassImbalance(), _rounds({"": _neglected(rng)}))
    assert [f.rule for f in found] == ["class_imbalance"]
    assert found[0].message.startswith("the classes are imbalanced (")
    assert "has recall 0 (limit 0.3)" in found[0].message
    assert "labels" not in found[0].message.split("Usual fixes")[0]


def test_confusion_names_the_head_it_judged_on_a_model_of_two_heads(feed, rng) -> None:
    found = feed(Confusion(), _rounds({"main": _confused(rng), "side": _healthy(rng, k=2)}))
    assert [f.rule for f in found] == ["confusion"]
    assert "samples of class 1 in labels/main are predicted as class 0 in predictions/main (limit 50%" in found[0].message
    assert list(found[0].tensors) == ["labels/main", "predictions/main"]


def test_confusion_on_a_single_head_names_no_tensor(feed, rng) -> None:
    found = feed(Confusion(), _rounds({"": _confused(rng)}))
    assert [f.rule for f in found] == ["confusion"]
    assert "samples of class 1 are predicted as class 0 (limit 50%" in found[0].message


def test_a_head_chosen_by_name_is_named_too(feed, rng) -> None:
    """labels=/predictions= pointed at the second head: the message names that one."""
    rule = ClassImbalance(labels="labels/side", predictions="predictions/side")
    found = feed(rule, _rounds({"main": _healthy(rng), "side": _neglected(rng)}))
    assert [f.rule for f in found] == ["class_imbalance"]
    assert found[0].message.startswith("the classes of labels/side are imbalanced (")
    assert "in predictions/side (limit" in found[0].message

"""Trial 32e F4: an ``include``/``exclude`` that leaves out every captured tensor of the rule's
collection turned ``exploding_gradient``, ``vanishing_gradient``, ``dead_relu`` and ``tensor_variance``
off without a word; only ``weight_update_ratio`` said "had nothing to read". Every rule with such a
filter now says it at the run's end (one shared message, ``filtered_out``), and ``tripwire watch``
counts the rule unjudged."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire

Feed = Callable[[int], dict[str, tuple[Any, str]]]


def _said(tmp_path: Path, caplog: pytest.LogCaptureFixture, rule: Any, feed: Feed, steps: int = 6,
          **session: Any) -> tuple[list[str], list[Any]]:
    """The "had nothing to read" WARNINGs a session says at close, and its findings."""
    s = tripwire.Session(rules=[rule], out_dir=str(tmp_path / "run"), save={"interval": 1}, **session)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for i in range(steps):
            s.step("train", i, {"loss": (1.0, "losses"), **feed(i)})
        s.close()
    return [r.getMessage() for r in caplog.records if "had nothing to read" in r.getMessage()], list(s.findings)


def test_exploding_gradient_whose_exclude_leaves_out_every_gradient_says_so(tmp_path: Path,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    said, found = _said(tmp_path, caplog, "exploding_gradient",
                        lambda i: {"gradients/fc.bias": (np.array([1e9]), "gradients")})
    assert found == []
    assert said == [
        "tripwire: rule 'exploding_gradient' had nothing to read: include='.*' (its default) and exclude (its "
        "default, which `tripwire rules exploding_gradient` shows) leave out every gradient captured "
        "(gradients/fc.bias), so the rule never judged"], said


def test_vanishing_gradient_whose_include_matches_nothing_says_so(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    said, _ = _said(tmp_path, caplog, {"name": "vanishing_gradient", "include": "conv"},
                    lambda i: {"gradients/fc1.weight": (np.array([1e-9]), "gradients"),
                               "gradients/fc2.weight": (np.array([1.0]), "gradients")})
    assert len(said) == 1, said
    assert ("rule 'vanishing_gradient' had nothing to read: include='conv' and exclude (its default, which "
            "`tripwire rules vanishing_gradient` shows) leave out every gradient captured (gradients/fc1.weight, "
            "gradients/fc2.weight), so the rule never judged") in said[0]


def test_dead_relu_whose_include_matches_nothing_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    said, found = _said(tmp_path, caplog, {"name": "dead_relu", "include": "conv"},
                        lambda i: {"fc/output": (np.zeros(10), "relu_outputs")})
    assert found == []
    assert said == ["tripwire: rule 'dead_relu' had nothing to read: include='conv' leaves out every relu_outputs "
                    "tensor captured (fc/output), so the rule never judged"], said


def test_tensor_variance_whose_include_matches_nothing_says_so(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    said, _ = _said(tmp_path, caplog, {"name": "tensor_variance", "collection": "gradients", "include": "zzz"},
                    lambda i: {"gradients/fc.weight": (np.array([1e3, -1e3]), "gradients")})
    assert said == ["tripwire: rule 'tensor_variance' had nothing to read: include='zzz' leaves out every gradients "
                    "tensor captured (gradients/fc.weight), so the rule never judged"], said


def test_input_not_normalized_whose_include_matches_nothing_says_so(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    said, found = _said(tmp_path, caplog, {"name": "input_not_normalized", "include": "^pixels$"},
                        lambda i: {"x": (np.full(10, 200.0), "inputs")})
    assert found == []
    assert said == ["tripwire: rule 'input_not_normalized' had nothing to read: include='^pixels$' leaves out every "
                    "input captured (x), so the rule never judged"], said


def test_poor_weight_initialization_whose_filters_leave_out_every_weight_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    said, found = _said(tmp_path, caplog, {"name": "poor_weight_initialization", "include": "conv"},
                        lambda i: {"fc.weight": (np.zeros(4), "weights")})
    assert found == []
    assert said == [
        "tripwire: rule 'poor_weight_initialization' had nothing to read: include='conv' and exclude (its default, "
        "which `tripwire rules poor_weight_initialization` shows) leave out every weight captured (fc.weight), so the "
        "rule never judged"], said


def test_weight_update_ratio_says_it_through_the_shared_message(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    said, _ = _said(tmp_path, caplog, "weight_update_ratio",
                    lambda i: {"update_ratio/fc.bias": (5.0, "optimizer")})
    assert said == ["tripwire: rule 'weight_update_ratio' had nothing to read: include='.*' (its default) and "
                    "exclude='(?i)(bias|gamma|layer_?scale|token)' (its default) leave out every update ratio captured "
                    "(update_ratio/fc.bias), so the rule never judged"], said


def test_a_filter_that_leaves_one_tensor_in_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    said, found = _said(tmp_path, caplog, {"name": "dead_relu", "include": "l1"},
                        lambda i: {"l1/output": (np.r_[np.zeros(99), 1.0], "relu_outputs"),
                                   "l2/output": (np.zeros(100), "relu_outputs")})
    assert said == []
    assert [(f.rule, f.step, f.tensors) for f in found] == [("dead_relu", 4, ("l1/output",))]


def test_a_collection_not_captured_is_said_as_before_not_as_filtered(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    said, _ = _said(tmp_path, caplog, {"name": "dead_relu", "include": "conv"}, lambda i: {})
    assert len(said) == 1 and "no tensor of the 'relu_outputs' collection was captured" in said[0], said
    assert "leaves out" not in said[0]


def test_watch_counts_a_rule_left_nothing_by_its_filter_unjudged(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    rule = {"name": "tensor_variance", "collection": "gradients", "include": "zzz"}
    _said(tmp_path, caplog, rule, lambda i: {"gradients/fc.weight": (np.array([1e3, -1e3]), "gradients")})
    watcher = tripwire.Watcher(str(tmp_path / "run"), {"rules": [rule]}, record=False, echo=lambda f: None)
    watcher.watch(once=True)
    assert watcher.unjudged() == ["tensor_variance"]
    assert [m for m in watcher.unmatched() if "had nothing to read" in m] == [
        "rule 'tensor_variance' had nothing to read: include='zzz' leaves out every gradients tensor captured "
        "(gradients/fc.weight), so the rule never judged"]

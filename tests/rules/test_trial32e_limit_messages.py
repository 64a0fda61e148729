"""Trial 32e F6, F9 and F5's message part.

F6: the rules' messages rounded a value above its limit to the limit ("input 'x' has mean 5 ... (limits
|mean| <= 5)" of a mean of 5.0001): ``fmt_vs`` gives a value beside its limit enough significant digits
to compare as the numbers do. F9: ``poor_weight_initialization``'s documented ``|mean(w) - 1| <= 0.05``
did not hold at 1.05 and 0.95 (float rounding). F5: ``exploding_gradient``'s divergence message said a
first loss of -1 was "its initial 1"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire


def _messages(tmp_path: Path, rule: Any, records: list[dict[str, tuple[Any, str]]],
              **session: Any) -> list[tuple[int, str]]:
    """``(step, message)`` of the findings of ``rule`` over one record per step (a loss of 1 added
    where the record has none)."""
    s = tripwire.Session(rules=[rule], out_dir=str(tmp_path / "run"), save={"interval": 1}, **session)
    for i, record in enumerate(records):
        s.step("train", i, {"loss": (1.0, "losses"), **record})
    s.close()
    return [(f.step, f.message) for f in s.findings]


@pytest.mark.parametrize("value, limit, expected", [
    (5.0001, 5.0, ("5.0001", "5")),
    (1000.01, 1000.0, ("1000.01", "1000")),
    (1.0001e7, 1e7, ("1.0001e+07", "1e+07")),
    (10002.0, 1e4, ("10002", "1e+04")),
    (0.99e-8, 1e-8, ("9.9e-09", "1e-08")),          # already apart: fmt's text
    (1000.0, 1000.0, ("1000", "1000")),              # equal numbers read equal
    (0.33337, 0.33336, ("0.33337", "0.33336")),     # a limit fmt rounds (0.3334) gets the digits too
    (-5.0001, -5.0, ("-5.0001", "-5")),
    (float("nan"), 3.0, ("nan", "3")),
    (float("inf"), 1e4, ("inf", "1e+04")),
])
def test_fmt_vs_prints_a_value_apart_from_its_limit(value: float, limit: float, expected: tuple[str, str]) -> None:
    from tripwire.rules._common import fmt_vs

    assert fmt_vs(value, limit) == expected


def test_fmt_vs_texts_compare_as_the_numbers_do() -> None:
    from tripwire.rules._common import fmt_vs

    rng = np.random.default_rng(0)
    for limit in (5.0, 1000.0, 1e4, 1e-8, 0.95, 1 / 3, 70.0, 2.0 / 7):
        for rel in (1e-15, 1e-12, 1e-9, 1e-6, 1e-4, 1e-2):
            for value in (limit * (1 + rel), limit * (1 - rel), limit * (1 + rel * rng.random())):
                shown, said = fmt_vs(value, limit)
                want = np.sign(value - limit)
                assert np.sign(float(shown) - float(said)) == want, (value, limit, shown, said)
                assert np.sign(float(shown) - limit) == want, (value, limit, shown, said)


def test_input_not_normalized_says_a_mean_just_above_its_limit(tmp_path: Path) -> None:
    [(step, message)] = _messages(tmp_path, "input_not_normalized", [{"x": (np.full(10, -5.0001), "inputs")}])
    assert message.startswith("input 'x' has mean -5.0001 and std ") and "(limits |mean| <= 5, std <= 5)" in message


def test_tensor_variance_says_a_variance_just_above_its_limit(tmp_path: Path) -> None:
    w = np.array([-100.0, 100.0] * 5) * 1.0001  # variance 10002.0001
    [(step, message)] = _messages(tmp_path, "tensor_variance", [{"w": (w, "weights")}] * 3)
    assert message.startswith("the variance of w is 10002, above the accepted range [0, 1e+04]."), message


def test_tensor_variance_says_a_variance_just_below_its_lower_limit(tmp_path: Path) -> None:
    w = np.array([-1.0, 1.0]) * 0.99995  # variance 0.9999
    [(step, message)] = _messages(tmp_path, {"name": "tensor_variance", "min_variance": 1.0},
                                  [{"w": (w, "weights")}] * 3)
    assert message.startswith("the variance of w is 0.9999, below the accepted range [1, 1e+04]."), message


def _gradients(first: float, last: float) -> dict[str, tuple[Any, str]]:
    return {"gradients/fc1.weight": (np.array([first]), "gradients"),
            "gradients/fc2.weight": (np.array([last]), "gradients")}


def test_exploding_gradient_says_a_norm_just_above_max_norm(tmp_path: Path) -> None:
    [(step, message)] = _messages(tmp_path, "exploding_gradient", [_gradients(1000.01, 1000.01)] * 3)
    assert step == 2
    assert message.startswith("the gradient gradients/fc1.weight has norm 1000.01 (limit max_norm=1000)"), message


def test_exploding_gradient_says_a_burst_just_beyond_burst_times_max_norm(tmp_path: Path) -> None:
    [(step, message)] = _messages(tmp_path, "exploding_gradient", [_gradients(1.0001e7, 1e7)])
    assert step == 0
    assert message.startswith("the gradient gradients/fc1.weight has norm 1.0001e+07 (limit max_norm=1000, beyond "
                              "burst=1e+04 times it"), message


def test_exploding_gradient_says_a_growth_just_above_its_limit(tmp_path: Path) -> None:
    [(step, message)] = _messages(tmp_path, "exploding_gradient",
                                  [_gradients(0.1, 0.1)] * 5 + [_gradients(100.01, 100.01)] * 3)
    assert step == 7
    assert message.startswith("the gradient gradients/fc1.weight has grown to norm 100.01, 1000.1 times its initial "
                              "0.1 (limit 1000x)."), message


def test_exploding_gradient_says_a_negative_first_loss_as_it_was(tmp_path: Path) -> None:
    records = [_gradients(1.0, 1.0)] + [_gradients(10.01, 1.0)] * 5
    losses = [-1.0] + [2.01] * 5
    found = _messages(tmp_path, "exploding_gradient",
                      [{**r, "loss": (loss, "losses")} for r, loss in zip(records, losses)])
    [(step, message)] = found
    assert step == 4
    assert "while loss is 2.01, 2.01 times the size of its initial -1 (limit 2x): training diverged" in message, \
        message


def test_exploding_gradient_keeps_its_message_for_a_positive_first_loss(tmp_path: Path) -> None:
    records = [_gradients(1.0, 1.0)] + [_gradients(10.01, 1.0)] * 5
    losses = [1.0] + [2.01] * 5
    [(step, message)] = _messages(tmp_path, "exploding_gradient",
                                  [{**r, "loss": (loss, "losses")} for r, loss in zip(records, losses)])
    assert step == 4
    assert message.startswith("the gradient gradients/fc1.weight has grown to norm 10.01, 10.01 times its first 1 "
                              "(limit 10x), while loss is 2.01, 2.01 times its initial 1 (limit 2x): training "
                              "diverged."), message


def test_weight_update_ratio_says_a_ratio_just_above_max_ratio(tmp_path: Path) -> None:
    [(step, message)] = _messages(tmp_path, "weight_update_ratio",
                                  [{"update_ratio/fc1.weight": (1.0001, "optimizer")}])
    assert message.startswith("the update of fc1.weight is 1.0001 times its size (limit 1; healthy ~1e-3)"), message


def test_poor_weight_initialization_says_a_ratio_just_above_its_limit(tmp_path: Path) -> None:
    pm = lambda a: np.array([-a, a, -a, a])  # noqa: E731
    [(step, message)] = _messages(
        tmp_path, "poor_weight_initialization",
        [{"l1/output": (pm(1.0), "activations"), "l2/output": (pm(100.01), "activations"),
          "fc.weight": (pm(0.5), "weights")}], include_collections=["activations"])
    assert ("ranges from 1 (l1/output) to 10002 (l2/output), a ratio of 10002 (limit 1e+04)") in message, message


def test_vanishing_gradient_says_its_limits(tmp_path: Path) -> None:
    [(step, message)] = _messages(tmp_path, "vanishing_gradient", [_gradients(0.999e-5, 0.01)] * 3)
    assert message.startswith("the gradient of the first layer gradients/fc1.weight has norm 9.99e-06 (limit "
                              "min_norm=0.0001), 0.000999 times that of the last layer gradients/fc2.weight (0.01; "
                              "limit ratio=0.001x): the first layers barely learn."), message


def test_dead_relu_says_a_fraction_as_it_compares(tmp_path: Path) -> None:
    z = np.r_[np.zeros(95), np.ones(5)]
    [(step, message)] = _messages(tmp_path, "dead_relu", [{"l1/output": (z, "relu_outputs")}] * 5)
    assert message.startswith("1 ReLU layer(s) output 95% zeros, e.g. l1/output (limit 95%;"), message


def test_tree_depth_says_one_round_as_one(tmp_path: Path) -> None:
    [(step, message)] = _messages(tmp_path, {"name": "tree_depth", "no_split_rounds": 1},
                                  [{"trees/depth": (0.0, "trees")}], include_collections=["trees"])
    assert message.startswith("no tree of round 0 (1 round, every tree this training added) made a split"), message


@pytest.mark.parametrize("value", [1.05, 0.95, 1.0499, 0.9501])
def test_poor_weight_initialization_exempts_weights_within_0_05_of_one(tmp_path: Path, value: float) -> None:
    assert _messages(tmp_path, "poor_weight_initialization", [{"fc.weight": (np.full(4, value), "weights")}]) == []


@pytest.mark.parametrize("value", [1.0625, 0.9375, 1.0501])
def test_poor_weight_initialization_still_fires_beyond_0_05_of_one(tmp_path: Path, value: float) -> None:
    [(step, message)] = _messages(tmp_path, "poor_weight_initialization",
                                  [{"fc.weight": (np.full(4, value), "weights")}])
    assert message.startswith("1 weight tensor(s) start constant (every value "), message


def test_poor_weight_initialization_says_a_constant_just_past_the_ones_exemption_apart_from_it(tmp_path: Path) -> None:
    [(step, message)] = _messages(tmp_path, "poor_weight_initialization",
                                  [{"fc.weight": (np.full(4, 1.0500001), "weights")}])
    assert message.startswith("1 weight tensor(s) start constant (every value 1.0500001), e.g. fc.weight"), message


def test_weight_update_ratio_says_a_learning_rate_just_below_tiny_lr_apart_from_it(tmp_path: Path) -> None:
    found = _messages(tmp_path, "weight_update_ratio",
                      [{"update_ratio/fc1.weight": (0.0, "optimizer"), "lr/0": (0.99999e-8, "optimizer")}] * 5)
    [(step, message)] = found
    assert step == 4
    assert "no parameter moves at all at a learning rate of 9.9999e-09 (lr/0): the learning rate is ~0" in message, \
        message
    assert "too small to move the weights (below 1e-08)" in message, message

"""Trial 32d F4: ``weight_update_ratio`` blamed a learning-rate scheduler for a learning rate that was
constant at 1e-12 from step 0 (Adam's ``lr=1e-12`` typed by mistake; a ReduceLROnPlateau that never
changed it). Where every learning rate recorded in the training up to the finding was that small, the
message now leads with a mistyped initial learning rate, its first value and step named; the scheduler
causes are kept for a learning rate that fell."""

from __future__ import annotations

from typing import Any

import numpy as np

from tripwire.rules import WeightUpdateRatio

TYPO = "The likely cause is a mistyped initial learning rate"
SCHEDULER = "a learning-rate scheduler stepped at every batch"


def _records(ratios: list[float], lrs: list[float], grad: float | None = None, every: int = 10) -> list[Any]:
    """One save every ``every`` steps: ``update_ratio/head.weight``, ``lr/0`` (and a gradient of norm ``grad``)."""
    out = []
    for i, (r, lr) in enumerate(zip(ratios, lrs)):
        tensors: dict[str, Any] = {"update_ratio/head.weight": (r, "optimizer"), "lr/0": (lr, "optimizer")}
        if grad is not None:
            tensors["gradients/head.weight"] = (np.full((4, 4), grad / 4), "gradients")
        out.append(("train", i * every, tensors))
    return out


def test_the_trials_constant_tiny_learning_rate_is_called_mistyped(feed) -> None:
    found = feed(WeightUpdateRatio(), _records([0.0] * 5, [1e-12] * 5), collections=["optimizer"], save_interval=10)
    [finding] = found
    assert finding.step == 40
    assert finding.message.endswith(
        "no parameter moves at all at a learning rate of 1e-12 (lr/0): the learning rate is ~0, too small to move "
        "the weights (below 1e-08). It was ~0 from the start: it has been 1e-12 since its first save (step 0). "
        f"{TYPO} (an exponent off: 1e-12 where something like 1e-3 was meant); check the learning rate given to the "
        "optimizer (or a schedule's starting value). No scheduler brought it there, and a lower learning rate "
        "would not help."), finding.message
    assert SCHEDULER not in finding.message


def test_a_constant_tiny_rate_with_ratios_above_0_is_called_mistyped_too(feed) -> None:
    # (ratios recorded above 0: the rate's measure is known, 0.1 per unit, and 1e-9 gives 1e-10)
    found = feed(WeightUpdateRatio(), _records([1e-10] * 5, [1e-9] * 5, grad=0.3), collections=["optimizer", "gradients"],
                 save_interval=10)
    message = found[0].message
    assert "It was ~0 from the start: it has been 1e-09 since its first save (step 0). " + TYPO in message, message
    assert "the gradients are not 0 (gradients/head.weight has norm 0.3 here)" in message, message
    assert SCHEDULER not in message


def test_a_tiny_rate_a_plateau_scheduler_halved_names_its_first_value(feed) -> None:
    lrs = [1e-12, 1e-12, 5e-13, 5e-13, 2.5e-13]
    found = feed(WeightUpdateRatio(), _records([0.0] * 5, lrs), collections=["optimizer"], save_interval=10)
    message = found[0].message
    assert ("It was ~0 from the start: it was 1e-12 at its first save (step 0) and never above 1e-12. " + TYPO
            + " (an exponent off: 1e-12 where") in message, message


def test_a_rate_that_fell_keeps_the_scheduler_causes(feed) -> None:
    # (trial 27g: a StepLR stepped per batch, 0.05 at step 0)
    lrs = [0.05 * 0.1 ** (s // 3) for s in range(0, 110, 10)]
    ratios = [5.66e-5, 5.6e-8, 5.5e-11] + [0.0] * 8
    found = feed(WeightUpdateRatio(), _records(ratios, lrs, grad=0.4), collections=["optimizer", "gradients"],
                 save_interval=10)
    message = found[0].message
    assert SCHEDULER in message and "mistyped" not in message, message


def test_a_warm_up_from_0_that_later_decayed_keeps_the_scheduler_causes(feed) -> None:
    # the first rate is 0 (a warm-up's start), then 1e-3, then decayed per batch to ~0
    lrs = [0.0, 1e-3, 1e-20, 1e-22, 1e-24, 1e-26, 1e-28]
    ratios = [0.0, 1e-3, 0.0, 0.0, 0.0, 0.0, 0.0]
    found = feed(WeightUpdateRatio(), _records(ratios, lrs), collections=["optimizer"], save_interval=10)
    message = found[0].message
    assert SCHEDULER in message and "mistyped" not in message, message

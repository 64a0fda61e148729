"""weight_update_ratio's messages in trial 27g (findings 1 and 4).

F1: a StepLR stepped per batch took the learning rate from 0.05 to 5e-25 by step 70; the update
ratio was exactly 0 (the update underflows float32) while the recorded gradients were 0.03-0.5. The
message said "their gradients have become exactly 0 ... dead units ... Lower the learning rate". A
learning rate that explains the ratio is named as decayed to ~0, the gradients are called 0 only
where the recorded ones are, and a learning rate already ~0 is never to be lowered.

F4: SGD at lr 0.05 with weight_decay=1.0 (1e-4 meant) shrank the weights toward 0, and a ratio of 1.55
was "the learning rate is far too high". The message names weights near 0 (a weight decay far too
large) among the causes, and the weight decay alone where the recorded weights' norms have shrunk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tripwire.rules import WeightUpdateRatio

COLLECTIONS = ["optimizer", "gradients"]
ZERO_GRADS = "gradients have become exactly 0"
LOWER = "Lower the learning rate"


def _records(ratios: list[float], lrs: list[float] | None = None, grad: float | None = None,
             weights: list[float] | None = None, every: int = 10) -> list[Any]:
    """One save every ``every`` steps: ``update_ratio/fc.weight`` (and ``lr/0``, a gradient of norm
    ``grad * 4``, a weight of that norm: ``np.full((4, 4), x)`` has norm ``4 * x``)."""
    out = []
    for i, r in enumerate(ratios):
        tensors: dict[str, Any] = {"update_ratio/fc.weight": (r, "optimizer")}
        if lrs is not None:
            tensors["lr/0"] = (lrs[i], "optimizer")
        if grad is not None:
            tensors["gradients/fc.weight"] = (np.full((4, 4), grad), "gradients")
        if weights is not None:
            tensors["fc.weight"] = (np.full((4, 4), weights[i] / 4), "weights")
        out.append(("train", i * every, tensors))
    return out


def _step_lr_per_batch() -> tuple[list[float], list[float]]:
    """Trial 27g's run: lr 0.05 x 0.1^(step // 3), saves every 10 steps; the ratio follows the lr
    (about 1.1 per unit) until float32 can no longer hold the update (exactly 0)."""
    lrs = [0.05 * 0.1 ** (s // 3) for s in range(0, 110, 10)]
    ratios = [5.66e-5, 5.6e-8, 5.5e-11] + [0.0] * 8
    return ratios, lrs


def test_a_learning_rate_decayed_to_0_is_named_with_the_recorded_gradients_not_0(feed) -> None:
    ratios, lrs = _step_lr_per_batch()
    found = feed(WeightUpdateRatio(), _records(ratios, lrs, grad=0.1), collections=COLLECTIONS, save_interval=10)
    assert [f.step for f in found] == [60]  # (ratios below 1e-8 from step 20: 5 saves in a row)
    message = found[0].message
    assert "the learning rate has decayed to ~0" in message, message
    assert "at a learning rate of 5e-22 (lr/0, 0.05 at step 0)" in message, message
    assert "the gradients are not 0 (gradients/fc.weight has norm 0.4 here)" in message, message
    assert "stepped at every batch where it was meant once per epoch" in message, message
    assert ZERO_GRADS not in message and "dead units" not in message and LOWER not in message, message
    assert "a lower learning rate would not help" in message, message


def test_a_learning_rate_decayed_to_0_without_gradients_recorded(feed) -> None:
    ratios, lrs = _step_lr_per_batch()
    found = feed(WeightUpdateRatio(), _records(ratios, lrs), collections=["optimizer"], save_interval=10)
    message = found[0].message
    assert "the learning rate has decayed to ~0" in message and ZERO_GRADS not in message and LOWER not in message
    assert "the gradients are not 0" not in message, message


def test_a_tiny_ratio_that_is_not_0_at_a_decayed_learning_rate_names_it_too(feed) -> None:
    lrs = [1e-2 * 1e-3 ** i for i in range(8)]
    ratios = [1e-3 * 1e-3 ** i for i in range(8)]  # 1e-3, 1e-6, 1e-9, ...: below 1e-8 from the third save
    found = feed(WeightUpdateRatio(), _records(ratios, lrs), collections=["optimizer"], save_interval=10)
    assert [f.step for f in found] == [60]
    message = found[0].message
    assert "the parameters barely move at a learning rate of 1e-20" in message and "decayed to ~0" in message, message


def test_dead_units_keep_their_message_at_a_steady_learning_rate(feed) -> None:
    # trial 27e's case (SGD at lr=3 killed the ReLUs), gradients recorded: they are exactly 0
    ratios = [2.0e-3, 5e-2] + [0.0] * 5
    found = feed(WeightUpdateRatio(), _records(ratios, [3.0] * 7, grad=0.0), collections=COLLECTIONS)
    message = found[0].message
    assert "every recorded gradient norm is exactly 0 here" in message and "dead units" in message, message
    assert "decayed" not in message, message


def test_gradients_recorded_not_0_at_a_steady_learning_rate_are_not_called_0(feed) -> None:
    # no parameter moves, the learning rate is what moved them before, the gradients are there: the
    # optimizer does not apply them
    ratios = [2.0e-3, 1e-3] + [0.0] * 5
    found = feed(WeightUpdateRatio(), _records(ratios, [0.1] * 7, grad=0.5), collections=COLLECTIONS)
    message = found[0].message
    assert ZERO_GRADS not in message and "dead units" not in message and "decayed" not in message, message
    assert "though their gradients are not 0 (gradients/fc.weight has norm 2 here)" in message, message
    assert "the optimizer does not apply them" in message and "a learning rate of ~0" not in message, message


def test_no_learning_rate_and_no_gradients_recorded_names_both_causes(feed) -> None:
    # a ratio of exactly 0 after updates, nothing else recorded: the learning rate may have decayed
    # to ~0 as well as the gradients become 0; neither is told as a fact
    found = feed(WeightUpdateRatio(), _records([1e-3, 1e-3] + [0.0] * 5), collections=["optimizer"])
    message = found[0].message
    assert "either the learning rate has decayed to ~0" in message and "or the gradients have become exactly 0" in message
    assert "their gradients have become exactly 0" not in message and "Offer lr/<group>" in message, message


def test_a_large_ratio_names_weights_near_0_among_the_causes(feed) -> None:
    found = feed(WeightUpdateRatio(), _records([1e-3, 0.5, 1.55], [0.05] * 3), collections=["optimizer"])
    assert [f.step for f in found] == [20]
    message = found[0].message
    assert message.startswith("the update of fc.weight is 1.55 times its size (limit 1; healthy ~1e-3) at a learning rate "
                              "of 0.05: the learning rate is far too high, or the weights are near 0"), message
    assert "weight decay far too large" in message, message


def test_weights_shrunk_toward_0_name_the_weight_decay(feed) -> None:
    found = feed(WeightUpdateRatio(), _records([1e-3, 0.5, 1.55], [0.05] * 3, weights=[8.0, 0.4, 0.02]),
                 collections=["optimizer", "weights"])
    message = found[0].message
    assert "its weights have shrunk to norm 0.02, from 8 at step 0" in message and "weight decay far too large" in message
    assert "the learning rate is far too high" not in message, message


def test_weights_that_did_not_shrink_keep_the_learning_rate(feed) -> None:
    found = feed(WeightUpdateRatio(), _records([1e-3, 0.5, 1.55], [5.0] * 3, weights=[8.0, 9.0, 12.0]),
                 collections=["optimizer", "weights"])
    message = found[0].message
    assert ("the learning rate is far too high (its weights have not shrunk toward 0: norm 12 at step 20, 8 at their "
            "first save, step 0)") in message, message
    assert "weight decay" not in message, message


def test_weights_with_only_mean_and_std_recorded_tell_the_shrink_too(feed) -> None:
    # (poor_weight_initialization asks for the weights' mean and std, not their l2: the root mean
    # square shrinks as the norm does; trial 27g's run with it on)
    records = _records([1e-3, 0.5, 1.55], [0.05] * 3)
    rng = np.random.default_rng(0)
    for (_, _, tensors), scale in zip(records, [1.0, 0.05, 0.006]):
        tensors["fc.weight"] = (scale * rng.standard_normal((8, 8)), "weights")
    found = feed(WeightUpdateRatio(), records, collections={"optimizer": {}, "weights": {"reductions": ["mean", "std"]}})
    message = found[0].message
    assert "its weights have shrunk to root mean square 0.00" in message and "from 0.9" in message, message
    assert "weight decay far too large" in message and "the learning rate is far too high" not in message, message


def test_a_learning_rate_below_1e_8_with_no_earlier_measure_is_0_and_not_to_be_lowered(feed) -> None:
    # ratios of exactly 0 from the start, gradients 0 as well, the learning rate 1e-25 throughout: no
    # earlier save tells how far it moves the weights, and 1e-25 is ~0 all the same
    found = feed(WeightUpdateRatio(), _records([0.0] * 5, [1e-25] * 5, grad=0.0), collections=COLLECTIONS)
    message = found[0].message
    assert "the learning rate is ~0, too small to move the weights (below 1e-08)" in message, message
    assert LOWER not in message and "every recorded gradient norm is exactly 0 here too" in message, message

"""Trial 30i F2: ``loss_scale_collapse``'s message says only what its numbers show, in no one framework's
terms. It said "the loss scaler skips the optimizer step at every step and the weights do not move"
right after "at least 18 of the 20 steps were skipped" (3 of 21 steps were applied), named GradScaler's
``backoff_factor`` (Keras's LossScaleOptimizer has none) and gave torch.sqrt / torch.where as the causes
in a Keras model."""

from __future__ import annotations

from typing import Any

from tripwire.rules import LossScaleCollapse


def _saves(*pairs: tuple[int, float]) -> list[Any]:
    return [("train", step, {"loss_scale": (scale, "optimizer")}) for step, scale in pairs]


def test_some_steps_applied_is_no_collapse(feed) -> None:
    # t7b_lowscale.py: 2^15 at step 0, 0.5 at step 20: 16 halvings in 20 steps, some steps applied; the rule
    # said "every step" of it (30i F2), and since session 30 (trial 30g F1) it does not fire on it at all
    assert feed(LossScaleCollapse(min_scale=1.0), _saves((0, 32768.0), (20, 0.5))) == []


def test_every_step_skipped_says_the_weights_have_not_moved(feed) -> None:
    [found] = feed(LossScaleCollapse(min_scale=1.0), _saves((0, 32768.0), (20, 2.0 ** -5)))
    assert ("skipped every one of the 20 optimizer steps since then: the weights have not moved since"
            in found.message), found.message


def test_the_message_names_no_frameworks_function_or_option(feed) -> None:
    [found] = feed(LossScaleCollapse(min_scale=1.0), _saves((0, 32768.0), (20, 2.0 ** -5)))
    message = found.message
    for term in ("backoff_factor", "torch.", "GradScaler", "LossScaleOptimizer", "keras"):
        assert term not in message, (term, message)
    assert "sqrt, log or a division at 0" in message and "the branch a where(...) does not take" in message, message


def test_a_limit_above_one_does_not_claim_the_scale_is_below_one(feed) -> None:
    [found] = feed(LossScaleCollapse(min_scale=256.0), _saves((0, 32768.0), (10, 32.0)))
    assert "is 32 (2^5) (loss_scale; limit min_scale=256)" in found.message, found.message
    assert "below 1" not in found.message and "lowers its scale only at steps it skips" in found.message

"""Trial 33e F2: ``loss_not_decreasing`` told a frozen backbone and shuffled labels the same dozen
causes, though the run showed the frozen weights' norms unchanged at every save. Where the run holds
weights (their ``l2``) that did not change at all while the loss did not fall, the message says so
first, naming them beside those that trained; where every weight changed, it says nothing more."""

from __future__ import annotations

import numpy as np

from tripwire import Session


def _run(frozen: bool, head_frozen: bool = False) -> str:
    s = Session(rules=[{"name": "loss_not_decreasing", "num_steps": 40}], write=False, save_interval=5,
                include_collections=["weights"])
    rng = np.random.default_rng(0)
    backbone = rng.normal(size=(8, 8))
    head = rng.normal(size=(8, 2))
    message = ""
    for step in range(100):
        if not frozen:
            backbone = backbone + 0.01 * rng.normal(size=backbone.shape)
        if not head_frozen:
            head = head + 0.01 * rng.normal(size=head.shape)
        loss = 2.3 + 0.01 * rng.normal()
        s.step("train", step, {"loss": (loss, "losses"), "backbone.weight": (backbone, "weights"),
                               "head.weight": (head, "weights")})
        found = [f for f in s.findings if f.rule == "loss_not_decreasing"]
        if found:
            message = found[0].message
            break
    s.close()
    assert message, "loss_not_decreasing did not fire on a flat loss"
    return message


def test_unchanged_weights_are_named_first() -> None:
    message = _run(frozen=True)
    assert "Here: 1 of the 2 weights saved since step 0 did not change at all (backbone.weight (l2 " in message
    assert "while the others train" in message
    assert message.index("Here:") < message.index("Usual causes")


def test_every_weight_still_is_said_plainly() -> None:
    """Session 37: with no weight trained the message said "none of the model's weights saved since
    step 0 did not change at all", which says the opposite."""
    message = _run(frozen=True, head_frozen=True)
    assert "Here: all 2 weights saved since step 0 did not change at all (backbone.weight (l2 " in message
    assert "none of" not in message
    assert "or no optimizer step taken" in message


def test_nothing_is_said_where_every_weight_changed() -> None:
    assert "Here:" not in _run(frozen=False)

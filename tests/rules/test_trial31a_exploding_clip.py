"""Trial 31a F3: ``exploding_gradient`` stopped a Keras regression trained with
``SGD(global_clipnorm=1.0)`` and advised "Usual fixes: gradient clipping". Where the run records the
optimizer's clipping (``clip/global_norm``, ``clip/norm``, ``clip/value``, kind optimizer: the Keras
callback records them), the message says the applied update is clipped already and leaves clipping out
of the fixes; without such a record the usual fixes stay."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tripwire.rules import ExplodingGradient, check_rule


def _grads(norms: list[float], clips: dict[str, float] | None = None, loss: float = 2.3) -> list[Any]:
    out = []
    for step, g in enumerate(norms):
        grad = np.full((4, 4), g / 4)  # (norm g)
        values: dict[str, Any] = {"gradients/fc1.weight": (grad, "gradients"),
                                  "gradients/out.weight": (grad, "gradients"), "loss": (np.float64(loss), "losses")}
        for name, limit in (clips or {}).items():
            values[name] = (limit, "optimizer")
        out.append(("train", step, values))
    return out


NORMS = [1.0, 5.0, 50.0, 2e3, 3e3, 4e3]  # (above max_norm=1000 from step 3: found at step 5)


@pytest.mark.parametrize(("clips", "said"), [
    ({"clip/global_norm": 1.0}, "to a global norm 1)"),
    ({"clip/norm": 0.5, "clip/value": 2.0}, "to a norm per gradient 0.5, value 2)"),
])
def test_a_run_that_clips_is_not_told_to_clip(feed, clips: dict[str, float], said: str) -> None:
    [found] = feed(ExplodingGradient(), _grads(NORMS, clips), collections=["gradients", "losses", "optimizer"])
    message = found.message
    assert found.step == 5 and "has norm 4000 (limit max_norm=1000)" in message, message
    assert "gradient clipping" not in message, message
    assert ("The optimizer clips the gradients it applies already (" + said + ", so the update applied is clipped; "
            "the norms judged here are the gradients' before clipping. Usual fixes: a lower learning rate") in message


def test_without_a_clipping_record_the_usual_fixes_stay(feed) -> None:
    [found] = feed(ExplodingGradient(), _grads(NORMS), collections=["gradients", "losses"])
    assert "Usual fixes: gradient clipping" in found.message and "clips the gradients" not in found.message


def test_a_clipping_limit_of_zero_or_nan_is_no_clipping(feed) -> None:
    [found] = feed(ExplodingGradient(), _grads(NORMS, {"clip/norm": 0.0, "clip/value": float("nan")}),
                   collections=["gradients", "losses", "optimizer"])
    assert "Usual fixes: gradient clipping" in found.message


def test_the_rule_still_passes_its_contract() -> None:
    check_rule(ExplodingGradient)

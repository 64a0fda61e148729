"""exploding_gradient's message for gradients offered before scaler.unscale_ (trial 27g, polish).

fp16 autocast with a GradScaler, the gradients offered before ``scaler.unscale_``: their norms were
4.26e4 from the first save (0.65 once divided by the scale, 65536) and the message gave the usual
fixes. Where the norm was above max_norm from the first save, the loss is at unit scale and the norm
over 65536 is an ordinary one, the message says what gradients offered before unscale_ look like."""

from __future__ import annotations

from typing import Any

import numpy as np

from tripwire.rules import ExplodingGradient

HINT = "before scaler.unscale_(optimizer)"


def _records(norms: list[float], loss: float = 2.3) -> list[Any]:
    """Two layers (first and last, the same norm), a loss at each save."""
    out = []
    for step, g in enumerate(norms):
        grad = np.full((4, 4), g / 4)  # (norm g)
        out.append(("train", step, {"gradients/fc1.weight": (grad, "gradients"),
                                    "gradients/out.weight": (grad, "gradients"),
                                    "loss": (np.float64(loss), "losses")}))
    return out


def test_gradients_scaled_from_the_first_save_name_unscale(feed) -> None:
    found = feed(ExplodingGradient(), _records([4.262e4] * 5), collections=["gradients", "losses"])
    assert [f.step for f in found] == [2]
    message = found[0].message
    assert HINT in message and "divided by its default loss scale 65536 is 0.6503" in message, message
    assert "if the run uses torch.amp.GradScaler" in message, message


def test_gradients_that_grew_over_training_get_no_unscale_hint(feed) -> None:
    found = feed(ExplodingGradient(), _records([1.0, 5.0, 50.0, 2e3, 3e3, 4e3]), collections=["gradients", "losses"])
    assert found and HINT not in found[0].message, found


def test_a_loss_far_from_unit_scale_keeps_its_own_hint(feed) -> None:
    found = feed(ExplodingGradient(), _records([4.262e4] * 5, loss=5e3), collections=["gradients", "losses"])
    assert found and HINT not in found[0].message and "far from unit scale" in found[0].message, found[0].message


def test_a_norm_far_beyond_any_loss_scale_gets_no_unscale_hint(feed) -> None:
    found = feed(ExplodingGradient(), _records([5e6] * 5), collections=["gradients", "losses"])
    assert found and HINT not in found[0].message, found[0].message

"""Trial 27a: the advice of ``vanishing_gradient`` and ``loss_not_decreasing`` names the causes a
fresh user's Lightning bugs had.

- F4: a ReLU MLP fed 0-255 pixel values had an exactly-zero first-layer gradient (its ReLUs died),
  and ``vanishing_gradient`` advised "ReLU-family activations instead of sigmoid/tanh" and nothing
  about dead ReLUs or the input scale.
- F5: ``F.mse_loss(pred (B, 1), y (B,))`` broadcasts to (B, B); the loss held near var(y), and
  ``loss_not_decreasing``'s causes did not name a target/output shape mismatch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tripwire.rules import LossNotDecreasing, VanishingGradient


def _grads(first: float, step: int, extra: dict[str, Any] | None = None) -> Any:
    out: dict[str, Any] = {"loss": (1.0, "losses")}
    for i, norm in enumerate([first, 1e-3, 1e-1, 1.0]):
        out[f"gradients/net.{2 * i}.weight"] = (np.full((4, 4), norm / 4.0), "gradients")
    out.update(extra or {})
    return ("train", step, out)


def _relu(step: int) -> dict[str, Any]:
    return {"net.1/output": (np.zeros((8, 4)), "relu_outputs")}


def _sigmoid(step: int) -> dict[str, Any]:
    return {"net.1.sigmoid/input": (np.ones((8, 4)), "activation_inputs")}


def test_an_exactly_zero_first_gradient_names_dead_relus_first(feed) -> None:
    found = feed(VanishingGradient(), [_grads(0.0, s) for s in range(3)])
    assert [f.rule for f in found] == ["vanishing_gradient"]
    msg = found[0].message
    assert "dead ReLU" in msg and "unit scale" in msg and "learning rate" in msg, msg
    assert "weights that went NaN" in msg  # (trial 19d's hint stays)
    # the dead ReLUs come before the sigmoid/tanh advice, which is kept for a network we know nothing of
    assert msg.index("dead ReLU") < msg.index("instead of sigmoid/tanh"), msg


def test_a_small_first_gradient_keeps_the_sigmoid_advice_and_names_dead_relus_too(feed) -> None:
    found = feed(VanishingGradient(), [_grads(1e-7, s) for s in range(3)])
    msg = found[0].message
    assert "ReLU-family activations instead of sigmoid/tanh" in msg and "dead ReLU" in msg, msg
    assert "weights that went NaN" not in msg


@pytest.mark.parametrize("first", [0.0, 1e-7])
def test_a_relu_network_is_not_told_to_use_relu(feed, first: float) -> None:
    found = feed(VanishingGradient(), [_grads(first, s, _relu(s)) for s in range(3)],
                 include_collections=["relu_outputs"])
    assert [f.rule for f in found] == ["vanishing_gradient"]
    msg = found[0].message
    assert "instead of sigmoid/tanh" not in msg and "ReLU-family" not in msg, msg
    assert "dead ReLU" in msg and "net.1/output" in msg, msg  # (the ReLU layer seen)


def test_a_sigmoid_network_gets_the_sigmoid_advice_first(feed) -> None:
    found = feed(VanishingGradient(), [_grads(1e-7, s, _sigmoid(s)) for s in range(3)],
                 include_collections=["activation_inputs"])
    msg = found[0].message
    assert msg.index("instead of sigmoid/tanh") < msg.index("dead ReLU"), msg


def test_loss_not_decreasing_names_a_target_shape_that_broadcasts(feed, loss_records) -> None:
    rng = np.random.default_rng(0)
    found = feed(LossNotDecreasing(num_steps=50), loss_records(1.0 + 0.01 * rng.standard_normal(60)))
    assert [f.rule for f in found] == ["loss_not_decreasing"]
    msg = found[0].message
    assert "broadcast" in msg and "(B, 1)" in msg and "(B,)" in msg, msg

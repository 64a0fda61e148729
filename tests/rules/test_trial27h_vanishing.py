"""Trial 27h F2: ``vanishing_gradient``'s every-layer clause (``min_abs_mean``) led with "saturated
activations" on a ReLU MLP whose hidden bias of -5 killed every ReLU (``relu_outputs`` captured,
zero fraction 1.0; every weight gradient exactly 0). It stopped the run before the configured
``dead_relu`` could fire, so the user was never told "dead ReLU". The clause's advice now follows the
captured activations and an exactly-zero first-layer gradient, as the ratio clause's does (trial 27a).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tripwire.rules import VanishingGradient


def _grads(step: int, first: float, last: float, extra: dict[str, Any] | None = None) -> Any:
    """A 2-layer net's weight gradients (both below min_abs_mean: the ratio clause has a zero or
    tiny last layer and does not judge), its loss held at its first value."""
    out: dict[str, Any] = {"loss": (2.3, "losses"),
                           "gradients/net.0.weight": (np.full((4, 4), first), "gradients"),
                           "gradients/net.2.weight": (np.full((4, 4), last), "gradients")}
    out.update(extra or {})
    return ("train", step, out)


def _relu() -> dict[str, Any]:
    return {"net.1/output": (np.zeros((8, 4)), "relu_outputs")}


def _sigmoid() -> dict[str, Any]:
    return {"net.1.sigmoid/input": (np.full((8, 4), 30.0), "activation_inputs")}


def _only_finding(found: list[Any]) -> str:
    assert [f.rule for f in found] == ["vanishing_gradient"], found
    msg = found[0].message
    assert msg.startswith("every captured layer's mean |gradient| is below 1e-07 (2 captured;"), msg
    return msg


def test_dead_relus_captured_lead_the_every_layer_message(feed) -> None:
    # the trial's fault: relu_outputs all 0, every weight gradient exactly 0
    found = feed(VanishingGradient(), [_grads(s, 0.0, 0.0, _relu()) for s in range(3)],
                 include_collections=["relu_outputs"])
    msg = _only_finding(found)
    assert "The network has ReLUs (net.1/output captured); the usual cause is dead ReLUs" in msg, msg
    for cause in ("large negative bias", "unit scale", "learning rate"):
        assert cause in msg, (cause, msg)
    assert msg.index("dead ReLU") < msg.index("saturated"), msg
    assert "weights that went NaN" in msg  # (kept: NaN weights behind a ReLU leave gradients of 0 too)


def test_an_exactly_zero_first_gradient_leads_with_dead_relus_without_activations(feed) -> None:
    # the default set captures no activation: the exactly-zero first-layer gradient tells
    found = feed(VanishingGradient(), [_grads(s, 0.0, 0.0) for s in range(3)])
    msg = _only_finding(found)
    assert "A first-layer gradient of exactly 0 usually means dead ReLUs" in msg, msg
    assert "large negative bias" in msg and msg.index("dead ReLU") < msg.index("saturated"), msg


def test_tiny_nonzero_gradients_of_an_unknown_network_keep_saturation_first(feed) -> None:
    found = feed(VanishingGradient(), [_grads(s, 1e-9, 2e-9) for s in range(3)])
    msg = _only_finding(found)
    assert "Usual causes: saturated activations" in msg and "dead ReLUs:" not in msg, msg


@pytest.mark.parametrize("first, last", [(0.0, 0.0), (1e-9, 2e-9)])
def test_a_sigmoid_network_keeps_saturation_first(feed, first: float, last: float) -> None:
    # a sigmoid/tanh gives exactly 0 only saturated in every unit: no dead ReLUs there
    found = feed(VanishingGradient(), [_grads(s, first, last, _sigmoid()) for s in range(3)],
                 include_collections=["activation_inputs"])
    msg = _only_finding(found)
    assert "Usual causes: saturated activations" in msg and "dead ReLUs:" not in msg, msg


def test_the_ratio_clause_names_a_large_negative_bias_too(feed) -> None:
    recs = []
    for s in range(3):
        out: dict[str, Any] = {"loss": (2.3, "losses"),
                               "gradients/net.0.weight": (np.zeros((4, 4)), "gradients"),
                               "gradients/net.2.weight": (np.full((4, 4), 0.1), "gradients")}
        out.update(_relu())
        recs.append(("train", s, out))
    found = feed(VanishingGradient(), recs, include_collections=["relu_outputs"])
    assert [f.rule for f in found] == ["vanishing_gradient"]
    msg = found[0].message
    assert "the first layers barely learn" in msg and "large negative bias" in msg, msg

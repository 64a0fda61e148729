"""Trial 43c F1: any captured tensor named like a normalisation layer silenced
``input_not_normalized``: a Keras ``BatchNormalization`` after the first ``Dense`` (its gradients
named ``batch_normalization/gamma``), or a transformer's ``layer_normalization``, hid inputs of mean
100 and std 30. A per-layer normalisation now counts only where its layer is the model's first (the
first weights, else gradients, captured); a ``Rescaling``/``Normalization`` layer anywhere, as before."""

from __future__ import annotations

import numpy as np
import pytest

import tripwire


def _judge(extra: dict[str, tuple[np.ndarray, str]]) -> list[str]:
    rng = np.random.default_rng(0)
    inputs = rng.normal(100, 30, size=(16, 4))
    session = tripwire.Session(write=False, save_interval=1, rules=["input_not_normalized"],
                               collections=["losses", "inputs", "weights", "gradients", "activations"])
    session.step("train", 0, {"loss": (np.float64(1.0), "losses"), "inputs": (inputs, "inputs"), **extra})
    return [f.rule for f in session.findings]


W = np.linspace(-1, 1, 16).reshape(4, 4)


@pytest.mark.parametrize("extra", [
    {},
    {"dense/kernel": (W, "weights"), "batch_normalization/gamma": (np.ones(4), "weights")},
    {"gradients/dense/kernel": (W, "gradients"), "gradients/batch_normalization/gamma": (np.ones(4), "gradients")},
    {"encoder/dense/kernel": (W, "weights"), "encoder/layer_normalization/gamma": (np.ones(4), "weights")},
    {"fc.weight": (W, "weights"), "GroupNormalization.weight": (np.ones(4), "weights")},
])
def test_a_normalisation_inside_the_network_does_not_hide_raw_inputs(extra: dict) -> None:
    assert _judge(extra) == ["input_not_normalized"]


@pytest.mark.parametrize("extra", [
    {"batch_normalization/gamma": (np.ones(4), "weights"), "dense/kernel": (W, "weights")},
    {"gradients/layer_normalization/gamma": (np.ones(4), "gradients"), "gradients/dense/kernel": (W, "gradients")},
    {"batch_normalization/gamma": (np.ones(4), "activations")},  # (no weights, no gradients: cannot tell, as before)
    {"dense/kernel": (W, "weights"), "normalization/output": (np.ones(4), "inputs")},  # Keras's Normalization layer
    {"dense/kernel": (W, "weights"), "rescaling/output": (np.ones(4), "activations")},
])
def test_a_first_layer_normalisation_or_a_rescaling_layer_still_counts(extra: dict) -> None:
    assert _judge(extra) == []

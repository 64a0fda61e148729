"""Trial 43c F2: ``poor_weight_initialization`` stopped healthy models: an ``nn.PReLU`` (its slopes
start at 0.25 each, "start tiny (std 0.000968)" after the first update) and a learnable scalar (a
temperature of 0.07: one value, whose spread is 0, "start constant"). PReLU slopes are left out by
name (``prelu``, Keras's ``p_re_lu``, ``alpha``), a one-value parameter whatever its name. A matrix
of one constant is still found, 0.25 too (trial 43f: a first fix took any tensor of mean 0.25 for
PReLU slopes)."""

from __future__ import annotations

import numpy as np
import pytest

import tripwire


def _judge(weights: dict[str, np.ndarray]) -> list[str]:
    session = tripwire.Session(write=False, save_interval=1, rules=["poor_weight_initialization"],
                               collections=["losses", "weights"])
    session.step("train", 0, {"loss": (np.float64(1.0), "losses"),
                              **{n: (w, "weights") for n, w in weights.items()}})
    return [f.rule for f in session.findings]


GOOD = np.random.default_rng(0).normal(0, 0.1, size=(8, 8))


@pytest.mark.parametrize("extra", [
    {"temperature": np.array([0.07])},
    {"logit_scale": np.array(2.659)},
    {"prelu1.weight": np.full(16, 0.25)},
    {"p_re_lu/alpha": 0.25 + np.random.default_rng(1).normal(0, 1e-3, size=16)},  # (moved by the first update)
    {"act.weight": np.array([0.25])},  # (a default nn.PReLU(): one slope)
])
def test_a_prelu_or_a_learnable_scalar_is_no_poor_initialisation(extra: dict) -> None:
    assert _judge({"fc.weight": GOOD, **extra}) == []


# (trial 43f: a constant matrix of 0.25 or 0.24 was taken for PReLU slopes, by its mean)
@pytest.mark.parametrize("bad", [np.full((8, 8), 0.5), np.full((8, 8), 0.07), np.zeros((4, 4)), np.full(16, 0.3),
                                 np.full((8, 8), 0.25), np.full((8, 8), 0.24)])
def test_a_constant_weight_is_still_found(bad: np.ndarray) -> None:
    assert _judge({"fc.weight": GOOD, "fc2.weight": bad}) == ["poor_weight_initialization"]

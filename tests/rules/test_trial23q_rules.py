"""Trial 23q: healthy models that the default set stopped. A Keras Embedding + GRU / LSTM / transformer
classifier was stopped by ``exploding_gradient`` in 5 of 9 seeds: its "first layer" was the embedding
table, whose gradient sums every token of the batch (74-146 times the small output layer's). The
gradient rules leave embedding tables out of their layers, as ``poor_weight_initialization`` does."""

from __future__ import annotations

import numpy as np
import pytest

import tripwire


def _fit(first: str) -> tripwire.Session:
    session = tripwire.Session(write=False, rules=["exploding_gradient", "vanishing_gradient"], save_interval=1,
                               include_collections=["gradients"])
    rng = np.random.default_rng(0)
    for step in range(8):
        session.step("train", step, {
            f"gradients/{first}": (rng.normal(size=(50, 32)) * 0.7, "gradients"),   # norm ~ 28
            "gradients/gru/kernel": (rng.normal(size=(32, 64)) * 0.01, "gradients"),
            "gradients/dense/kernel": (rng.normal(size=(64, 2)) * 0.02, "gradients"),  # norm ~ 0.23: ~120x
            "loss": (0.7 / (step + 1), "losses"),
        })
    session.close()
    return session


def test_an_embedding_tables_gradient_is_no_first_layer_of_the_gradient_rules() -> None:
    assert _fit("embedding/embeddings").findings == []
    assert [f.rule for f in _fit("dense_in/kernel").findings] == ["exploding_gradient"]  # (a real first layer)


@pytest.mark.parametrize("name", ["embedding/embeddings", "emb.weight", "token_embedding.weight", "Embed_0/kernel"])
def test_the_default_exclude_matches_the_usual_embedding_names(name: str) -> None:
    import re

    from tripwire.rules._gradients import DEFAULT_EXCLUDE

    assert re.search(DEFAULT_EXCLUDE, name)


def test_oscillating_loss_is_quiet_on_one_window_of_minority_heavy_batches() -> None:
    # trial 23q: a class-weighted 95:5 Lightning fit (batches of 32) was stopped at step 210 of 846 by
    # four minority-heavy batches in one window: its median (0.47) just over half the initial level
    # (0.80), while the loss around it sat at a fifth of it; found by a loss that stays up, as before
    from tripwire.rules import OscillatingLoss

    rng = np.random.default_rng(1)
    values = np.concatenate([0.55 + 0.25 * rng.random(20), 0.12 + 0.1 * rng.random(175),
                             [1.23, 0.25, 0.12, 2.42, 0.14, 1.03, 0.29, 0.13, 0.64, 0.71]])
    session = tripwire.Session(write=False, rules=[OscillatingLoss()], save_interval=1)
    for step, value in enumerate(values):
        session.step("train", step, {"loss": (float(value), "losses")})
    assert session.findings == []
    swinging = np.concatenate([values[:185], np.where(np.arange(30) % 2, 2.4, 0.5)])
    session = tripwire.Session(write=False, rules=[OscillatingLoss()], save_interval=1)
    for step, value in enumerate(swinging):
        session.step("train", step, {"loss": (float(value), "losses")})
    assert [f.rule for f in session.findings] == ["oscillating_loss"]


def test_a_window_too_small_for_the_default_min_swings_names_the_window() -> None:
    # (trial 23m's twin: the error named min_swings, which the user had not set)
    from tripwire.rules import OscillatingLoss

    with pytest.raises(tripwire.ConfigError, match=r"^oscillating_loss\.window: got 4 with min_swings 2 \(its default\); "
                                                   r"accepted: an integer >= 2 \* min_swings \+ 1 \(5\)"):
        OscillatingLoss(window=4)
    with pytest.raises(tripwire.ConfigError, match=r"^oscillating_loss\.min_swings: got 5 with window 10"):
        OscillatingLoss(min_swings=5)


def test_only_nan_with_a_std_alone_says_an_infinite_value_may_be_the_cause() -> None:
    # trial 23r: one +inf made the std nan, and the message said "NaN, or both +inf and -inf"
    session = tripwire.Session(write=False, rules=[{"name": "exploding_tensor", "only_nan": True}], save_interval=1,
                               collections={"losses": None, "weights": {"reductions": ["std"]}})
    w = np.ones(8)
    w[0] = np.inf
    session.step("train", 0, {"loss": (1.0, "losses"), "w.weight": (w, "weights")})
    assert [f.message.split(" at step")[0] for f in session.findings] == [
        "w.weight holds a std of nan: NaN, or an infinite value"]


def test_poor_weight_initialization_leaves_lora_b_and_zero_convolutions_out() -> None:
    # trial 23r: docs/rules.md called LoRA's zero-initialised B "on purpose", and the rule flagged it
    session = tripwire.Session(write=False, rules=["poor_weight_initialization"], save_interval=1,
                               include_collections=["weights"])
    rng = np.random.default_rng(0)
    session.step("train", 0, {"loss": (1.0, "losses"), "lora_A.weight": (rng.normal(0, 0.1, (4, 16)), "weights"),
                              "lora_B.weight": (np.zeros((16, 4)), "weights"),
                              "controlnet.zero_convs.0.weight": (np.zeros((8, 8)), "weights"),
                              "fc.weight": (np.zeros((8, 8)), "weights")})
    [found] = session.findings  # (the plain zero layer only: 1 tensor, fc.weight)
    assert found.message.startswith("1 weight tensor(s) start constant (every value 0), e.g. fc.weight")

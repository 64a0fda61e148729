"""Trial 32d, finding 3: ``oscillating_loss``'s message.

An LSTM at SGD lr 200 with ``Trainer(gradient_clip_val=1.0)``: the run recorded ``clip/global_norm``,
yet the finding ended "add warm-up or gradient clipping"; and its loss went 0.7, 17.5, 16, 26, 20.4,
93.7, 202, 295, 244, 456, 175 (a divergence, hundreds of times its start), which the message called
an oscillation with a missing ``zero_grad()`` and MXNet's ``grad_req='add'`` beside the learning rate.
Only the message changes: when the rule fires does not."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire.rules import OscillatingLoss
from tripwire.rules import oscillating_loss as osc

TRIAL = [0.707, 17.5, 16.0, 26.0, 20.4, 93.7, 202.3, 295.4, 243.8, 456.0, 174.8]
AROUND = [2.3] * 20 + [2.3 + 3.0 * (i % 2) for i in range(20)]  # swings around its start level


def _found(values: list[float], clip: tuple[str, float] | None = None, **params: Any) -> list[tripwire.Finding]:
    session = tripwire.Session(write=False, rules=[OscillatingLoss(**params)], save_interval=1, actions=[])
    for step, value in enumerate(values):
        tensors: dict[str, Any] = {"loss": (np.float64(value), "losses")}
        if clip is not None:
            tensors[clip[0]] = (clip[1], "optimizer")
        session.step("train", step, tensors)
    session.close()
    return [f for f in session.findings if f.rule == "oscillating_loss"]


def test_a_fit_that_clips_is_not_told_to_clip() -> None:
    found = _found(TRIAL, clip=("clip/global_norm", 1.0))
    assert found, "expected an oscillation"
    message = found[0].message
    assert "gradient clipping." not in message and "add warm-up or gradient clipping" not in message, message
    assert ("add warm-up. The optimizer clips the gradients it applies already (to a global norm 1): the updates "
            "are clipped, and more clipping is not the fix.") in message, message


@pytest.mark.parametrize("name, words", [("clip/value", "value 0.5"), ("clip/norm", "norm per gradient 0.5")])
def test_each_recorded_clipping_is_named(name: str, words: str) -> None:
    message = _found(TRIAL, clip=(name, 0.5))[0].message
    assert f"(to a {words})" in message and "add warm-up or gradient clipping" not in message, message


def test_a_fit_that_does_not_clip_is_still_told_to_clip() -> None:
    message = _found(TRIAL)[0].message
    assert message.endswith("add warm-up or gradient clipping."), message
    assert "clips the gradients" not in message, message


def test_a_clipping_limit_of_0_is_no_clipping() -> None:
    assert "add warm-up or gradient clipping." in _found(TRIAL, clip=("clip/global_norm", 0.0))[0].message


def test_swings_far_above_the_start_lead_with_a_learning_rate_too_high() -> None:
    found = _found(TRIAL)
    message = found[0].message
    assert found[0].details["diverged"] is True
    assert "The swings ride on a level far above the loss's start (its median over the window, " in message, message
    assert f"at least {osc.DIVERGED:g}x: training diverged): most likely a learning rate too high" in message, message
    lead = message.index("most likely a learning rate too high")
    assert lead < message.index("optimizer.zero_grad()") and lead < message.index("grad_req='add'"), message
    assert "Usual causes: a learning rate" not in message and "Other causes: gradients accumulated" in message


def test_swings_around_the_start_keep_the_usual_causes() -> None:
    found = _found(AROUND)
    message = found[0].message
    assert found[0].details["diverged"] is False
    assert "far above the loss's start" not in message, message
    assert "Usual causes: a learning rate too high for the optimizer, gradients accumulated over steps" in message


@pytest.mark.parametrize("factor, diverged", [(9.0, False), (11.0, True)])
def test_the_divergence_factor_is_the_windows_median_against_the_initial_level(factor: float, diverged: bool) -> None:
    # a start at 1 for 20 values, a level of factor x 1 for 10, then swings of +-2 around it: the first
    # window with two rises and two falls has its median at factor
    values = [1.0] * 20 + [factor] * 10 + [factor + 2.0 * (-1) ** i for i in range(20)]
    found = _found(values)
    assert found and found[0].details["diverged"] is diverged
    assert ("far above the loss's start" in found[0].message) is diverged


def test_a_negative_loss_far_above_its_start_reads_as_diverged() -> None:
    # an NLL from -2: swings ending 30 above its start are a divergence; said against its highest first value
    values = [-2.0] * 20 + [28.0] * 10 + [28.0 + 5.0 * (-1) ** i for i in range(20)]
    found = _found(values)
    assert found and found[0].details["diverged"] is True
    assert "the magnitude of its initial level 2 above the highest of its first values, -2" in found[0].message


FAR_ABOVE = [1.0] * 20 + [11.0] * 10 + [11.0 + 2.0 * (-1) ** i for i in range(20)]


@pytest.mark.parametrize("values", [TRIAL, AROUND, FAR_ABOVE])
def test_the_decisions_do_not_change(values: list[float]) -> None:
    # clipping recorded or not: the same steps (the message alone reads it)
    plain = [(f.step, f.details["ups"], f.details["downs"]) for f in _found(values)]
    clipped = [(f.step, f.details["ups"], f.details["downs"]) for f in _found(values, clip=("clip/global_norm", 1.0))]
    assert plain and plain == clipped


def test_clipping_limits_reads_the_last_value_at_or_before_the_step() -> None:
    session = tripwire.Session(write=False, rules=[OscillatingLoss()], save_interval=1, actions=[])
    for step in range(5):
        session.step("train", step, {"loss": (1.0, "losses"), "clip/global_norm": (float(step + 1), "optimizer")})
    history = session.history
    assert osc.clipping_limits(history, 2, "train", 0) == ["global norm 3"]
    assert osc.clipping_limits(history, 9, "eval", 0) == ["global norm 5"]
    session.close()
    bare = tripwire.Session(write=False, rules=[OscillatingLoss()], save_interval=1, actions=[])
    bare.step("train", 0, {"loss": (1.0, "losses")})
    assert osc.clipping_limits(bare.history, 0, "train", 0) == []
    bare.close()


def test_the_rule_asks_for_the_optimizers_clipping_optionally() -> None:
    optimizer = [r for r in OscillatingLoss().requirements() if r.collection == "optimizer"]
    assert len(optimizer) == 1 and optimizer[0].optional and optimizer[0].reductions == ("raw",)

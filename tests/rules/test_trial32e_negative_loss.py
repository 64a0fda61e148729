"""Trial 32e, finding 5: losses below 0 (a Gaussian NLL, ELBO-type objectives).

``oscillating_loss`` asked ``median(window) >= min_level * L0`` with ``L0 = max|l| > 0``, which no
negative median meets: it could never fire. ``loss_not_decreasing`` compared with
``(1 - min_decrease) * L_0``, which for ``L_0 < 0`` lies above ``L_0``: any fall at all passed as a
5% one. Each negative case is checked beside its positive twin, whose decision is unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from tripwire.rules import LossNotDecreasing, OscillatingLoss


def names(findings: list) -> list[str]:
    return [f.rule for f in findings if f.kind == "finding"]


# ------------------------------------------------------------------------------ loss_not_decreasing
@pytest.mark.parametrize("start, end", [(1.0, 0.98), (-1.0, -1.02)])
def test_a_2_percent_fall_is_not_progress_above_or_below_0(feed, loss_records, start: float, end: float) -> None:
    found = feed(LossNotDecreasing(), loss_records([start] * 10 + [end] * 200))
    assert names(found) == ["loss_not_decreasing"] and found[0].step == 200
    assert "loss has fallen only 2% in 200 steps" in found[0].message
    assert found[0].details["start"] == start and found[0].details["lowest"] == end


@pytest.mark.parametrize("start, end", [(1.0, 0.94), (-1.0, -1.06)])
def test_a_6_percent_fall_is_progress_above_or_below_0(feed, loss_records, start: float, end: float) -> None:
    assert feed(LossNotDecreasing(), loss_records([start] * 10 + [end] * 200)) == []


@pytest.mark.parametrize("noise", [0.0, 0.0005])
@pytest.mark.parametrize("start", [1.0, -1.0])
def test_a_creeping_loss_is_not_spared_as_on_its_way_down_below_0(feed, loss_records, start: float,
                                                                  noise: float) -> None:
    # a significant but tiny downward trend (0.2% in 200 steps): projected over the horizon it cuts far
    # less than 5% of |L_0|. For -1 the threshold (1 - 0.05) * -1 = -0.95 lay above the start: without
    # noise the fall from the first value (beyond 10x a noise of 0) spared it as progress; with noise
    # (10x the noise above that fall) the significant trend spared it as a loss on its way down
    values = start - 1e-5 * np.arange(210) + noise * np.random.default_rng(0).standard_normal(210)
    found = feed(LossNotDecreasing(), loss_records(values))
    assert names(found) == ["loss_not_decreasing"] and found[0].step == 200


def test_a_negative_loss_that_fell_by_5_percent_from_its_first_value_and_held_is_spared(feed, loss_records) -> None:
    # the last clause (a fall from the very first value, beyond the noise, then held) in its right direction
    rng = np.random.default_rng(0)
    values = np.concatenate([[-1.0], np.full(209, -1.2)]) + 0.001 * rng.standard_normal(210)
    values[0] = -1.0
    assert feed(LossNotDecreasing(window=1), loss_records(values)) == []


def test_lowered() -> None:
    from tripwire.rules._loss import lowered

    assert lowered(1.0, 0.05) == (1.0 - 0.05) * 1.0 and lowered(0.7, 0.05) == (1.0 - 0.05) * 0.7
    assert lowered(-1.0, 0.05) == pytest.approx(-1.05) and lowered(0.0, 0.05) == 0.0


# ---------------------------------------------------------------------------------- oscillating_loss
POSITIVE = [2.0] * 20 + [2.0, 4.5, 2.0, 4.5, 2.0, 4.5, 2.0]


@pytest.mark.parametrize("shift", [0.0, -4.0, -10.0])
def test_the_same_swings_fire_whatever_the_shift_below_0(feed, loss_records, shift: float) -> None:
    # (L0 is the magnitude of the first values: 2 for the positive and the -4 shifted, 8 for -10 one;
    # swing is scaled to keep the twin's swings above it)
    values = [v + shift for v in POSITIVE]
    l0 = max(abs(v) for v in values[:20])
    found = feed(OscillatingLoss(swing=2.4 / l0), loss_records(values))
    assert names(found) == ["oscillating_loss"] and found[0].step == 24
    assert found[0].details["initial"] == l0
    said = "the largest of its first 15 values" if shift == 0 else "the largest magnitude of its first 15 values"
    assert f"its initial level {l0:g} ({said};" in found[0].message


def test_a_negative_loss_that_has_fallen_far_below_its_start_is_not_oscillating(feed, loss_records) -> None:
    # an NLL that fell from -2 to -10 and spikes from there by more than its initial level 2 (a noisy,
    # heavy-tailed objective): the level clause spares it, as it spares a positive loss that fell from
    # 10 to 1 and spikes by more than 10
    spikes = [0.0, 0.0, 1.0] * 6
    values = [-2.0] * 20 + list(np.linspace(-2.0, -10.0, 20)) + [-10.0 + 2.5 * x for x in spikes]
    assert feed(OscillatingLoss(), loss_records(values)) == []
    positive = [10.0] * 20 + list(np.linspace(10.0, 1.0, 20)) + [1.0 + 11.0 * x for x in spikes]
    assert feed(OscillatingLoss(), loss_records(positive)) == []
    # the same spikes while the loss is still at its start level: an oscillation
    near = [-2.0] * 20 + [-2.0 + 2.5 * x for x in spikes]
    assert names(feed(OscillatingLoss(), loss_records(near))) == ["oscillating_loss"]
    assert names(feed(OscillatingLoss(), loss_records([10.0] * 20 + [10.0 + 11.0 * x for x in spikes]))) == \
        ["oscillating_loss"]


def test_a_negative_loss_that_blew_up_at_once_is_judged_against_its_first_value(feed, loss_records) -> None:
    # first value -0.5, then around +5: the median magnitude of the first values is more than 4x |l_1|
    values = [-0.5] + [5.0] * 19 + [5.0, 0.0] * 5
    found = feed(OscillatingLoss(), loss_records(values))
    assert names(found) == ["oscillating_loss"]
    assert "its initial level 0.5 (the magnitude of its first value: the median of the magnitudes of its first" \
        in found[0].message

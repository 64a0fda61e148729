"""loss_not_decreasing's message in trial 27g (finding 2): each number is named as what it is.

With every step's loss kept (saves 10 steps apart), "to 10.32 (the median of its last 3 values)" was
the median of 21 values (steps 30-50), and a loss that fell 87% from its first value within the
start span (an ExponentialLR stepped per batch: 2.31 -> 0.29 at step 25, then 2.76 and NaN) was told
"it fell at most 3.775% below its start", its start being the median of steps 0-50. The two series are
the trial's own losses (digits MLP, SGD with momentum, batch 32, 352 planned steps)."""

from __future__ import annotations

import numpy as np

import tripwire
from tripwire.rules import LossNotDecreasing

SCHED_EXPLODE = [
    2.3076, 2.3406, 2.2953, 2.2513, 2.184, 2.1961, 1.9949, 1.9861, 1.7387, 1.8254, 1.6494, 1.4537, 1.5735, 1.1132,
    0.9918, 1.1528, 0.7858, 0.8779, 0.6308, 0.7933, 0.4596, 0.4561, 0.7783, 0.2938, 0.5389, 0.2855, 0.8584, 1.5126,
    0.3554, 1.3322, 0.8366, 0.6845, 0.4097, 1.2203, 3.0126, 1.7365, 2.1041, 1.5666, 2.6455, 1.1815, 0.816, 1.493,
    0.7933, 0.8521, 1.0187, 1.2107, 1.9807, 1.1825, 0.9879, 1.0114, 2.1436, 1.1378, 1.2618, 1.4258, 1.25, 0.868, 1.702,
    0.4166, 0.5425, 1.5366, 2.8948, 2.1766, 3.5998, 4.7345, 4.0813, 3.5523, 5.8981, 2.1059, 7.4698, 3.5028, 2.6925,
    3.9299, 2.5592, 2.4152, 2.4176, 3.3042, 2.6574, 2.2871, 23.3884, 2.6466, 2.4948, 3.0607, 2.762, 2.5555, 2.6651,
    2.4722, 2.4319, 2.6043, 2.6967, 2.6714, 3.0874, 3.028, 5.3268, 2.7832, 2.8893, 2.7541, 2.8406, 2.5247, 3.4077,
    2.4849, 156.6115, 3.4139, 2.6878, 9.3519, 10.9026, 3.5962, 3.8487, 2.6296, 2.8995, 4.6917, 3.5484,
]
NO_ZERO_GRAD = [
    2.3076, 2.3406, 2.2918, 2.209, 2.116, 2.0267, 1.7564, 1.8451, 1.3974, 1.4239, 1.2646, 1.1388, 2.9753, 4.1585, 4.2776,
    3.9583, 3.3226, 8.4957, 3.2515, 4.6136, 4.8958, 11.7592, 10.1437, 7.8483, 15.7356, 5.9992, 6.683, 18.2299, 10.63,
    11.6067, 10.3236, 11.773, 9.6732, 7.2941, 7.4933, 15.6459, 30.3232, 19.9064, 9.4815, 24.6876, 18.7522, 9.8977,
    33.6589, 25.1312, 26.7124, 8.2679, 29.6641, 5.6057, 6.4357, 5.1101, 5.2508,
]


def _judged(values: list[float] | np.ndarray, planned: int = 352) -> list[tripwire.Finding]:
    """The default loss_not_decreasing over every step's loss, saves 10 steps apart, as the trial ran it."""
    session = tripwire.Session(write=False, rules=[LossNotDecreasing()], save_interval=10)
    session.set_planned_steps(planned)
    for step, value in enumerate(values):
        session.step("train", step, {"loss": (np.float64(value), "losses")})
    return [f for f in session.findings if f.rule == "loss_not_decreasing"]


def test_the_level_now_names_the_values_it_is_the_median_of() -> None:
    found = _judged(NO_ZERO_GRAD)
    assert [f.step for f in found] == [50]
    message = found[0].message
    assert f"{np.median(NO_ZERO_GRAD[30:51]):.4g}" == "10.32"
    assert "the median of its last 3 values" not in message, message
    assert "from its start level 2.308 to 10.32 (the median of its 21 values at steps 30-50, its last 3 saves)" in message
    assert "start level: median of its 21 values at steps 0-20 (its first 3 saves) 2.308" in message, message
    assert "lowest median of 21 consecutive values (3 consecutive saves) ending after them 5.999" in message, message
    # (it fell 39% within the first saves: said, with the values it is the median of)
    assert f"{np.median(NO_ZERO_GRAD[7:12]):.4g}" == "1.397"
    assert "it had first fallen from its first value 2.308 to 1.397 (the median of its values at steps 7-11" in message


def test_a_loss_that_fell_within_the_start_span_and_then_rose_says_so() -> None:
    found = _judged(SCHED_EXPLODE)
    assert [f.step for f in found] == [110]
    message = found[0].message
    assert "fell at most" not in message and "below its start" not in message, message
    assert "from its start level 1.183 to 2.762 (the median of its 41 values at steps 70-110, its last 5 saves)" in message
    assert "its lowest level after its first 6 saves was 3.78% below that start level" in message, message
    assert "it had first fallen from its first value 2.308 to 0.4561 (the median of its values at steps 21-25" in message
    assert "and then rose again; its level now is 19.69% above its first value" in message, message
    assert "start level: median of its 51 values at steps 0-50 (its first 6 saves) 1.183" in message, message
    assert message.index("A loss that fell at first and then rose") < message.index("Usual causes"), message


def test_one_value_per_save_keeps_its_last_values(feed, loss_records) -> None:
    # one value per save: "the median of its last 5 values" is what it is
    values = [2.0 + 0.01 * s for s in range(61)]
    found = feed(LossNotDecreasing(num_steps=60), loss_records(values))
    message = found[0].message
    assert "from its start level 2.045 to 2.58 (the median of its last 5 values); it has stayed above its start level " \
           "since its first 10 values" in message, message
    assert "it had first fallen" not in message, message


def test_a_noisy_rising_loss_is_not_said_to_have_fallen_first(rng) -> None:
    # batch noise around a loss that climbs from its first value: its lowest 5-value median dips
    # below the first value by chance, not beyond its noise
    values = 2.3 + 0.004 * np.arange(111) + 0.15 * rng.standard_normal(111)
    found = _judged(values)
    assert found, "a rising loss"
    assert "it had first fallen" not in found[0].message and "has risen" in found[0].message, found[0].message


def test_a_fall_and_climb_with_values_at_save_steps_only(feed, loss_records) -> None:
    # one value per save (a metric, or every_step off): the same story, in values
    values = [2.3, 1.2, 0.5, 0.45, 0.5, 0.6, 1.4, 2.0] + [2.4] * 53
    found = feed(LossNotDecreasing(num_steps=60), loss_records(values))
    message = found[0].message
    assert "it had first fallen from its first value 2.3 to 0.5 (the median of its values at steps 0-4" in message, message


def test_the_causes_name_tiny_clipping_and_a_huge_weight_decay(feed, loss_records) -> None:
    # trial 27g: clip_grad_norm_(max_norm=1e-4) and weight_decay=1.0 held a digits MLP's loss at 2.30;
    # the causes named neither (F4: no message named weight decay)
    found = feed(LossNotDecreasing(num_steps=50), loss_records(np.full(60, 2.3)))
    message = found[0].message
    assert "gradients clipped to a tiny max_norm" in message and "a weight decay far too large" in message, message

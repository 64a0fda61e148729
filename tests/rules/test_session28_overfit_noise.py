"""``overfit``'s noise after a plateau: the validation loss of a healthy run sat on a flat plateau for
50 evaluations (changes of about 0.01), then dropped and bounced by 0.05 from one evaluation to the
next; the noise of the whole series was the plateau's, and one bounce read as overfitting (trial 28c:
an MXNet XOR-like task stopped at evaluation 63 while its validation loss went on to fall 35%). The
noise is now the larger of the whole series' and that of its last 10 changes."""

from __future__ import annotations

import numpy as np

from tripwire.rules import Overfit

#: the trial's validation losses (ok5_plateau_drop.py, evaluations 0-79)
PLATEAU_THEN_DROP = [
    0.685, 0.694, 0.718, 0.73, 0.684, 0.699, 0.683, 0.699, 0.694, 0.692, 0.704, 0.719, 0.69, 0.696, 0.688, 0.697,
    0.701, 0.724, 0.704, 0.685, 0.688, 0.683, 0.694, 0.692, 0.684, 0.699, 0.685, 0.689, 0.688, 0.66, 0.561, 0.582,
    0.546, 0.67, 0.54, 0.547, 0.556, 0.522, 0.543, 0.526, 0.546, 0.553, 0.553, 0.538, 0.54, 0.545, 0.569, 0.528,
    0.541, 0.542, 0.54, 0.536, 0.547, 0.396, 0.327, 0.298, 0.256, 0.233, 0.256, 0.297, 0.32, 0.366, 0.337, 0.289,
    0.234, 0.265, 0.258, 0.243, 0.263, 0.335, 0.257, 0.213, 0.2, 0.252, 0.242, 0.249, 0.231, 0.17, 0.272, 0.172,
]


def _first_verdict(rule: Overfit, val: list[float]) -> int | None:
    values = np.asarray(val)
    walls = np.arange(len(values), dtype=float)
    for k in range(2, len(values) + 1):
        if rule.assess(values[:k], walls[:k], None, False):
            return k - 1
    return None


def test_a_bounce_after_a_drop_from_a_long_plateau_is_noise() -> None:
    assert _first_verdict(Overfit(), PLATEAU_THEN_DROP) is None


def test_a_real_climb_after_the_drop_still_fires() -> None:
    # the same start, then the validation loss climbs steadily evaluation after evaluation
    climb = PLATEAU_THEN_DROP[:58] + [0.233 + 0.02 * i for i in range(1, 23)]
    at = _first_verdict(Overfit(), climb)
    assert at is not None and at <= 58 + 8, at


def test_a_clean_climb_fires_where_it_did() -> None:
    # a smooth fall and a smooth rise (no regime change in the noise): the recent noise adds nothing
    val = list(np.linspace(1.0, 0.3, 30)) + list(0.3 + 0.01 * np.arange(1, 30))
    assert _first_verdict(Overfit(), val) == _first_verdict(Overfit(noise=0.0), val)

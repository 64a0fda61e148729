"""Trial 30g F9: a warm-start trial whose x=0.51 met ``Integer(0, 1)`` was left out as "outside
Integer(0, 1)", though 0.51 lies in [0, 1]: it is not an integer, and the WARNING now says so."""
from __future__ import annotations

from tripwire.tune import Continuous, Integer
from tripwire.tune._tuner import _outside_space
from tripwire.tune._space import Space


def test_a_value_in_an_integer_range_that_is_no_integer_is_said_so() -> None:
    space = Space({"x": Integer(0, 1), "y": Continuous(0, 1)})
    assert _outside_space({"x": 0.51, "y": 0.5}, space) == \
        f"x=0.51, not an integer, as {Integer(0, 1)!r} holds integers only"
    assert _outside_space({"x": 2, "y": 0.5}, space) == f"x=2, outside {Integer(0, 1)!r}"
    assert _outside_space({"x": 1, "y": 0.5}, space) is None
    assert _outside_space({"x": 1.0, "y": 0.5}, space) is None

"""Trial 32h F7, F8: a hyperparameter named ``metric:<key>`` gave two dataframe columns of one name
(the metric's) and lost its value; ``Continuous(-1e308, 1e308)`` drew 1e308 every time (the linear
draw's width overflows), and ``Integer(0, 2**63)`` raised numpy's ValueError from ``fit()``. Each is
refused when the range or the space is made."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tripwire.tune import Continuous, Integer, Tuner
from tripwire.tune._errors import ConfigError
from tripwire.tune._space import Space


def test_a_parameter_named_like_a_metric_column_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^space key: got 'metric:acc'; accepted: a name that does not start with "
                                          r"'metric:'"):
        Tuner(lambda params, trial: 0.0, space={"metric:acc": Continuous(0.0, 1.0)}, max_jobs=1)


def test_a_linear_range_wider_than_a_float_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^Continuous low, high: got low=-1e\+308, high=1e\+308; accepted: a range "
                                          r"whose width high - low is a finite float"):
        Continuous(-1e308, 1e308)
    wide = Continuous(-8e307, 8e307)  # (a finite width: drawn over the whole range)
    draws = [Space({"w": wide}).sample(0, t)["w"] for t in range(200)]
    assert all(math.isfinite(x) and -8e307 <= x <= 8e307 for x in draws) and len(set(draws)) == 200
    assert Continuous(1e-300, 1e308).scale == "auto"  # (a log scale: no width to overflow)


def test_an_integer_range_beyond_int64_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^Integer low, high: got low=0, high=9223372036854775808; accepted: "
                                          r"-9223372036854775808 <= low <= high < 9223372036854775807"):
        Integer(0, 2**63)
    with pytest.raises(ConfigError, match=r"^Integer low, high: got low=-9223372036854775809"):
        Integer(-(2**63) - 1, 0)
    widest = Integer(-(2**63), 2**63 - 2)
    rng = np.random.default_rng(0)
    assert all(-(2**63) <= widest.sample(rng) <= 2**63 - 2 for _ in range(100))

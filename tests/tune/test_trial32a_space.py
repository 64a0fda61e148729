"""Trial 32a F4: the search-space errors in the library's format, ``<argument>: got <value>;
accepted: <what is>``, and the errors of a space given to the Tuner name the parameter.

A range checks its bounds when it is built (``Continuous(0, 1, scale="log")``), before any space
names it: its error names the class and the argument. A space (a dict given to ``Tuner``, a YAML
``space:``) names the parameter of an entry it cannot take."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tripwire import ConfigError
from tripwire.tune import Categorical, Continuous, Integer, Space, Tuner


def _train(params: dict[str, Any], trial: Any) -> float:
    return 0.0


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: Continuous(0, 1, scale="log"),
         r"^Continuous low: got 0 with scale='log'; accepted: a low > 0 \(a log scale starts above 0\), or "
         r"scale='linear'$"),
        (lambda: Integer(0, 10, scale="log"),
         r"^Integer low: got 0 with scale='log'; accepted: a low >= 1 \(a log scale starts above 0\), or "
         r"scale='linear'$"),
        (lambda: Continuous(1, 1), r"^Continuous low, high: got low=1, high=1; accepted: low < high$"),
        (lambda: Continuous(0.5, 1.0, scale="reverse_log"),
         r"^Continuous low, high: got low=0.5, high=1 with scale='reverse_log'; accepted: 0 <= low < high < 1$"),
        (lambda: Continuous(0, 1, scale="cubic"),
         r"^Continuous scale: got 'cubic'; accepted: 'auto', 'linear', 'log', 'reverse_log'$"),
        (lambda: Continuous(0, 1, scale="logg"),
         r"^Continuous scale: got 'logg'; did you mean 'log'\?; accepted: 'auto', 'linear', 'log', 'reverse_log'$"),
        (lambda: Integer(0, 1, scale="cubic"), r"^Integer scale: got 'cubic'; accepted: 'auto', 'linear', 'log'$"),
        (lambda: Integer(1, 4, scale="reverse_log"),
         r"^Integer scale: got 'reverse_log'; accepted: 'auto', 'linear', 'log' \(reverse_log is only for "
         r"Continuous ranges\)$"),
        (lambda: Continuous("a", 1), r"^Continuous low: got 'a' \(str\); accepted: a real number \(an int or a float\)$"),
        (lambda: Continuous(0, math.inf), r"^Continuous high: got inf; accepted: a finite real number$"),
        (lambda: Integer(5, 1), r"^Integer low, high: got low=5, high=1; accepted: low <= high \(both are drawn\)$"),
        (lambda: Integer(1.5, 4), r"^Integer low: got 1.5 \(float\); accepted: an integer \(numpy's too\)$"),
        (lambda: Integer(1, True), r"^Integer high: got True \(bool\); accepted: an integer \(numpy's too\)$"),
        (lambda: Categorical([]),
         r"^Categorical values: got \[\]; accepted: a non-empty list \(or tuple\) of str, int, float, bool or None$"),
        (lambda: Categorical("ab"), r"^Categorical values: got 'ab' \(str\); accepted: a non-empty list "),
        (lambda: Categorical(["a", object]),
         r"^Categorical values\[1\]: got <class 'object'> \(type\); accepted: str, int, float, bool or None$"),
        (lambda: Categorical(["a", "a"]),
         r"^Categorical values: got \['a', 'a'\], which holds 'a' twice; accepted: values that differ "),
        (lambda: Categorical([1, True]),
         r"^Categorical values: got \[1, True\], which holds True and 1, which are equal in Python \(1 == True\); "
         r"accepted: values that differ \(use strings to tell them apart, e.g. '1' and 'true'\)$"),
        (lambda: Categorical([0.1, float("nan")]),
         r"^Categorical values: got \[0.1, nan\], which holds nan, which equals no value \(a trial's nan could not be "
         r"told apart or matched\); accepted: values that differ, none of them nan: use None or a string such as "
         r"'nan'$"),
    ],
)
def test_a_bad_range_names_its_argument_the_value_and_what_is_accepted(make: Any, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        make()


def test_numpy_bounds_are_taken_as_before() -> None:
    assert Integer(np.int64(1), np.int64(5)).to_dict()["high"] == 5
    assert Continuous(np.float32(0.5), 2).low == 0.5
    assert Continuous(1e-4, 1e-1)._resolved == "log" and Integer(1, 1000, scale="log").grid(3) == [1, 32, 1000]


def test_a_space_dict_given_to_the_tuner_names_the_parameter() -> None:
    with pytest.raises(ConfigError, match=r"^space\['eta'\]: Continuous low: got 0 with scale='log'; accepted: a low "
                                          r"> 0"):
        Tuner(_train, space={"eta": {"type": "continuous", "low": 0, "high": 1, "scale": "log"}}, max_jobs=2)
    with pytest.raises(ConfigError, match=r"^space\['n'\]: Integer low, high: got low=5, high=1; accepted: low <= high"):
        Tuner(_train, space={"lr": Continuous(0.1, 1), "n": {"type": "integer", "low": 5, "high": 1}}, max_jobs=2)
    with pytest.raises(ConfigError, match=r"^space\['d'\]: range type: got 'float'; accepted: integer, continuous, "
                                          r"categorical$"):
        Tuner(_train, space={"d": {"type": "float", "low": 0, "high": 1}}, max_jobs=2)
    with pytest.raises(ConfigError, match=r"^space\['d'\]: range type: got 'continous'; did you mean 'continuous'\?; "
                                          r"accepted: integer, continuous, categorical$"):
        Space.from_dict({"d": {"type": "continous", "low": 0, "high": 1}})
    with pytest.raises(ConfigError, match=r"^space\['c'\]: Categorical values: got \['a', 'a'\], which holds 'a' twice"):
        Tuner(_train, space={"c": {"type": "categorical", "values": ["a", "a"]}}, max_jobs=2)
    # an entry that is no range, and a name that is no string
    with pytest.raises(ConfigError, match=r"^space\['lr'\]=0.1 is not a range: use Integer, Continuous or Categorical"):
        Tuner(_train, space={"lr": 0.1}, max_jobs=2)
    with pytest.raises(ConfigError, match=r"^space key: got 3 \(int\); accepted: a non-empty string \(the parameter's "
                                          r"name\)$"):
        Tuner(_train, space={3: Continuous(0, 1)}, max_jobs=2)  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"^space: got \{\}; accepted: a non-empty mapping of parameter names to "
                                          r"ranges \(Integer, Continuous or Categorical\)$"):
        Space({})

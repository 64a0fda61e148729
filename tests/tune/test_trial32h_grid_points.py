"""Trial 32h F6: ``Space.grid`` / ``Continuous.grid`` / ``Integer.grid`` took ``num_points=0`` and
negative counts (the two bounds), ``True`` (the midpoint) and raised a bare TypeError for ``2.0``,
where ``GridSearch`` refuses them. They take what GridSearch takes: None or an int >= 1."""

from __future__ import annotations

import numpy as np
import pytest

from tripwire.tune import Continuous, Integer
from tripwire.tune._errors import ConfigError
from tripwire.tune._space import Space


@pytest.mark.parametrize("bad", [0, -3, True, 2.0, "3"])
def test_a_grid_count_that_is_no_positive_int_is_refused(bad: object) -> None:
    space = Space({"c": Continuous(0.0, 1.0), "n": Integer(1, 100)})
    with pytest.raises(ConfigError, match=rf"^num_points={bad!r} must be an int >= 1"):
        space.grid(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"num_points=.* must be an int >= 1"):
        Continuous(0.0, 1.0).grid(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"num_points=.* must be an int >= 1"):
        Integer(1, 100).grid(bad)  # type: ignore[arg-type]


def test_good_counts_still_make_the_grid() -> None:
    assert Continuous(0.0, 1.0).grid(np.int64(3)) == [0.0, 0.5, 1.0]
    assert Integer(1, 100).grid(3) == [1, 10, 100]  # (auto scale: log, 100 / 1 >= 100)
    assert len(Space({"c": Continuous(0.0, 1.0), "n": Integer(1, 2)}).grid(2)) == 4

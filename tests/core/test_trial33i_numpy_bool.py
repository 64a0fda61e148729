"""Trial 33i F1: numpy's bools are bools where a parameter takes a bool, as numpy's integers are
integers where it takes an int (``Session(write=np.True_)`` and ``LocalExecutor(reuse_workers=np.False_)``
were refused with "got np.True_ (bool)"); ``1`` and ``"yes"`` are still refused."""

from __future__ import annotations

import numpy as np
import pytest

from tripwire import ConfigError
from tripwire._session import check_write_and_keep_arrays
from tripwire._validate import check_bool, plain_bool
from tripwire.tune import LocalExecutor


@pytest.mark.parametrize("value, expected", [(np.True_, True), (np.False_, False), (True, True), (False, False)])
def test_numpy_bools_are_taken_as_python_bools(value: object, expected: bool) -> None:
    got = check_bool(value, "flag")
    assert got is expected
    assert plain_bool(value) is expected


@pytest.mark.parametrize("value", [1, 0, "yes", np.int64(1), np.float64(1.0), None, np.array([True])])
def test_other_values_are_refused(value: object) -> None:
    assert plain_bool(value) is None
    with pytest.raises(ConfigError, match=r"^flag: got .*; accepted: true or false"):
        check_bool(value, "flag")


def test_session_write_and_executor_take_numpy_bools() -> None:
    assert check_write_and_keep_arrays(np.True_, None) == (True, None)
    assert type(check_write_and_keep_arrays(np.False_, None)[0]) is bool
    assert LocalExecutor(reuse_workers=np.False_).reuse_workers is False

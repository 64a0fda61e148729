"""Trial 32i F5: ``WriterConfig(ranks=...)`` takes a numpy integer array as a list of ranks (as
``SaveConfig(steps=...)`` does); ``np.array([1, 0])`` raised numpy's "truth value of an array is
ambiguous" and ``np.array([0])`` was refused."""
from __future__ import annotations

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, WriterConfig


def test_a_numpy_array_of_ranks_is_a_list() -> None:
    assert WriterConfig(ranks=np.array([1, 0])).ranks == (1, 0)
    assert WriterConfig(ranks=np.array([0])).ranks == (0,)
    assert WriterConfig(ranks=np.int64(2)).ranks == (2,)
    assert all(type(r) is int for r in WriterConfig(ranks=np.array([1, 0])).ranks)
    assert tripwire.load_config({"writer": {"ranks": np.array([0])}}).to_dict()["writer"]["ranks"] == [0]


def test_a_bad_array_is_refused_naming_the_rank() -> None:
    with pytest.raises(ConfigError, match=r"^writer\.ranks\[1\]: got -1; accepted: an integer >= 0"):
        WriterConfig(ranks=np.array([0, -1]))
    with pytest.raises(ConfigError, match=r"^writer\.ranks: got \[\]: no rank would write"):
        WriterConfig(ranks=np.array([], dtype=int))

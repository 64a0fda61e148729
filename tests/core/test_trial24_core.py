"""Session 24's fresh-user trials: core fixes (validation messages)."""

from __future__ import annotations

import pytest

from tripwire import ConfigError
from tripwire._config import load_config


@pytest.mark.parametrize("value", [-1, "soon"])
def test_an_optional_integer_names_null_in_every_refusal(value: object) -> None:
    # trial 24a: num_boost_round -5 was told "an integer >= 1", 'a' "an integer >= 1 or null"
    with pytest.raises(ConfigError, match=r"^save\.end_step: got .*; accepted: an integer >= 0 or null$"):
        load_config({"save": {"end_step": value}})

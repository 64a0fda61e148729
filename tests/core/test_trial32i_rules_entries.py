"""Trial 32i F4: a rules entry that is no rule (null, a number, a nested list) is refused when the
config is loaded, naming the entry, the value and what is accepted (it was taken and written as
{'name': '?:?'}, which read back failed with "No module named '?'")."""
from __future__ import annotations

from typing import Any

import pytest

import tripwire
from tripwire import ConfigError, Rule

_ACCEPTED = r"accepted: a rule name \('overfit'\), a mapping with name: .*a Rule object or class, or a function"


@pytest.mark.parametrize("entry, shown", [(None, r"None \(NoneType\)"), (5, r"5 \(int\)"),
                                          (["dead_relu"], r"\['dead_relu'\] \(list\)")])
def test_an_entry_that_is_no_rule_is_refused_at_load(entry: Any, shown: str) -> None:
    with pytest.raises(ConfigError, match=rf"^rules\[1\]: got {shown}; {_ACCEPTED}"):
        tripwire.load_config({"rules": ["overfit", entry]})


def test_a_keyword_override_is_checked_too() -> None:
    with pytest.raises(ConfigError, match=rf"^rules\[0\]: got None \(NoneType\); {_ACCEPTED}"):
        tripwire.load_config(None, rules=[None])


def test_functions_and_rule_objects_and_classes_are_still_taken() -> None:
    def my_rule(history: Any, step: int, mode: str) -> None:
        return None

    cfg = tripwire.load_config(None, rules=[my_rule, Rule, "overfit"])
    assert [r.name for r in cfg.rules] == ["<object>", "<object>", "overfit"]

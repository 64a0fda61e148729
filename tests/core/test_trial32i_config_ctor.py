"""Trial 32i F2: ``tripwire.Config(...)`` reads and checks ``save``, ``collections``, ``rules``,
``actions``, ``writer`` and ``strict`` as ``from_dict`` does (``Config(save={"interval": 3})`` was
taken, then ``repr()`` raised an AttributeError; ``Config(strict="yes")`` was taken)."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import tripwire
from tripwire import ConfigError


def test_a_save_mapping_is_read_as_a_file_s() -> None:
    c = tripwire.Config(save={"interval": 3})
    assert isinstance(c.save, tripwire.SaveConfig) and c.save.interval == 3
    assert repr(c) == "Config(save={interval: 3})"
    assert c.to_dict() == tripwire.load_config({"save": {"interval": 3}}).to_dict()
    assert tripwire.Session(c, write=False).config.save.interval == 3


def test_the_other_fields_are_read_as_a_file_s() -> None:
    c = tripwire.Config(collections=["losses", "weights"], rules=["overfit"], actions="log",
                        writer={"ranks": [0]}, strict=None)
    assert sorted(c.collections) == ["losses", "weights"]
    assert all(isinstance(v, tripwire.Collection) for v in c.collections.values())
    assert [r.name for r in c.rules] == ["overfit"] and [a.name for a in c.actions] == ["log"]
    assert c.writer == tripwire.WriterConfig(ranks=[0]) and c.strict is False


@pytest.mark.parametrize("kwargs, message", [
    ({"strict": "yes"}, r"^strict: got 'yes'; accepted: true or false"),
    ({"save": {"intervall": 3}}, r"^save\.intervall: unknown key 'intervall'"),
    ({"save": 3}, r"^save: .*3"),
    ({"writer": {"ranks": "x"}}, r"^writer\.ranks: got 'x'; accepted: 'all' or a list of ranks"),
    ({"collections": ["weight"]}, r"^collections\[0\]: 'weight' is no built-in collection"),
    ({"rules": [None]}, r"^rules\[0\]: got None \(NoneType\); accepted: a rule name"),
    ({"actions": [5]}, r"^actions\[0\]: got 5; accepted: an action name"),
])
def test_what_a_file_may_not_hold_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        tripwire.Config(**kwargs)


def test_the_defaults_and_replace_still_work() -> None:
    assert repr(tripwire.Config()) == "Config()"
    c = dataclasses.replace(tripwire.load_config({"rules": ["overfit"]}), save=None, strict=True)
    assert c.strict is True and c.save == tripwire.SaveConfig() and [r.name for r in c.rules] == ["overfit"]

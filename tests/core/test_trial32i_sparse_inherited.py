"""Trial 32i F6: the "too sparse" error named ``collections.labels.save.interval: 10``, a key the user
never wrote: the collection's save stated ``start_step`` only, and the interval was the run's. It now
says where the interval comes from and which key to state."""

from __future__ import annotations

import pytest

import tripwire
from tripwire import ConfigError


def test_an_inherited_interval_is_named_as_the_runs() -> None:
    config = {"rules": ["class_imbalance"], "collections": {"labels": {"save": {"start_step": 100}}, "predictions": None}}
    with pytest.raises(ConfigError, match=r"^save\.interval: 10, which collections\.labels\.save inherits, is too "
                                          r"sparse for rule 'class_imbalance'.*accepted: 1 or less \(state "
                                          r"collections\.labels\.save\.interval, or "):
        tripwire.Session(config, write=False)


def test_a_stated_interval_is_named_by_its_key() -> None:
    config = {"rules": ["class_imbalance"], "collections": {"labels": {"save": {"interval": 5}}, "predictions": None}}
    with pytest.raises(ConfigError, match=r"^collections\.labels\.save\.interval: 5 is too sparse"):
        tripwire.Session(config, write=False)

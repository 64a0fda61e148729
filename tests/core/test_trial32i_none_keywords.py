"""Trial 32i F7: a keyword override given ``None`` sets the key's default, not the config's, as the
docs say (``include_collections``, ``save_steps``, ``start_step`` and ``save_interval`` refused it)."""
from __future__ import annotations

import tripwire
from tripwire import load_config

_FILE = {"save": {"interval": 3, "steps": [4], "start_step": 2}, "collections": ["losses"]}


def test_none_for_a_save_keyword_is_its_default() -> None:
    for key, field, default in (("save_interval", "interval", 10), ("save_steps", "steps", ()),
                                ("start_step", "start_step", 0)):
        save = load_config(_FILE, **{key: None}).save
        assert getattr(save, field) == default, key
        assert getattr(tripwire.Session(_FILE, write=False, **{key: None}).config.save, field) == default, key


def test_none_for_include_collections_adds_none() -> None:
    assert list(load_config(_FILE, include_collections=None).collections) == ["losses"]
    assert list(load_config(None, include_collections=None).collections) == list(load_config(None).collections)


def test_a_keyword_other_than_none_still_wins() -> None:
    assert load_config(_FILE, save_interval=5, start_step=1).save.interval == 5

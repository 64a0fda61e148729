"""Trial 32i F3: ``Collection.to_dict()`` writes its ``save`` as stated (as ``Config.to_dict()``
does), so that a round trip through a config saves the same steps (every key was written: the
read-back collection saved from step 0, past the run's end_step, and lost the listed step 1)."""
from __future__ import annotations

from typing import Any

import pytest

import tripwire
from tripwire import Collection, SaveConfig

_TOP = {"start_step": 5, "end_step": 40, "steps": [1]}


def _saved(cfg: tripwire.Config, name: str) -> dict[str, list[int]]:
    return {m: [s for s in range(50) if cfg.collections[name].should_save(m, s, cfg.save)] for m in ("train", "eval")}


@pytest.mark.parametrize("save", [{"interval": 3}, SaveConfig(interval=3),
                                  {"interval": 3, "modes": {"eval": {"interval": 7}}}])
def test_a_collection_s_save_round_trips_through_a_config(save: Any) -> None:
    c = Collection("weights", save=save)
    written = save if isinstance(save, dict) else save.to_dict()
    assert c.to_dict()["save"] == written
    a = tripwire.load_config({"save": _TOP, "collections": {"weights": {"save": written}}})
    b = tripwire.load_config({"save": _TOP, "collections": {"weights": c.to_dict()}})
    assert _saved(b, "weights") == _saved(a, "weights")
    assert _saved(b, "weights")["train"][:3] == [1, 6, 9]


def test_a_config_s_collection_round_trips_with_the_config_s_save() -> None:
    cfg = tripwire.load_config({"save": _TOP, "collections": {"weights": {"save": {"interval": 3}}}})
    c = cfg.collections["weights"]
    assert c.to_dict()["save"] == {"interval": 3}
    assert Collection.from_dict("weights", c.to_dict(), default_save=cfg.save) == c
    again = tripwire.load_config({"save": _TOP, "collections": {"weights": c.to_dict()}})
    assert _saved(again, "weights") == _saved(cfg, "weights")

"""Trial 27d's config findings: a Collection's ``save=SaveConfig(...)`` did not inherit the run's
top-level save as the mapping form does (finding 2); ``SaveConfig.to_dict()`` wrote every per-mode key,
so that it was another schedule under keyword overrides (finding 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import Collection, Config, ReductionConfig, SaveConfig, load_config


def _steps(collection: Collection, config: Config, mode: str, n: int = 40) -> list[int]:
    return [s for s in range(n) if collection.should_save(mode, s, config.save)]


def _mine(save: Any) -> Collection:
    return Collection("mine", include=["^p"], reduction=ReductionConfig(reductions=["mean"]), save=save)


@pytest.mark.parametrize("save", [SaveConfig(interval=1), {"interval": 1}], ids=["SaveConfig", "mapping"])
def test_a_collections_saveconfig_keeps_the_runs_disabled_predict_mode(tmp_path: Path, save: Any) -> None:
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=out, rules=[], save={"interval": 1, "modes": {"predict": {"enabled": False}}},
                         collections={"mine": _mine(save)})
    for step in range(3):
        s.step("predict", step, {"preds": (np.ones(3) * step, "predictions")})
        s.step("train", step, {"preds": (np.ones(3) * step, "predictions")})
    s.close()
    run = tripwire.open_run(out)
    assert run.steps("predict") == []
    assert run.steps("train") == [0, 1, 2]


def test_a_collections_saveconfig_inherits_what_it_does_not_state_as_the_yaml_does() -> None:
    top = {"interval": 2, "start_step": 1, "end_step": 30, "steps": [1, 33],
           "modes": {"eval": {"interval": 1}, "predict": {"enabled": False}}}
    yaml_form = load_config({"save": top, "collections": {"gradients": {"save": {"interval": 5, "start_step": 0}}}})
    grads = Collection("gradients", kinds=["gradients"], reduction=ReductionConfig(reductions=["l2"]),
                       save=SaveConfig(interval=5, start_step=0))
    python_form = load_config({"save": top}, collections={"gradients": grads})
    a, b = yaml_form.collections["gradients"], python_form.collections["gradients"]
    for mode in ("train", "eval", "test", "predict"):
        assert _steps(a, yaml_form, mode) == _steps(b, python_form, mode), mode
    assert _steps(b, python_form, "train") == [0, 1, 5, 10, 15, 20, 25, 33]
    assert _steps(b, python_form, "predict") == []
    # (a keyword override applies to what it does not state, as to the mapping's)
    again = python_form.with_overrides(end_step=12)
    assert _steps(again.collections["gradients"], again, "train") == [0, 1, 5, 10, 33]


def test_a_config_built_in_python_gives_its_collections_its_save() -> None:
    config = Config(save=SaveConfig(interval=2, modes={"predict": {"enabled": False}}),
                    collections={"mine": _mine(SaveConfig(interval=3))})
    mine = config.collections["mine"]
    assert _steps(mine, config, "train", 10) == [0, 3, 6, 9]
    assert _steps(mine, config, "predict", 10) == []


def test_saveconfig_to_dict_writes_what_it_states_and_reads_back_as_the_same_schedule() -> None:
    s = SaveConfig(interval=4, modes={"eval": {"interval": 1}})
    assert s.to_dict() == {"interval": 4, "modes": {"eval": {"interval": 1}}}
    assert SaveConfig().to_dict() == {}
    assert SaveConfig(5, 2).to_dict() == {"interval": 5, "start_step": 2}
    assert SaveConfig.from_dict(s.to_dict()) == s
    for keywords in ({"start_step": 5, "end_step": 9}, {"save_interval": 3}, {"save_steps": [2]}):
        as_object = load_config(None, save=s, **keywords).save
        as_mapping = load_config(None, save=s.to_dict(), **keywords).save
        for mode in ("train", "eval"):
            assert [t for t in range(15) if as_object.should_save(mode, t)] == \
                [t for t in range(15) if as_mapping.should_save(mode, t)], (keywords, mode)
    eval_steps = load_config(None, save=s.to_dict(), start_step=5, end_step=9).save
    assert [t for t in range(15) if eval_steps.should_save("eval", t)] == [5, 6, 7, 8]
    # as a collection's save: the same as the object
    top = {"save": {"interval": 2, "end_step": 6, "modes": {"predict": {"enabled": False}}}}
    one = load_config(top, collections={"mine": _mine(s)})
    two = load_config(top, collections={"mine": _mine(s.to_dict())})
    for mode in ("train", "eval", "predict"):
        assert _steps(one.collections["mine"], one, mode) == _steps(two.collections["mine"], two, mode)


def test_a_collection_still_reads_back_from_its_to_dict() -> None:
    config = load_config({"save": {"interval": 2, "end_step": 30, "modes": {"eval": {"interval": 1}}},
                          "collections": {"weights": {"save": {"interval": 6, "steps": [7]}}}})
    weights = config.collections["weights"]
    # (its save as stated, the rest from the run's save: trial 32i F3)
    assert Collection.from_dict("weights", weights.to_dict(), default_save=config.save) == weights
    stored = config.to_dict()
    assert stored["collections"]["weights"]["save"] == {"interval": 6, "steps": [7]}
    assert Config.from_dict(stored).to_dict() == stored

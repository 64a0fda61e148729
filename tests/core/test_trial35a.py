"""Trial 35a (an smdebug user's first programs): a hand-made ModeSaveConfig states what it was
given, a reader's hint names every collection that could keep a reduction, one unknown key is one
error, and the near-typo collection warning carries the logger's prefix."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tripwire
from tripwire import ModeSaveConfig, SaveConfig
from tripwire._cli import main


def _saved(save: SaveConfig, mode: str, upto: int = 25) -> list[int]:
    return [s for s in range(upto) if save.should_save(mode, s)]


def test_a_mode_save_config_object_states_only_the_arguments_it_was_given() -> None:
    by_object = SaveConfig(interval=4, steps=[1, 3], modes={"eval": ModeSaveConfig(start_step=2)})
    by_mapping = SaveConfig(interval=4, steps=[1, 3], modes={"eval": {"start_step": 2}})
    assert _saved(by_object, "eval") == _saved(by_mapping, "eval") == [1, 3, 4, 8, 12, 16, 20, 24]
    assert by_object.to_dict() == by_mapping.to_dict() == {"interval": 4, "steps": [1, 3], "modes": {"eval": {"start_step": 2}}}
    assert SaveConfig.from_dict(by_object.to_dict()) == by_object
    # positional arguments are given too; one given nothing is the top level
    assert _saved(SaveConfig(interval=4, modes={"eval": ModeSaveConfig(5)}), "eval") == [0, 5, 10, 15, 20]
    assert _saved(SaveConfig(interval=4, modes={"eval": ModeSaveConfig()}), "eval") == _saved(SaveConfig(interval=4), "train")


def test_a_mode_save_config_object_follows_keyword_overrides_it_does_not_state() -> None:
    config = tripwire.load_config({}, save=SaveConfig(modes={"eval": ModeSaveConfig(start_step=2)}), save_interval=5)
    assert _saved(config.save, "eval") == [5, 10, 15, 20]


def test_a_mode_save_config_end_before_an_inherited_start_names_where_it_came_from() -> None:
    with pytest.raises(tripwire.ConfigError, match=r"save\.modes\.eval\.end_step: got 3; .*inherited from save"):
        SaveConfig(start_step=5, modes={"eval": ModeSaveConfig(end_step=3)})


def test_the_kept_hint_names_every_collection_of_the_tensor_that_lacks_the_reduction(tmp_path: Path) -> None:
    config = {"collections": {"weights": {"reductions": ["l2", "mean"]},
                              "first_layer": {"include": ["^fc1\\.weight$"], "kinds": ["weights"], "reductions": ["raw"],
                                              "save": {"steps": [0, 7], "end_step": 0}}},
              "rules": []}
    import numpy as np

    with tripwire.Session(config, out_dir=tmp_path / "run") as session:
        for step in range(12):
            plan = session.begin_step("train", step)
            plan.add("fc1.weight", np.full((2, 2), float(step)), "weights")
            session.end_step()
    run = tripwire.open_run(tmp_path / "run")
    with pytest.raises(tripwire.TensorNotFoundError) as info:
        run.tensor("fc1.weight").value("min", 10)
    message = str(info.value)
    assert "collections.weights.reductions or collections.first_layer.reductions" in message or \
        "collections.first_layer.reductions or collections.weights.reductions" in message
    assert "l2, mean of collection 'weights'" in message and "raw of collection 'first_layer'" in message


def test_an_unknown_top_level_key_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("reduction_config: {reductions: [mean], norms: [l2]}\nsave: {interval: 0}\n")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 errors" in err
    assert err.count("unknown key 'reduction_config'") == 1 and "reductions: [mean, l2]" in err
    assert "save.interval: got 0" in err


def test_the_near_typo_collection_warning_starts_with_the_prefix(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        tripwire.load_config({"collections": {"gradeints": {"include": [".*"], "reductions": ["l2"]}}})
    said = [r.getMessage() for r in caplog.records if "gradeints" in r.getMessage()]
    assert said and all(m.startswith("tripwire: ") for m in said)


def test_histogram_arguments_given_to_a_collection_point_at_its_reduction_config() -> None:
    with pytest.raises(TypeError, match=r"did you mean reduction=ReductionConfig\(reductions=\['histogram'\], histogram_bins=7\)"):
        tripwire.Collection("c", include=[".*"], histogram_bins=7)

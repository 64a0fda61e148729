"""Trial 25g (the YAML config, key by key) and trial 25e finding 5 (smdebug hints): ``tripwire
validate`` crashed on a mapping inside a ``collections`` list; ``Config.to_dict()`` (and the config in
run.json) wrote inherited save keys as stated, so a keyword override then saved on another schedule;
error messages showed values the file does not hold; ``mode_save_configs=`` was "did you mean
'config'?"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import Config, ConfigError, load_config
from tripwire._cli import main

# ------------------------------------------------ 1. a mapping inside a collections list (finding 1)


@pytest.mark.parametrize("text, place, name", [
    ("collections: [{weights: {reductions: [l2]}}]\n", 0, "weights"),
    ("collections: [losses, {mine: {include: [fc], reductions: [l2]}}]\n", 1, "mine"),
])
def test_validate_names_a_mapping_inside_a_collections_list(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            text: str, place: int, name: str) -> None:
    # it was a traceback (TypeError: unhashable type: 'dict'), exit status 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"collections[{place}]: got {{'{name}': " in err
    assert f"a mapping of names to their settings, without the list: collections: {{{name}: {{...}}}}" in err


def test_load_config_names_the_mapping_form_for_a_mapping_inside_a_collections_list() -> None:
    # it said "accepted: a string", leaving out the form the user meant
    with pytest.raises(ConfigError, match=r"^collections\[0\]: got \{'weights': \{'reductions': \['l2'\]\}\} \(a mapping "
                                          r"inside a list\); accepted: a list of collection names .*, or a mapping of "
                                          r"names to their settings"):
        load_config({"collections": [{"weights": {"reductions": ["l2"]}}]})


def test_validate_names_each_bad_entry_of_a_collections_list_with_the_other_errors(tmp_path: Path,
                                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("save: {interval: 0}\ncollections: [losses, {mine: {include: [fc]}}, weightz]\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"3 errors in {bad}:" in err
    for said in ("save.interval: got 0", "collections[1]: got {'mine': ", "collections[2]: 'weightz' is no built-in "
                 "collection; did you mean 'weights'?"):
        assert said in err, said


# --------------------------------------- 2. to_dict / run.json keep what was stated (finding 2)
_YAML = """
save:
  interval: 4
  modes:
    predict: {enabled: false}
    eval: {interval: 4}
collections:
  losses: null
  weights: {save: {start_step: 2}}
"""


def _schedule(config: Config) -> dict[str, Any]:
    """Every collection's save steps (0..39) in every mode."""
    return {(name, mode): [s for s in range(40) if c.should_save(mode, s, config.save)]
            for name, c in config.collections.items() for mode in tripwire.MODES}


def test_to_dict_writes_the_save_keys_as_stated() -> None:
    import yaml

    config = load_config(yaml.safe_load(_YAML))
    data = config.to_dict()
    assert data["save"] == {"interval": 4, "start_step": 0, "end_step": None, "steps": [],
                            "modes": {"predict": {"enabled": False}, "eval": {"interval": 4}}}
    assert data["collections"]["weights"]["save"] == {"start_step": 2}
    assert "save" not in data["collections"]["losses"]
    again = Config.from_dict(data)
    assert again.to_dict() == data and _schedule(again) == _schedule(config)


@pytest.mark.parametrize("overrides", [{"save_interval": 6}, {"start_step": 1, "end_step": 30},
                                       {"save": {"interval": 5, "modes": {"test": {"interval": 2}}}},
                                       {"save_steps": [3]}])
def test_a_round_tripped_config_saves_as_the_original_under_overrides(overrides: dict[str, Any]) -> None:
    import yaml

    config = load_config(yaml.safe_load(_YAML))
    again = Config.from_dict(config.to_dict())
    assert _schedule(again.with_overrides(**overrides)) == _schedule(config.with_overrides(**overrides))
    # the weights and the predict mode state no interval: they follow save_interval=6 (they kept 4)
    if "save_interval" in overrides:
        sched = _schedule(again.with_overrides(**overrides))
        assert sched[("weights", "train")] == [6, 12, 18, 24, 30, 36]
        assert sched[("weights", "predict")] == [] and sched[("weights", "eval")] == [4, 8, 12, 16, 20, 24, 28, 32, 36]


def test_a_python_config_round_trips_with_its_stated_modes() -> None:
    save = tripwire.SaveConfig(interval=4, modes={"eval": tripwire.ModeSaveConfig(interval=1)})
    config = Config(save=save)
    again = Config.from_dict(config.to_dict())
    assert again.to_dict() == config.to_dict()
    # eval states its interval alone: it follows start_step=3 (it kept start_step 0 once round-tripped)
    assert _schedule(again.with_overrides(start_step=3)) == _schedule(config.with_overrides(start_step=3))
    assert _schedule(again.with_overrides(start_step=3))[("losses", "eval")][:3] == [3, 4, 5]


def test_the_config_a_run_stores_saves_as_the_file_under_a_keyword(tmp_path: Path) -> None:
    # the stored config reused with save_interval=6 saved fc1.weight at [4, 8, 12, 16], the file at [6, 12, 18]
    config_file = tmp_path / "rt.yaml"
    config_file.write_text(_YAML)
    with tripwire.Session(str(config_file), out_dir=str(tmp_path / "run"), framework="unit-test") as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    stored = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
    assert stored == tripwire.open_run(tmp_path / "run").config
    assert stored["collections"]["weights"]["save"] == {"start_step": 2}
    from_file = load_config(str(config_file), save_interval=6)
    from_run = load_config(stored, save_interval=6)
    assert _schedule(from_run) == _schedule(from_file)
    assert _schedule(from_run)[("weights", "train")] == [6, 12, 18, 24, 30, 36]


# ---------------------------------------------- 3. the value as written in a message (finding 5)
def test_a_mapping_for_histogram_range_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # three errors, two of them values the file does not hold ({'low': 0}, {'high': 1})
    bad = tmp_path / "bad.yaml"
    bad.write_text("collections: {weights: {reductions: [histogram], histogram_range: {low: 0, high: 1}}}\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "errors in" not in err and "{'low': 0}" not in err
    assert ("collections.weights.histogram_range: got {'low': 0, 'high': 1} (a mapping); accepted: null or a list "
            "[low, high] of two numbers with low < high") in err


def test_histogram_range_without_a_histogram_shows_the_range_as_written() -> None:
    # it was "got (-1.0, 1.0)"
    with pytest.raises(ConfigError, match=r"^collections\.weights\.histogram_range: got \[-1, 1\], but no histogram is "
                                          r"kept"):
        load_config({"collections": {"weights": {"reductions": ["l2"], "histogram_range": [-1, 1]}}})


# --------------------------------------------------- 4. smdebug's mode_save_configs (25e finding 5)
def test_mode_save_configs_is_save_modes_for_a_session_and_load_config() -> None:
    # a Session said "did you mean 'config'?", load_config nothing
    said = r"unknown argument 'mode_save_configs'; did you mean save=\{'modes': \{\.\.\.\}\}\? \(smdebug's mode_save_configs"
    with pytest.raises(ConfigError, match=rf"^Session\(mode_save_configs=\{{\}}\): {said}"):
        tripwire.Session(write=False, mode_save_configs={})
    with pytest.raises(ConfigError, match=rf"^load_config\(mode_save_configs=\{{\}}\): {said}"):
        load_config(None, mode_save_configs={})


# ------------------------------------------------------------- values as written (finding 5, the rest)
@pytest.mark.parametrize(("config", "said"), [
    ({"actions": [{"name": "log", "level": "LOUD"}]}, r"^actions\[0\]\.level: got 'LOUD'; accepted: debug, info, "),
    ({"actions": [{"name": "log", "level": 3}]}, r"^actions\[0\]\.level: got 3 \(int\); accepted: a string"),
    ({"rules": [{"name": "dead_relu", "threshold": 2}]}, r"^rules\[0\]: dead_relu\.threshold: got 2; accepted: "),
    ({"rules": [{"name": "dead_relu", "threshold": 2.5}]}, r"^rules\[0\]: dead_relu\.threshold: got 2\.5; accepted: "),
])
def test_a_bad_value_is_named_as_written(config: dict[str, Any], said: str) -> None:
    # LOUD was named 'loud' (lowered before the check), a threshold of 2 as 2.0 (converted before it)
    with pytest.raises(ConfigError, match=said):
        load_config(config)


def test_a_log_level_in_any_case_is_still_accepted() -> None:
    assert load_config({"actions": [{"name": "log", "level": "WARNING"}]}).actions


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="needs /dev/fd (a pipe as a path)")
def test_a_config_read_from_a_pipe(tmp_path: Path) -> None:
    # trial 25i: tripwire watch RUN --config <(...) was "no such file '/dev/fd/63'" (a regular file only)
    import os

    r, w = os.pipe()
    try:
        os.write(w, b"rules: [dead_relu]\nsave: {interval: 3}\n")
        os.close(w)
        config = load_config(f"/dev/fd/{r}")
    finally:
        os.close(r)
    assert config.save.interval == 3 and [getattr(rule, "name", rule) for rule in config.rules] == ["dead_relu"]
    with pytest.raises(ConfigError, match=r"^config: no such file '.*nowhere\.yaml'"):
        load_config(str(tmp_path / "nowhere.yaml"))


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="needs /dev/fd (a pipe as a path)")
def test_validate_names_every_error_of_a_config_read_from_a_pipe(capsys: pytest.CaptureFixture[str]) -> None:
    # a pipe reads once: validate named only the first error (the second read, for the others, found
    # an empty pipe), where the same file on disk gets all three
    import os

    r, w = os.pipe()
    try:
        os.write(w, b"save_interval: -3\ncollections: [foo]\nrules: [{name: nope}]\n")
        os.close(w)
        assert main(["validate", f"/dev/fd/{r}"]) == 2
    finally:
        os.close(r)
    message = capsys.readouterr().err
    assert message.startswith(f"tripwire validate: error: 3 errors in /dev/fd/{r}:"), message
    assert "save_interval" in message and "'foo'" in message and "'nope'" in message

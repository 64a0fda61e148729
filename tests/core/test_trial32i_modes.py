"""Trial 32i F13/F14: a rule's ``modes: [validation]`` gets "did you mean 'eval'"; ``save.modes: []``
is refused (it was taken silently as no modes); a mode given null is saved as the top level, in YAML
and in Python alike (documented)."""
from __future__ import annotations

import pytest

import tripwire
from tripwire import ConfigError, SaveConfig


@pytest.mark.parametrize("modes", [["validation"], "val", ["train", "VALID"]])
def test_a_rule_s_validation_mode_is_said_to_be_eval(modes: object) -> None:
    with pytest.raises(ConfigError, match=r"^rules\[0\]: dead_relu\.modes: got '[A-Za-z]+'; did you mean 'eval'\? "
                                          r"\(validation is mode 'eval'\); accepted: train, eval, test, predict$"):
        tripwire.load_config({"rules": [{"name": "dead_relu", "modes": modes}]})


def test_a_rule_s_mode_in_another_case_is_guessed() -> None:
    with pytest.raises(ConfigError, match=r"dead_relu\.modes: got 'TRAIN'; did you mean 'train'\?; accepted: "):
        tripwire.load_config({"rules": [{"name": "dead_relu", "modes": ["TRAIN"]}]})


@pytest.mark.parametrize("modes", [[], ["eval"], "eval"])
def test_save_modes_that_is_no_mapping_is_refused(modes: object) -> None:
    with pytest.raises(ConfigError, match=r"^save\.modes: got .*; accepted: a mapping of modes \(train, eval, test, "
                                          r"predict\) to a mapping of .*or null for none"):
        tripwire.load_config({"save": {"modes": modes}})
    with pytest.raises(ConfigError, match=r"^collections\.weights\.save\.modes: got "):
        tripwire.load_config({"collections": {"weights": {"save": {"modes": modes}}}})


def test_a_mode_given_null_is_the_top_level_in_yaml_and_python() -> None:
    yaml = tripwire.load_config({"save": {"interval": 4, "modes": {"eval": None}}}).save
    python = SaveConfig(interval=4, modes={"eval": None})
    assert yaml.for_mode("eval") == python.for_mode("eval") == yaml.for_mode("train")
    assert tripwire.load_config({"save": {"modes": None}}).save == SaveConfig()

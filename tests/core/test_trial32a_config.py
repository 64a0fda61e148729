"""Trial 32a F5: two config errors did not say what is accepted.

A collection's ``include`` / ``exclude`` pattern that is no regular expression named the pattern and
Python's reason but not what is accepted; a ``save.modes`` key ``validation`` (what Keras and
Lightning call ``eval``) listed the modes without a "did you mean 'eval'"."""

from __future__ import annotations

import pytest

import tripwire
from tripwire import Collection, ConfigError, SaveConfig


@pytest.mark.parametrize("key", ["include", "exclude"])
def test_an_invalid_regular_expression_says_what_is_accepted(key: str) -> None:
    spec = {"include": ["fc"], key: ["("]} if key == "exclude" else {key: ["("]}
    with pytest.raises(ConfigError, match=rf"^collections\.weights\.{key}\[0\]: invalid regular expression '\(' "
                                          r"\(missing \), unterminated subpattern at position 0\); accepted: a Python "
                                          r"regular expression, matched with re\.search against each tensor name"):
        tripwire.load_config({"collections": {"weights": spec}})
    with pytest.raises(ConfigError, match=rf"^collections\.mine\.{key}\[0\]: invalid regular expression .*; accepted: "):
        Collection("mine", **{"include": ["fc"], key: ["("]} if key == "exclude" else {key: ["("]})


@pytest.mark.parametrize("mode", ["validation", "val", "Validation", "VAL", "valid"])
def test_a_validation_mode_key_points_at_eval(mode: str) -> None:
    with pytest.raises(ConfigError, match=rf"^save\.modes\.{mode}: unknown key {mode!r}; did you mean 'eval'\? "
                                          r"\(validation is mode 'eval'\) \(accepted keys: eval, predict, test, "
                                          r"train\)$"):
        tripwire.load_config({"save": {"modes": {mode: {"interval": 1}}}})
    with pytest.raises(ConfigError, match=rf"^save\.modes: unknown mode {mode!r}; did you mean 'eval'\? \(validation "
                                          r"is mode 'eval'\); accepted: train, eval, test, predict$"):
        SaveConfig(modes={mode: {"interval": 1}})


def test_a_mode_key_in_another_case_or_with_its_enum_prefix_points_at_its_mode() -> None:
    with pytest.raises(ConfigError, match=r"^save\.modes\.TRAIN: unknown key 'TRAIN'; did you mean 'train'\? "
                                          r"\(accepted keys: "):
        tripwire.load_config({"save": {"modes": {"TRAIN": {"interval": 1}}}})
    with pytest.raises(ConfigError, match=r"^save\.modes: unknown mode 'ModeKeys\.EVAL'; did you mean 'eval'\?; "):
        SaveConfig(modes={"ModeKeys.EVAL": {"interval": 1}})
    # (a collection's own save: the same)
    with pytest.raises(ConfigError, match=r"^collections\.losses\.save\.modes\.validation: unknown key 'validation'; "
                                          r"did you mean 'eval'\?"):
        tripwire.load_config({"collections": {"losses": {"save": {"modes": {"validation": {"interval": 1}}}}}})
    # the guesses that were there stay
    with pytest.raises(ConfigError, match=r"^save\.modes: unknown mode 'evaluation'; did you mean 'eval'\?; "):
        SaveConfig(modes={"evaluation": {"interval": 1}})
    with pytest.raises(ConfigError, match=r"^save\.modes\.predictions: unknown key 'predictions'; did you mean "
                                          r"'predict'\? \(accepted keys: "):
        tripwire.load_config({"save": {"modes": {"predictions": {"interval": 1}}}})

"""Trial 31e F4: smdebug's rule parameters get tripwire's names (or what tripwire has instead), and
smdebug's CheckInputImages points at input_not_normalized."""

from __future__ import annotations

import pytest

import tripwire
from tripwire import ConfigError


@pytest.mark.parametrize("rule, key, value, meant, note", [
    ("loss_not_decreasing", "diff_percent", 10, "min_decrease", "a fraction of the starting loss, not a percent: "
     "diff_percent: 10 is min_decrease: 0.1"),
    ("vanishing_gradient", "threshold", 1e-7, "min_abs_mean", "every layer's mean |gradient| below it"),
    ("tensor_variance", "max_threshold", 10, "max_variance", ""),
    ("tensor_variance", "min_threshold", 1e-5, "min_variance", ""),
    ("overfit", "ratio_threshold", 0.1, "gap", "the validation metric more than gap times the training metric"),
    ("overtraining", "patience_validation", 10, "val_patience", ""),
    ("dead_relu", "threshold_layer", 50, "threshold", "a fraction, not a percent"),
    ("saturated_activation", "threshold_tanh_max", 9.5, "tanh_threshold", "one bound of |x|"),
    ("weight_update_ratio", "large_threshold", 10, "max_ratio", ""),
    ("class_imbalance", "threshold_misprediction", 0.7, "min_recall", "1 - threshold_misprediction"),
    ("tree_depth", "depth", 4, "max_depth", ""),
    ("all_zero", "tensor_regex", ".*", "include", "a regular expression"),
    ("exploding_tensor", "collection_names", ["gradients"], "collections", "a list of collection names"),
    ("loss_not_decreasing", "mode", "TRAIN", "modes", "a list of tripwire's modes"),
])
def test_an_smdebug_parameter_is_told_tripwires(rule: str, key: str, value: object, meant: str, note: str) -> None:
    said = f"did you mean '{meant}'? (smdebug's {key} is tripwire's {meant}"
    with pytest.raises(ConfigError) as err:
        tripwire.load_config({"rules": [{"name": rule, key: value}]})
    text = str(err.value)
    assert text.startswith(f"rules[0].{key}: unknown parameter of rule '{rule}'; {said}"), text
    assert note in text
    assert "; accepted: " in text


@pytest.mark.parametrize("rule, key, note", [
    ("loss_not_decreasing", "increase_threshold_percent", "loss_diverging"),
    ("dead_relu", "threshold_inactivity", "exactly 0"),
    ("all_zero", "threshold", "every element is 0"),
    ("exploding_tensor", "tensor_regex", "every tensor of the collections in collections"),
])
def test_an_smdebug_parameter_without_an_equivalent_says_what_there_is(rule: str, key: str, note: str) -> None:
    with pytest.raises(ConfigError, match=rf"^rules\[0\]\.{key}: unknown parameter of rule '{rule}' \(smdebug's {key}: "
                       rf"no such parameter in tripwire; .*{note}"):
        tripwire.load_config({"rules": [{"name": rule, key: 1}]})


def test_another_rules_smdebug_parameter_gets_no_smdebug_hint() -> None:
    with pytest.raises(ConfigError) as err:
        tripwire.load_config({"rules": [{"name": "tensor_variance", "diff_percent": 10}]})
    assert str(err.value).startswith("rules[0].diff_percent: unknown parameter of rule 'tensor_variance'")
    assert "smdebug" not in str(err.value)


def test_the_mapped_parameters_are_the_rules_own() -> None:
    from tripwire.rules._registry import _SMDEBUG_PARAMS, _init_params, available_rules

    rules = available_rules()
    for rule, params in _SMDEBUG_PARAMS.items():
        accepted = _init_params(rules[rule])
        for key, (new, _) in params.items():
            assert key not in accepted, (rule, key)
            assert new is None or new in accepted, (rule, key, new)


def test_check_input_images_points_at_input_not_normalized() -> None:
    with pytest.raises(ConfigError, match=r"^rules\[0\]: unknown rule 'CheckInputImages'; did you mean "
                       r"'input_not_normalized'\? \(smdebug's CheckInputImages: the closest rule"):
        tripwire.Session(rules=["CheckInputImages"], out_dir=None)
    with pytest.raises(ConfigError, match=r"rules\[0\]\.threshold_mean: unknown parameter of rule 'input_not_normalized'; "
                       r"did you mean 'max_abs_mean'\?"):
        tripwire.load_config({"rules": [{"name": "input_not_normalized", "threshold_mean": 0.2}]})


def test_the_mapped_parameter_fires_as_asked(feed, loss_records) -> None:  # type: ignore[no-untyped-def]
    # min_decrease as the fraction the hint says (diff_percent: 10 is 0.1): a loss that fell 8% fires at 0.1,
    # not at 0.05 (a tiny real judgement by the rule the hint sends the user to)
    values = [1.0] * 10 + [0.92] * 60
    fired = feed(tripwire.rules.LossNotDecreasing(num_steps=50, min_decrease=0.1), loss_records(values))
    quiet = feed(tripwire.rules.LossNotDecreasing(num_steps=50, min_decrease=0.05), loss_records(values))
    assert [f.rule for f in fired] == ["loss_not_decreasing"]
    assert quiet == []

"""Trial 29d's messages and checks of rules and actions:

6. ``validate`` added a bogus ``similar_across_runs.other: got None`` after the right error;
9. half-useful messages: a top-level ``interval:`` suggested ``writer``; a rule set's parameter typo
   was copied into the suggested fix, under ``rules[default]``; a non-breaking space after a colon
   was printed raw; ``save: {enabled: ...}`` gave no hint of ``modes``;
10. a notify ``region`` against the topic ARN's, and ``tree_depth``'s ``max_depth: 0``, were taken.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tripwire
from tripwire import ConfigError, SaveConfig, load_config
from tripwire._cli import main


def _validate_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], yaml: str) -> list[str]:
    import json

    path = tmp_path / "c.yaml"
    path.write_text(yaml, encoding="utf-8")
    assert main(["validate", "--json", str(path)]) == 2
    return json.loads(capsys.readouterr().out)["errors"]


# ------------------------------------------------------------------------------------------- 6
def test_validate_names_a_bad_similar_across_runs_other_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    errors = _validate_errors(tmp_path, capsys, "rules: [{name: similar_across_runs, other: /nonexistent/run}]\n")
    assert errors == ["rules[0]: similar_across_runs.other: got '/nonexistent/run', which is not a tripwire run "
                      "(run.json missing); accepted: the directory of a stored tripwire run"]


def test_similar_across_runs_without_other_says_it_is_required() -> None:
    with pytest.raises(ConfigError, match=r"rules\[0\]: similar_across_runs\.other: got None; accepted: the "
                                          r"directory of a stored tripwire run \(a required parameter: the reference "
                                          r"run to compare with\)"):
        load_config({"rules": ["similar_across_runs"]})


# ------------------------------------------------------------------------------------------- 9
@pytest.mark.parametrize("key, value, shown", [("interval", 5, "save: {interval: 5}"), ("steps", [3, 7],
                                                                                       "save: {steps: [3, 7]}"),
                                               ("modes", {"eval": {"interval": 1}}, "save: {modes: {eval: {interval: 1}}}")])
def test_a_save_key_at_the_top_level_suggests_save(key: str, value: object, shown: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{key}: unknown key {key!r}; did you mean {shown}? ({key} goes "
                                                    f"under save)")):
        load_config({key: value})
    with pytest.raises(ConfigError, match=re.escape(f"did you mean save=SaveConfig({key}=")):
        tripwire.Config(**{key: value})


def test_a_rule_set_parameter_is_named_by_its_place_with_the_rule_that_takes_it() -> None:
    every = "exploding_tensor, loss_not_decreasing, oscillating_loss, vanishing_gradient, exploding_gradient, loss_scale_collapse"
    with pytest.raises(ConfigError, match=re.escape(
            "rules[1].patiense: a rule set takes 'actions' only, got {'patiense': 3}; 'patiense' is no parameter of "
            "its rules either; did you mean 'patience'? Give a parameter to the rule that takes it, after the set: "
            f"rules: [default, {{name: exploding_tensor, patience: 3}}] (patience is a parameter of each of its "
            f"rules: {every})")):
        load_config({"rules": ["overfit", {"name": "default", "patiense": 3}]})
    with pytest.raises(ConfigError, match=re.escape(
            "rules[0].window: a rule set takes 'actions' only, got {'window': 20}; give it to the rule that takes "
            "it, after the set: rules: [default, {name: loss_not_decreasing, window: 20}] (window is a parameter "
            "of loss_not_decreasing, oscillating_loss)")):
        load_config({"rules": [{"name": "default", "window": 20}]})
    with pytest.raises(ConfigError, match=re.escape(
            "rules[0].zzz: a rule set takes 'actions' only, got {'zzz': 1}; 'zzz' is no parameter of its rules "
            "either. Give a parameter to the rule that takes it, after the set: rules: [default, {name: "
            f"exploding_tensor, ...: ...}}] (the rules of default: {every})")):
        load_config({"rules": [{"name": "default", "zzz": 1}]})


@pytest.mark.parametrize("yaml, message", [
    ("save: {interval:\u00a05}\n",
     "save: unknown key 'interval:\\xa05': a non-breaking space (U+00A0) after ':' makes it one key, not the key "
     "'interval' and its value; write an ordinary space there"),
    ("save:\n  interval:\u00a05\n",
     "save: expected a mapping, got 'interval:\\xa05' (str): a non-breaking space (U+00A0) after ':' makes it one "
     "string, not the key 'interval' and its value; write an ordinary space there"),
    ("interval:\u00a05\n",
     "a non-breaking space (U+00A0) after ':' makes it one string, not the key 'interval' and its value; write an "
     "ordinary space there"),
    ("save: {interval:\u20035}\n", "an em space (U+2003) after ':'"),
])
def test_a_non_breaking_space_after_a_colon_is_named(tmp_path: Path, yaml: str, message: str) -> None:
    path = tmp_path / "nbsp.yaml"
    path.write_text(yaml, encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path)


def test_enabled_in_save_is_said_to_be_a_modes_key() -> None:
    with pytest.raises(ConfigError, match=re.escape(
            "save.enabled: unknown key 'enabled'; 'enabled' is a key of one mode: save: {modes: {predict: {enabled: "
            "false}}} (to save nothing in that mode)")):
        load_config({"save": {"enabled": False}})
    with pytest.raises(ConfigError, match=re.escape(
            "collections.weights.save.enabled: unknown key 'enabled'; 'enabled' is a key of one mode")):
        load_config({"collections": {"weights": {"save": {"enabled": False}}}})
    with pytest.raises(ConfigError, match=re.escape(
            "did you mean modes={'predict': ModeSaveConfig(enabled=False)}?")):
        SaveConfig(enabled=False)  # type: ignore[call-arg]


# ------------------------------------------------------------------------------------------ 10
def test_a_notify_region_against_the_topics_is_refused() -> None:
    topic = "arn:aws:sns:us-east-1:123456789012:alerts"
    with pytest.raises(ConfigError, match=re.escape(
            f"actions[0].region: got 'us-west-2', but the topic_arn {topic!r} is in us-east-1 (an SNS topic is "
            f"published to in its own region); accepted: 'us-east-1' or leave region out")):
        load_config({"actions": [{"name": "notify", "topic_arn": topic, "region": "us-west-2"}]})
    with pytest.raises(ConfigError, match=re.escape("rules[0].actions[0].region: got 'eu-west-1'")):
        load_config({"rules": [{"name": "exploding_tensor", "actions": [{"notify": {"topic_arn": topic,
                                                                                    "region": "eu-west-1"}}]}]})
    # the same region, or a topic ARN that names none, is fine
    load_config({"actions": [{"name": "notify", "topic_arn": topic, "region": "us-east-1"}]})
    load_config({"actions": [{"name": "notify", "topic_arn": "arn:aws:sns::123456789012:alerts", "region": "eu-west-1"}]})


def test_tree_depth_max_depth_0_is_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape(
            "rules[0]: tree_depth.max_depth: got 0; accepted: an integer >= 1, the depth the trees must stay within "
            "(XGBoost's max_depth 0 means no limit; here 0 would fire at the first tree that makes a split)")):
        load_config({"rules": [{"name": "tree_depth", "max_depth": 0}]})
    assert load_config({"rules": [{"name": "tree_depth", "max_depth": 1}]}).rules

"""Trials 38a and 38c: what a config refuses, a rule object's ``actions`` refuse too, and a rule set
listed twice is refused as a rule listed twice is; the ``notify`` action's missing ``topic_arn`` error
says what it got and what is accepted."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import tripwire
from tripwire import ConfigError
from tripwire.rules import FunctionRule, Overfit


@pytest.mark.parametrize("actions", [["log", "log"], ["stop_training", "stop_training"],
                                     [{"name": "log", "level": "error"}, {"log": {"level": "error"}}]])
def test_a_rule_objects_action_listed_twice_is_refused_as_in_a_config(actions: list[Any]) -> None:
    with pytest.raises(ConfigError, match=r"overfit\.actions\[1\]: got .*, listed already \(overfit\.actions\[0\]\); "
                                          r"an action runs once per finding: keep one"):
        Overfit(actions=actions)
    with pytest.raises(ConfigError, match=r"listed already"):
        tripwire.load_config({"rules": [{"name": "overfit", "actions": actions}]})


def test_a_rule_objects_two_actions_of_one_function_with_other_arguments_are_two() -> None:
    seen: list[str] = []

    def page(finding: Any, channel: str) -> None:
        seen.append(channel)

    rule = FunctionRule(lambda h, s, m: "fired" if s == 2 else None, name="fires",
                        actions=[functools.partial(page, channel="a"), functools.partial(page, channel="b")])
    session = tripwire.Session(write=False, rules=[rule], save_interval=1)
    for step in range(4):
        session.step("train", step, {"loss": (1.0, "losses")})
    session.close()
    assert seen == ["a", "b"]
    with pytest.raises(ConfigError, match=r"fires\.actions\[1\]: got .*listed already"):
        FunctionRule(lambda h, s, m: None, name="fires", actions=[print, print])


def test_a_rule_set_listed_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"rules\[1\]: rule set 'default' is listed already \(rules\[0\]\); its rules "
                                          r"run once per config"):
        tripwire.load_config({"rules": ["default", {"name": "default", "actions": ["log"]}]})
    assert len(tripwire.load_config({"rules": ["default", "overfit"]}).rules) == 2  # (a rule after its set: fine)


def test_notify_without_topic_arn_names_what_it_got_and_what_is_accepted() -> None:
    with pytest.raises(ConfigError, match=r"actions\[0\]: the notify action needs 'topic_arn', got no parameters; "
                                          r"accepted: topic_arn, an SNS topic ARN \(arn:aws:sns:REGION:ACCOUNT:NAME\)"):
        tripwire.load_config({"actions": [{"notify": {}}]})

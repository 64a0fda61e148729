"""Trials 38a and 38c: what a config refuses, a rule object's ``actions`` refuse too, and a rule set
listed twice is refused as a rule listed twice is; the ``notify`` action's missing ``topic_arn`` error
says what it got and what is accepted."""

from __future__ import annotations

import functools
from pathlib import Path
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


def test_a_module_whose_own_import_fails_is_not_blamed_on_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 38c: a rule module that exists and imports a missing package was reported as "No module
    named 'nonexistent_38c' (it imports from the current directory and PYTHONPATH)"."""
    (tmp_path / "rules38c_broken.py").write_text("import nonexistent_38c\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = (r"the module was found, but its own import raised ModuleNotFoundError: No module named "
             r"'nonexistent_38c' \(fix that import in the module, or install what it needs\)")
    with pytest.raises(ConfigError, match=r"rules\[0\]: cannot import module 'rules38c_broken' for "
                                          r"'rules38c_broken:Foo': " + found):
        tripwire.Session(write=False, rules=["rules38c_broken:Foo"])
    with pytest.raises(ConfigError, match=r"imports\[0\]: cannot import module 'rules38c_broken': " + found):
        tripwire.load_config({"imports": ["rules38c_broken"]})
    with pytest.raises(ConfigError, match=r"actions\[0\]: cannot load action 'rules38c_broken:page': " + found):
        tripwire.Session(write=False, actions=["rules38c_broken:page"])
    with pytest.raises(ConfigError, match=r"cannot import module 'rules38c_gone' for 'rules38c_gone:Foo': "
                                          r"ModuleNotFoundError: No module named 'rules38c_gone' \(it imports from the "
                                          r"current directory and PYTHONPATH\)"):
        tripwire.Session(write=False, rules=["rules38c_gone:Foo"])


def test_collections_none_beside_include_collections_keeps_the_included() -> None:
    """Trial 38f: ``collections=None`` (the default collections) beside ``include_collections`` dropped
    the included ones: a fit stored its loss alone, without a word."""
    default = sorted(tripwire.load_config(None).collections)
    got = tripwire.load_config(None, include_collections=["weights", "gradients"], collections=None)
    assert sorted(got.collections) == sorted({*default, "weights", "gradients"})
    from_file = tripwire.load_config({"collections": ["biases"]}, include_collections=["weights"], collections=None)
    assert sorted(from_file.collections) == sorted({*default, "weights"})  # (None: the default, not the file's)


def test_a_failed_runs_reason_names_a_tripwire_error_by_its_public_name(tmp_path: Path) -> None:
    """Trial 38k: a run a ConfigError failed read ``tripwire._errors.ConfigError: ...``."""
    with pytest.raises(ConfigError):
        with tripwire.Session(out_dir=tmp_path / "run", save_interval=1) as session:
            session.step("train", 0, {"loss": (1.0, "losses")})
            raise ConfigError("a bad setting met mid-training")
    assert tripwire.open_run(tmp_path / "run").stop_reasons[0] == "tripwire.ConfigError: a bad setting met mid-training"


def test_a_rule_or_action_module_whose_import_raises_is_a_config_error_naming_the_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 38l: a module that raises at import (not an ImportError) crashed ``tripwire validate`` with a
    traceback, exit 1 (``--json`` printed nothing), and training got the bare RuntimeError."""
    import json

    from tripwire._cli import main

    (tmp_path / "rules38l_raises.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    raised = r"importing module 'rules38l_raises'.* raised RuntimeError: boom at import"
    with pytest.raises(ConfigError, match=r"rules\[0\]: " + raised):
        tripwire.Session(write=False, rules=["rules38l_raises:x"])
    with pytest.raises(ConfigError, match=r"actions\[0\]: cannot load action 'rules38l_raises:page': " + raised):
        tripwire.Session(write=False, actions=["rules38l_raises:page"])
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("rules: ['rules38l_raises:x']\n")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", str(cfg), "--json"]) == 2
    said = json.loads(capsys.readouterr().out)
    assert said["valid"] is False and said["errors"][0].startswith("rules[0]: importing module 'rules38l_raises'")

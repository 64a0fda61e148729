"""Trial 36k: (2) ``out_dir=`` given as a keyword did not rescue a file whose ``out_dir`` names an
environment variable that is not set (the file's value was expanded before the keyword replaced
it); (3) the log line of a rule that raised had no ``tripwire: `` prefix."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tripwire


def test_an_out_dir_keyword_replaces_the_files_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNS_UNSET_36K", raising=False)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("out_dir: ${RUNS_UNSET_36K}/exp\nrules: [default]\n")
    assert tripwire.load_config(str(cfg), out_dir=str(tmp_path / "run")).out_dir == str(tmp_path / "run")
    assert tripwire.load_config({"out_dir": "${RUNS_UNSET_36K}/x"}, out_dir=str(tmp_path / "r2")).out_dir == str(tmp_path / "r2")
    with pytest.raises(tripwire.ConfigError, match=r"the environment variable 'RUNS_UNSET_36K' is not set"):
        tripwire.load_config(str(cfg))  # (without the keyword: the file's is read)


def test_a_rule_that_raised_is_logged_with_the_prefix(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def boom(history: object, step: int, mode: str) -> str | None:
        raise ValueError("boom")

    rule = tripwire.FunctionRule(boom, requirements=[tripwire.Requirement("losses", ("raw",))], name="boom")
    with caplog.at_level(logging.ERROR, logger="tripwire"), \
            tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=[rule]) as s:
        s.step("train", 0, {"loss": (1.0, "losses")})
    said = [r.getMessage() for r in caplog.records if "the rule raised" in r.getMessage()]
    assert said and said[0].startswith("tripwire: [error] boom at step 0 (train): the rule raised"), said


@pytest.mark.parametrize("subject", [5, ["a"], "", "x" * 101])
def test_the_notify_subject_is_checked(subject: object) -> None:
    action = {"name": "notify", "topic_arn": "arn:aws:sns:us-east-1:123456789012:t", "subject": subject}
    with pytest.raises(tripwire.ConfigError, match=r"actions\[0\]\.subject: got .*; accepted: a non-empty string of at "
                                                   r"most 100 characters"):
        tripwire.load_config({"rules": ["default"], "actions": [action]})


@pytest.mark.parametrize("value", ["5", "true", "2.5"])
def test_validate_names_a_rules_value_that_is_no_list_as_load_config_does(
        value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 36k: ``rules: 5`` was ``rules: got 5`` in load_config but ``rules[0]: got 5 (int)`` in
    validate, a key path the file does not have."""
    from tripwire._cli import main

    path = tmp_path / "c.yaml"
    path.write_text(f"rules: {value}\n")
    with pytest.raises(tripwire.ConfigError) as loaded:
        tripwire.load_config(path)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(loaded.value).startswith("rules: got ") and str(loaded.value) in err
    assert "rules[0]" not in err

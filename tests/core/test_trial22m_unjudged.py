"""Trial 22m: a custom rule that asks for data in train and eval but judges train steps only (the
default modes) never ran over a training that recorded eval steps only (XGBoost with a validation
set alone), and nothing said so: its stop_training guarded nothing."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import FunctionRule, Requirement


def _session(tmp_path: Path, **rule_kw: Any) -> tuple[tripwire.Session, list[tuple[int, str]]]:
    calls: list[tuple[int, str]] = []

    def always(history: Any, step: int, mode: str) -> str:
        calls.append((step, mode))
        return f"fired at {step}"

    rule = FunctionRule(always, requirements=[Requirement("metrics", modes=("train", "eval"))], actions=["record"],
                        **rule_kw)
    return tripwire.Session(out_dir=tmp_path / "run", rules=[rule], save_interval=1), calls


def test_a_rule_that_never_judged_the_modes_it_asked_for_is_named(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    session, calls = _session(tmp_path)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(5):
            session.step("eval", step, {"validation-rmse": (1.0, "metrics")})
        session.close()
    assert calls == []
    assert ("rule 'always' never judged: it judges train steps (its modes), and this session recorded eval steps "
            "only, where it asked for data in eval; give it modes=['eval'] to judge them") in caplog.text


def test_no_word_where_the_rule_judges_a_mode_recorded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    session, calls = _session(tmp_path, modes=["train", "eval"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for step in range(3):
            session.step("eval", step, {"validation-rmse": (1.0, "metrics")})
        session.close()
    assert [m for _, m in calls] == ["eval"] and "never judged" not in caplog.text  # (fired: once)
    # a built-in rule set over an evaluation alone (trainer.validate()): its rules ask for nothing there
    quiet = tripwire.Session(out_dir=tmp_path / "run2", rules=["default"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        quiet.step("eval", 0, {"val_loss": (1.0, "losses")}, summary=True)
        quiet.close()
    assert "never judged" not in caplog.text

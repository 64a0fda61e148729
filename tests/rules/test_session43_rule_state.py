"""Trial 43c F3: ``Rule.state_dict`` kept the base class's patience streak under ``streak``; a custom
rule that extends it as the docs say (``{**super().state_dict(), "streak": ...}``) with a counter of
its own under that natural name replaced it, so a resumed rule lost its patience count and fired a
step early, and ``check_rule`` did not see it. The base class's state is now under the one key
``tripwire``; a state saved before (``streak`` and ``last_eval`` at the top) still loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import tripwire
from tripwire.rules import Requirement, Rule, check_rule


class LossRises(Rule):
    """Loss rises: the loss rose ``rises`` saves in a row.

    Condition: ``l_t > l_(t-1)`` on ``rises`` consecutive saves.

    Defaults: ``rises=3``, mode ``train``.
    """

    name = "test_session43_loss_rises"

    def __init__(self, rises: int = 3, **common: Any) -> None:
        super().__init__(**common)
        self.rises = rises
        self.last: float | None = None
        self.streak = 0

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", ("raw",))]

    def check(self, history: Any, step: int, mode: str) -> Any:
        value = history.value("loss", "raw", step, mode)
        if value is None:
            return None
        found = None
        if self.last is not None and value > self.last:
            self.streak += 1
            if self.streak >= self.rises:
                found = self.finding(step, mode, f"loss rose {self.streak} saves in a row")
        else:
            self.streak = 0
        self.last = value
        return found

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "last": self.last, "streak": self.streak}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.last, self.streak = state.get("last"), state.get("streak", 0)


LOSSES = [1.0] * 10 + [1.0 + 0.1 * i for i in range(1, 21)]


def _session(out: Path) -> tripwire.Session:
    return tripwire.Session(rules=[LossRises(rises=3, patience=2, actions=["record"])], out_dir=out, save_interval=1,
                            collections=["losses"])


def test_a_custom_rule_with_its_own_streak_resumes_with_the_patience_count(tmp_path: Path) -> None:
    whole = _session(tmp_path / "whole")
    for i, v in enumerate(LOSSES):
        whole.step("train", i, {"loss": (np.float64(v), "losses")})
    whole.close()
    first = _session(tmp_path / "resumed")
    for i, v in enumerate(LOSSES[:12]):
        first.step("train", i, {"loss": (np.float64(v), "losses")})
    state = first.state_dict()
    first.close()
    assert state["rules"][0]["streak"] == 2  # (its own: two rises, at steps 10 and 11)
    second = _session(tmp_path / "resumed")
    second.load_state_dict(state)
    for i, v in enumerate(LOSSES[12:], start=12):
        second.step("train", i, {"loss": (np.float64(v), "losses")})
    second.close()
    assert [f.step for f in second.findings] == [f.step for f in whole.findings] == [13]
    assert check_rule(LossRises, rises=3, patience=2) is None


def test_a_state_saved_before_the_key_still_loads() -> None:
    rule = LossRises(patience=3)
    rule.load_state_dict({"streak": {"train": 2}, "last_eval": {"train": 7}, "last": 1.5})
    assert rule.state_dict()["tripwire"] == {"streak": {"train": 2}, "last_eval": {"train": 7}}


def test_a_rules_own_state_under_the_reserved_key_is_refused_at_load() -> None:
    """Trial 43f: a rule that kept its own state under ``tripwire`` silently lost the patience streak."""
    import pytest

    from tripwire import ConfigError

    rule = LossRises(patience=3)
    with pytest.raises(ConfigError, match=r"test_session43_loss_rises: load_state_dict: the state's key 'tripwire' "
                                          r"holds dict \{'seen': 2\}, not the base class's state"):
        rule.load_state_dict({"tripwire": {"seen": 2}, "last": 1.0, "streak": 0})


def test_a_rule_state_without_the_base_state_is_not_read_as_an_old_one() -> None:
    """Trial 43f: a rule that returns its own state without ``super()``'s, an int ``streak`` of its own
    in it, had that read as the patience streak (an old state's)."""
    rule = LossRises(patience=3)
    rule.load_state_dict({"streak": 7, "last": 1.0})
    assert rule.state_dict()["tripwire"] == {"streak": {}, "last_eval": {}}
    assert rule.streak == 7


def test_a_malformed_state_is_a_config_error_naming_the_rule() -> None:
    """Trial 43k F8: a list or None as the state raised AttributeError, a streak of 'abc' ValueError."""
    import pytest

    from tripwire import ConfigError

    rule = LossRises(patience=3)
    for bad in ([], None, {"tripwire": {"streak": "abc", "last_eval": {}}}):
        with pytest.raises(ConfigError, match=r"^test_session43_loss_rises: load_state_dict: "):
            rule.load_state_dict(bad)  # type: ignore[arg-type]

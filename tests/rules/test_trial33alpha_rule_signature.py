"""Trial 33 (fixer alpha) F5: a rule function that cannot be called as rules are, refused when built."""

from __future__ import annotations

import pytest

from tripwire import ConfigError, FunctionRule, Session, load_config
from tripwire._session import check_config

# ------------------------------------------------------------------ F5: a rule function's signature


def _two(history, step):  # noqa: ANN001, ANN202 - (a rule function missing the mode)
    return None


def test_rule_function_that_cannot_take_history_step_mode_refused_when_built() -> None:
    with pytest.raises(ConfigError, match=r"rules\[0\]: rule function '<lambda>' cannot be called as a rule is, "
                                          r"fn\(history, step, mode\): .*accepted: a callable taking three positional"):
        Session(write=False, rules=[lambda: None])
    with pytest.raises(ConfigError, match=r"rules\[0\]: rule function 'getcwd' cannot be called as a rule is"):
        Session(write=False, rules=[{"name": "os:getcwd"}])
    with pytest.raises(ConfigError, match=r"rules\[1\]: rule function '_two' cannot be called as a rule is.*"
                                          r"_two\(history, step\)"):
        check_config(load_config(rules=["loss_not_decreasing", _two]))
    with pytest.raises(ConfigError, match=r"rule function 'needs_more' cannot be called as a rule is.*missing a "
                                          r"required argument: 'extra'"):
        def needs_more(history, step, mode, extra):  # noqa: ANN001, ANN202
            return None
        FunctionRule(needs_more)


def test_rule_functions_of_the_right_signature_are_taken_and_run() -> None:
    calls = []

    def rule(history, step, mode, *rest, extra=None):  # noqa: ANN001, ANN202
        calls.append((step, mode))
        return "seen" if step == 1 else None

    s = Session(write=False, save_interval=1, rules=[rule, lambda h, s, m: None, FunctionRule(lambda *a: None, name="va")])
    for step in range(2):
        p = s.begin_step("train", step)
        p.add("loss", 1.0, "losses")
        d = s.end_step()
    s.close()
    assert calls == [(0, "train"), (1, "train")]
    assert [f.rule for f in d.findings] == ["rule"]

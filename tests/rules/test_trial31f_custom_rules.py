"""Trial 31f: a platform engineer's own rules.

F1: a rule reading a collection its requirements() do not ask for passed check_rule and, in a
training, never fired without a word. F2: a rule with a mutable default argument passed check_rule,
its state shared by every rule built, check_rule's synthetic steps included. F3: start_step's "no
finding dated before it" held for built-in rules only. F4: a finding dated in the future or in
another mode was accepted. F6: a rule object named in a config took actions but no other common
parameter. F7: a bad rule_name was named "FunctionRule.name". F9: FunctionRule's repr hid its common
parameters. F10: check_rule('nosuch') quoted the name twice.
"""

from __future__ import annotations

import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError, Finding, FunctionRule, Requirement, Rule
from tripwire.rules import RuleContractError, check_rule


# ------------------------------------------------------------------------------------------- F1
class _GradsUndeclared(Rule):
    """Reads gradients l2 and asks for nothing."""

    name = "grads_undeclared_31f"

    def check(self, history: Any, step: int, mode: str) -> Finding | None:
        got = history.latest("gradients/fc.weight", "l2", mode)
        return self.finding(step, mode, "big") if got is not None and got[1] > 1e9 else None


class _GradsDeclared(_GradsUndeclared):
    name = "grads_declared_31f"

    def requirements(self) -> list[Requirement]:
        return [Requirement("gradients", reductions=("l2",))]


class _GradsOtherReduction(_GradsUndeclared):
    """Asks for gradients' mean, reads their l2: a training stores the mean alone."""

    name = "grads_mean_31f"

    def requirements(self) -> list[Requirement]:
        return [Requirement("gradients", reductions=("mean",))]


def _lists_weights(history: Any, step: int, mode: str) -> None:
    history.tensor_names("weights")


def _reads_labels(history: Any, step: int, mode: str) -> None:
    if mode == "eval":
        history.array("labels", step, "raw", mode)


def test_check_rule_names_a_collection_read_that_requirements_do_not_ask_for() -> None:
    with pytest.raises(RuleContractError, match=r"check\(\) reads l2 of 'gradients/fc\.weight' \(gradients\), which its "
                                                r"requirements\(\) do not ask for \(it asks for nothing\).*never judges it.*"
                                                r"accepted: declare Requirement\('gradients', reductions=\('l2',\)\)"):
        check_rule(_GradsUndeclared)
    with pytest.raises(RuleContractError, match=r"reads l2 of 'gradients/fc\.weight' \(gradients\), which its "
                                                r"requirements\(\) do not ask for \(it asks for gradients\): a training "
                                                r"captures gradients with mean for this rule"):
        check_rule(_GradsOtherReduction)
    with pytest.raises(RuleContractError, match=r"lists the collection 'weights' \(tensor_names\).*Requirement\('weights'\)"):
        check_rule(FunctionRule(_lists_weights, name="lists_weights_31f"))
    with pytest.raises(RuleContractError, match=r"reads array raw of 'labels' \(labels\).*accepted: declare "
                                                r"Requirement\('labels', raw_arrays=True\)"):
        check_rule(FunctionRule(_reads_labels, name="reads_labels_31f", modes=["eval"]))
    check_rule(FunctionRule(_reads_labels, name="reads_labels_31f", modes=["eval"],
                            requirements=[Requirement("labels", raw_arrays=True, modes=("eval",))]))
    check_rule(_GradsDeclared)  # (declared: passes)
    check_rule(lambda history, step, mode: history.latest("loss") and None)  # (losses: captured by default)


def _grad_present(history: Any, step: int, mode: str) -> str | None:
    got = history.latest("gradients/fc.weight", "l2", mode)
    return f"grad l2 {got[1]:.3g}" if got is not None and got[1] > 0 else None


def _loop(rules: list[Any]) -> tripwire.Session:
    """A hand-written loop that offers its gradients where the session wants them (save every step)."""
    session = tripwire.Session(rules=rules, actions=["record"], write=False, save_interval=1)
    rng = np.random.default_rng(0)
    for step in range(5):
        plan = session.begin_step("train", step)
        plan.add("loss", float(1.0 / (step + 1)), "losses")
        if plan.wants("gradients"):
            plan.add("gradients/fc.weight", rng.normal(size=(4, 3)), "gradients")
        session.end_step()
    session.close()
    return session


def test_a_session_says_once_what_a_rule_of_yours_read_that_the_run_never_captured(caplog: Any) -> None:
    declared = FunctionRule(_grad_present, name="grad_present", requirements=[Requirement("gradients", ("l2",))])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session = _loop([declared])
    assert [f.step for f in session.findings] == [0]
    assert "never captured" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session = _loop([FunctionRule(_grad_present, name="grad_present")])
    assert session.findings == []
    said = [r.getMessage() for r in caplog.records if "never captured" in r.getMessage()]
    assert said == ["tripwire: rule 'grad_present' read 'gradients/fc.weight' (l2), which this run never captured, so it "
                    "never had that value to judge: a session captures a collection that its config lists or a rule's "
                    "requirements() ask for, and this rule asks for nothing; declare Requirement('gradients', "
                    "reductions=('l2',)) in its requirements() (FunctionRule(fn, requirements=[...]); in YAML, "
                    "requirements: [{collection: gradients, reductions: [l2]}])"]


def test_a_name_the_run_does_not_hold_is_said_with_the_name_it_holds(caplog: Any) -> None:
    def typo(history: Any, step: int, mode: str) -> None:
        history.latest("los", "raw", mode)

    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _loop([FunctionRule(typo, name="typo_31f")])
    assert "rule 'typo_31f' read 'los' (raw), which this run never captured, so it never had that value to judge; " \
           "did you mean 'loss'?: a name the run does not hold" in caplog.text


# ------------------------------------------------------------------------------------------- F2
class _MutableDefault(Rule):
    name = "mutable_default_31f"

    def __init__(self, seen: list[int] = [], **common: Any) -> None:  # noqa: B006 - the bug under test
        super().__init__(**common)
        self.seen = seen

    def check(self, history: Any, step: int, mode: str) -> None:
        self.seen.append(step)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "seen": list(self.seen)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.seen[:] = state.get("seen", [])


class _ClassAttribute(Rule):
    name = "class_attribute_31f"
    seen: list[int] = []

    def check(self, history: Any, step: int, mode: str) -> None:
        self.seen.append(step)


def test_check_rule_refuses_state_two_rules_share_and_leaves_it_as_it_was() -> None:
    default = _MutableDefault.__init__.__defaults__[0]  # type: ignore[index]
    with pytest.raises(RuleContractError, match=r"two rules built alike share state: judging one changed the other's "
                                                r"'seen' \(seen: \[\] before, \[0, 1, 2, .*after\).*take seen=None, then "
                                                r"self\.seen = \[\] if seen is None else list\(seen\)"):
        check_rule(_MutableDefault)
    assert default == [] and _MutableDefault().seen == []  # (check_rule's steps do not reach a training's rule)
    with pytest.raises(RuleContractError, match=r"share state: judging one changed the other's 'seen'"):
        check_rule(_ClassAttribute)
    assert _ClassAttribute.seen == []


class _Counter(Rule):
    name = "counter_31f"

    def __init__(self, **common: Any) -> None:
        super().__init__(**common)
        self.calls = 0

    def check(self, history: Any, step: int, mode: str) -> None:
        self.calls += 1

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "calls": self.calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.calls = int(state.get("calls", 0))


def test_check_rule_leaves_a_rule_object_as_it_was() -> None:
    rule = _Counter(patience=2)
    check_rule(rule)
    assert rule.calls == 0 and rule.state_dict() == {"tripwire": {"streak": {}, "last_eval": {}}, "calls": 0}


class _Uncopyable(_Counter):
    name = "uncopyable_31f"

    def __deepcopy__(self, memo: Any) -> Any:
        raise TypeError("cannot pickle '_thread.lock' object")


def test_check_rule_refuses_a_rule_object_it_cannot_copy_without_changing_it() -> None:
    rule = _Uncopyable()
    with pytest.raises(RuleContractError, match=r"it cannot be copied \(copy\.deepcopy raised TypeError: cannot pickle "
                                                r"'_thread\.lock' object\): it is checked on a copy, never changed itself"):
        check_rule(rule)
    assert rule.calls == 0


# ------------------------------------------------------------------------------------------- F3
class _LookBack(Rule):
    """Reports the first loss above 5 in the run, whenever it is evaluated."""

    name = "look_back_31f"

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", ("raw",))]

    def check(self, history: Any, step: int, mode: str) -> Finding | None:
        steps, values = history.series("loss", "raw", mode)
        for s, v in zip(steps, values):
            if v > 5:
                return self.finding(int(s), mode, f"loss {v} at {s}")
        return None


def _losses(session: tripwire.Session, losses: list[float]) -> None:
    for step, loss in enumerate(losses):
        session.step("train", step, {"loss": (loss, "losses")})


def test_start_step_drops_a_finding_of_a_rule_of_yours_dated_before_it() -> None:
    losses = [1.0, 1.0, 9.0, 1.0, 1.0, 1.0, 1.0, 9.0, 1.0]
    session = tripwire.Session(rules=[_LookBack(start_step=5)], actions=["record"], write=False, save_interval=1)
    _losses(session, losses)
    session.close()
    assert session.findings == []  # (step 2 is before start_step; the rule reports the first high loss only)
    straight = tripwire.Session(rules=[_LookBack()], actions=["record"], write=False, save_interval=1)
    _losses(straight, losses)
    straight.close()
    assert [f.step for f in straight.findings] == [2]
    # Rule.evaluate itself (what tripwire watch calls): the same
    rule = _LookBack(start_step=5)
    assert rule.evaluate(session.history, 8, "train") == []
    assert [f.step for f in _LookBack(start_step=1).evaluate(session.history, 8, "train")] == [2]


# ------------------------------------------------------------------------------------------- F4
class _Manual(Rule):
    name = "manual_31f"

    def check(self, history: Any, step: int, mode: str) -> Any:
        if step == 2:
            return [self.finding(1, mode, "seen at step 1"),
                    Finding(rule="someone_else", step=99, mode="eval", message="hand-made")]
        return None


class _OtherMode(Rule):
    name = "other_mode_31f"

    def check(self, history: Any, step: int, mode: str) -> Any:
        return self.finding(step, "eval", "in eval") if step == 3 else None


def test_check_rule_refuses_a_finding_dated_after_the_step_judged_or_in_another_mode() -> None:
    with pytest.raises(RuleContractError, match=r"at train step 2: MisdatedFindingError: rule 'manual_31f': evaluated at "
                                                r"train step 2, check\(\) returned a finding dated at eval step 99; accepted: "
                                                r"findings of mode 'train' dated at step 2 or before it"):
        check_rule(_Manual)
    with pytest.raises(RuleContractError, match=r"evaluated at train step 3, check\(\) returned a finding dated at eval "
                                                r"step 3"):
        check_rule(_OtherMode)


def test_a_session_records_a_misdated_finding_as_the_rule_s_error_and_keeps_the_others() -> None:
    session = tripwire.Session(rules=[_Manual()], actions=["record", "stop_training"], write=False, save_interval=1)
    stopped = None
    for step in range(4):
        decision = session.step("train", step, {"loss": (1.0, "losses")})
        if decision.stop:
            stopped = (step, decision.stopped_by)
            break
    session.close()
    assert stopped is not None and stopped[0] == 2 and (stopped[1].step, stopped[1].mode) == (1, "train")
    assert [(f.step, f.mode, f.kind) for f in session.findings] == [(2, "train", "error"), (1, "train", "finding")]
    assert session.findings[0].message.startswith(
        "the rule returned a finding dated where it did not judge: rule 'manual_31f': evaluated at train step 2, "
        "check() returned a finding dated at eval step 99")
    strict = tripwire.Session(rules=[_Manual()], actions=["record"], write=False, save_interval=1, strict=True)
    with pytest.raises(tripwire.RuleError, match=r"rule 'manual_31f' raised at step 2 \(train\).*eval step 99"):
        _losses(strict, [1.0, 1.0, 1.0])


# ----------------------------------------------------------------------------------- F6, F7, F9
TEAM = '''
import tripwire

def loss_over(history, step, mode):
    v = history.value("loss", "raw", step, mode)
    return f"loss {v} is above 5" if v is not None and v > 5 else None

loss_over_rule = tripwire.FunctionRule(loss_over, name="loss_over_31f",
                                       requirements=[tripwire.Requirement("losses", ("raw",))])
'''


@pytest.fixture
def team(tmp_path: Path, monkeypatch: Any) -> str:
    name = f"team31f_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TEAM))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_rule_object_named_in_a_config_takes_the_common_parameters_on_its_copy(team: str) -> None:
    import importlib

    obj = importlib.import_module(team).loss_over_rule
    entry = {"name": f"{team}:loss_over_rule", "patience": 2, "severity": "error", "start_step": 1, "every": 1,
             "repeat": True, "modes": ["train"], "actions": ["record"]}
    session = tripwire.Session(rules=[entry], write=False, save_interval=1)
    [rule] = session.rules
    assert rule is not obj and (rule.patience, rule.severity, rule.start_step, rule.repeat) == (2, "error", 1, True)
    assert (obj.patience, obj.severity, obj.start_step, obj.repeat) == (1, "warning", 0, False)  # (the module's: as it was)
    _losses(session, [9.0, 9.0, 1.0, 9.0, 9.0, 9.0])
    session.close()
    # (from step 1, two high losses in a row: steps 3 and 4, then 4 and 5 again, repeat)
    assert [(f.step, f.severity) for f in session.findings] == [(4, "error"), (5, "error")]
    with pytest.raises(ConfigError, match=r"rules\[0\]: loss_over_31f\.patience: got 0; accepted: an integer >= 1"):
        tripwire.Session(rules=[{"name": f"{team}:loss_over_rule", "patience": 0}], write=False)
    with pytest.raises(ConfigError, match=rf"rules\[0\]\.threshold: unknown parameter for the rule object "
                                          rf"'{team}:loss_over_rule'; accepted: start_step, patience, every, modes, "
                                          rf"severity, repeat .*name its function \({team}:loss_over, with rule_name"):
        tripwire.Session(rules=[{"name": f"{team}:loss_over_rule", "threshold": 2}], write=False)


def test_a_bad_rule_name_is_named_by_its_key_path(team: str) -> None:
    with pytest.raises(ConfigError, match=r"^rules\[1\]\.rule_name: got 'bad name!'; accepted: a name matching"):
        tripwire.Session(rules=["default", {"name": f"{team}:loss_over", "rule_name": "bad name!"}], write=False)
    with pytest.raises(ConfigError, match=r"^rules\[0\]: loss_over\.severity: got 'loud'"):
        tripwire.Session(rules=[{"name": f"{team}:loss_over", "severity": "loud"}], write=False)


def test_a_function_rule_shows_its_common_parameters() -> None:
    rule = FunctionRule(_grad_present, name="x_31f", patience=3, severity="error", start_step=5)
    assert repr(rule).endswith("name='x_31f', requirements=[], start_step=5, patience=3, every=1, modes=('train',), "
                               "severity='error', repeat=False)")


# ------------------------------------------------------------------------------------------ F10
def test_check_rule_quotes_an_unknown_name_once() -> None:
    with pytest.raises(RuleContractError, match=r"^rule 'nosuch_rule_31f' breaks the rule contract \(1 problem\):\n  - it "
                                                r"does not build: ConfigError: rules\[0\]: unknown rule 'nosuch_rule_31f'"):
        check_rule("nosuch_rule_31f")
    with pytest.raises(RuleContractError, match=r"^rule 'nosuch_rule_31f' breaks"):
        check_rule({"name": "nosuch_rule_31f"})

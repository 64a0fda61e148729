"""A user's rule that cannot work is named when it is built or when it misbehaves (trial 18d):
what it returned, what is accepted, and which rule; training goes on and nothing is lost."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire.rules import Requirement, Rule, register_rule


def _feed(session: tripwire.Session, n: int = 3) -> None:
    for i in range(n):
        session.step("train", i, {"loss": (1.0, "losses")})


@pytest.mark.parametrize("returned, shown", [(["a", "b"], "whose item 0 is a str ('a')"),
                                             ({"msg": "x"}, "returned a dict"),
                                             (42, "returned an int (42)")])
def test_a_function_returning_what_is_not_accepted_is_an_error_finding(tmp_path: Path, returned, shown: str) -> None:
    def bad(history, step, mode):
        return returned

    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), rules=[bad], save_interval=1) as s:
        _feed(s)  # (a list of strings: AttributeError "'str' object has no attribute 'rule'" out of step())
    errors = [f for f in s.findings if f.kind == "error"]
    assert len(errors) == 1 and errors[0].rule == "bad" and errors[0].step == 0
    assert shown in errors[0].message
    assert "accepted: a Finding, a str (the finding's message), a list of Findings or None" in errors[0].message
    assert tripwire.open_run(out).status == "complete"


def test_the_findings_beside_a_bad_item_are_kept_and_the_error_says_what_was_returned(tmp_path: Path) -> None:
    """Trial 21b: a check returning [a finding, "not a finding"] lost the finding, and its error
    said "the rule raised TypeError" of a rule that raised nothing."""

    class Mixed(Rule):
        name = "mixed_21b"

        def check(self, history, step, mode):
            return [self.finding(step, mode, "a real finding"), "not a finding"]

    with tripwire.Session(out_dir=str(tmp_path / "run"), rules=[Mixed()], save_interval=1) as s:
        _feed(s, 2)
    said = sorted((f.kind, f.step, f.message) for f in tripwire.open_run(tmp_path / "run").findings)
    assert [k for k, _, _ in said] == ["error", "finding"] and all(step == 0 for _, step, _ in said)
    assert said[0][2].startswith("the rule returned what is not a finding: rule 'mixed_21b': check() returned a "
                                 "list whose item 1 is a str ('not a finding')")
    assert said[1][2] == "a real finding"


def test_a_function_returning_an_empty_message_reports_nothing(tmp_path: Path) -> None:
    # trial 21b: `return msg if bad else ""` recorded a warning with an empty message (and a stop with no reason)
    def quiet(history, step, mode):
        return "" if step < 2 else "  "

    with tripwire.Session(out_dir=str(tmp_path / "run"), rules=[quiet], save_interval=1) as s:
        _feed(s)
    assert s.findings == []


def test_every_finding_of_one_check_is_kept_under_the_rules_name(tmp_path: Path) -> None:
    class TwoDead(Rule):
        name = "two_dead"

        def check(self, history, step, mode):
            return [self.finding(step, mode, "layer a is dead"), self.finding(step, mode, "layer b is dead"),
                    tripwire.Finding(rule="overfit", step=step, mode=mode, message="built by hand")]

    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), rules=[TwoDead()], save_interval=1) as s:
        _feed(s)
    assert [(f.rule, f.message) for f in s.findings] == [("two_dead", "layer a is dead"), ("two_dead", "layer b is dead"),
                                                         ("two_dead", "built by hand")]
    assert [f.message for f in tripwire.open_run(out).findings] == ["layer a is dead", "layer b is dead", "built by hand"]


class _NoName(Rule):
    def check(self, history, step, mode):
        return None


class _NoSuper(Rule):
    name = "no_super"

    def __init__(self, limit: float = 1.0) -> None:
        self.limit = limit

    def check(self, history, step, mode):
        return None


class _NoCheck(Rule):
    name = "no_check"


class _NamesNotRequirements(Rule):
    name = "names_not_requirements"

    def requirements(self):
        return ["gradients"]

    def check(self, history, step, mode):
        return None


class _RequirementsRaise(Rule):
    name = "requirements_raise"

    def requirements(self):
        raise RuntimeError("oops")

    def check(self, history, step, mode):
        return None


class _BadReduction(Rule):
    name = "bad_reduction"

    def requirements(self):
        return [tripwire.Requirement("gradients", reductions=("l3",))]

    def check(self, history, step, mode):
        return None


@pytest.mark.parametrize("rule, match", [
    (_NoName(), r"rules\[0\]: _NoName has no name; accepted: a class attribute name"),
    # trial 21b: refused as 'reductions[0]: unknown reduction' when the session was built, naming no rule
    (_BadReduction(), r"rules\[0\]: rule 'bad_reduction' \(_BadReduction\): requirements\(\) raised ConfigError: "
                      r"requirement.reductions\[0\]: unknown reduction 'l3'; did you mean 'l2'\?"),
    (_NoSuper(), r"rule 'no_super' \(_NoSuper\): its __init__ does not call super\(\).__init__\(\*\*common\)"),
    (_NoCheck(), r"rule 'no_check' \(_NoCheck\) does not implement check\(history, step, mode\)"),
    (_NamesNotRequirements(), r"requirements\(\) item 0 is 'gradients'; accepted: tripwire.Requirement objects"),
    (_RequirementsRaise(), r"rule 'requirements_raise' \(_RequirementsRaise\): requirements\(\) raised RuntimeError: oops"),
])
def test_a_rule_object_that_cannot_work_is_named_when_built(rule: Rule, match: str) -> None:
    with pytest.raises(tripwire.ConfigError, match=match):
        tripwire.Session(write=False, rules=[rule])


def test_register_rule_refuses_a_function() -> None:
    def my_rule(history, step, mode):
        return None

    with pytest.raises(tripwire.ConfigError, match=r"register_rule: got <function .*my_rule.*>; accepted: a Rule "
                                                   r"subclass .*tripwire.FunctionRule\(fn, name=...\)"):
        register_rule(my_rule)  # type: ignore[arg-type]


def test_function_rule_takes_requirements_as_mappings_and_names_bad_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fn(history, step, mode):
        return None

    rule = tripwire.FunctionRule(fn, requirements=[{"collection": "gradients", "reductions": ["l2"]}])
    assert rule.requirements() == [Requirement("gradients", reductions=("l2",))]
    tripwire.Session(write=False, rules=[rule], save_interval=1)  # (was AttributeError: 'dict' ... 'collection')
    with pytest.raises(tripwire.ConfigError, match=r"fn.requirements\[0\].reductions\[0\]: unknown reduction 'l3'"):
        tripwire.FunctionRule(fn, requirements=[{"collection": "gradients", "reductions": ["l3"]}])
    with pytest.raises(tripwire.ConfigError, match=r"fn.requirements\[0\].collection: got 'gradeints'.*did you mean 'gradients'"):
        tripwire.FunctionRule(fn, requirements=[{"collection": "gradeints"}])
    with pytest.raises(tripwire.ConfigError, match=r"fn.requirements\[0\].reduction: unknown key; did you mean 'reductions'"):
        tripwire.FunctionRule(fn, requirements=[{"collection": "gradients", "reduction": ["l2"]}])
    (tmp_path / "my_fn_rules.py").write_text("def quiet(history, step, mode):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(tripwire.ConfigError, match=r"^rules\[0\].requirements\[0\].collection: got 'gradeints'"):
        tripwire.Session(write=False, rules=[{"name": "my_fn_rules:quiet", "requirements": [{"collection": "gradeints"}]}])


class _MedianState(Rule):
    """Keeps numpy values in its state, as a user's rule naturally does."""

    name = "median_state"

    def __init__(self, **common) -> None:
        super().__init__(**common)
        self.median = np.float64(np.nan)
        self.window = np.zeros(0)

    def check(self, history, step, mode):
        latest = history.latest("loss", "raw", mode)
        self.window = np.append(self.window, latest[1])
        self.median = np.median(self.window)
        return None

    def state_dict(self):
        return {**super().state_dict(), "median": self.median, "window": self.window, "count": np.int64(len(self.window))}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.median, self.window = state["median"], state["window"]
        assert isinstance(self.window, np.ndarray) and state["count"] == len(self.window)


def test_numpy_values_in_a_rules_state_load_from_a_weights_only_checkpoint() -> None:
    # trial 18d: Lightning loads ckpt_path with torch.load(weights_only=True), which refused the
    # np.float64 a custom rule kept: the fit wrote its checkpoint and could not be resumed
    torch = pytest.importorskip("torch")
    first = tripwire.Session(write=False, rules=[_MedianState()], save_interval=1)
    for i, v in enumerate([3.0, 1.0, 2.0]):
        first.step("train", i, {"loss": (v, "losses")})
    buf = io.BytesIO()
    torch.save({"callbacks": {"tripwire": first.state_dict()}}, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)["callbacks"]["tripwire"]
    resumed = tripwire.Session(write=False, rules=[_MedianState()], save_interval=1)
    resumed.load_state_dict(loaded)
    rule = resumed.rules[0]
    assert rule.median == 2.0 and rule.window.dtype == np.float64 and rule.window.tolist() == [3.0, 1.0, 2.0]
    # numpy scalars come back as numpy scalars of their dtype (trial 21b: as Python float and int)
    assert type(rule.median) is np.float64


def test_numpy_scalars_of_a_rules_state_keep_their_type() -> None:
    from tripwire.rules._base import plain_state, restored_state

    state = {"f32": np.float32(1.5), "nested": [np.int64(3), {"b": np.bool_(True)}], "nan": np.float64("nan"),
             "plain": 2.0, "array": np.arange(3, dtype=np.int16)}
    back = restored_state(plain_state(state))
    assert type(back["f32"]) is np.float32 and back["f32"] == 1.5
    assert type(back["nested"][0]) is np.int64 and type(back["nested"][1]["b"]) is np.bool_
    assert type(back["nan"]) is np.float64 and np.isnan(back["nan"])
    assert type(back["plain"]) is float and back["array"].dtype == np.int16


def test_a_rule_whose_load_state_dict_raises_is_named() -> None:
    class Strict(Rule):
        name = "strict_state"

        def check(self, history, step, mode):
            return None

        def load_state_dict(self, state):
            self.count = state["count"]

    state = tripwire.Session(write=False, rules=[Strict()]).state_dict()
    with pytest.raises(tripwire.ConfigError, match=r"load_state_dict: rule 'strict_state' \(.*Strict\) could not load "
                                                   r"its saved state: KeyError: 'count'"):
        tripwire.Session(write=False, rules=[Strict()]).load_state_dict(state)


def test_a_function_rule_given_parameters_of_its_own_names_what_it_takes(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # trial 21b: "Rule.__init__() got an unexpected keyword argument 'threshold'"
    (tmp_path / "fn_rules_21b.py").write_text("def small(history, step, mode):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(tripwire.ConfigError, match=r"rules\[0\].threshold: unknown parameter of rule function "
                                                   r"'fn_rules_21b:small'; accepted: actions, every, modes, patience, "
                                                   r"repeat, requirements, rule_name, severity, start_step \(a function "
                                                   r"takes no parameters of its own"):
        tripwire.Session(write=False, rules=[{"name": "fn_rules_21b:small", "threshold": 3}])
    with pytest.raises(tripwire.ConfigError, match=r"rules\[0\].patiense: .*did you mean 'patience'"):
        tripwire.Session(write=False, rules=[{"name": "fn_rules_21b:small", "patiense": 3}])
    assert tripwire.Session(write=False, rules=[{"name": "fn_rules_21b:small", "patience": 3}]).rules[0].patience == 3


def test_a_requirement_checks_its_reductions() -> None:
    with pytest.raises(tripwire.ConfigError, match=r"requirement.reductions\[1\]: unknown reduction 'l3'"):
        tripwire.Requirement("gradients", reductions=("l2", "l3"))
    with pytest.raises(tripwire.ConfigError, match=r"requirement.reductions: got 'l2'; accepted: a list"):
        tripwire.Requirement("gradients", reductions="l2")  # type: ignore[arg-type]
    assert tripwire.Requirement("losses", reductions=("raw",)).reductions == ("raw",)


def test_a_parameter_the_runs_config_cannot_record_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    # trial 21b: said twice in one Lightning fit (the run's config is written more than once)
    import re

    from tripwire.rules._registry import object_spec

    class Pattern(Rule):
        name = "pattern_21b"

        def __init__(self, loss=None, **common):
            super().__init__(**common)
            self.loss = loss

        def check(self, history, step, mode):
            return None

    rule, other = Pattern(loss=re.compile("loss")), Pattern(loss=re.compile("aux"))
    with caplog.at_level("WARNING", logger="tripwire"):
        for r in (rule, rule, other):
            assert "loss" not in object_spec(r)
    said = [r.getMessage() for r in caplog.records if "not plain data" in r.getMessage()]
    assert len(said) == 2, said

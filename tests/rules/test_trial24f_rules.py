"""Rule classes given a wrong argument in code (trial 24f) are answered as a config mapping is:

- a misspelled keyword of a built-in rule class, FunctionRule or Requirement is a TypeError (a
  ConfigError too) naming the class, the keyword, a "did you mean" and the accepted keywords (it was
  Python's bare "Rule.__init__() got an unexpected keyword argument");
- ``actions`` is checked when the rule is made: one action is a list of one (``"log"`` was stored as
  ``['l', 'o', 'g']``), ``5`` is named, and an unknown built-in action is named with "did you mean";
- ``FunctionRule(name=5)`` and ``name=""`` are refused; ``Requirement(modes="train")`` is a list of
  one (it said "requirement.modes: got 't'");
- ``TreeDepth(tensor="(")`` is refused as the other regex parameters are, and an infinite
  threshold that holds its clause whatever the values (``UnchangedTensor(atol=inf)``,
  ``VanishingGradient(min_norm=inf)``) is refused.
"""

from __future__ import annotations

import math

import pytest

import tripwire
import tripwire.rules as R
from tripwire.rules import Requirement, Rule


def _fn(history, step, mode):
    return None


@pytest.mark.parametrize("make, said", [
    (lambda: R.DeadRelu(threshhold=0.9),
     r"^DeadRelu\(threshhold=0.9\): unknown argument 'threshhold'; did you mean 'threshold'\? \(accepted: threshold, "
     r"include, patience, start_step, every, modes, severity, actions, repeat\)"),
    (lambda: R.VanishingGradient(min_nrom=1e-3), r"^VanishingGradient\(min_nrom=0.001\): .*did you mean 'min_norm'"),
    (lambda: R.TreeDepth(max_dept=3), r"^TreeDepth\(max_dept=3\): .*did you mean 'max_depth'"),
    (lambda: tripwire.FunctionRule(_fn, patiense=2),
     r"^FunctionRule\(patiense=2\): unknown argument 'patiense'; did you mean 'patience'\? \(accepted: fn, name, "
     r"requirements, start_step, patience"),
    (lambda: Requirement("gradients", reduction=("l2",)),
     r"^Requirement\(reduction=\('l2',\)\): unknown argument 'reduction'; did you mean 'reductions'\? \(accepted: "
     r"collection, reductions, histogram"),
])
def test_a_misspelled_keyword_is_named_with_did_you_mean_and_stays_a_type_error(make, said: str) -> None:
    with pytest.raises(TypeError, match=said) as info:
        make()
    assert isinstance(info.value, tripwire.ConfigError)


def test_a_users_rule_class_gets_the_same_answer_and_keeps_its_own_keywords() -> None:
    class Mine(Rule):
        name = "mine_24f"

        def __init__(self, limit: float = 1.0, **common) -> None:
            super().__init__(**common)
            self.limit = limit

        def check(self, history, step, mode):
            return None

    class Popping(Rule):  # (a subclass that takes a keyword out of **common before passing it on)
        name = "popping_24f"

        def __init__(self, **common) -> None:
            self.extra = common.pop("extra", 0)
            super().__init__(**common)

        def check(self, history, step, mode):
            return None

    with pytest.raises(TypeError, match=r"^Mine\(limt=2\): unknown argument 'limt'; did you mean 'limit'\?"):
        Mine(limt=2)
    assert Mine(limit=2, patience=3).patience == 3
    assert Popping(extra=4, every=2).extra == 4
    with pytest.raises(TypeError, match=r"^Popping\(evrey=2\): .*did you mean 'every'"):
        Popping(evrey=2)


def test_actions_are_checked_when_the_rule_is_made() -> None:
    assert R.DeadRelu(actions="log").actions == ["log"]  # (was ['l', 'o', 'g'])
    assert R.DeadRelu(actions={"name": "log", "level": "info"}).actions == [{"name": "log", "level": "info"}]
    assert R.DeadRelu(actions=("stop_training", "log")).actions == ["stop_training", "log"]
    assert R.DeadRelu().actions is None
    with pytest.raises(tripwire.ConfigError, match=r"^dead_relu\.actions: got 5; accepted: an action or a list of "
                                                   r"actions"):
        R.DeadRelu(actions=5)
    with pytest.raises(tripwire.ConfigError, match=r"^dead_relu\.actions\[0\]: unknown action 'trian'"):
        R.DeadRelu(actions=["trian"])
    with pytest.raises(tripwire.ConfigError, match=r"^dead_relu\.actions\[0\]: unknown action 'stop_trainig'; "
                                                   r"did you mean 'stop_training'\?"):
        R.DeadRelu(actions="stop_trainig")
    with pytest.raises(tripwire.ConfigError, match=r"^_fn\.actions\[1\]\.level: got 'loud'"):
        tripwire.FunctionRule(_fn, actions=["record", {"name": "log", "level": "loud"}])
    # a rule made with its actions still runs them
    with tripwire.Session(write=False, save_interval=1, rules=[tripwire.FunctionRule(
            lambda h, s, m: "bad", name="bad_24f", actions="stop_training",
            requirements=[Requirement("losses", ("raw",))])]) as s:
        decision = s.step("train", 0, {"loss": (1.0, "losses")})
        assert bool(decision) and s.stopped_by is not None and s.stopped_by.rule == "bad_24f"


def test_a_function_rules_name_is_a_non_empty_string() -> None:
    with pytest.raises(tripwire.ConfigError, match=r"^FunctionRule\.name: got 5; accepted: a non-empty string"):
        tripwire.FunctionRule(_fn, name=5)  # type: ignore[arg-type]
    with pytest.raises(tripwire.ConfigError, match=r"^FunctionRule\.name: got ''; accepted: a non-empty string .*"
                                                   r"or None for the function's name \('_fn'\)"):
        tripwire.FunctionRule(_fn, name="")
    assert tripwire.FunctionRule(_fn).name == "_fn"
    assert tripwire.FunctionRule(_fn, name="mine").name == "mine"


def test_a_requirements_modes_string_is_a_list_of_one() -> None:
    assert Requirement("gradients", ("l2",), modes="train").modes == ("train",)  # (was "got 't'")
    assert Requirement("gradients", ("l2",), modes=["train", "eval"]).modes == ("train", "eval")
    with pytest.raises(tripwire.ConfigError, match=r"^requirement\.modes: got 'trian'; accepted: "):
        Requirement("gradients", ("l2",), modes="trian")
    with pytest.raises(tripwire.ConfigError, match=r"^requirement\.modes: got 5; accepted: a mode or a list"):
        Requirement("gradients", ("l2",), modes=5)  # type: ignore[arg-type]


def test_tree_depths_tensor_is_checked_as_a_regex() -> None:
    with pytest.raises(tripwire.ConfigError, match=r"^tree_depth\.tensor: got '\(', not a valid regular expression"):
        R.TreeDepth(tensor="(")
    assert R.TreeDepth(tensor="trees/depth|depth").tensor == "trees/depth|depth"


@pytest.mark.parametrize("make, said", [
    (lambda: R.UnchangedTensor(atol=math.inf), r"^unchanged_tensor\.atol: got inf; accepted: a finite number >= 0"),
    (lambda: R.UnchangedTensor(rtol=math.inf), r"^unchanged_tensor\.rtol: got inf; accepted: a finite number >= 0"),
    (lambda: R.VanishingGradient(min_norm=math.inf), r"^vanishing_gradient\.min_norm: got inf; accepted: a finite"),
    (lambda: R.VanishingGradient(min_abs_mean=math.inf), r"^vanishing_gradient\.min_abs_mean: got inf; accepted:"),
])
def test_an_infinite_threshold_that_would_hold_always_is_refused(make, said: str) -> None:
    with pytest.raises(tripwire.ConfigError, match=said):
        make()


def test_zero_and_finite_thresholds_are_still_taken() -> None:
    assert R.UnchangedTensor(atol=1e-3, rtol=0.0).atol == 1e-3
    assert R.VanishingGradient(min_norm=0.0, min_abs_mean=0.0).min_norm == 0.0  # (0: that clause is off)

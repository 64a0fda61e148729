"""Trial 22k: repr() of a FunctionRule (the README's own rule object) recursed without end, through
its ``requirements`` method taken for its parameter; ``tripwire rules mod:rule`` printed a
1,228-line RecursionError."""

from __future__ import annotations

from typing import Any

import tripwire
from tripwire import FunctionRule, Requirement


def grad_too_small(history: Any, step: int, mode: str) -> str | None:
    return None


def test_a_function_rule_has_a_repr_naming_its_function_and_requirements() -> None:
    rule = FunctionRule(grad_too_small, requirements=[Requirement("gradients", ("l2",))], actions=["log"])
    text = repr(rule)
    assert text.startswith("FunctionRule(fn=<function grad_too_small") and "name='grad_too_small'" in text
    assert "requirements=[Requirement(collection='gradients', reductions=('l2',)" in text
    assert rule.params()["requirements"] == [Requirement("gradients", ("l2",))]
    assert f"{rule!s}" == text  # (str, logging's %s, f-strings: the same)


class Spike(tripwire.Rule):
    """A rule with a parameter named like one of its methods (requirements) and none set for it."""

    name = "spike_for_repr"

    def __init__(self, factor: float = 3.0, requirements: Any = None, **common: Any) -> None:
        super().__init__(**common)
        self.factor = factor

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", ("raw",))]

    def check(self, history: Any, step: int, mode: str) -> None:
        return None


def test_a_parameter_named_like_a_method_is_not_taken_for_its_value() -> None:
    rule = Spike(factor=2.0)
    assert "requirements" not in rule.params() and rule.params()["factor"] == 2.0
    assert repr(rule).startswith("Spike(factor=2.0, ")


def test_tripwire_rules_describes_a_function_rule_object(tmp_path: Any, monkeypatch: Any, capsys: Any) -> None:
    # its requirements were shown as "<bound method FunctionRule.requirements ...>" and its title was
    # the Rule base class's docstring
    from tripwire._cli import main

    (tmp_path / "myrules_22k.py").write_text(
        "import tripwire\n"
        "def grad_too_small(history, step, mode):\n"
        "    '''The first layer's gradient norm is below 1e-8.'''\n"
        "    return None\n"
        "rule = tripwire.FunctionRule(grad_too_small, requirements=[tripwire.Requirement('gradients', ('l2',))])\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["rules", "myrules_22k:rule"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("myrules_22k:rule\n  The first layer's gradient norm is below 1e-8.\n")  # (trial 32f F2)
    assert "  its findings' rule: grad_too_small\n" in out
    # (trial 26c: the requirements as their collection and reductions, not a dataclass's repr)
    assert "bound method" not in out and "requirements=[{'collection': 'gradients', 'reductions': ['l2']}]" in out

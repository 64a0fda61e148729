"""Gamma's note on trial 32e F2: the end-of-training evaluation of a look-back rule with ``every``
above 1 was keyed on a class attribute ``looks_back`` that the rule base class did not declare (read
with ``getattr(..., False)``). :attr:`tripwire.Rule.looks_back` is declared, False by default, and a
rule class of one's own that sets it True gets that evaluation, in a session and in ``tripwire
watch``, as the built-in look-back rules do."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import tripwire
from tripwire import Finding, History, Requirement, Rule
from tripwire import _watch
from tripwire.rules import get_rule


def test_the_base_class_declares_looks_back_false_and_the_look_back_rules_set_it() -> None:
    assert "looks_back" in vars(Rule) and Rule.looks_back is False
    assert Rule.__annotations__["looks_back"] in ("ClassVar[bool]", "ClassVar[bool] ")
    assert get_rule("exploding_tensor").looks_back is True
    assert get_rule("similar_across_runs").looks_back is True
    assert get_rule("loss_not_decreasing").looks_back is False
    doc = " ".join((Rule.__doc__ or "").split())
    assert "(:attr:`looks_back`) is evaluated once more at each mode's last step when a training ends" in doc, doc


class _AnyNaN(Rule):
    """A rule of one's own that looks back over every step since its last evaluation."""

    name = "trial32e_any_nan"
    looks_back = True

    def __init__(self, **common: Any) -> None:
        super().__init__(**common)
        self._seen: dict[str, int] = {}

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", reductions=("raw",))]

    def check(self, history: History, step: int, mode: str) -> Finding | None:
        steps, values = history.series("loss", "raw", mode)
        after = self._seen.get(mode, -1)
        self._seen[mode] = step
        for s, v in zip(steps.tolist(), values.tolist()):
            if after < s <= step and math.isnan(v):
                return Finding(self.name, int(s), mode, f"loss is NaN at step {s}", ["loss"])
        return None


class _Plain(_AnyNaN):
    name = "trial32e_plain_nan"
    looks_back = False


def _train(out: Path, rules: list[Rule]) -> tripwire.Session:
    s = tripwire.Session(out_dir=str(out), rules=rules, save_interval=1, actions=["record"])
    for i in range(30):
        s.step("train", i, {"loss": (math.nan if i == 25 else 1.0, "losses")})
    s.close()
    return s


def test_a_rule_of_ones_own_that_looks_back_is_evaluated_at_the_end(tmp_path: Path) -> None:
    s = _train(tmp_path / "a", [_AnyNaN(every=20)])
    assert [(f.rule, f.step) for f in s.findings] == [("trial32e_any_nan", 25)]
    # (one that does not look back is evaluated at steps 0 and 20 only, as its every says)
    s = _train(tmp_path / "b", [_Plain(every=20)])
    assert s.findings == []


def test_the_watch_evaluates_it_at_the_end_too(tmp_path: Path) -> None:
    out = tmp_path / "r"
    _train(out, [])
    rule = _AnyNaN(every=20)
    found = _watch.watch(str(out), {"rules": [rule]}, once=True)
    assert [(f.rule, f.step) for f in found if f.kind == "finding"] == [("trial32e_any_nan", 25)]

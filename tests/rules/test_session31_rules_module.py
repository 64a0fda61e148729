"""Trial 31f F8: ``tripwire rules teamrules`` (a team's module of rules) said "unknown rule; did you
mean 'default'?". A module name lists the rules the module registers (by their registered names) and
the others it defines (as ``module:attribute``); a module that defines none, or whose import raises,
is refused naming it; an unknown name that is no module stays an unknown rule."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tripwire._cli import main

MODULE = '''
from typing import Any
from tripwire import Rule
from tripwire.rules import register_rule


@register_rule
class LossJump31(Rule):
    """The loss jumped.

    Condition: ``loss(t) > factor * loss(t-1)``.

    Defaults: ``factor=2.0``.
    """

    name = "loss_jump_31"

    def __init__(self, factor: float = 2.0, **common: Any) -> None:
        super().__init__(**common)
        self.factor = factor

    def check(self, history, step, mode):  # (session 41: a registered rule is listed only where it builds)
        return None


def loss_over_31(history, step, mode):
    """The loss is over 10."""
    return None


def helper(x):
    return x
'''


def test_a_module_name_lists_what_it_registers_and_defines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "teamrules_s31.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    assert main(["rules", "teamrules_s31", "--json"]) == 0
    names = [item["name"] for item in json.loads(capsys.readouterr().out)]
    assert names == ["loss_jump_31", "teamrules_s31:loss_over_31"]  # (the registered name; no helper, no import)


def test_a_module_without_rules_and_an_unknown_name_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "norules_s31.py").write_text("X = 1\n")
    (tmp_path / "raises_s31.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.chdir(tmp_path)
    assert main(["rules", "norules_s31"]) == 2
    assert "module 'norules_s31' registers and defines no rule" in capsys.readouterr().err
    assert main(["rules", "raises_s31"]) == 2
    assert "importing module 'raises_s31' raised RuntimeError: boom" in capsys.readouterr().err
    assert main(["rules", "no_such_rule_or_module_s31"]) == 2
    assert "unknown rule 'no_such_rule_or_module_s31'" in capsys.readouterr().err

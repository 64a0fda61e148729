"""``tripwire rules module:attribute`` (trial 30h F3, F4): a misspelled name lists the module's rules,
not its action functions; a rule object's own actions and common parameters are listed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tripwire._cli import main

MODULE = '''
import tripwire

def grad_too_small(history, step, mode):
    return None

grad_rule = tripwire.FunctionRule(grad_too_small, requirements=[tripwire.Requirement("gradients", reductions=("l2",))],
                                  actions=["log", "stop_training"], patience=2)

def page(finding):
    pass

def write_file(finding, path="findings.txt"):
    pass

def post(finding, channel="#ml", run=None):
    pass

class Helper:
    pass
'''


@pytest.fixture
def teamrules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"teamrules30_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_missing_attribute_lists_the_rules_not_the_actions(teamrules: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["rules", f"{teamrules}:nothing"]) == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith("rules it defines: grad_too_small, grad_rule"), err


def test_a_rule_objects_actions_are_listed(teamrules: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["rules", f"{teamrules}:grad_rule"]) == 0
    out = capsys.readouterr().out
    assert "actions=['log', 'stop_training']" in out and "patience=2" in out, out

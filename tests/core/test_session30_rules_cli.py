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


def test_a_modules_helper_functions_are_not_listed_as_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture) -> None:
    """Trial 37c: ``tripwire rules MODULE`` listed every public function that takes three arguments
    (a helper ``ema(values, alpha, start)``; ``tripwire rules os`` listed ``os:makedirs``)."""
    name = f"helpers37_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text(
        "def ema(values, alpha, start):\n    return start\n\n"
        "def loss_high(history, step, mode):\n    return None\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["rules", name]) == 0
    out = capsys.readouterr().out
    assert f"{name}:loss_high" in out and "ema" not in out
    assert main(["rules", "os"]) == 2
    assert "defines no rule" in capsys.readouterr().err

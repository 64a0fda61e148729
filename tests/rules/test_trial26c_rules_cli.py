"""Trial 26c (F8): ``tripwire rules module:attribute`` of a function rule printed Python reprs.

``tripwire rules teamrules:grad_rule`` (a FunctionRule) showed ``fn='<function grad_too_small at
0x7fd0...>'`` and a raw ``Requirement(collection='gradients', ...)`` repr among its parameters; with
``--json`` the bare function ``teamrules:grad_too_small`` had empty parameters and condition."""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from tripwire import _rules_cli

TEAMRULES = textwrap.dedent('''
    import tripwire

    def grad_too_small(history, step, mode):
        got = history.latest("gradients/fc2.weight", "l2", mode)
        return f"fc2.weight's gradient l2 is {got[1]:.2g}" if got and got[1] < 1e-8 else None

    def val_metric_odd(history, step, mode):
        """A validation metric that reads odd.

        Condition: ``metric < 0``."""
        return None

    grad_rule = tripwire.FunctionRule(grad_too_small, name="grad_too_small",
                                      requirements=[tripwire.Requirement("gradients", ("l2",))],
                                      actions=["log", "record"])
    odd_rule = tripwire.FunctionRule(val_metric_odd, modes=["eval"],
                                     requirements=[tripwire.Requirement("metrics", modes=("eval",), max_interval=1)])
''')


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="tripwire")
    _rules_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    rc = args.func(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def teamrules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "teamrules26c.py").write_text(TEAMRULES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    sys.modules.pop("teamrules26c", None)


def test_function_rule_object_parameters_are_readable(teamrules: None, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(["rules", "teamrules26c:grad_rule"], capsys)
    assert rc == 0
    assert "<function" not in out and " at 0x" not in out and "Requirement(" not in out
    assert ("parameters: fn='teamrules26c.grad_too_small', name='grad_too_small', "
            "requirements=[{'collection': 'gradients', 'reductions': ['l2']}]") in out
    rc, out, _ = _cli(["rules", "teamrules26c:grad_rule", "--json"], capsys)
    item = json.loads(out)[0]
    assert item["parameters"]["fn"] == "teamrules26c.grad_too_small"
    assert item["parameters"]["requirements"] == [{"collection": "gradients", "reductions": ["l2"]}]
    # no docstring: said so, and the condition is what the function returns
    assert item["title"] == "a function rule (teamrules26c.grad_too_small; it has no docstring)"
    assert item["condition"].startswith("Condition: teamrules26c.grad_too_small(history, step, mode) returns a Finding")


def test_requirement_fields_other_than_defaults_are_shown(teamrules: None, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(["rules", "teamrules26c:odd_rule", "--json"], capsys)
    item = json.loads(out)[0]
    assert rc == 0 and item["name"] == "teamrules26c:odd_rule"  # (trial 32f F2: the name a config gives)
    assert item["finding_rule"] == "val_metric_odd"
    assert item["title"] == "A validation metric that reads odd."  # the function's docstring
    assert item["condition"] == "Condition: `metric < 0`."
    assert item["parameters"]["requirements"] == [
        {"collection": "metrics", "reductions": [], "modes": ["eval"], "max_interval": 1}]
    assert item["parameters"]["modes"] == ["eval"]


def test_a_bare_function_lists_what_a_config_may_give_it(teamrules: None, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(["rules", "teamrules26c:grad_too_small", "--json"], capsys)
    item = json.loads(out)[0]
    assert rc == 0
    assert item["parameters"] == {"rule_name": "grad_too_small", "requirements": [], "modes": ["train"],
                                  "severity": "warning"}
    assert item["condition"].startswith("Condition: teamrules26c.grad_too_small(history, step, mode) returns")
    rc, out, _ = _cli(["rules", "teamrules26c:grad_too_small"], capsys)
    assert re.search(r"parameters: rule_name='grad_too_small', requirements=\[\], modes=\['train'\], "
                     r"severity='warning'", out)

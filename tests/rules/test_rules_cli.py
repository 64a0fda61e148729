"""``tripwire rules module:attribute`` refuses what is not a rule (session 10)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from tripwire import _rules_cli


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="tripwire")
    _rules_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    rc = args.func(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


ACCEPTED = "accepted: a Rule subclass, a Rule instance or a function (history, step, mode)"


@pytest.mark.parametrize(("ref", "what"), [
    ("collections:OrderedDict", "is the class collections.OrderedDict, which is not a Rule subclass"),
    ("math:pi", "is a float (3.141592653589793), not a rule"),
    ("json:dumps", "is the function json.dumps taking (obj, *, skipkeys=False"),
    ("tripwire.rules._registry:RULE_SETS", "is a dict ({'default':"),
])
def test_rules_cli_refuses_what_is_not_a_rule(ref: str, what: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``tripwire rules collections:OrderedDict`` exited 0 and described the class as a function rule."""
    rc, out, err = _cli(["rules", ref], capsys)
    assert rc == 2 and out == ""
    assert err.startswith(f"tripwire rules: error: rules: {ref!r} {what}") and ACCEPTED in err


def test_rules_cli_describes_a_rule_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cli_rule_instances.py").write_text(
        "from tripwire.rules import Overfit\n"
        "patient_overfit = Overfit(patience=7)\n"
        "def loss_is_big(history, step, mode):\n"
        '    """The loss is big."""\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    rc, out, _ = _cli(["rules", "cli_rule_instances:patient_overfit"], capsys)
    assert rc == 0 and out.startswith("cli_rule_instances:patient_overfit\n") and "patience=7" in out
    assert "  its findings' rule: overfit\n" in out  # (trial 32f F2: headed by the name a config gives)
    rc, out, _ = _cli(["rules", "cli_rule_instances:loss_is_big"], capsys)
    assert rc == 0 and "The loss is big." in out


def test_json_writes_code_with_one_backtick(capsys: pytest.CaptureFixture[str]) -> None:
    # trial 17a: reStructuredText's ``code`` inside the JSON strings (the text output had one backtick)
    import json

    rc, out, _ = _cli(["rules", "dead_relu", "--json"], capsys)
    item = json.loads(out)[0]
    assert rc == 0 and "``" not in out and "`zero_fraction(relu output) >= threshold`" in item["condition"]

"""Trial 40d F2: ``tripwire validate`` reported one rule entry with no ``name`` key twice, the second
time quoting a part of it (``got {'patience': 2}``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tripwire._cli import main


def test_a_rule_entry_without_a_name_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "t.yaml"
    cfg.write_text("rules:\n  - {dead_relu: {threshold: 0.9}, patience: 2}\n  - {name: overfit, patience: 0}\n")
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tripwire validate: error: 2 errors in {cfg}:\n"), err
    lines = err.splitlines()[1:]
    assert len(lines) == 2, err
    assert lines[0].startswith("  rules[0]: a rule mapping needs a 'name' key, got {'dead_relu': {'threshold': 0.9}, "
                               "'patience': 2}"), lines[0]
    assert lines[1].startswith("  rules[1]: overfit.patience: got 0"), lines[1]


MIXED = '''
import tripwire


def loss_over_40d(history, step, mode):
    return None


class NoSuper40d(tripwire.Rule):
    name = "nosuper_40d"

    def __init__(self, **common):
        pass

    def check(self, history, step, mode):
        return None
'''


def test_rules_of_a_module_name_the_broken_one_and_the_ones_that_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # F1: the first broken rule was the whole answer, worded as a config's "rules[0]: ..."
    import sys

    (tmp_path / "mixedrules40d.py").write_text(MIXED)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        assert main(["rules", "mixedrules40d"]) == 2
    finally:
        sys.modules.pop("mixedrules40d", None)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "tripwire rules: error: rules: module 'mixedrules40d' defines 1 rule(s) that a config could not build: "
        "mixedrules40d:NoSuper40d: rule 'nosuper_40d' (NoSuper40d): its __init__ does not call super().__init__(**common); "
        "accepted: a Rule subclass whose __init__ passes the common parameters (start_step, patience, every, ...) on "
        "(its other rules build: mixedrules40d:loss_over_40d; tripwire rules mixedrules40d:ATTRIBUTE describes one)\n")

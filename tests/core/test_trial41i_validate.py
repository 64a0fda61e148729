"""Trial 41i F2: ``tripwire validate`` of one function listed twice under two ``rule_name``s (two rules,
as docs/config.md allows), each entry with one bad value: each error came twice, the second under the
function's name, and a false "'teamrules:loss_over' is listed already" followed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tripwire._cli import main


@pytest.fixture
def teamrules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "rules41i.py").write_text(
        "def loss_over(history, step, mode):\n"
        "    v = history.value('loss', 'raw', step, mode)\n"
        "    return 'high' if v is not None and v > 100 else None\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    yield tmp_path
    sys.modules.pop("rules41i", None)


def test_each_error_once_under_its_rule_name(teamrules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = teamrules / "dup.yaml"
    cfg.write_text("rules:\n"
                   "  - {name: 'rules41i:loss_over', rule_name: lo_a, patience: 0}\n"
                   "  - {name: 'rules41i:loss_over', rule_name: lo_b, severity: huge}\n", encoding="utf-8")
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"tripwire validate: error: 2 errors in {cfg}:",
                   "  rules[0]: lo_a.patience: got 0; accepted: an integer >= 1",
                   "  rules[1]: lo_b.severity: got 'huge'; accepted: info, warning, error, critical"], err
    cfg.write_text("rules:\n"
                   "  - {name: 'rules41i:loss_over', rule_name: lo_a, patience: 2}\n"
                   "  - {name: 'rules41i:loss_over', rule_name: lo_b}\n", encoding="utf-8")
    assert main(["validate", str(cfg)]) == 0


def test_a_bad_rule_name_does_not_hide_the_entrys_other_errors(teamrules: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 41k F3: {rule_name: 5} checked alone added "a rule mapping needs a 'name' key", and the
    entry's misspelled patiense was never named."""
    cfg = teamrules / "bad.yaml"
    cfg.write_text("rules:\n  - {name: 'rules41i:loss_over', rule_name: 5, patiense: 2}\n", encoding="utf-8")
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and err[0] == f"tripwire validate: error: 2 errors in {cfg}:", err
    assert err[1].startswith("  rules[0].rule_name: got 5; accepted: a name matching")
    assert err[2].startswith("  rules[0].patiense: unknown parameter of rule function 'rules41i:loss_over'; did you "
                             "mean 'patience'?")

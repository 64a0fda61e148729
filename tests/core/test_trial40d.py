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

"""Trial 36d: ``tripwire validate`` of a config whose ``imports`` failed told of an unknown rule
that its module should be listed under ``imports``, which the config did."""

from __future__ import annotations

from pathlib import Path

import pytest

from tripwire._cli import main


def test_an_unknown_rule_beside_a_failed_import_points_at_that_import(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "team.yaml"
    path.write_text("imports: [teamrules_not_here]\nrules:\n  - default\n  - {name: loss_jump, factor: 3}\n")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "imports[0]: cannot import module 'teamrules_not_here'" in err
    line = next(x for x in err.splitlines() if "rules[1]: unknown rule 'loss_jump'" in x)
    assert "list its module under the config's imports" not in line
    assert "registered by a module of the config's imports that did not import (imports[0]: see that error)" in line


def test_an_unknown_rule_alone_still_advises_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("rules: [loss_jump]\n")
    assert main(["validate", str(path)]) == 2
    assert "list its module under the config's imports (imports: [teamrules])" in capsys.readouterr().err

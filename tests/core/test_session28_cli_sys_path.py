"""``tripwire._cli.main`` called in a program (or a test) leaves ``sys.path`` as it found it: the
folders it adds for ``module:attribute`` rules (the current directory, the ``--config`` YAML's folder)
are taken off again (session 27's left-alone list: ``watch --config`` left its folder on sys.path)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire._cli import main


def _run(out: Path) -> None:
    session = tripwire.Session(rules=[], out_dir=out)
    for step in range(30):
        session.step("train", step, {"loss": (np.float32(1.0 / (step + 1)), "losses")})
    session.close()


def test_watch_with_a_config_leaves_sys_path_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run(tmp_path / "run")
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "team_rules.py").write_text(
        "def quiet(history, step, mode):\n    return None\n", encoding="utf-8")
    (folder / "rules.yaml").write_text("rules:\n  - team_rules:quiet\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    rc = main(["watch", str(tmp_path / "run"), "--once", "--config", str(folder / "rules.yaml")])
    assert rc == 0
    assert "team_rules" in sys.modules  # (the rule beside the YAML was imported: the folder was on the path)
    assert sys.path == before
    sys.modules.pop("team_rules", None)


def test_a_failing_verb_leaves_sys_path_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    assert main(["inspect", str(tmp_path / "no-such-run")]) == 2
    assert sys.path == before

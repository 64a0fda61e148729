"""Trial 35e: a finding an earlier ``tripwire watch --config`` recorded (``source: watch``), of a
rule this watch neither watches nor can import by name, was read as "a check the training
recorded", and a later plain ``watch --once`` of the run exited 1. A watch's finding is a rule's:
never a check."""

from __future__ import annotations

from pathlib import Path

import pytest

import tripwire
from tripwire._cli import main


def test_an_earlier_watchs_finding_is_no_check_of_a_later_watch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mod35e.py").write_text(
        "import tripwire\n"
        "def over(history, step, mode):\n"
        "    latest = history.latest('loss')\n"
        "    return f'loss {latest[1]}' if latest is not None and latest[1] > 5 else None\n"
        "RULE = tripwire.FunctionRule(over, name='loss_over_35e')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    run = tmp_path / "run"
    with tripwire.Session({"out_dir": str(run), "save": {"interval": 1}, "rules": ["exploding_tensor"], "collections": ["losses"]}) as s:
        for step in range(10):
            s.step("train", step, {"loss": (float(step), "losses")})
    cfg = tmp_path / "watch.yaml"
    cfg.write_text("rules: ['mod35e:RULE']\n")
    assert main(["watch", str(run), "--once", "--config", str(cfg)]) == 1
    assert any(f.source == "watch" and f.rule == "loss_over_35e" for f in tripwire.open_run(run).findings)
    capsys.readouterr()
    assert main(["watch", str(run), "--once"]) == 0
    out = capsys.readouterr().out
    assert "loss_over_35e" not in out and "no finding" in out, out

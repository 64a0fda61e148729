"""Trial 31f F3/F4, ``tripwire watch``'s side: the session drops a finding dated before a rule's
``start_step`` and refuses one dated after the step it judged (or in another mode) for every rule,
also one that overrides ``evaluate`` (as the built-in rules do; ``Rule.evaluate`` checks the dates only
where it runs). The watch replaying a stored run judged such a rule's findings without the check, so
it could report what the training did not."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import tripwire
from tripwire._cli import main

MODULE = '''
from tripwire import Finding, Requirement, Rule


class LookBackEval31(Rule):
    """Reports the first loss above 5 of the run, at every evaluation (an evaluate() of its own)."""

    name = "look_back_eval_31"

    def requirements(self):
        return [Requirement("losses", ("raw",))]

    def check(self, history, step, mode):  # (not called: evaluate is its own)
        return None

    def evaluate(self, history, step, mode):
        steps, values = history.series("loss", "raw", mode)
        for s, v in zip(steps, values):
            if v > 5:
                return [self.finding(int(s), mode, f"loss {v} at {s}")]
        return []


class Future31(Rule):
    """Dates its finding at a step it did not judge (an evaluate() of its own)."""

    name = "future_31"

    def requirements(self):
        return [Requirement("losses", ("raw",))]

    def check(self, history, step, mode):  # (not called: evaluate is its own)
        return None

    def evaluate(self, history, step, mode):
        return [self.finding(step + 5, mode, "from the future")] if step == 3 else []
'''


def _run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    session = tripwire.Session(out_dir=out, save_interval=1)
    for step, loss in enumerate([1.0, 1.0, 9.0, 1.0, 1.0, 1.0, 1.0, 9.0, 1.0]):
        session.step("train", step, {"loss": (loss, "losses")})
    session.close()
    return out


def _watch(run: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    main(["watch", str(run), "--config", str(config), "--once", "--no-record", "--json"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return [d for d in lines if d.get("rule") in ("look_back_eval_31", "future_31")]


def test_watch_drops_a_finding_dated_before_start_step_as_the_session_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "datedrules_s31.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    run = _run(tmp_path)
    config = tmp_path / "rules.yaml"
    config.write_text("rules:\n  - {name: 'datedrules_s31:LookBackEval31', start_step: 5}\n")
    assert _watch(run, config, capsys) == []  # (step 2 is before start_step 5)
    config.write_text("rules:\n  - {name: 'datedrules_s31:LookBackEval31', start_step: 1}\n")
    assert [(d["step"], d["kind"]) for d in _watch(run, config, capsys)] == [(2, "finding")]


def test_watch_records_a_finding_dated_after_the_step_judged_as_the_rules_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "datedrules_s31b.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    run = _run(tmp_path)
    config = tmp_path / "rules.yaml"
    config.write_text("rules:\n  - {name: 'datedrules_s31b:Future31'}\n")
    [error] = _watch(run, config, capsys)
    assert error["kind"] == "error" and error["step"] == 3
    assert "returned a finding dated at train step 8" in error["message"], error["message"]

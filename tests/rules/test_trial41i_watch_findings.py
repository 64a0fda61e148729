"""Trial 41i F1: ``tripwire watch`` kept only the first finding of an evaluation that made several (a
rule returning a list: ``grad_norm_above``'s one finding per gradient), where the training's session
records and acts on each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire.rules import Requirement, _registry


class Two(tripwire.Rule):
    """Two findings at step 20, one per tensor."""

    name = "two_at_20"

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", ("raw",))]

    def check(self, history: Any, step: int, mode: str) -> Any:
        if step == 20:
            return [self.finding(step, mode, "first of two", tensors=["a"]),
                    self.finding(step, mode, "second of two", tensors=["b"])]
        return None


def _run(out: Path, rules: list[Any]) -> list[tripwire.Finding]:
    with tripwire.Session({"save": {"interval": 5}}, out_dir=out, rules=rules) as s:
        for step in range(40):
            s.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    return list(s.findings)


def test_watch_keeps_every_finding_of_one_evaluation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_registry._REGISTRY, "two_at_20", Two)
    in_process = _run(tmp_path / "twin", ["two_at_20"])
    assert [(f.step, f.message) for f in in_process] == [(20, "first of two"), (20, "second of two")]
    _run(tmp_path / "run", [])
    found = tripwire.watch(tmp_path / "run", {"rules": ["two_at_20"]}, once=True, record=True)
    assert [(f.rule, f.step, f.message) for f in found] == [("two_at_20", 20, "first of two"),
                                                            ("two_at_20", 20, "second of two")]
    assert len(tripwire.open_run(tmp_path / "run").findings) == 2  # (both recorded)

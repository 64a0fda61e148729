"""Trial 41d F4: a findings file cut short after a run ended lost a finding without a word where the
run held two trainings: the end marker's ``findings`` counts its last training's findings only, so
the first training's, gone, was not missed. The end marker now holds the lines of the worker's
findings file (``findings_file``), every training's, and a reader that reads fewer says so."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import tripwire


def _spike(history, step, mode):  # noqa: ANN001, ANN202 - a function rule
    value = history.value("loss", "raw", step, mode)
    return f"loss {value} is high" if value is not None and value > 10 else None


def _training(out: Path, steps: range, high: int) -> None:
    rule = tripwire.FunctionRule(_spike, requirements=[tripwire.Requirement("losses", ("raw",))])
    with tripwire.Session({"out_dir": str(out), "save": {"interval": 1}}, rules=[rule]) as s:
        for step in steps:
            s.step("train", step, {"loss": (100.0 if step == high else 1.0, "losses")})


def test_a_findings_file_cut_short_in_a_run_of_two_trainings_is_said(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    _training(out, range(0, 5), high=2)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _training(out, range(5, 10), high=7)  # (a second training appended: its own WARNING)
    marker = json.loads((out / "workers" / "worker-00000.end.json").read_text())
    assert marker["findings"] == 1 and marker["findings_file"] == {"name": "in-process-00000.jsonl", "lines": 2}
    run = tripwire.open_run(out)
    assert [f.step for f in run.findings] == [2, 7] and run._findings_lost == {}
    path = out / "findings" / "in-process-00000.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[1])  # (the first training's finding cut away)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        run = tripwire.open_run(out)
    assert [f.step for f in run.findings] == [7]
    said = [r.getMessage() for r in caplog.records if "findings file held" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(
        f"tripwire: worker 0: its findings file held 2 findings (every training's) when its training ended the run, 1 is read "
        f"({path}): the file was truncated, damaged or removed after the run ended"), said


def test_a_whole_findings_file_is_not_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    _training(out, range(0, 5), high=9)  # (no finding: a marker of 0 lines)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        run = tripwire.open_run(out)
    assert run.findings == [] and not [r for r in caplog.records if "findings file held" in r.getMessage()]

"""Trial 27c (follow-up D): ``tripwire tune-report JOURNAL --json`` (and ``tripwire report JOURNAL
--json``, refused before): one strict JSON object with the job's summary and one object per trial
(the columns of ``TuningResult.dataframe()``), every value at full precision, a value that is not
finite as the strings docs/cli.md names. The text rounded objectives to 6 to 12 digits, and a CI job
or dashboard had no other way than the SQLite journal itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tripwire._cli import main
from tripwire.tune import TuningResult

YAML = """\
train: trial27c2_trainables:{train}
objective: auc
space:
  x: {{type: continuous, low: 0.0, high: 1.0}}
strategy: {{type: random, max_resource: 3}}
max_jobs: {max_jobs}
seed: 3
journal: tuning.db
"""

#: the keys docs/cli.md documents
REPORT_KEYS = {"journal", "job", "objective", "mode", "max_resource", "counts", "halt", "best", "top", "resource_used",
               "resource_without_early_stopping", "resource_lost", "tuner", "no_objective", "trials"}
TRIAL_KEYS = {"number", "params", "status", "objective", "metrics", "resource", "bracket", "rung", "start", "end",
              "elapsed_s", "reason", "error", "attempt", "rule"}


def _strict(text: str) -> Any:
    """``text`` parsed as strict JSON (NaN and Infinity refused, as a JSON parser other than Python's does)."""
    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def _job(folder: Path, capsys: pytest.CaptureFixture[str], train: str = "train_mixed", max_jobs: int = 4) -> Path:
    config = folder / "tune.yaml"
    config.write_text(YAML.format(train=train, max_jobs=max_jobs))
    rc = main(["tune", "--no-progress", str(config)])
    capsys.readouterr()
    assert rc == (1 if train == "train_fails" else 0)
    return folder / "tuning.db"


def test_tune_report_json_is_the_summary_and_every_trial_at_full_precision(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    journal = _job(tmp_path, capsys)
    result = TuningResult.from_journal(journal)
    assert main(["tune-report", str(journal), "--json", "--top", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and len(captured.out.splitlines()) == 1  # one object on one line
    data = _strict(captured.out)
    assert set(data) == REPORT_KEYS
    assert (data["journal"], data["objective"], data["mode"], data["max_resource"]) == (str(journal), "auc", "max", 3)
    assert data["job"]["seed"] == 3 and data["job"]["strategy"]["type"] == "random"
    assert data["counts"] == {"pending": 0, "running": 0, "completed": 3, "stopped": 0, "failed": 1}
    assert data["halt"] is None and data["no_objective"] is None and data["tuner"] is None
    assert data["resource_used"] == result.resource_used and data["resource_lost"] == 0
    assert data["resource_without_early_stopping"] == result.resource_without_early_stopping
    best = result.best
    assert best is not None
    assert data["best"] == {"number": best.number, "objective": best.value, "params": best.params}
    ranked = sorted((t for t in result.trials if t.rankable), key=lambda t: -t.value)  # type: ignore[operator]
    assert data["top"] == [t.number for t in ranked[:2]]

    frame = result.dataframe()
    assert [t["number"] for t in data["trials"]] == frame["number"].tolist() == [0, 1, 2, 3]
    for trial, record in zip(data["trials"], result.trials):
        assert set(trial) == TRIAL_KEYS
        assert trial["params"] == record.params and trial["status"] == record.status
        assert (trial["resource"], trial["bracket"], trial["rung"], trial["attempt"]) == (
            record.resource, record.bracket, record.rung, record.attempt)
        assert trial["start"] == record.started and trial["end"] == record.ended  # seconds, not rounded
        assert trial["elapsed_s"] == record.elapsed and trial["reason"] == record.reason
        assert trial["rule"] is None
    completed = data["trials"][0]
    assert completed["objective"] == result.trials[0].value  # the float itself, every digit
    assert completed["metrics"] == {"auc": result.trials[0].value, "loss": 1 / 3 + result.trials[0].value,
                                    "optimizer": "adam"}
    assert completed["error"] is None
    failed = data["trials"][1]
    assert failed["status"] == "failed" and failed["objective"] is None and failed["metrics"] == {}
    assert "RuntimeError: boom in trial 1" in failed["error"]  # the whole traceback
    assert data["trials"][2]["metrics"]["loss"] == "Infinity"  # (JSON has no infinity)


def test_report_json_of_a_journal_is_tune_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 27c: refused ("--json: ... is a tuning journal; accepted for a journal: --top, --errors")
    journal = _job(tmp_path, capsys, max_jobs=2)
    assert main(["report", str(journal), "--json"]) == 0
    reported = _strict(capsys.readouterr().out)
    assert main(["tune-report", str(journal), "--json"]) == 0
    assert reported == _strict(capsys.readouterr().out)
    assert len(reported["top"]) == 1  # (--top's default, 5, of the one rankable trial)


def test_tune_report_json_of_a_job_without_objective_exits_1_with_the_object(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = _job(tmp_path, capsys, train="train_fails", max_jobs=2)
    assert main(["tune-report", str(journal), "--json"]) == 1
    captured = capsys.readouterr()
    data = _strict(captured.out)
    assert data["best"] is None and data["top"] == [] and data["counts"]["failed"] == 2
    assert data["no_objective"] == "the job ended and every finished trial failed (no objective)"
    assert captured.err.strip() == f"tripwire tune-report: error: {data['no_objective']}"


def test_tune_report_json_refuses_errors_and_bad_input_has_no_json(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    journal = _job(tmp_path, capsys, max_jobs=1)
    assert main(["tune-report", str(journal), "--json", "--errors"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == ("tripwire tune-report: error: --errors: with --json every failed trial's "
                                    "traceback is its 'error' already; accepted with --json: --top")
    fake = tmp_path / "fake.db"
    fake.write_text("not a journal")
    assert main(["tune-report", str(fake), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    # report still refuses a run's options for a journal, by name
    assert main(["report", str(journal), "--json", "--tensors"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"tripwire report: error: --tensors: {str(journal)!r} is a tuning journal; accepted for a journal: --top, "
        "--full-only, --errors, --json, --csv (--tensors and --regex are for a run directory)")

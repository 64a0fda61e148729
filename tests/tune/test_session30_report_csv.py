"""``tripwire report JOURNAL --csv`` prints what ``tune-report JOURNAL --csv`` prints, and is refused
for a run directory by name (session 30: tune-report gained --csv in trial 30e, report had none)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tune_trainables as tt

from tripwire._cli import main
from tripwire.tune import Continuous, RandomSearch, Tuner

pytest.importorskip("pandas")


def test_report_csv_is_tune_reports(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    journal = tmp_path / "job.db"
    Tuner(tt.train_five_steps, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(5), max_jobs=3, seed=0,
          journal=str(journal)).fit()
    capsys.readouterr()
    assert main(["tune-report", str(journal), "--csv"]) == 0
    want = capsys.readouterr().out
    assert main(["report", str(journal), "--csv"]) == 0
    got = capsys.readouterr().out
    assert got == want and got.count("\n") == 4, got


def test_report_csv_of_a_run_directory_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "run").mkdir()
    assert main(["report", str(tmp_path / "run"), "--csv"]) == 2
    assert "--csv" in capsys.readouterr().err

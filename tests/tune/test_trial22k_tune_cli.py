"""Trial 22k: ``tripwire tune`` / ``tune-report`` / ``report`` exit alike for a job whose every trial
failed; a directory given as the YAML, a file that is no journal and a bad --top are one line naming
what is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
import tune_trainables as tt

from tripwire._cli import main
from tripwire.tune import Continuous, RandomSearch, Space, Tuner


def _failed_job(path: Path) -> Path:
    Tuner(tt.train_same_error, Space({"x": Continuous(0.0, 1.0)}), strategy=RandomSearch(3), max_jobs=2, seed=0,
          journal=str(path)).fit()
    return path


def test_reports_of_a_job_whose_every_trial_failed_exit_1_as_tune_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 22k: tune exited 1, tune-report and report 0 ("best: none: no trial returned an objective"):
    # a CI step checking the journal passed the job
    journal = _failed_job(tmp_path / "failed.db")
    capsys.readouterr()
    for verb in ("tune-report", "report"):
        assert main([verb, str(journal)]) == 1
        captured = capsys.readouterr()
        assert "best: none: no trial returned an objective" in captured.out
        assert _line(captured.err) == (f"tripwire {verb}: error: the job ended and every finished trial failed "
                                       f"(no objective); their tracebacks: tripwire tune-report --errors {journal}")
    assert main(["tune-report", str(journal), "--errors"]) == 1
    assert "(no objective)\n" in capsys.readouterr().err  # (the tracebacks are printed above: no hint)


def test_reports_of_a_job_not_ended_or_with_a_best_trial_exit_0(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from tripwire.tune._journal import Journal

    with Journal(tmp_path / "empty.db", create=True) as j:
        j.init_job({"objective": "objective", "mode": "max", "strategy": {}})
    assert main(["tune-report", str(tmp_path / "empty.db")]) == 0
    Tuner(tt.train_curve, Space({"x": Continuous(0.0, 1.0)}), strategy=RandomSearch(3), max_jobs=2, seed=0,
          journal=str(tmp_path / "ok.db")).fit()
    assert main(["tune-report", str(tmp_path / "ok.db")]) == 0
    assert capsys.readouterr().err == ""


def _line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_tune_of_a_directory_says_it_is_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 22k: "tuning config 'tune' does not exist"
    assert main(["tune", str(tmp_path), "--no-progress"]) == 2
    assert _line(capsys.readouterr().err) == (f"tripwire tune: error: tuning config {str(tmp_path)!r} is a directory; "
                                              "accepted: the path of a tuning job's YAML file (see docs/tune.md)")
    assert main(["tune", str(tmp_path / "nope.yaml"), "--no-progress"]) == 2
    assert "does not exist; accepted: the path of a tuning job's YAML file" in _line(capsys.readouterr().err)


def test_tune_report_of_a_file_that_is_no_journal_names_what_is_accepted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "fake.db"
    fake.write_text("not a database")
    assert main(["tune-report", str(fake)]) == 2
    line = _line(capsys.readouterr().err)
    assert line.startswith(f"tripwire tune-report: error: {str(fake)!r} is not a tripwire journal")
    assert line.endswith("; accepted: a tuning job's SQLite journal (the journal: path of its YAML)")


def test_tune_report_top_is_one_line_as_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # trial 22k: tune-report printed the usage line first, report did not
    journal = _failed_job(tmp_path / "failed.db")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["tune-report", str(journal), "--top", "-1"])
    assert exc.value.code == 2
    assert _line(capsys.readouterr().err) == \
        "tripwire tune-report: error: --top: got '-1'; accepted: an integer >= 0 (0: no list)"
    assert main(["report", str(journal), "--top", "-1"]) == 2
    assert _line(capsys.readouterr().err) == \
        "tripwire report: error: --top: got '-1'; accepted: an integer >= 0 (0: no list)"

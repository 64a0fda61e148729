"""Trial 33i F2, F3: ``tripwire tune`` and ``Tuner(journal=...)`` agree on what becomes a new journal
(docs/tune.md: "An empty file (0 bytes) or an empty SQLite database becomes a new journal"): the CLI
refused an SQLite database with no table as "not a tripwire journal (tables [])" while the Python API
took it. And ``tripwire tune ''`` said "tuning config '.' is a directory": an empty path is refused as
empty, as ``inspect``, ``validate`` and the rest refuse it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tripwire._cli import main
from tripwire.tune import TuningResult

from test_trial27b_cli import _config  # noqa: E402  (tests/tune is on sys.path)


def _empty_database(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
        db.execute("DROP TABLE t")
    assert path.stat().st_size > 0


@pytest.mark.parametrize("flags", [[], ["--resume-if-exists"]])
def test_an_empty_sqlite_database_becomes_the_cli_jobs_journal(tmp_path: Path, flags: list[str],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    _empty_database(tmp_path / "tuning.db")
    assert main(["tune", *flags, "--no-progress", str(config)]) == 0, capsys.readouterr().err
    result = TuningResult.from_journal(tmp_path / "tuning.db")
    assert [t.status for t in result.trials] == ["completed"] * 3
    # the job is now in it: a plain rerun is refused as a started job (exit 2), not as a foreign file
    assert main(["tune", "--no-progress", str(config)]) == 2
    assert "already holds a tuning job" in capsys.readouterr().err


def test_a_text_file_is_still_no_journal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    (tmp_path / "tuning.db").write_text("notes\n")
    assert main(["tune", "--no-progress", str(config)]) == 2
    assert "is not a tripwire journal" in capsys.readouterr().err
    assert (tmp_path / "tuning.db").read_text() == "notes\n"


def test_an_empty_config_path_is_refused_as_empty(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", ""]) == 2
    err = capsys.readouterr().err
    assert "tuning config: got '' (an empty path, not read as the current directory)" in err, err
    assert "is a directory" not in err


def test_a_mistyped_strategy_key_is_named_before_the_journals_job(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 37e: with a journal that holds a job, a misspelled strategy key was named only by the
    ``--resume`` that the "already holds a tuning job" refusal advised."""
    config = _config(tmp_path)
    assert main(["tune", "--no-progress", str(config)]) == 0
    capsys.readouterr()
    config.write_text(config.read_text().replace("max_resource: 3", "max_resource: 3, reducton_factor: 3"))
    assert main(["tune", "--no-progress", str(config)]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'reducton_factor'; did you mean 'reduction_factor'?" in err or "reducton_factor" in err
    assert "already holds a tuning job" not in err

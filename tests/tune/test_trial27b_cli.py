"""Trial 27b, finding 4: ``tripwire tune --resume-if-exists`` starts a job or continues it, one
command for a scheduled run (``--resume`` on a new journal exited 2, and a second plain run of a
started job exits 2 too, so a cron entry needed a wrapper that checks for the journal)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tripwire._cli import main
from tripwire.tune import TuningResult

YAML = """\
train: tune_trainables:train_curve
objective: auc
space:
  x: {{type: continuous, low: 0.0, high: 1.0}}
strategy: {{type: random, max_resource: 3}}
max_jobs: {max_jobs}
seed: 0
journal: tuning.db
"""


def _config(folder: Path, max_jobs: int = 3) -> Path:
    config = folder / "tune.yaml"
    config.write_text(YAML.format(max_jobs=max_jobs))
    return config


def test_resume_if_exists_starts_a_new_job_then_continues_it(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    journal = tmp_path / "tuning.db"
    assert main(["tune", "--resume-if-exists", "--no-progress", str(config)]) == 0   # no journal yet: started
    assert f"tripwire tune: --resume-if-exists: starting a new job in {str(journal)!r}" in capsys.readouterr().err
    first = TuningResult.from_journal(journal)
    assert [(t.number, t.status, t.attempt) for t in first.trials] == [(n, "completed", 1) for n in range(3)]

    # run again (the next cron run): the finished job is continued, which reruns nothing
    assert main(["tune", "--resume-if-exists", "--no-progress", str(config)]) == 0
    assert f"--resume-if-exists: continuing the job in {str(journal)!r}" in capsys.readouterr().err
    again = TuningResult.from_journal(journal)
    assert [(t.number, t.status, t.ended) for t in again.trials] == [
        (t.number, t.status, t.ended) for t in first.trials]

    # killed while trial 2 ran: the next run reruns it; a raised max_jobs in the YAML runs more
    with sqlite3.connect(journal) as db:
        db.execute("UPDATE trials SET status='running' WHERE number=2")
        db.execute("UPDATE reports SET stop=0 WHERE trial=2")
    _config(tmp_path, max_jobs=4)
    assert main(["tune", "--resume-if-exists", "--no-progress", str(config)]) == 0
    after = TuningResult.from_journal(journal)
    assert [(t.number, t.status, t.attempt) for t in after.trials] == [
        (0, "completed", 1), (1, "completed", 1), (2, "completed", 2), (3, "completed", 1)]


def test_resume_if_exists_keeps_the_exit_codes_of_the_other_cases(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    journal = tmp_path / "tuning.db"
    # --resume on a journal that does not exist: exit 2 as before, and the message names the flag
    assert main(["tune", "--resume", "--no-progress", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"tripwire tune: error: --resume: journal {str(journal)!r} does not exist: no job to continue; "
                   f"start it with tripwire tune {config}, or run tripwire tune --resume-if-exists {config}, which "
                   "continues the job where its journal holds one and starts it otherwise")
    assert not journal.exists()
    # both flags: refused by argparse (exit 2)
    with pytest.raises(SystemExit) as exc:
        main(["tune", "--resume", "--resume-if-exists", str(config)])
    assert exc.value.code == 2
    assert "argument --resume-if-exists: not allowed with argument --resume" in capsys.readouterr().err
    # a started job whose YAML changes the job: refused as --resume refuses it (exit 2), not a new job
    assert main(["tune", "--no-progress", str(config)]) == 0
    config.write_text(YAML.format(max_jobs=3).replace("seed: 0", "seed: 1"))
    capsys.readouterr()
    assert main(["tune", "--resume-if-exists", "--no-progress", str(config)]) == 2
    err = capsys.readouterr().err
    assert "differs from the job journaled in" in err and "['seed']" in err
    # a file that is not a tripwire journal: exit 2, nothing written into it
    other = tmp_path / "other"
    other.mkdir()
    (other / "tune.yaml").write_text(YAML.format(max_jobs=3))
    with sqlite3.connect(other / "tuning.db") as db:
        db.execute("CREATE TABLE study (id INTEGER)")
    assert main(["tune", "--resume-if-exists", "--no-progress", str(other / "tune.yaml")]) == 2
    assert "is not a tripwire journal" in capsys.readouterr().err


def test_the_help_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--resume-if-exists" in out and "a finished job is not rerun" in out

"""Trial 33f M1 (fixer gamma F1): ``Tuner(journal="notes.txt")`` where notes.txt held the single byte
``x`` was accepted and ``fit()`` overwrote it with a SQLite journal (SQLite reads a file of one byte
as an empty database); files of 2 bytes or more were refused. Any existing non-empty file that does
not start with SQLite's header is refused before anything is written; an empty file (0 bytes) is a
new journal, as docs/tune.md says."""

from __future__ import annotations

from pathlib import Path

import pytest
import tune_trainables as tt

from tripwire._cli import main
from tripwire.tune import Continuous, JournalError, RandomSearch, Tuner, TuningResult
from tripwire.tune._errors import ConfigError
from tripwire.tune._journal import Journal

SPACE = {"x": Continuous(0.0, 1.0)}


@pytest.mark.parametrize("content", [b"x", b"\n", b"S", b"SQLite format 3", b"ok"])
def test_a_short_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=r"^'.*notes\.txt' is not a tripwire journal \(file is not a database: "
                                          r"it does not start with SQLite's header\); pass a new path or a "
                                          r"tripwire journal$"):
        Tuner(tt.train_curve, SPACE, strategy=RandomSearch(2), max_jobs=1, journal=str(path))
    with pytest.raises(JournalError, match=r"notes\.txt' is not a tripwire journal \(file is not a database"):
        Journal(path, create=True)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_reading_a_one_byte_file_names_it_no_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"x")
    with pytest.raises(JournalError, match=r"notes\.txt' is not a tripwire journal \(file is not a database: it does "
                                           r"not start with SQLite's header\)$"):
        TuningResult.from_journal(path)
    with pytest.raises(JournalError, match=r"is not a tripwire journal \(file is not a database"):
        Tuner.resume(str(path), train=tt.train_curve)
    assert path.read_bytes() == b"x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_yaml_journal_of_one_byte_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "j.db").write_bytes(b"x")
    config = tmp_path / "tune.yaml"
    config.write_text("train: tune_trainables:train_curve\n"
                      "space:\n  x: {type: continuous, low: 0.0, high: 1.0}\n"
                      "strategy: {type: random, max_resource: 2}\nmax_jobs: 1\njournal: j.db\n")
    assert main(["tune", "--no-progress", str(config)]) == 2
    assert "j.db' is not a tripwire journal (file is not a database" in capsys.readouterr().err
    assert (tmp_path / "j.db").read_bytes() == b"x"


def test_an_empty_file_is_still_a_new_journal(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    result = Tuner(tt.train_curve, SPACE, strategy=RandomSearch(2), max_jobs=1, seed=0, journal=str(path)).fit()
    assert result.counts()["completed"] == 1
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    assert TuningResult.from_journal(path).counts()["completed"] == 1

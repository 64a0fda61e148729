"""Trial 40a: two tuners started at the same moment on one new journal (F1). The one that lost the race
was sometimes told "cannot be opened for writing (database is locked|disk I/O error); pass a path in a
folder you can write", or "is not a regular file", instead of the refusal of a journal another tuner
holds: switching a new journal to WAL takes an exclusive lock SQLite does not wait for, and the
path's probe (a file made and removed at the journal's own name) raced the other tuner's. Also F2:
``Tuner.resume`` of a journal that does not exist said what to do."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import tune_trainables as tt

from tripwire.tune import JournalError, Tuner
from tripwire.tune import _journal
from tripwire.tune._journal import Journal, journal_path_problem

HERE = Path(tt.__file__).parent


class _Flaky:
    """A connection whose WAL switch fails ``fails`` times with ``message`` (what SQLite says while
    another process creates or switches the same journal), then works."""

    def __init__(self, db: sqlite3.Connection, state: dict[str, Any]) -> None:
        self._db, self._state = db, state

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("PRAGMA journal_mode") and self._state["fails"] > 0:
            self._state["fails"] -= 1
            raise sqlite3.OperationalError(self._state["message"])
        return self._db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def _flaky_connect(monkeypatch: pytest.MonkeyPatch, fails: int, message: str) -> dict[str, Any]:
    state: dict[str, Any] = {"fails": fails, "message": message}
    real = sqlite3.connect
    monkeypatch.setattr(_journal.sqlite3, "connect", lambda *a, **k: _Flaky(real(*a, **k), state))
    return state


@pytest.mark.parametrize("message", ["database is locked", "disk I/O error"])
def test_a_wal_switch_that_another_process_holds_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             message: str) -> None:
    state = _flaky_connect(monkeypatch, 3, message)
    with Journal(tmp_path / "j.db", create=True) as j:
        assert j.job is None
    assert state["fails"] == 0


def test_a_journal_held_past_the_retries_is_said_to_be_held_not_unwritable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _flaky_connect(monkeypatch, 10**6, "database is locked")
    monkeypatch.setattr(_journal, "OPEN_RETRY_S", 0.2)
    path = tmp_path / "j.db"
    with pytest.raises(JournalError, match=r"cannot be opened for writing \(database is locked\): another process held "
                                           r"it for 0 s \(another tuner, or a program with it open\), or the disk failed; "
                                           r"retry when it is done, or pass another path$"):
        Journal(path, create=True)


def test_a_new_path_is_probed_under_another_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real_unlink = _journal.os.unlink
    monkeypatch.setattr(_journal.os, "unlink", lambda p, *a, **k: (seen.append(str(p)), real_unlink(p, *a, **k)))
    path = tmp_path / "new.db"
    assert journal_path_problem(path) is None
    assert str(path) not in seen and len(seen) == 1 and Path(seen[0]).parent == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # (the probe removed, nothing at the journal's name)


RACER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {here!r})
    import tune_trainables as tt
    from tripwire.tune import Continuous, Hyperband, JournalLockedError, Tuner
    start = float(sys.argv[2])
    while time.time() < start:
        time.sleep(0.001)
    try:
        Tuner(tt.train_slow, {{"x": Continuous(0.0, 1.0)}}, strategy=Hyperband(min_resource=1, max_resource=3),
              max_jobs=3, max_parallel_jobs=1, seed=int(sys.argv[3]), journal=sys.argv[1]).fit()
        print("OK")
    except JournalLockedError:
        print("HELD")
    except Exception as exc:
        print("OTHER", type(exc).__name__, exc)
""")


def test_two_tuners_started_at_once_on_a_new_journal(tmp_path: Path) -> None:
    script = tmp_path / "racer.py"
    script.write_text(RACER.format(here=str(HERE)))
    for round_ in range(2):
        journal = tmp_path / f"race{round_}.db"
        start = time.time() + 4.0  # (both interpreters started and tripwire imported by then)
        procs = [subprocess.Popen([sys.executable, str(script), str(journal), repr(start), str(seed)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
        outs = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
        assert outs == ["HELD", "OK"], outs
        with Journal(journal, readonly=True) as j:
            assert [t["number"] for t in j.trials()] == [0, 1, 2]


def test_resume_of_a_journal_that_does_not_exist_says_how_to_start_it(tmp_path: Path) -> None:
    path = tmp_path / "none.db"
    with pytest.raises(JournalError, match=r"^Tuner\.resume: journal '.*none\.db' does not exist: no job to continue; "
                                           r"accepted: the journal of a tuning job \(Tuner\(\.\.\., journal=\.\.\.\) "
                                           r"writes it\); to start the job, call Tuner\(train, space, \.\.\., "
                                           r"journal='.*none\.db'\)\.fit\(\)$"):
        Tuner.resume(path)

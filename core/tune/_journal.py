"""SQLite journal of one tuning job (stdlib ``sqlite3``, WAL, one transaction per event; a session's
start, from its lock to its workers' start, is one transaction: :meth:`Journal.begin`).

Tables::

    meta(key TEXT PRIMARY KEY, value TEXT)          -- schema, job (JSON), wall_seconds, priors
    trials(number INTEGER PRIMARY KEY, params TEXT, bracket INTEGER, status TEXT, value REAL,
           metrics TEXT, resource INTEGER, rung INTEGER, reason TEXT, error TEXT,
           attempt INTEGER, started REAL, ended REAL, rule TEXT)
    reports(trial INTEGER, step INTEGER, value REAL, time REAL, stop INTEGER, reason TEXT,
            PRIMARY KEY (trial, step))
    rungs(bracket INTEGER, rung INTEGER, trial INTEGER, value REAL, PRIMARY KEY (bracket, rung, trial))
    scheduler(id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT, updated REAL)
    lock(id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER, host TEXT, proc_start TEXT,
         acquired REAL, heartbeat REAL)
    lock_file(id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER, host TEXT, acquired REAL,
              path TEXT, dev INTEGER, ino INTEGER)    -- the file the lock row locks

``status`` is one of ``pending`` (an interrupted trial waiting to be rerun, or a trial submitted to
an executor that queues it, a Dask thread, which has not begun yet), ``running``,
``completed``, ``stopped`` (early-stopped), ``failed``; ``rule`` names the tripwire rule that
stopped the trial's training (NULL otherwise; a journal written before the column gets it when
opened for writing, and reads NULL). A report and the rung values it records
are written in one transaction, so the ``rungs`` table is always the scheduler's exact state (a
trial a tripwire rule stopped, or a failed one, has its rows deleted with its end, as the scheduler
forgets them; an interrupted trial keeps its rows while a resume reruns it, and its rerun's reports
replace them, trial 27b); the
``scheduler`` row holds a :meth:`state_dict` snapshot written when a session starts and ends.
SQLite stores NaN as NULL: a NULL report value reads back as NaN.

The lock names the file it locks: with the ``lock`` row, in the same transaction, the one row of
``lock_file(id=1, pid, host, acquired, path, dev, ino)`` holds the real path, device and inode of
the file when the lock was taken (trial 28b: a journal copied while its job ran, ``cp`` with its
``-wal`` or ``sqlite3 .backup``, carried the original's row, and was "held by another tuner" until
that tuner ended). A lock that names another file (another device or inode on this host; another
inode elsewhere) locks nothing here: the file is a copy, which :meth:`Journal.holder` says, and
which a tuner may take. A lock row without its ``lock_file`` row (the same pid, host and
``acquired``), written before trial 28b or by an earlier tripwire, locks the file as it did. (A
table of its own, not new columns of ``lock``: an earlier tripwire still takes the lock of a journal
this one wrote; not the meta: a finished job resumed leaves the file as it was, its rows taken and
dropped with the lock's.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import socket
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

from ._errors import JournalError, JournalLockedError

__all__ = ["Journal"]

logger = logging.getLogger("tripwire.tune")

SCHEMA_VERSION = 1
STALE_AFTER_S = 120.0

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    number INTEGER PRIMARY KEY, params TEXT NOT NULL, bracket INTEGER NOT NULL, status TEXT NOT NULL,
    value REAL, metrics TEXT, resource INTEGER NOT NULL DEFAULT 0, rung INTEGER NOT NULL DEFAULT 0,
    reason TEXT, error TEXT, attempt INTEGER NOT NULL DEFAULT 1, started REAL, ended REAL, rule TEXT);
CREATE TABLE IF NOT EXISTS reports (
    trial INTEGER NOT NULL, step INTEGER NOT NULL, value REAL, time REAL NOT NULL,
    stop INTEGER NOT NULL, reason TEXT, PRIMARY KEY (trial, step));
CREATE TABLE IF NOT EXISTS earlier_reports (
    trial INTEGER NOT NULL, attempt INTEGER NOT NULL, step INTEGER NOT NULL, value REAL, time REAL NOT NULL,
    stop INTEGER NOT NULL, reason TEXT, PRIMARY KEY (trial, attempt, step));
CREATE TABLE IF NOT EXISTS rungs (
    bracket INTEGER NOT NULL, rung INTEGER NOT NULL, trial INTEGER NOT NULL, value REAL,
    PRIMARY KEY (bracket, rung, trial));
CREATE TABLE IF NOT EXISTS scheduler (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL,
    updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS lock (id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL,
    host TEXT NOT NULL, proc_start TEXT, acquired REAL NOT NULL, heartbeat REAL NOT NULL);
"""
#: The file the lock row locks (trial 28b): a table of its own, made by :meth:`Journal.acquire_lock`
#: too (a journal opened without ``create=True`` may predate it).
_LOCK_FILE_DDL = ("CREATE TABLE IF NOT EXISTS lock_file (id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, "
                  "host TEXT NOT NULL, acquired REAL NOT NULL, path TEXT, dev INTEGER, ino INTEGER)")
_DDL += _LOCK_FILE_DDL + ";\n"

TRIAL_COLUMNS = ("number", "params", "bracket", "status", "value", "metrics", "resource", "rung",
                 "reason", "error", "attempt", "started", "ended", "rule")


def _proc_start(pid: int) -> str | None:
    """Start time of ``pid`` (Linux ``/proc``), to tell a live holder from a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("ascii", "replace")
        return data.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, proc_start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if proc_start is not None:
        now = _proc_start(pid)
        if now is not None and now != proc_start:
            return False
        if now is not None:
            try:  # a zombie (killed, not yet reaped) holds nothing
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    if fh.read().decode("ascii", "replace").rsplit(")", 1)[1].split()[0] == "Z":
                        return False
            except OSError:
                pass
    return True


def _nan(v: float | None) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


REQUIRED_TABLES = frozenset({"meta", "trials", "reports", "rungs", "lock"})


def _bare_wal_header(path: Path) -> bool:
    """Whether ``path`` is a SQLite database in WAL mode of one page (its header, 100 bytes read):
    what a tripwire journal's main file is before SQLite's first checkpoint, every table still in
    its ``-wal`` file. Copied without that file, it reads as a database with no table."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
        size = path.stat().st_size
    except OSError:
        return False
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        return False
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    return head[18] == 2 and head[19] == 2 and size <= page  # (file format 2 to write and read: WAL)


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _not_sqlite(path: Path) -> bool:
    """Whether the existing, non-empty file ``path`` lacks the 16 bytes every SQLite database
    starts with. SQLite itself reads a file of one byte as an empty database (trial 33f M1: a
    ``notes.txt`` holding ``x`` passed as a journal was overwritten with one); ``sqlite3`` refuses
    ("file is not a database") only files of 2 bytes or more."""
    with open(path, "rb") as fh:
        return fh.read(len(_SQLITE_MAGIC)) != _SQLITE_MAGIC


def no_tables_hint(path: Path) -> str:
    """What to say of a SQLite file at ``path`` that holds no table where a journal was expected: a
    bare WAL-mode header (:func:`_bare_wal_header`, exact and cheap: 100 bytes read) is a journal
    copied without its ``-wal`` file (trial 28b: "not a tripwire journal (tables [])", the 2.3 MB of
    the job in the ``-wal`` beside the original, unnamed). ``""`` otherwise, and where a ``-wal``
    file is beside it (called once this process's connection closed, which removes its own): another
    process has the file open, a tuner making the journal now, say."""
    if not _bare_wal_header(path) or path.with_name(path.name + "-wal").exists():
        return ""
    return (f"; it is a SQLite database in WAL mode of one page and no table, as a tripwire journal is before "
            f"SQLite's first checkpoint: its content is in the original's write-ahead log (the file ORIGINAL.db-wal "
            f"beside it), which was not copied with it: copy the journal together with its -wal file, or back a "
            f"live journal up with sqlite3 ORIGINAL.db \".backup {path.name}\"")


def _file_identity(path: Path) -> tuple[str, int, int] | None:
    """``(real path, device, inode)`` of ``path``, or None where it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.path.realpath(path), st.st_dev, st.st_ino


def _row_locks_other_file(here: tuple[str, int, int] | None, host: str, row_host: str,
                          row_dev: int | None, row_ino: int | None) -> bool:
    """Whether a lock row that names the file ``(row_dev, row_ino)`` locks another file than
    ``here`` (this journal's identity): a copy of a journal carries its original's row. On this host
    the device and the inode are compared; on another host the inode only (a shared disk's device
    number differs from host to host, its inode not). A row written before trial 28b (no inode), or
    a file whose identity cannot be read, locks this file."""
    if row_ino is None or here is None:
        return False
    if row_host == host:
        return (row_dev, row_ino) != (here[1], here[2])
    return row_ino != here[2]


def _write_hint(path: Path) -> str:
    """What keeps this user from writing a journal at ``path``, in words (for the error)."""
    folder = path.parent
    if path.exists() and not os.access(path, os.W_OK):
        return "this user cannot write the file: pass a path you can write (reading it needs no write access)"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"this user cannot write in its folder {str(folder)!r} (SQLite writes the journal and its -wal there): " \
               "pass a path in a folder you can write"
    return "pass a path in a folder you can write"


def journal_path_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot hold a new or existing tripwire journal, in words (``None``: it can).

    Refused: a directory, a path in a folder that does not exist (or is a file), a path this user
    cannot write (the file, or its folder: SQLite writes its ``-wal`` there), an existing file that
    is not a SQLite database, and a SQLite database that holds tables but not a tripwire journal's (an
    Optuna storage, say): tripwire never writes into another program's database. Accepted: a new
    path in an existing folder, an empty file or SQLite database, a tripwire journal. Nothing is
    left written (a new path is made and removed at once: whether this user may is not always what
    ``os.access`` says; an existing file is only read)."""
    p = Path(path)
    shown = str(p)
    if p.is_dir():
        return f"journal {shown!r} is a directory; pass a file path, such as {str(p / 'tuning.db')!r}"
    folder = p.parent
    if not folder.is_dir():
        if folder.exists():
            return f"journal {shown!r}: {str(folder)!r} is not a folder (a file of that name exists); pass another path"
        return (f"journal {shown!r}: its folder {str(folder)!r} does not exist; create it first or pass "
                "another path")
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        return f"journal {shown!r} cannot be written: {_write_hint(p)}"
    if not p.exists():
        # (os.access answers yes to root everywhere, and to a folder that refuses new files, /proc: a
        # file of another name made and removed at once in the folder, so that Tuner(...) refuses it, not
        # fit(); not the journal's own name, which a tuner started at the same moment may be creating:
        # trial 40a F1, it saw the other's probe come and go, "is not a regular file")
        try:
            fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".probe", dir=folder)
        except OSError as exc:
            return f"journal {shown!r} cannot be written: creating a file in its folder failed ({exc.strerror}); " \
                   "pass a path in a folder you can write"
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)
        return None
    try:
        if not p.is_file():
            return f"journal {shown!r} is not a regular file"
        if p.stat().st_size == 0:
            return None  # SQLite makes a database of an empty file
        foreign = _not_sqlite(p)
    except FileNotFoundError:
        return None  # (removed meanwhile: a new path)
    except OSError as exc:
        return f"journal {shown!r} cannot be read ({exc.strerror})"
    if foreign:
        return (f"{shown!r} is not a tripwire journal (file is not a database: it does not start with SQLite's "
                "header); pass a new path or a tripwire journal")
    try:
        reader = _connect_readonly(p)
    except (sqlite3.Error, OSError) as exc:
        return f"journal {shown!r} cannot be opened ({exc})"
    try:
        names = {r[0] for r in reader.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        return f"{shown!r} is not a tripwire journal ({exc}); pass a new path or a tripwire journal"
    finally:
        reader.close()
    if names and not REQUIRED_TABLES <= names:
        return (f"{shown!r} is not a tripwire journal: it is a SQLite database with the tables {sorted(names)}; "
                "tripwire does not write into another program's database: pass a new path or a tripwire journal")
    return None


def is_new_journal(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is what a tuner makes a new journal of: no file, an empty one, or a SQLite
    database with no table (as :func:`journal_path_problem` accepts; trial 33i F2: ``tripwire tune``
    refused such a database, which ``Tuner(journal=...)`` took). False for anything else, a file
    that cannot be read included (read as a journal, it is refused there, with why)."""
    p = Path(path)
    if not p.is_file() or not p.stat().st_size:
        return True
    try:
        if _not_sqlite(p):
            return False
        reader = _connect_readonly(p)
        try:
            return reader.db.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0] == 0
        finally:
            reader.close()
    except (OSError, sqlite3.Error):
        return False


class _ReadOnly:
    """A connection that only reads ``path`` (:func:`_connect_readonly`) and what it holds: the
    private copy it reads, where there is one (removed by :meth:`close`)."""

    def __init__(self, db: sqlite3.Connection, copy: tempfile.TemporaryDirectory[str] | None) -> None:
        self.db = db
        self.copy = copy

    def close(self) -> None:
        try:
            self.db.close()
        finally:
            if self.copy is not None:
                self.copy.cleanup()


def _connect_readonly(path: Path) -> _ReadOnly:
    """A connection that only reads. Where the file and its folder are writable it is an ordinary
    connection with ``PRAGMA query_only``: SQLite then removes the ``-wal``/``-shm`` files it needs
    for reading a WAL journal when the last connection closes. Elsewhere (a read-only folder, or a
    file of someone else's) SQLite would need to write them next to the journal, which fails in a
    read-only folder ("attempt to write a readonly database") and leaves them behind next to a
    read-only file: the journal (and its ``-wal``, with what a killed tuner had not checkpointed)
    is copied to a private temporary folder and read there."""
    if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK):
        db = sqlite3.connect(path, isolation_level=None, timeout=30)
        db.execute("PRAGMA query_only=ON")
        return _ReadOnly(db, None)
    copy = tempfile.TemporaryDirectory(prefix="tripwire-journal-")
    try:
        target = Path(copy.name) / path.name
        shutil.copyfile(path, target)
        wal = path.with_name(path.name + "-wal")
        if wal.is_file():
            shutil.copyfile(wal, target.with_name(target.name + "-wal"))
        db = sqlite3.connect(target, isolation_level=None, timeout=30)
        db.execute("PRAGMA query_only=ON")
    except BaseException:
        copy.cleanup()
        raise
    return _ReadOnly(db, copy)


#: How long opening a journal for writing retries while another process holds SQLite's locks on it
#: (it is creating the journal, or switching it to WAL), in seconds.
OPEN_RETRY_S = 10.0

_TRANSIENT = ("locked", "busy", "disk i/o error")


def _connect_wal(path: Path) -> sqlite3.Connection:
    """A connection to ``path`` in WAL mode, for writing. Switching a journal to WAL takes an exclusive
    lock, which SQLite does not wait for: while another process creates the same journal or switches it,
    the switch fails with "database is locked" (or "disk I/O error", its -wal file coming and going). That
    is retried for :data:`OPEN_RETRY_S` seconds (trial 40a F1: two tuners started on one new journal at
    once, and the one that lost the race was told to "pass a path in a folder you can write", instead of
    the refusal of a journal another tuner holds that comes once the journal is open)."""
    deadline = time.monotonic() + OPEN_RETRY_S
    delay = 0.01
    while True:
        db = None
        try:
            db = sqlite3.connect(path, isolation_level=None, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            return db
        except sqlite3.Error as exc:
            if db is not None:
                db.close()
            transient = isinstance(exc, sqlite3.OperationalError) and any(t in str(exc).lower() for t in _TRANSIENT)
            if transient and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
                continue
            if transient and os.access(path.parent, os.W_OK | os.X_OK):
                raise JournalError(f"journal {str(path)!r} cannot be opened for writing ({exc}): another process "
                                   f"held it for {OPEN_RETRY_S:.0f} s (another tuner, or a program with it open), or the "
                                   f"disk failed; retry when it is done, or pass another path") from None
            # (a folder or file this user cannot write, say)
            raise JournalError(f"journal {str(path)!r} cannot be opened for writing ({exc}); "
                               f"{_write_hint(path)}") from None


def held_by_another(path: str | os.PathLike[str], pid: Any, host: Any) -> JournalLockedError:
    """The refusal of a journal another live tuner holds (``fit()``'s and ``tripwire tune``'s, one
    text)."""
    return JournalLockedError(f"journal {str(path)!r} is held by another tuner (pid {pid} on {host}); a dead "
                              f"holder releases it at once on this host, after {STALE_AFTER_S:.0f} s elsewhere")


class Journal:
    """Open (``create=False``) or create a journal at ``path``.

    Opened for writing, it refuses before writing anything a path that :func:`journal_path_problem`
    rejects (a directory, a missing folder, a file that is not a tripwire journal)."""

    def __init__(self, path: str | os.PathLike[str], create: bool = False, readonly: bool = False) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise JournalError(f"journal {str(self.path)!r} does not exist")
        if not readonly:
            problem = journal_path_problem(self.path)
            if problem is not None:
                raise JournalError(problem)
        if readonly:
            if self.path.is_dir():
                raise JournalError(f"journal {str(self.path)!r} is a directory, not a tripwire journal")
            try:
                foreign = self.path.is_file() and self.path.stat().st_size > 0 and _not_sqlite(self.path)
            except OSError as exc:
                raise JournalError(f"journal {str(self.path)!r} cannot be opened ({exc.strerror})") from None
            if foreign:
                raise JournalError(f"{str(self.path)!r} is not a tripwire journal (file is not a database: it does "
                                   "not start with SQLite's header)")
            try:
                self._reader: _ReadOnly | None = _connect_readonly(self.path)
            except (sqlite3.Error, OSError) as exc:
                raise JournalError(f"journal {str(self.path)!r} cannot be opened ({exc})") from None
            self._db = self._reader.db
        else:
            self._reader = None
            self._db = _connect_wal(self.path)
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._locked = False
        self._identity: tuple[str, int, int] | None = None  # the file's, when this tuner took the lock
        # (the lock as it was when begin() opened the transaction: what rollback() goes back to)
        self._locked_before: tuple[bool, tuple[str, int, int] | None] = (False, None)
        try:
            if create:
                self._db.executescript(_DDL)
            names = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            self._close_db()
            raise JournalError(f"{str(self.path)!r} is not a tripwire journal: {exc}") from None
        if not REQUIRED_TABLES <= names:
            self._close_db()
            hint = no_tables_hint(self.path) if not names else ""
            raise JournalError(f"{str(self.path)!r} is not a tripwire journal (tables {sorted(names)}){hint}")
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(trials)")}
        self._has_rule = "rule" in cols
        if not self._has_rule and not readonly:  # a journal written before the column
            self._db.execute("ALTER TABLE trials ADD COLUMN rule TEXT")
            self._has_rule = True

    # ---- transactions -------------------------------------------------------------------------
    def _tx(self) -> "_Tx":
        return _Tx(self._db)

    def begin(self) -> None:
        """Open a transaction that the journal's own writes join (each as a savepoint) until
        :meth:`commit`: what a tuning session writes when it starts (the lock, the interrupted trials
        requeued, the limits ``resume`` changed) is written together or not at all, so a resume that
        is refused before its workers start, or killed meanwhile, leaves the journal as it was, the
        lock row of the tuner that ran it before included (trial 31g: a refused resume had requeued
        the interrupted trials). :meth:`rollback`, and :meth:`close` without a commit, drop it all,
        the lock taken in it too. A :class:`JournalError` where one is open already."""
        if self._db.in_transaction:
            raise JournalError(f"journal {str(self.path)!r}: begin() while a transaction is open")
        self._db.execute("BEGIN IMMEDIATE")
        self._locked_before = (self._locked, self._identity)

    def commit(self) -> None:
        """Write what was done since :meth:`begin` (nothing where no transaction is open)."""
        if self._db.in_transaction:
            self._db.execute("COMMIT")

    def rollback(self) -> None:
        """Drop what was done since :meth:`begin`, a lock taken since included (nothing where no
        transaction is open)."""
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
            self._locked, self._identity = self._locked_before

    # ---- meta ----------------------------------------------------------------------------------
    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def set_meta(self, key: str, value: Any) -> None:
        with self._tx():
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    @property
    def job(self) -> dict[str, Any] | None:
        return self.get_meta("job")  # type: ignore[no-any-return]

    def init_job(self, job: dict[str, Any]) -> None:
        """Write the job. A journal that already holds a job refuses, unless that job never started
        a trial: the new job then replaces it (logged at INFO)."""
        with self._tx():
            if self._db.execute("SELECT 1 FROM meta WHERE key='job'").fetchone():
                if self._db.execute("SELECT 1 FROM trials LIMIT 1").fetchone() is not None:
                    raise JournalError(f"journal {str(self.path)!r} already holds a tuning job; continue it with "
                                       "Tuner.resume(journal) (CLI: tripwire tune --resume) or pass another journal "
                                       "path")
                for table in ("meta", "reports", "rungs", "scheduler"):
                    self._db.execute(f"DELETE FROM {table}")
                logger.info("tripwire.tune: journal %r held a tuning job that never started a trial; the new job replaces it",
                            str(self.path))
            self._db.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("schema", json.dumps(SCHEMA_VERSION)), ("job", json.dumps(job)),
                ("created", json.dumps(time.time())), ("wall_seconds", json.dumps(0.0))])

    # ---- lock ----------------------------------------------------------------------------------
    def _lock_row(self) -> tuple[Any, ...] | None:
        """``(pid, host, proc_start, heartbeat, path, dev, ino)`` of the lock row, or None: the last
        three from the ``lock_file`` row written with it (None where there is none for this very row:
        a lock taken before trial 28b, or by an earlier tripwire)."""
        row = self._db.execute("SELECT pid, host, proc_start, heartbeat, acquired FROM lock WHERE id=1").fetchone()
        if row is None:
            return None
        pid, host, start, beat, acquired = row
        try:
            named = self._db.execute("SELECT path, dev, ino FROM lock_file WHERE id=1 AND pid=? AND host=? AND "
                                     "acquired=?", (pid, host, acquired)).fetchone()
        except sqlite3.OperationalError:  # (a journal written before the table, read only)
            named = None
        return (pid, host, start, beat, *(named or (None, None, None)))

    def acquire_lock(self) -> None:
        """Take the job lock; refuse while a live process (or a fresh heartbeat elsewhere) holds it.
        A row that locks another file (this journal is a copy of a job's, made while it ran: trial
        28b) holds nothing here: it is replaced. The row written names this file (real path, device,
        inode)."""
        host, pid, now = socket.gethostname(), os.getpid(), time.time()
        here = _file_identity(self.path)
        with self._tx():
            self._db.execute(_LOCK_FILE_DDL)  # (a journal opened without create=True may predate it)
            row = self._lock_row()
            if row is not None:
                hpid, hhost, hstart, beat, hpath, hdev, hino = row
                if _row_locks_other_file(here, host, hhost, hdev, hino):
                    logger.info("tripwire.tune: journal %r is a copy of %r, whose lock (pid %s on %s) it carried: that lock is "
                                "not this file's, and is replaced", str(self.path), hpath, hpid, hhost)
                else:
                    if hhost == host:
                        held = hpid != pid and _alive(hpid, hstart)
                    else:
                        held = now - beat < STALE_AFTER_S
                    if held:
                        raise held_by_another(self.path, hpid, hhost)
            self._db.execute("INSERT OR REPLACE INTO lock VALUES (1, ?, ?, ?, ?, ?)",
                             (pid, host, _proc_start(pid), now, now))
            if here is not None:
                self._db.execute("INSERT OR REPLACE INTO lock_file VALUES (1, ?, ?, ?, ?, ?, ?)",
                                 (pid, host, now, *here))
        self._locked = True
        self._identity = here

    def file_problem(self) -> str | None:
        """Whether the file this tuner locked is still at the journal's path (trial 29c: a script's
        module-level ``os.remove(journal)``, run again by each worker, removed it while the job ran,
        every later write went to a file no path leads to, and ``fit()`` returned as if all was
        well): None where it is (or where this connection holds no lock, or the file's identity
        could not be read when it took it), else what happened, in words: ``"was removed ..."`` or
        ``"was replaced ..."`` (another file, another device or inode, at the path). One
        ``os.stat``."""
        if not self._locked or self._identity is None:
            return None
        try:
            st = os.stat(self._identity[0])  # (its real path when locked: a chdir since changes nothing)
        except FileNotFoundError:
            return f"was removed while the job ran (no file is at {self._identity[0]!r} now)"
        except OSError as exc:
            return f"cannot be found while the job runs ({exc.strerror}: {self._identity[0]!r})"
        if (st.st_dev, st.st_ino) != self._identity[1:]:
            return (f"was replaced while the job ran (the file at {self._identity[0]!r} now is another one: device "
                    f"{st.st_dev}, inode {st.st_ino}; the journal's were {self._identity[1]}, {self._identity[2]})")
        return None

    def rescue(self) -> Path:
        """Copy what this connection holds (the job, as written to the file it opened, wherever that
        file went: :meth:`file_problem`) to a new file beside the journal's path, ``NAME.rescued.db``
        (``NAME.rescued-2.db``... where that exists), with SQLite's backup; returns its path. The copy
        is a journal whose lock nobody holds: ``tune-report`` reads it, ``Tuner.resume`` continues its
        job."""
        stem, suffix = self.path.stem, self.path.suffix or ".db"
        n, target = 1, self.path.with_name(f"{stem}.rescued{suffix}")
        while target.exists():
            n += 1
            target = self.path.with_name(f"{stem}.rescued-{n}{suffix}")
        out = sqlite3.connect(target, isolation_level=None)
        try:
            self._db.backup(out)
            out.execute("DELETE FROM lock")  # (no tuner holds the copy)
            out.execute("DELETE FROM lock_file")
        finally:
            out.close()
        return target

    def holder(self) -> dict[str, Any] | None:
        """The tuner that holds the job lock: ``{"pid", "host", "alive"}`` (``alive``: the process runs,
        on this host; elsewhere, a heartbeat fresher than the stale limit), or None when none does
        (the job ended, or was interrupted by a signal it handled). A journal copied while its job
        ran carries the original's lock row, which locks the original only: then ``alive`` is False
        and ``"copy_of"`` names the original's path (trial 28b: ``tune-report`` on the copy said that
        a tuner ran it)."""
        try:
            row = self._lock_row()
        except sqlite3.Error:  # (a journal written before the lock table existed)
            return None
        if row is None:
            return None
        pid, host, start, beat, path, dev, ino = row
        if _row_locks_other_file(_file_identity(self.path), socket.gethostname(), host, dev, ino):
            return {"pid": pid, "host": host, "alive": False, "copy_of": path}
        alive = _alive(pid, start) if host == socket.gethostname() else time.time() - beat < STALE_AFTER_S
        return {"pid": pid, "host": host, "alive": alive}

    def heartbeat(self, wall_seconds: float | None = None) -> None:
        """Refresh the lock's heartbeat (this tuner holds the journal), and write ``wall_seconds`` (the
        job's time so far) to the meta in the same transaction: a session killed outright (SIGKILL, a
        lost machine) has then counted its time up to its last heartbeat (trial 28b: ``wall_seconds``
        was written only when a trial ended and when a session ended, so a killed session's time after
        its last trial end was lost, and a preempted job with long epochs never used up
        ``max_wall_time``). ``None``: the meta is left as it is. Nothing while the lock is not held."""
        if self._locked:
            with self._tx():
                self._db.execute("UPDATE lock SET heartbeat=? WHERE id=1 AND pid=?", (time.time(), os.getpid()))
                if wall_seconds is not None:
                    self._db.execute("INSERT OR REPLACE INTO meta VALUES ('wall_seconds', ?)",
                                     (json.dumps(wall_seconds),))

    def release_lock(self) -> None:
        if self._locked:
            with self._tx():
                if self._db.execute("DELETE FROM lock WHERE id=1 AND pid=?", (os.getpid(),)).rowcount:
                    self._db.execute("DELETE FROM lock_file WHERE id=1 AND pid=?", (os.getpid(),))
            self._locked = False

    # ---- trials --------------------------------------------------------------------------------
    def start_trial(self, number: int, params: dict[str, Any], bracket: int, started: float | None) -> None:
        """Insert trial ``number`` as running, or restart a ``pending`` one (same number).
        ``started=None``: submitted to a worker it may wait for (a Dask thread), so it stays (or is
        inserted) ``pending`` until :meth:`begin_trial` says it began (trial 25b: a trial queued
        behind a busy thread showed ``running`` with a start time, and a stopped job's rerun of it
        counted an attempt that never ran)."""
        status = "pending" if started is None else "running"
        with self._tx():
            row = self._db.execute("SELECT status FROM trials WHERE number=?", (number,)).fetchone()
            if row is None:
                self._db.execute("INSERT INTO trials (number, params, bracket, status, started) "
                                 "VALUES (?, ?, ?, ?, ?)", (number, json.dumps(params), bracket, status, started))
            elif row[0] == "pending":
                self._db.execute("UPDATE trials SET status=?, started=?, resource=0, rung=0 "
                                 "WHERE number=?", (status, started, number))
            else:
                raise JournalError(f"trial {number} already exists with status {row[0]!r}")

    def begin_trial(self, number: int, started: float) -> None:
        """A trial submitted with ``started=None`` (:meth:`start_trial`) began to run: ``running``
        from ``started`` on. Nothing for a trial that is not ``pending`` (it ended first)."""
        with self._tx():
            self._db.execute("UPDATE trials SET status='running', started=? WHERE number=? AND status='pending'",
                             (started, number))

    def add_report(self, number: int, step: int, value: float, stop: bool, reason: str,
                   rung_records: Iterable[tuple[int, int, float]], rung: int) -> bool:
        """One report, the rung values it recorded (``(bracket, rung, value)``) and the progress.
        A report whose step is not past the trial's last one (a stale execution of the trial's code
        that reports its steps again) is logged and dropped, and False returned: the journal keeps
        the reports it has (trial 20c: a Dask rerun's step 1 crashed the tuner with
        ``sqlite3.IntegrityError``)."""
        with self._tx():
            last = self._db.execute("SELECT MAX(step) FROM reports WHERE trial=?", (number,)).fetchone()[0]
            if last is not None and step <= last:
                logger.warning("tripwire.tune: journal: dropped a report of trial %d at step=%d (value %r): the trial "
                               "has a report at step=%d already", number, step, value, last)
                return False
            self._db.execute("INSERT INTO reports VALUES (?, ?, ?, ?, ?, ?)",
                             (number, step, _nan(value), time.time(), int(stop), reason))
            self._db.executemany("INSERT OR REPLACE INTO rungs VALUES (?, ?, ?, ?)",
                                 [(b, i, number, _nan(v)) for b, i, v in rung_records])
            self._db.execute("UPDATE trials SET resource=?, rung=? WHERE number=?", (step, rung, number))
        return True

    def end_trial(self, number: int, status: str, value: float | None, metrics: dict[str, Any] | None,
                  resource: int, rung: int, reason: str | None, error: str | None, ended: float,
                  wall_seconds: float | None, rule: str | None = None, drop_rungs: bool = False,
                  drop_rung_rows: Iterable[tuple[int, int]] = ()) -> None:
        """End trial ``number``; ``drop_rungs``: also delete its rung values (a trial a tripwire rule
        stopped, or a failed one: a broken run, whose values must not judge the other trials), in the same
        transaction, so that the ``rungs`` table stays the scheduler's exact state; ``drop_rung_rows``:
        delete only these ``(bracket, rung)`` rows of it (an interrupted attempt's values above the
        levels its rerun reached: :meth:`HyperbandScheduler.trim`). ``wall_seconds``: the job's time
        so far, written to the meta (``None``: left as it is)."""
        with self._tx():
            if drop_rungs:
                self._db.execute("DELETE FROM rungs WHERE trial=?", (number,))
            self._db.executemany("DELETE FROM rungs WHERE bracket=? AND rung=? AND trial=?",
                                 [(b, i, number) for b, i in drop_rung_rows])
            self._db.execute(
                "UPDATE trials SET status=?, value=?, metrics=?, resource=?, rung=?, reason=?, error=?, ended=?, "
                "rule=? WHERE number=?",
                (status, _nan(value), json.dumps(metrics) if metrics is not None else None, resource, rung,
                 reason, error, ended, rule, number))
            if wall_seconds is not None:
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('wall_seconds', ?)", (json.dumps(wall_seconds),))
            if self._locked:
                self._db.execute("UPDATE lock SET heartbeat=? WHERE id=1", (time.time(),))

    def told_to_stop(self) -> list[dict[str, Any]]:
        """The trials left ``running`` (by a dead or stopped tuner) whose stop was journaled already:
        a report with ``stop`` set, the trial was finishing its epoch when its tuner stopped (trial
        27b). One dict each: ``number``, ``step`` and ``value`` of its last report, ``reason`` and
        ``time`` of its first report with ``stop`` set, ``rung`` (the trial's journaled rung)."""
        out = []
        for number, rung in self._db.execute("SELECT number, rung FROM trials WHERE status='running' "
                                             "ORDER BY number").fetchall():
            first = self._db.execute("SELECT reason, time FROM reports WHERE trial=? AND stop=1 ORDER BY step "
                                     "LIMIT 1", (number,)).fetchone()
            if first is None:
                continue
            step, value = self._db.execute("SELECT step, value FROM reports WHERE trial=? ORDER BY step DESC "
                                           "LIMIT 1", (number,)).fetchone()
            out.append({"number": number, "step": int(step), "value": math.nan if value is None else float(value),
                        "reason": first[0], "time": float(first[1]), "rung": int(rung or 0)})
        return out

    def requeue_running(self) -> list[int]:
        """Trials left ``running`` by a dead tuner become ``pending`` (attempt + 1); their reports
        are moved to ``earlier_reports`` (with the attempt that made them: kept, as issue 8 asks, but
        out of the priors and the results, trial 22b), so they rerun from scratch under the same
        number. Their rung values stay (trial 27b: deleting them changed the rungs that judged the
        other trials, and a rerun reporting the same value as before was stopped at a rung its
        attempt had passed); a rerun's report replaces its value at a level. The resource their
        attempts used (each one's last reported step) is added to the meta ``resource_lost``. A
        trial told to stop already is not for this: end it first (:meth:`told_to_stop`)."""
        with self._tx():
            nums = [r[0] for r in self._db.execute("SELECT number FROM trials WHERE status='running' ORDER BY number")]
            # the units their attempts trained (to their last report): max_total_resource counts them
            lost = sum(int(r[0] or 0) for r in self._db.execute(
                f"SELECT MAX(step) FROM reports WHERE trial IN ({','.join('?' * len(nums))}) GROUP BY trial", nums))
            if lost:  # (in this transaction: not set_meta, which opens its own)
                total = int(self.get_meta("resource_lost", 0)) + lost
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('resource_lost', ?)", (json.dumps(total),))
            for n in nums:
                self._db.execute("INSERT OR REPLACE INTO earlier_reports SELECT r.trial, t.attempt, r.step, r.value, "
                                 "r.time, r.stop, r.reason FROM reports r JOIN trials t ON t.number = r.trial "
                                 "WHERE r.trial=?", (n,))
                self._db.execute("DELETE FROM reports WHERE trial=?", (n,))
                self._db.execute("UPDATE trials SET status='pending', attempt=attempt+1, resource=0, rung=0, "
                                 "started=NULL, ended=NULL WHERE number=?", (n,))
        return nums

    def trials(self) -> list[dict[str, Any]]:
        cols = [c if c != "rule" or self._has_rule else "NULL" for c in TRIAL_COLUMNS]
        rows = self._db.execute(f"SELECT {', '.join(cols)} FROM trials ORDER BY number").fetchall()
        out = []
        for row in rows:
            d = dict(zip(TRIAL_COLUMNS, row))
            d["params"] = json.loads(d["params"])
            d["metrics"] = json.loads(d["metrics"]) if d["metrics"] else None
            out.append(d)
        return out

    def reports(self, number: int | None = None) -> list[tuple[int, int, float, float, bool, str]]:
        """``(trial, step, value, time, stop, reason)`` rows."""
        q = "SELECT trial, step, value, time, stop, reason FROM reports"
        rows = (self._db.execute(q + " WHERE trial=? ORDER BY step", (number,)) if number is not None
                else self._db.execute(q + " ORDER BY trial, step"))
        return [(t, s, math.nan if v is None else v, tm, bool(st), r) for t, s, v, tm, st, r in rows]

    def earlier_reports(self, number: int | None = None) -> list[tuple[int, int, int, float, float, bool, str]]:
        """``(trial, attempt, step, value, time, stop, reason)`` rows: the reports of attempts that
        were interrupted (a killed tuner) and rerun by a resume. They count nowhere (the rerun
        reports afresh); a journal written before they were kept has none."""
        if not self._db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='earlier_reports'").fetchone():
            return []
        q = "SELECT trial, attempt, step, value, time, stop, reason FROM earlier_reports"
        rows = (self._db.execute(q + " WHERE trial=? ORDER BY attempt, step", (number,)) if number is not None
                else self._db.execute(q + " ORDER BY trial, attempt, step"))
        return [(t, a, s, math.nan if v is None else v, tm, bool(st), r) for t, a, s, v, tm, st, r in rows]

    def rung_records(self) -> list[tuple[int, int, int, float]]:
        return [(b, i, t, math.nan if v is None else v)
                for b, i, t, v in self._db.execute("SELECT bracket, rung, trial, value FROM rungs "
                                                   "ORDER BY bracket, rung, trial")]

    # ---- scheduler snapshot --------------------------------------------------------------------
    def save_scheduler_state(self, state: dict[str, Any]) -> None:
        """Write the scheduler's snapshot, unless the journal already holds this very state (a
        finished job resumed leaves the file as it was)."""
        if self.load_scheduler_state() == json.loads(json.dumps(state)):
            return
        with self._tx():
            self._db.execute("INSERT OR REPLACE INTO scheduler VALUES (1, ?, ?)", (json.dumps(state), time.time()))

    def load_scheduler_state(self) -> dict[str, Any] | None:
        row = self._db.execute("SELECT state FROM scheduler WHERE id=1").fetchone()
        return json.loads(row[0]) if row else None

    def _close_db(self) -> None:
        if self._reader is not None:
            self._reader.close()  # (and its private copy)
        else:
            self._db.close()

    def close(self) -> None:
        """Release the lock and close. A transaction of :meth:`begin` still open is rolled back first:
        never written half done."""
        try:
            if self._reader is None:
                with contextlib.suppress(sqlite3.ProgrammingError):  # (closed already)
                    self.rollback()
            self.release_lock()
        finally:
            self._close_db()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Tx:
    """One write: its own transaction, or a savepoint inside the one :meth:`Journal.begin` opened."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._nested = False

    def __enter__(self) -> None:
        self._nested = self._db.in_transaction
        self._db.execute("SAVEPOINT journal_write" if self._nested else "BEGIN IMMEDIATE")

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if self._nested:
            if exc_type:
                self._db.execute("ROLLBACK TO journal_write")
            self._db.execute("RELEASE journal_write")
        else:
            self._db.execute("ROLLBACK" if exc_type else "COMMIT")

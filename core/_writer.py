"""The run store's writer: one shard per rank, written by a background thread.

The training thread only enqueues (bounded: when the disk cannot keep up the training thread waits
rather than data being dropped). It wakes the writer thread once per ``_BATCH`` records or
``_LATENCY`` seconds, not at every record: each wake-up hands the interpreter lock over to the
writer thread and back, which on a busy step loop costs more wall time than the writing itself.
Findings, flushes and closes wake it at once. Errors of the writer thread are re-raised on the
next call from the training thread: never swallowed. The one exception is the disk or the run
directory failing (``OSError``: full, removed, read-only): that costs the run, not the training, so
it is logged once as an ERROR, later records are dropped, and the end marker (where it can still be
written) says so (``write_error``).
"""

from __future__ import annotations

import collections
import errno
import functools
import json
import logging
import os
import platform
import socket
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

import numpy as np

from ._errors import ConfigError, StoreClosedError, TripwireError
from ._finding import Finding
from ._format import (
    CONTROL_DIR,
    FINDINGS_DIR,
    FORMAT_VERSION,
    RUN_FILE,
    WORKERS_DIR,
    Layouts,
    StepRecord,
    StepsBlock,
    batchable,
    encode,
    encode_steps,
    end_marker_name,
    scalar_layout,
    shard_name,
    torn_tail_text,
    valid_prefix,
    worker_meta_name,
)

_PACKAGES = ("tripwire", "numpy", "torch", "lightning", "keras", "jax", "xgboost", "mxnet", "dask", "distributed", "pandas")


@functools.lru_cache(maxsize=1)
def _package_versions() -> tuple[tuple[str, str], ...]:
    """Installed versions of the packages of interest, looked up once per process (the metadata
    scan costs tens of milliseconds, paid by every session otherwise)."""
    versions = []
    for pkg in _PACKAGES + ("xgboost-cpu",):
        try:
            versions.append((pkg, metadata.version(pkg)))
        except metadata.PackageNotFoundError:
            continue
    return tuple(versions)


def environment_info(world_size: int = 1, rank: int = 0, framework: str = "python") -> dict[str, Any]:
    """Package versions (read from metadata, nothing imported), host, Python, world size."""
    versions = dict(_package_versions())
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": versions,
        "world_size": world_size,
        "rank": rank,
        "framework": framework,
        "argv": list(sys.argv),
    }


def atomic_write_json(path: Path, data: Any) -> None:
    """Write JSON to ``path`` so that a reader sees the old file or the new one, never half.

    It is written to a temporary file beside ``path`` (``.<name>.<hex>.tmp``), then renamed. Where
    that fails (a full disk, the directory removed, ``data`` that JSON cannot hold) the temporary
    file is removed and the error raised again; an ``OSError`` names ``path``, not the temporary
    file (trial 26i: a 0-byte temporary file of the end marker was left behind, and the ERROR showed
    its name; trial 32i: a ``TypeError`` from a numpy value left a half-written one)."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, allow_nan=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            tmp.unlink()
        except OSError:
            pass  # (never made, or its directory is gone)
        if not isinstance(exc, OSError) or exc.errno is None or str(tmp) not in (exc.filename, exc.filename2):
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def _truncate_partial_line(path: Path) -> int:
    """Cut a findings file's last line that is cut short (its writer killed while writing it), said
    in a WARNING: that finding is not in the run (trial 31c #6). Returns the lines it holds."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        logger.warning("tripwire: %s: its last line (%d bytes) was cut short (the training that wrote it was killed "
                       "while writing it): removed before this training writes on; that finding is not in the run",
                       path, len(data) - keep)
        with open(path, "r+b") as f:
            f.truncate(keep)
    return data.count(b"\n")


logger = logging.getLogger("tripwire")

_MARKER_RESERVE = 32 * 1024  # bytes kept for the end marker (one is well under 2 KiB)


def reserve_name(rank: int) -> str:
    """The file that keeps the end marker's space while a worker writes (hidden: no reader reads it)."""
    return f".worker-{rank:05d}.end.reserve"


def _write_fully(f: Any, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = f.write(view)
        view = view[n or 0:]


def _reserve(path: Path, out_dir: Path) -> bool:
    """Keep room for the end marker: ``path`` filled with ``_MARKER_RESERVE`` random bytes (random:
    a compressing file system stores them whole), which :meth:`RunWriter.close` overwrites with the
    marker and renames to it. A disk that fills during training then still gets its end marker
    (trial 26i: without it, a training that ended normally on a full disk read as killed). False,
    with a WARNING saying what that costs, where it cannot be made."""
    try:
        with open(path, "wb", buffering=0) as f:
            _write_fully(f, os.urandom(_MARKER_RESERVE))
    except OSError as exc:
        try:
            path.unlink()
        except OSError:
            pass
        logger.warning("tripwire: could not keep room for the end marker in %s (%s: %s): should the disk fill during "
                       "training, the end marker may not be written, and the run %s would then read as if the "
                       "training were killed (status running)", path, type(exc).__name__, exc.strerror or exc, out_dir)
        return False
    return True


def _cannot_write(out_dir: Path, exc: OSError) -> str:
    """The ``ConfigError`` message for an ``out_dir`` whose run cannot be made or written at the
    start: the path, the OS error and what to do about it."""
    what = exc.strerror or str(exc)
    where = f": {exc.filename}" if exc.filename else ""
    todo = {
        errno.EROFS: ": its file system is mounted read-only; accepted: a directory it can write (remount the file "
                     "system read-write, or give an out_dir on a writable one)",
        errno.ENOSPC: ": the disk is full; accepted: a directory it can write (free space on that disk, or give an "
                      "out_dir on another)",
        getattr(errno, "EDQUOT", -1): ": the disk quota is used up; accepted: a directory it can write (free space "
                                      "within the quota, or give an out_dir elsewhere)",
        errno.EACCES: "; accepted: a directory it can write (check the permissions and owner of the directory, or "
                      "give another out_dir)",
        errno.EPERM: "; accepted: a directory it can write (check the permissions and owner of the directory, or "
                     "give another out_dir)",
        errno.ENOTDIR: ": a part of the path is a file; accepted: a directory it can write (give another out_dir)",
        errno.EEXIST: ": a part of the path is a file; accepted: a directory it can write (give another out_dir)",
    }.get(exc.errno or 0, "; accepted: a directory it can write (give another out_dir)")
    return f"out_dir: got {str(out_dir)!r}, which this process cannot create or write ({what}{where}){todo}"

_STOP = object()
_BATCH = 32  # records queued before the writer thread is woken
_LATENCY = 0.05  # seconds: queued records wait at most about this long


def _step_records(block: StepsBlock, rank: int) -> list[StepRecord]:
    """The step records a :class:`StepsBlock` joins (a run of format version 1 holds no ``steps``
    record)."""
    out = []
    for step, gstep, wall, row in zip(block.steps, block.global_steps, block.wall_times, block.values):
        scalars, at = [], 0
        for tensor, reds in block.layout:
            scalars.append((tensor, reds, row[at:at + len(reds)]))
            at += len(reds)
        out.append(StepRecord(block.mode, step, gstep, wall, rank, scalars))
    return out


def _coalesce(items: list[Any]) -> list[Any]:
    """Consecutive scalar-only step records and ``steps`` blocks of one mode and scalar layout become
    one item (written as one ``steps`` record: one header, one CRC and one write instead of one per
    step, the writer thread's Python work, which competes with training for the GIL); order is kept.
    The kept every-step losses of save steps that wait together join too (trial 37d: at
    ``save_interval: 2`` a record of two steps each, about 100 bytes a step)."""
    out: list[Any] = []
    key: Any = None
    for item in items:
        k: Any = None
        if isinstance(item, StepRecord) and batchable(item):
            k = (item.mode, scalar_layout(item))
        elif isinstance(item, StepsBlock):
            k = (item.mode, item.layout)
        if k is not None and k == key:
            last = out[-1]
            if isinstance(last, list):
                last.append(item)
            else:
                out[-1] = [last, item]
            continue
        key = k
        out.append(item)
    return [_joined(item) if isinstance(item, list) and any(isinstance(i, StepsBlock) for i in item) else item
            for item in out]


def _joined(group: list[Any]) -> StepsBlock:
    """One :class:`StepsBlock` of consecutive step records and blocks of one mode and layout."""
    blocks = [i if isinstance(i, StepsBlock) else StepsBlock.of([i]) for i in group]
    first = blocks[0]
    return StepsBlock(first.mode, [s for b in blocks for s in b.steps], [g for b in blocks for g in b.global_steps],
                      [w for b in blocks for w in b.wall_times], first.layout,
                      np.concatenate([np.asarray(b.values, dtype=np.float64).reshape(len(b.steps), -1) for b in blocks]))


def _open_locked(shard: Path, meta: Path, rank: int) -> Any:
    """The shard, opened to append, with an exclusive lock (``flock``, released when the file is
    closed, also by a process that dies): two trainings writing one worker's shard at once would
    interleave their records, and the second would cut the first's record being written."""
    f = open(shard, "ab", buffering=0)
    if fcntl is None:  # pragma: no cover - Windows: no lock
        return f
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        who = ""
        for _ in range(10):  # (a training that took the lock a moment ago writes its worker file next: trial 42f)
            try:
                json.loads(meta.read_text(encoding="utf-8"))
                break
            except (OSError, ValueError):
                time.sleep(0.1)
        try:
            env = json.loads(meta.read_text(encoding="utf-8")).get("environment", {})
            who = f" (pid {env.get('pid')} on {env.get('host')})" if env.get("pid") else ""
            if env.get("pid") == os.getpid() and env.get("host") == socket.gethostname():
                who = (" (another session of this process that is still open: a second callback with the same "
                       "out_dir in this training, or one left open by a training that raised: end that one first, "
                       "with its callback's close() or Session.close())")
        except (OSError, ValueError, AttributeError):
            pass
        raise ConfigError(
            f"out_dir: got {str(shard.parent.parent)!r}, whose worker {rank} is being written by another training"
            f"{who}; accepted: a directory no other training writes to (give each training its own out_dir)"
        ) from None
    return f


class RunWriter:
    """Writes one rank's shard of a run under ``out_dir`` (see docs/format.md)."""

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        *,
        rank: int = 0,
        world_size: int = 1,
        config: dict[str, Any] | None = None,
        framework: str = "python",
        provides: Sequence[str] | None = None,
        queue_size: int = 64,
        fsync: bool = False,
        source: str = "in-process",
    ) -> None:
        if rank < 0 or world_size < 1 or rank >= world_size:
            raise ValueError(f"rank: got {rank!r} with world_size {world_size!r}; accepted: 0 <= rank < world_size")
        self.out_dir = Path(out_dir)
        self.rank = rank
        self.world_size = world_size
        self._fsync = fsync
        self._source = source
        self._file: Any = None
        self._findings_file: Any = None
        self._finding_lines = 0  # the lines of the findings file (see _start)
        try:
            self._start(world_size, rank, config, framework, provides, source)
        except TripwireError:  # (another training writes this worker; a damaged shard)
            self._close_files()
            raise
        except OSError as exc:  # (a bare OSError from pathlib: trial 18f, read-only: trial 26i)
            self._close_files()
            raise ConfigError(_cannot_write(self.out_dir, exc)) from exc
        self._pending: collections.deque[Any] = collections.deque()
        self._max_pending = max(1, int(queue_size))
        self._wake = threading.Event()
        self._progress = threading.Condition()
        self._queued = 0  # records and other items appended (training thread)
        self._handled = 0  # records and other items taken care of (writer thread, under _progress)
        self._batch: list[bytes | memoryview] = []
        self._batch_size = 0
        self._batch_ends: list[tuple[int, int]] = []  # per batched record: (its end in the batch, step records)
        self._error: BaseException | None = None  # a bug (a record that cannot be encoded): raised
        # the disk or the run directory failing (full, removed): said once, then nothing more is
        # written and training goes on (trial 18f: a full disk ended a training at step 41 of 192,
        # and a removed run directory lost a finished XGBoost training's booster at close)
        self.io_error: OSError | None = None
        self._closed = False
        self.records_written = 0
        self.bytes_written = 0
        self._thread = threading.Thread(target=self._run, name=f"tripwire-writer-{rank}", daemon=True)
        self._thread.start()

    def _start(self, world_size: int, rank: int, config: dict[str, Any] | None, framework: str,
               provides: Sequence[str] | None, source: str) -> None:
        """Make the run's directories and files for this worker (its ``OSError`` is turned into a
        ``ConfigError`` naming ``out_dir`` by the caller), and reserve the end marker's space."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        run_file = self.out_dir / RUN_FILE
        env = environment_info(world_size, rank, framework)
        # the run's format: a run written by an earlier tripwire, appended to (a resume after an upgrade),
        # keeps its version's records, which its run.json promises (trial 37d: version 3 records in a run
        # whose run.json said 2 read as damaged to a tripwire of version 2)
        self._format = FORMAT_VERSION
        if run_file.exists():
            try:
                info = json.loads(run_file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                info = exc
            if not isinstance(info, dict) or info.get("format") != "tripwire-run":
                # (trial 41j: a session wrote a whole training into a directory whose run.json ({}, another
                # format's) every reader refuses, without a word)
                what = (f"cannot be read ({type(info).__name__}: {info})" if isinstance(info, Exception) else
                        f"holds no tripwire run's (its 'format' is {info.get('format')!r})" if isinstance(info, dict)
                        else f"holds {type(info).__name__}, no tripwire run's")
                raise ConfigError(f"out_dir: {str(self.out_dir)!r} has a {RUN_FILE} that {what}, so no reader could "
                                  f"read what this training writes there; accepted: a new directory, or one a tripwire "
                                  f"training wrote (move the other files away, or give another out_dir)")
            version = info.get("format_version")
            if type(version) is not int or version < 1:
                # (trial 42h: a run.json with no format_version, or 0, "x", 2.0, every reader refuses, took a
                # whole training)
                raise ConfigError(f"out_dir: {str(self.out_dir)!r} has a {RUN_FILE} that holds 'format_version' "
                                  f"{version!r} (accepted there: an integer >= 1), so no reader could read what this "
                                  f"training writes there; accepted: a new directory, or one a tripwire training wrote "
                                  f"(move the other files away, or give another out_dir)")
            if version < FORMAT_VERSION:
                self._format = version
        # (after the run.json check: a refused directory is left as it was, with no empty folders of ours)
        for sub in (WORKERS_DIR, FINDINGS_DIR, CONTROL_DIR):
            (self.out_dir / sub).mkdir(exist_ok=True)
        if not run_file.exists():
            atomic_write_json(
                run_file,
                {
                    "format": "tripwire-run",
                    "format_version": FORMAT_VERSION,
                    "run_id": uuid.uuid4().hex,
                    "created": time.time(),
                    "world_size": world_size,
                    "framework": framework,
                    # the kinds the framework's integration captures (None: anything): what rules
                    # out of process (tripwire watch) can be fed, as the session judged in process
                    "provides": None if provides is None else sorted(set(provides)),
                    "config": config or {},
                    "environment": env,
                },
            )
        workers = self.out_dir / WORKERS_DIR
        self._shard_path = workers / shard_name(rank)
        self._meta_path = workers / worker_meta_name(rank)
        self._marker_path = workers / end_marker_name(rank)
        self._reserve_path = workers / reserve_name(rank)
        self._file = _open_locked(self._shard_path, self._meta_path, rank)  # before anything of this rank changes
        # the scalar layouts this writer named in the shard, by their number (each written out in full
        # once, at its first record; numbered anew where a writer appends to a shard: _format's docstring)
        self._layouts: Layouts | None = {} if self._format >= 3 else None
        self._meta: dict[str, Any] = {"rank": rank, "started": time.time(), "environment": env}
        # the shard's identity on its file system: a copy of the run (another file) is told from it
        # once the writer is gone (Run.unknown_workers, why "copy"; docs/format.md)
        ident = os.fstat(self._file.fileno())
        self._meta["shard"] = {"device": int(ident.st_dev), "inode": int(ident.st_ino)}
        atomic_write_json(self._meta_path, self._meta)
        if self._marker_path.exists():
            self._marker_path.unlink()  # the run continues (resumed fit): it is not complete any more
        self.appending = False
        """Whether this rank's shard already held records (an earlier training's, or the one this
        writer continues): what is written goes after them."""
        self._records_before = 0  # step records of earlier writing sessions (the end marker counts them too)
        if self._shard_path.exists():
            keep, self._records_before = valid_prefix(str(self._shard_path))
            self.appending = keep > 0
            size = self._shard_path.stat().st_size
            if keep != size:
                # trial 31c #6: a resume dropped the torn last record (an eval step's) without a word
                logger.warning(
                    "tripwire: %s: its last %d bytes, %s (the training that wrote it was killed while writing it, or "
                    "a crash lost its end), are removed before this training writes on: that record is not in the "
                    "run, the %d records before it are", self._shard_path, size - keep,
                    torn_tail_text(str(self._shard_path), keep, size), self._records_before)
                with open(self._shard_path, "r+b") as f:
                    f.truncate(keep)
        self._findings_path = self.out_dir / FINDINGS_DIR / f"{source}-{rank:05d}.jsonl"
        # the lines its findings file holds, every training's of this worker (the end marker's
        # findings_file: a reader tells a file cut short after the run ended from it; trial 41d)
        self._finding_lines = _truncate_partial_line(self._findings_path)
        self._findings_file = open(self._findings_path, "a", encoding="utf-8")
        self._reserved = _reserve(self._reserve_path, self.out_dir)

    def _close_files(self) -> None:
        """Close what :meth:`_start` opened (the shard's lock goes with it) after it failed."""
        for f in (self._file, self._findings_file):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass

    # ------------------------------------------------------------------------------ thread side
    def _run(self) -> None:
        while True:
            self._wake.wait(_LATENCY)
            self._wake.clear()
            items = []
            while self._pending:
                items.append(self._pending.popleft())
            stop = False
            for item in _coalesce(items) + [None]:  # None: write what is batched
                if item is _STOP:
                    stop = True
                elif self._error is None and self.io_error is None:
                    try:
                        self._handle(item) if item is not None else self._flush_records()
                    except OSError as exc:
                        self._lost(exc)
                    except BaseException as exc:  # kept and re-raised on the training thread
                        self._error = exc
            with self._progress:  # (a StepsBlock: write_steps' records, counted one by one)
                self._handled += sum(len(i.steps) if type(i) is StepsBlock else 1 for i in items)
                self._progress.notify_all()
            if stop:
                return

    def _handle(self, item: Any) -> None:
        if self._format < 2 and isinstance(item, (list, StepsBlock)):  # (a version 1 run: step records only)
            for record in (item if isinstance(item, list) else _step_records(item, self.rank)):
                self._handle(record)
            return
        if isinstance(item, (StepRecord, list, StepsBlock)):
            if isinstance(item, StepRecord):
                buffers, records = encode(item, self._layouts), 1
            else:  # (a steps record: write_steps' block, or the records _coalesce joined)
                block = item if isinstance(item, StepsBlock) else StepsBlock.of(item)
                buffers, records = encode_steps(block, self._layouts), len(block.steps)
            size = sum(len(b) for b in buffers)
            if size < (1 << 20):  # small records of a wake-up go out in one write
                self._batch.extend(buffers)
                self._batch_size += size
                self._batch_ends.append((self._batch_size, records))
                if self._batch_size >= (1 << 20):
                    self._flush_records()
            else:
                self._flush_records()
                self._check_shard()
                for b in buffers:  # (not joined: a copy of a large record)
                    self._write_all(b)
                self.records_written += records  # (a write that failed partway reached no whole record)
            if self._fsync:
                self._flush_records()
                os.fsync(self._file.fileno())
            return
        self._flush_records()  # what comes next is ordered after the records before it
        if isinstance(item, Finding):
            self._findings_file.write(json.dumps(item.to_dict(), allow_nan=True) + "\n")
            self._findings_file.flush()
            self._finding_lines += 1
        elif callable(item):
            item()

    def _shard_gone(self) -> bool:
        """Whether this writer's shard was removed (with its run directory, say): its open file has
        no name left, so what is written to it goes nowhere and nothing of it can be read."""
        try:
            return self._file is not None and os.fstat(self._file.fileno()).st_nlink == 0
        except (OSError, ValueError):  # (closed)
            return False

    def _check_shard(self) -> None:
        if self._shard_gone():
            raise FileNotFoundError(errno.ENOENT, "the run directory was removed during training (its shard is gone)",
                                    str(self._shard_path))

    def _lost(self, exc: OSError, batch: bool = True) -> None:
        """The shard cannot be written any more: said once (an ERROR on the ``tripwire`` logger),
        what was written stays readable (unless the shard itself is gone: the message says which,
        trial 26i), and later records are dropped; the session's rules go on judging in memory, so a
        stop they ask for still stops training. ``batch``: drop the writer thread's batch too (False
        from the training thread, which does not own it)."""
        self.io_error = exc
        if batch:
            self._batch, self._batch_size, self._batch_ends = [], 0, []
        written = self._records_before + self.records_written
        if self._shard_gone():
            what = (f"the {written} step records written before are gone with the shard (nothing of this training "
                    f"is left to read there)")
        else:
            what = f"the {written} step records written before stay readable"
        logger.error("tripwire: could not write the run %s (%s: %s): nothing more of this training is written "
                     "there; training goes on, the rules still judge it, and %s", self.out_dir, type(exc).__name__,
                     exc, what)

    def _flush_records(self) -> None:
        """Write the records batched so far (whole records only: a reader never sees half of one
        that is not at the end of the file). Where the write fails partway, the records counted
        written (``records_written``, the end marker's ``records``) are the whole ones that reached
        the file before it failed (trial 26i: a batch written partway counted none, 9 fewer than the
        shard held)."""
        if not self._batch:
            return
        self._check_shard()  # (the shard was deleted, with its run directory: writes would go nowhere)
        data, ends = b"".join(self._batch), self._batch_ends
        self._batch, self._batch_size, self._batch_ends = [], 0, []
        before = self.bytes_written
        try:
            self._write_all(data)
        except OSError:
            reached = self.bytes_written - before
            self.records_written += sum(n for end, n in ends if end <= reached)
            raise
        self.records_written += sum(n for _, n in ends)

    def _write_all(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = self._file.write(view)
            if n is None:  # pragma: no cover - only for non-blocking files
                continue
            self.bytes_written += n
            view = view[n:]

    # ---------------------------------------------------------------------------- caller side
    def _check(self) -> None:
        if self._error is not None:
            err = self._error
            raise RuntimeError(f"tripwire's run writer failed writing {self._shard_path}: {err!r}") from err
        if self._closed:
            raise StoreClosedError(f"the run writer for {self._shard_path} is closed")

    @property
    def started(self) -> float:
        """When this writer opened its shard (wall time; its worker meta file's ``started``)."""
        return float(self._meta["started"])

    def set_meta(self, **values: Any) -> None:
        """Add facts about this worker's training to its meta file (``workers/worker-NNNNN.json``),
        e.g. ``planned_steps``: readers of the run (``tripwire watch``) see what the session knew."""
        self._meta.update(values)
        if self.io_error is not None:
            return  # (the run cannot be written: said when it failed)
        try:
            atomic_write_json(self._meta_path, self._meta)
        except OSError as exc:
            self._lost(exc, batch=False)

    def write(self, record: StepRecord) -> None:
        """Queue one step record (blocks while ``queue_size`` records wait to be written)."""
        self._put(record, urgent=False)

    def write_steps(self, records: list[StepRecord], values: np.ndarray | None = None) -> None:
        """Queue consecutive :func:`~tripwire._format.batchable` records of one mode and one scalar
        layout (the kept every-step losses of the steps since the last save step) as one item, one
        ``steps`` record: what the writer thread would join them into (``_coalesce``), without a
        queue entry each. Each counts as a record against ``queue_size``. ``values``: their values
        as a matrix, a row each (the caller's, made for the history: not gathered again)."""
        if len(records) == 1:
            self._put(records[0], urgent=False)
        elif records:
            self._put(StepsBlock.of(records, values), urgent=False, count=len(records))

    def write_finding(self, finding: Finding) -> None:
        self._put(finding, urgent=True)

    def _put(self, item: Any, urgent: bool, count: int = 1) -> None:
        self._check()
        self._pending.append(item)
        self._queued += count
        waiting = self._queued - self._handled
        if urgent or waiting >= _BATCH:  # otherwise the writer thread wakes by itself every _LATENCY
            self._wake.set()
        if waiting > self._max_pending:  # the disk does not keep up: wait for room
            self._wait_until(self._queued - self._max_pending)

    def _wait_until(self, handled: int) -> None:
        self._wake.set()
        with self._progress:
            while self._handled < handled and self._error is None and self._thread.is_alive():
                self._progress.wait(_LATENCY)

    def flush(self) -> None:
        """Wait until everything queued so far is written."""
        self._check()
        self._wait_until(self._queued)
        self._check()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, status: str = "complete", summary: dict[str, Any] | None = None) -> None:
        """Drain the queue, close the shard and write the end-of-run marker (``status``:
        ``complete``, ``stopped`` (a rule stopped training) or ``failed``). The marker is written
        into the space reserved for it when the writer started, so a disk that filled during
        training still gets it, with ``write_error``. Where even that fails, an ERROR says so: the
        run then reads as if the training were killed (no marker). A run whose shard was removed
        (its directory removed during training) gets no marker."""
        if self._closed:
            return
        self._pending.append(_STOP)
        self._wake.set()
        self._thread.join()
        self._closed = True
        try:
            # the marker first, then the shard's lock goes: a reader that finds the shard unlocked and
            # no marker knows that the training ended without closing the run (Run.abandoned_workers)
            if self._error is None:
                self._end(status, summary)
        finally:
            self._drop_reserve()
            for f in (self._file, self._findings_file):
                try:
                    f.close()
                except OSError:  # (its last flush on a full disk: said above)
                    pass
        if self._error is not None:
            err = self._error
            raise RuntimeError(f"tripwire's run writer failed writing {self._shard_path}: {err!r}") from err

    def _end(self, status: str, summary: dict[str, Any] | None) -> None:
        """Write the end marker (never raises: a failure is said in an ERROR, and the training ends as
        it would have)."""
        if self._shard_gone():  # (the run directory removed: a marker would go nowhere, or into a new run there)
            if self.io_error is None:
                self._lost(FileNotFoundError(errno.ENOENT, "the run directory was removed during training (its "
                                             "shard is gone)", str(self._shard_path)))
            return
        written = self._records_before + self.records_written
        lost = {} if self.io_error is None else {"write_error": f"{type(self.io_error).__name__}: {self.io_error}"}
        try:
            self._write_marker({"rank": self.rank, "status": status, "ended": time.time(), "records": written,
                                **(summary or {}), **lost,
                                "findings_file": {"name": self._findings_path.name, "lines": self._finding_lines}})
        except OSError as exc:  # (the directory removed, the disk failing: said, never the training's end)
            either = "" if self.io_error is None else " either"
            self.io_error = self.io_error or exc
            logger.error("tripwire: could not write the end marker %s%s (%s: %s): the run reads as if this training "
                         "were killed (status running; worker %d ended without closing it); the %d step records it "
                         "holds stay readable", self._marker_path, either, type(exc).__name__,
                         exc.strerror or exc, self.rank, written)

    def _write_marker(self, marker: dict[str, Any]) -> None:
        """Write the end marker so that a reader sees all of it or none: into the file that holds
        the space reserved for it (overwritten in place: no block to find on a full disk), renamed to
        the marker's name. Where that cannot be done (no reserve was made, it was removed, the
        marker is larger than it, a copy-on-write file system), the reserve is freed and the marker
        written as a new file (:func:`atomic_write_json`)."""
        if self._reserved:
            self._reserved = False
            text = json.dumps(marker, indent=1, allow_nan=True).encode("utf-8")
            try:
                with open(self._reserve_path, "r+b", buffering=0) as f:
                    _write_fully(f, text)
                    f.truncate(len(text))
                    os.fsync(f.fileno())
                os.replace(self._reserve_path, self._marker_path)
                return
            except OSError:
                self._drop_reserve()  # (its space freed for the new file below, whose failure is said)
        atomic_write_json(self._marker_path, marker)

    def _drop_reserve(self) -> None:
        """Remove the end marker's reserve file, where it is still there."""
        self._reserved = False
        try:
            self._reserve_path.unlink()
        except OSError:  # (consumed by the marker, never made, or its directory is gone)
            pass

    def abandon(self) -> None:
        """Stop the thread without writing an end marker (the run stays incomplete)."""
        if self._closed:
            return
        self._pending.append(_STOP)
        self._wake.set()
        self._thread.join()
        self._closed = True
        self._drop_reserve()
        self._file.close()
        self._findings_file.close()

"""Trial 26i (the run store on long and fragile jobs): the writer on a full disk, a read-only
out_dir and a run directory removed during training."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tripwire
import tripwire._writer as writer_module
from tripwire import ConfigError, RunWriter, StepRecord, open_run
from tripwire._writer import atomic_write_json, reserve_name


def _record(step: int, size: int = 16) -> StepRecord:
    """A step record with an array: never coalesced with others (one record a step in the shard)."""
    return StepRecord("train", step, step, time.time(), 0, [("loss", ("raw",), np.array([float(step)]))],
                      [("w", "raw", np.full(size, float(step), dtype=np.float32))],
                      declare={"loss": ["losses"]} if step == 0 else {})


def _leftovers(out: Path) -> list[str]:
    """Files in workers/ that no reader reads: temporary files, the marker's reserve."""
    return sorted(p.name for p in (out / "workers").iterdir() if p.name.startswith("."))


def _no_space(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


# --------------------------------------------- 1. a disk that fills and stays full: the end marker is written


def test_a_disk_that_stays_full_still_gets_the_end_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    # trial 26i: the end marker could not be written on the full disk, so a training that ended
    # normally read as "running ... killed, out of memory, a crash", with no warning, and a 0-byte
    # temporary file of the marker was left behind
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1)
    for i in range(3):
        s.step("train", i, {"loss": (1.0, "losses")})
    s.flush()
    assert _leftovers(out) == [reserve_name(0)]  # (the marker's room, kept while it writes)

    def new_file_on_full_disk(path: Path, data: object) -> None:  # a new file gets no block
        (path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp").touch()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RunWriter, "_write_all", lambda self, data: _no_space())
    monkeypatch.setattr(writer_module, "atomic_write_json", new_file_on_full_disk)
    with caplog.at_level("WARNING", logger="tripwire"):
        for i in range(3, 8):
            s.step("train", i, {"loss": (1.0, "losses")})
        s.close()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(said) == 1 and "could not write the run" in said[0]  # (no second ERROR: the marker was written)
    run = open_run(out)
    assert run.status == "complete" and run.abandoned_workers() == [] and run.steps() == [0, 1, 2]
    marker = run.end_markers[0]
    assert marker["write_error"] == "OSError: [Errno 28] No space left on device" and marker["records"] == 3
    assert marker["status"] == "complete" and marker["findings"] == 0
    assert run.warnings == ["worker 0 could not write all of its records (OSError: [Errno 28] No space left on "
                            "device): this run holds the 3 step records it wrote before; its training went on"]
    assert _leftovers(out) == []  # (the reserve became the marker)


def test_the_end_marker_is_written_in_the_reserved_space_and_the_reserve_goes(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "run")
    reserve = tmp_path / "run" / "workers" / reserve_name(0)
    assert reserve.stat().st_size == writer_module._MARKER_RESERVE
    for step in range(4):
        writer.write(_record(step))
    writer.close("stopped", {"stop_reason": "x" * 100_000})  # (larger than the reserve: the file grows)
    run = open_run(tmp_path / "run")
    assert run.status == "stopped" and run.end_markers[0]["records"] == 4
    assert run.end_markers[0]["stop_reason"] == "x" * 100_000 and _leftovers(tmp_path / "run") == []
    again = RunWriter(tmp_path / "run")  # (a resumed writer keeps its own room)
    assert reserve.exists()
    again.abandon()
    assert _leftovers(tmp_path / "run") == [] and open_run(tmp_path / "run").abandoned_workers() == [0]


def test_no_room_for_the_end_marker_at_the_start_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(writer_module, "_write_fully", lambda f, data: _no_space())
    with caplog.at_level("WARNING", logger="tripwire"):
        writer = RunWriter(tmp_path / "run")
    [said] = [r.getMessage() for r in caplog.records]
    assert said.startswith("tripwire: could not keep room for the end marker in ")
    assert said.endswith("(OSError: No space left on device): should the disk fill during training, the end marker "
                         f"may not be written, and the run {tmp_path / 'run'} would then read as if the training "
                         "were killed (status running)")
    writer.write(_record(0))
    writer.close()  # (the marker written as a new file: there is room)
    assert open_run(tmp_path / "run").status == "complete" and _leftovers(tmp_path / "run") == []


def test_an_end_marker_that_cannot_be_written_at_all_says_how_the_run_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    writer = RunWriter(out)
    writer.write(_record(0))
    writer.flush()
    (out / "workers" / reserve_name(0)).unlink()  # (removed by someone: the marker gets a new file)
    monkeypatch.setattr(os, "fsync", _no_space)
    with caplog.at_level("ERROR", logger="tripwire"):
        writer.close()
    [said] = [r.getMessage() for r in caplog.records]
    marker = out / "workers" / "worker-00000.end.json"
    assert said == (f"tripwire: could not write the end marker {marker} (OSError: No space left on device): the run "
                    "reads as if this training were killed (status running; worker 0 ended without closing it); the "
                    "1 step records it holds stay readable")
    monkeypatch.undo()
    run = open_run(out)
    assert run.status == "running" and run.abandoned_workers() == [0] and run.steps() == [0]
    assert _leftovers(out) == []  # (no temporary file left behind)


def test_atomic_write_json_removes_its_temporary_file_and_names_the_file_it_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "x.json"
    monkeypatch.setattr(os, "fsync", _no_space)
    with pytest.raises(OSError, match=r"No space left on device"):
        atomic_write_json(target, {"a": 1})
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError, match=r"No such file or directory: '.*gone/x\.json'$") as info:
        atomic_write_json(tmp_path / "gone" / "x.json", {"a": 1})
    assert ".tmp" not in str(info.value)


def _mount_tmpfs(where: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root only; skipped elsewhere)."""
    where = tmp_path / "tiny"
    if not _mount_tmpfs(where, "1m"):
        pytest.skip("needs root and tmpfs mounts")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_a_real_full_disk_gets_its_end_marker_and_counts_the_records_it_holds(
        tiny_disk: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 26i (repro 02, a 3 MiB tmpfs there): the disk fills and stays full to the end
    out = tiny_disk / "run"
    writer = RunWriter(out)
    with caplog.at_level("ERROR", logger="tripwire"):
        for step in range(60):  # ~40 KiB a record: the disk fills after about 24
            writer.write(_record(step, 10_000))
        writer.close()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "No space left on device" in said[0] and "stay readable" in said[0]
    run = open_run(out)
    assert run.status == "complete" and run.abandoned_workers() == []
    marker = run.end_markers[0]
    assert marker["write_error"] == "OSError: [Errno 28] No space left on device"
    assert 10 < marker["records"] == len(run.steps()) < 60 and run.damaged == {}
    assert f"the {marker['records']} step records written before stay readable" in said[0]
    assert _leftovers(out) == []


# ------------------------------------- 2. records counted after a write error: the whole ones that reached the file


def test_a_batch_written_partway_counts_the_whole_records_that_reached_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # trial 26i: the end marker said 771 records, the shard held 800 (a batch written partway counted 0)
    monkeypatch.setattr(writer_module, "_LATENCY", 30.0)  # the writer thread wakes at flush() and close() only
    monkeypatch.setattr(writer_module, "_BATCH", 10_000)
    out = tmp_path / "run"
    writer = RunWriter(out)
    for step in range(3):
        writer.write(_record(step))
    writer.flush()
    one = len(b"".join(bytes(b) for b in tripwire._format.encode(_record(3))))
    real = RunWriter._write_all

    def fills(self: RunWriter, data: bytes | memoryview) -> None:  # room for 2.5 more records
        real(self, memoryview(data)[: int(one * 2.5)])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RunWriter, "_write_all", fills)
    with caplog.at_level("ERROR", logger="tripwire"):
        for step in range(3, 9):  # (one batch: the writer thread sleeps until close)
            writer.write(_record(step))
        writer.close()
    run = open_run(out)
    assert run.steps() == [0, 1, 2, 3, 4] and run.damaged == {}
    assert run.end_markers[0]["records"] == 5
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert [m.endswith("the 5 step records written before stay readable") for m in said] == [True]
    assert run.warnings == ["worker 0 could not write all of its records (OSError: [Errno 28] No space left on "
                            "device): this run holds the 5 step records it wrote before; its training went on"]


# ------------------------------------------------------------ 3. an out_dir on a read-only file system


def test_an_out_dir_on_a_read_only_file_system_is_a_config_error(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # trial 26i: a bare "OSError: [Errno 30] Read-only file system: 'ro/run'" from pathlib
    real = Path.mkdir

    def read_only(self: Path, *args: object, **kwargs: object) -> None:
        if "ro" in self.parts:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(ConfigError, match=r"^out_dir: got '.*/ro/run', which this process cannot create or write "
                                          r"\(Read-only file system: .*/ro/run\): its file system is mounted "
                                          r"read-only; accepted: a directory it can write \(remount the file system "
                                          r"read-write, or give an out_dir on a writable one\)$") as info:
        RunWriter(tmp_path / "ro" / "run")
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.EROFS


def test_a_full_disk_at_the_start_is_a_config_error_and_frees_the_shard(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    RunWriter(out).close()
    monkeypatch.setattr(writer_module, "atomic_write_json", lambda path, data: _no_space())  # (the worker meta)
    with pytest.raises(ConfigError, match=r"^out_dir: got '.*run', which this process cannot create or write \(No "
                                          r"space left on device\): the disk is full; accepted: a directory it can "
                                          r"write \(free space on that disk, or give an out_dir on another\)$"):
        tripwire.Session(out_dir=str(out))
    monkeypatch.undo()
    RunWriter(out).close()  # (the failed start let go of the shard's lock)


def test_a_real_read_only_out_dir_is_a_config_error(tmp_path: Path) -> None:
    where = tmp_path / "ro"
    if not _mount_tmpfs(where, "1m"):
        pytest.skip("needs root and tmpfs mounts")
    try:
        RunWriter(where / "existing").close()  # (a run there already: the shard's open fails, not mkdir)
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        for out in (where / "run", where / "existing"):
            with pytest.raises(ConfigError, match=rf"^out_dir: got '{out}', which this process cannot create or "
                                                  r"write \(Read-only file system: .*\): its file system is mounted "
                                                  r"read-only; accepted: .*remount"):
                tripwire.Session(out_dir=str(out))
    finally:
        subprocess.run(["umount", str(where)], check=False)


# ------------------------------------------------------------ 4. the run directory removed during training


def test_a_removed_run_directory_is_not_said_to_stay_readable(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    # trial 26i: "... and the 1971 step records written before stay readable" for a directory that is
    # gone, then a second ERROR naming the marker's temporary file
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1)
    for i in range(5):
        s.step("train", i, {"loss": (1.0, "losses")})
    s.flush()
    shutil.rmtree(out)
    with caplog.at_level("ERROR", logger="tripwire"):
        for i in range(5, 10):
            s.step("train", i, {"loss": (1.0, "losses")})
        s.close()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said  # (no end marker tried in a directory that is gone)
    assert said[0].startswith(f"tripwire: could not write the run {out} (FileNotFoundError: [Errno 2] the run "
                              "directory was removed during training (its shard is gone)")
    assert said[0].endswith("nothing more of this training is written there; training goes on, the rules still "
                            "judge it, and the 5 step records written before are gone with the shard (nothing of "
                            "this training is left to read there)")
    assert "stay readable" not in said[0] and ".tmp" not in said[0]
    assert not out.exists()  # (nothing made anew there)


def test_a_removed_run_directory_seen_first_by_the_meta_file_names_no_temporary_file(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1)
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.flush()
    shutil.rmtree(out)
    with caplog.at_level("ERROR", logger="tripwire"):
        s.set_planned_steps(100)  # (the worker meta file is written first)
        s.close()
    [said] = [r.getMessage() for r in caplog.records]
    assert ".tmp" not in said and "worker-00000.json" in said and "stay readable" not in said
    assert said.endswith("the 1 step records written before are gone with the shard (nothing of this training is "
                         "left to read there)")

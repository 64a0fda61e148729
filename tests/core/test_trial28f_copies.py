"""Trial 28f F1: a copy of a run still being written (``cp -r``, rsync, a sync from object storage
then a download: docs/format.md's "write locally and copy the directory") read as a crashed run:
``Run.abandoned_workers()`` decided from a free ``flock`` probe, which means something only for the
file its writer holds on its own machine. A worker is now "ended" (crashed) only where that is
known: its writer ran on this machine and is gone; one whose writer may still run where this
machine cannot see it is in ``Run.unknown_workers()``, said as such by inspect and watch."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire._cli import main
from tripwire._watch import Watcher

_LIVE = textwrap.dedent("""
    import sys, tripwire
    s = tripwire.Session(out_dir=sys.argv[1], save_interval=1, rules=["default"])
    for i in range(5):
        s.step("train", i, {"loss": (1.0, "losses")})
    s.flush()
    print("written", flush=True)
    sys.stdin.readline()  # (held open until the test says: a training still running)
    s.close()
    print("closed", flush=True)
""")

_KILLED = "killed, out of memory, a crash"


class _Training:
    """A training in a process of its own that holds its run open until :meth:`close` (or :meth:`kill`)."""

    def __init__(self, out: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _LIVE, str(out)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "written"

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "closed"
        self.proc.wait(timeout=60)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)


@pytest.fixture
def training(tmp_path: Path) -> Iterator[_Training]:
    t = _Training(tmp_path / "live")
    try:
        yield t
    finally:
        if t.proc.poll() is None:
            t.kill()


def _meta(run: Path) -> Path:
    return run / "workers" / "worker-00000.json"


def _edit_meta(run: Path, **environment: Any) -> None:
    data = json.loads(_meta(run).read_text(encoding="utf-8"))
    data["environment"].update(environment)
    _meta(run).write_text(json.dumps(data), encoding="utf-8")


def _sync(src: Path, dst: Path) -> None:
    """Copy ``src`` over ``dst`` file by file, each written beside and renamed into place (as rsync
    does: a reader never sees a file cut short)."""
    for path in sorted(src.rglob("*")):
        target = dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(exist_ok=True)
            continue
        tmp = target.with_name(f".{target.name}.sync")
        shutil.copy2(path, tmp)
        os.replace(tmp, target)


def _inspect_line(capsys: pytest.CaptureFixture[str], run: Path) -> str:
    assert main(["inspect", str(run)]) == 0
    return capsys.readouterr().out.splitlines()[1]


def test_a_copy_of_a_run_still_written_is_not_read_as_a_crash(tmp_path: Path, training: _Training,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    live, copy = tmp_path / "live", tmp_path / "copy"
    shutil.copytree(live, copy)  # (what cp -r, rsync or an S3 sync then a download give)
    original = tripwire.open_run(live)
    assert original.abandoned_workers() == [] and original.unknown_workers() == {}  # (its writer holds it)
    run = tripwire.open_run(copy)
    assert run.status == "running" and run.abandoned_workers() == []
    [(worker, info)] = run.unknown_workers().items()
    assert worker == 0 and info["why"] == "alive" and info["pid"] == training.proc.pid
    assert info["host"] == socket.gethostname() and 0 <= time.time() - info["last_write"] < 120

    line = _inspect_line(capsys, copy)
    assert line.startswith(f"worker 0 has no end marker, its writer (pid {training.proc.pid} on host "
                           f"{socket.gethostname()}, this machine) still runs but holds no lock on these files (a copy "
                           f"of a run still being written, or a run on a shared file system whose locks this machine "
                           f"cannot see), and its last record was written "), line
    assert line.endswith(" ago (wall time); what it wrote is readable"), line
    assert _KILLED not in line and "no process writes" not in line
    assert main(["inspect", str(copy), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["abandoned_workers"] == [] and data["notes"][0].startswith("worker 0 has no end marker, its writer")

    # watch --once: not everything judged (exit 3, the training has not ended as far as is known), no crash said
    assert main(["watch", str(copy), "--once"]) == 3
    err = capsys.readouterr().err
    assert _KILLED not in err
    assert f"tripwire watch: worker 0 has no end marker, its writer (pid {training.proc.pid} on host" in err
    assert "(wall time): judged what was written by now\n" in err
    assert main(["watch", str(copy), "--once", "--json"]) == 3
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["abandoned"] == [] and summary["status"] == "running"
    assert any(n.startswith("worker 0 has no end marker") for n in summary["notes"])

    # once its writer was killed (kill -9): the original is known to have crashed, on this machine; the
    # copy is another file than the one the writer opened (the worker meta's shard device and inode,
    # session 28): whether the writer closed the original is not in it, and it is not said to have crashed
    training.kill()
    assert tripwire.open_run(live).abandoned_workers() == [0]
    assert _inspect_line(capsys, live) == (f"no process writes this run any more: worker 0 ended without closing it "
                                          f"({_KILLED}); what it wrote is readable")
    assert main(["watch", str(live), "--once"]) == 3
    assert f"worker 0 ended without closing the run ({_KILLED}): what was written is judged" in capsys.readouterr().err
    run = tripwire.open_run(copy)
    assert run.abandoned_workers() == [] and run.unknown_workers()[0]["why"] == "copy"
    line = _inspect_line(capsys, copy)
    assert "these files are a copy of the run its writer" in line and _KILLED not in line, line


def test_a_run_written_on_another_machine_is_not_known_to_have_ended(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # a copy of a run whose writer ran elsewhere (its process table cannot be read here), dead or alive
    script = textwrap.dedent("""
        import os, signal, sys, tripwire
        s = tripwire.Session(out_dir=sys.argv[1], save_interval=1)
        s.step("train", 0, {"loss": (1.0, "losses")})
        s.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "run")], timeout=60)
    run = tmp_path / "run"
    assert tripwire.open_run(run).abandoned_workers() == [0]  # (here, its writer is known to be gone)
    _edit_meta(run, host="gpu-node-7", pid=4242)
    opened = tripwire.open_run(run)
    assert opened.abandoned_workers() == []
    assert {w: (i["why"], i["host"], i["pid"]) for w, i in opened.unknown_workers().items()} == {
        0: ("other_host", "gpu-node-7", 4242)}
    line = _inspect_line(capsys, run)
    assert line.startswith("worker 0 has no end marker, its writer (pid 4242 on host gpu-node-7, another machine) may "
                           "still be running (a copy of a run still being written, or a run written on another "
                           "machine), and its last record was written "), line
    assert _KILLED not in line

    # no meta file (a partial copy): the writer is not known
    _meta(run).unlink()
    opened = tripwire.open_run(run)
    assert opened.abandoned_workers() == [] and opened.unknown_workers()[0]["why"] == "no_writer"
    assert "its writer is not known (its worker meta file is missing or damaged" in _inspect_line(capsys, run)


def _run_killed_here(out: Path) -> None:
    script = textwrap.dedent("""
        import os, signal, sys, tripwire
        s = tripwire.Session(out_dir=sys.argv[1], save_interval=1)
        s.step("train", 0, {"loss": (1.0, "losses")})
        s.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run([sys.executable, "-c", script, str(out)], timeout=60)


def test_a_pid_another_program_took_or_a_zombie_is_a_writer_gone(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _run_killed_here(run)
    later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # the writer's pid is now a program that began an hour after the writer opened its shard
        data = json.loads(_meta(run).read_text(encoding="utf-8"))
        data["started"] = time.time() - 3600
        data["environment"]["pid"] = later.pid
        _meta(run).write_text(json.dumps(data), encoding="utf-8")
        assert tripwire.open_run(run).abandoned_workers() == [0]
        # a process that began before the writer opened its shard may be that writer: not known
        data["started"] = time.time()
        data["environment"]["pid"] = os.getppid()
        _meta(run).write_text(json.dumps(data), encoding="utf-8")
        opened = tripwire.open_run(run)
        assert opened.abandoned_workers() == [] and opened.unknown_workers()[0]["why"] == "alive"
        # a killed process that no one reaped (a zombie) holds nothing
        later.kill()
        deadline = time.monotonic() + 30
        while Path(f"/proc/{later.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        data["environment"]["pid"] = later.pid
        data["started"] = time.time()
        _meta(run).write_text(json.dumps(data), encoding="utf-8")
        assert tripwire.open_run(run).abandoned_workers() == [0]
    finally:
        later.kill()
        later.wait(timeout=60)


def test_a_copy_made_by_the_process_that_writes_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = tripwire.Session(out_dir=str(tmp_path / "live"), save_interval=1)
    s.step("train", 0, {"loss": (1.0, "losses")})
    s.flush()
    shutil.copytree(tmp_path / "live", tmp_path / "copy")
    run = tripwire.open_run(tmp_path / "copy")
    assert run.abandoned_workers() == [] and run.unknown_workers()[0]["why"] == "this_process"
    assert "its writer is this process (pid" in _inspect_line(capsys, tmp_path / "copy")
    s.writer.abandon()  # type: ignore[union-attr]  (this process writes it no more, without an end marker)
    assert tripwire.open_run(tmp_path / "live").abandoned_workers() == [0]
    copy = tripwire.open_run(tmp_path / "copy")  # (another file than the one the writer opened: a copy)
    assert copy.abandoned_workers() == [] and copy.unknown_workers()[0]["why"] == "copy"


def test_a_copy_read_after_its_writer_closed_the_original_is_not_a_crash(tmp_path: Path, training: _Training,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    live, copy, moved = tmp_path / "live", tmp_path / "copy", tmp_path / "moved"
    shutil.copytree(live, copy)  # (taken while the training ran: no end marker in it)
    training.close()  # (the original is closed: complete)
    assert tripwire.open_run(live).status == "complete"
    run = tripwire.open_run(copy)
    assert run.status == "running" and run.abandoned_workers() == []
    info = run.unknown_workers()[0]
    assert info["why"] == "copy" and info["pid"] == training.proc.pid
    line = _inspect_line(capsys, copy)
    assert line.startswith(f"worker 0 has no end marker, these files are a copy of the run its writer (pid "
                           f"{training.proc.pid} on host {socket.gethostname()}, this machine) wrote"), line
    assert _KILLED not in line
    assert main(["inspect", str(copy), "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["unknown_workers"]
    assert entry["worker"] == 0 and entry["why"] == "copy" and entry["pid"] == training.proc.pid
    assert main(["watch", str(copy), "--once", "--json"]) == 3
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [u["why"] for u in summary["unknown"]] == ["copy"] and summary["abandoned"] == []
    # a run moved within its file system keeps its shard's inode: not a copy (a crashed one still reads as one)
    meta = json.loads(_meta(live).read_text(encoding="utf-8"))
    assert set(meta["shard"]) == {"device", "inode"}
    (live / "workers" / "worker-00000.end.json").unlink()  # (as if it had been killed before its end)
    live.rename(moved)
    assert tripwire.open_run(moved).abandoned_workers() == [0]


def test_a_live_watch_of_a_copy_waits_for_its_end_marker(tmp_path: Path, training: _Training,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    live, copy = tmp_path / "live", tmp_path / "copy"
    shutil.copytree(live, copy)
    # a watch of a copy whose writer is alive does not end as if the training were killed: it waits
    began = time.monotonic()
    assert main(["watch", str(copy), "--timeout", "1.5", "--interval", "0.2"]) == 3
    assert time.monotonic() - began >= 1.5
    err = capsys.readouterr().err
    assert _KILLED not in err
    assert "waiting for its end marker (--timeout gives up; --once judges what is there now)" in err
    assert "(wall time): judged what was written by then" in err
    assert "--timeout=1.5 s ran out before the run ended" in err

    # a copy synced again once the training closed the run: the watch ends with it
    watcher = Watcher(copy, {"rules": ["exploding_tensor"]}, echo=lambda f: None)
    done: list[Any] = []
    thread = threading.Thread(target=lambda: done.append(watcher.watch(interval=0.1, timeout=60)))
    thread.start()
    time.sleep(0.5)
    assert thread.is_alive()
    training.close()
    _sync(live, copy)  # (the sync after the training ended)
    thread.join(timeout=60)
    assert done == [[]] and not watcher.timed_out and watcher.complete and watcher.abandoned == []

"""Trial 26i, finding 5: SIGTERM (Kubernetes or SLURM preemption, ``docker stop``, ``kill``) lost the
last records and wrote no end marker: the run read as a crash. Where the process's SIGTERM handler is
the default one and the session is made in the main thread, the session installs one that raises
``SystemExit(143)`` in the main thread: ``with`` blocks and exit handlers run, the writer writes what
it holds, and the run ends ``failed`` with a ``stop_reason`` naming SIGTERM. A handler someone else
installed is never replaced, and the previous handler is back when the last session closes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import tripwire
from tripwire import Session
from tripwire._cli import main

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

CHILD = textwrap.dedent('''
    import os, signal, sys, time
    import tripwire

    out, how = sys.argv[1], sys.argv[2]
    log = open(out + ".steps", "w", buffering=1)
    stop = []
    if how == "own-handler":  # a handler of the user's own, installed first: never replaced
        signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))

    def kill_myself(finding):  # (an action run while close() judges the last steps: a SIGTERM then)
        os.kill(os.getpid(), signal.SIGTERM)

    actions = ["record", kill_myself] if how == "during-close" else ["record"]
    session = tripwire.Session({"rules": ["exploding_tensor"], "actions": actions}, out_dir=out, save_interval=10)

    def train(steps):
        for step in range(steps):
            loss = float("nan") if how == "during-close" and step == 13 else 1.0 / (1 + step)
            session.step("train", step, {"loss": (loss, "losses")})
            log.write(f"{step}\\n")
            if step == 25:
                print("ready", flush=True)
            if stop:
                print("stopping by my own handler", flush=True)
                return
            time.sleep(0.002)

    if how == "with":
        with session:
            train(10 ** 6)
    elif how == "never-closed":  # a loop that never calls close(): the exit handler closes the run
        train(10 ** 6)
    elif how == "own-handler":
        with session:
            train(10 ** 6)
    elif how == "during-close":
        train(15)
        session.close()
        print("closed, no SIGTERM raised", flush=True)
''')


def _child(tmp_path: Path, how: str, signal_it: bool = True) -> tuple[int, str, str, Path]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(script), str(out), how], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if signal_it:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "ready\n", (line, proc.stderr.read() if proc.stderr else "")
        proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    return proc.returncode, stdout, stderr, out


def _last_logged(out: Path) -> int:
    return max(int(line) for line in Path(str(out) + ".steps").read_text().split())


@pytest.mark.parametrize("how", ["with", "never-closed"])
def test_sigterm_writes_the_last_records_and_marks_the_run_failed(tmp_path: Path, how: str, capsys) -> None:
    rc, _, stderr, out = _child(tmp_path, how)
    assert rc == 143, stderr
    marker = json.loads((out / "workers" / "worker-00000.end.json").read_text())
    assert marker["status"] == "failed"
    assert marker["stop_reason"].startswith("SIGTERM: the process was asked to terminate: a scheduler's "
                                            "preemption, docker stop, kill; the session wrote its records")
    run = tripwire.open_run(out)
    assert run.status == "failed" and run.abandoned_workers() == []
    assert run.series("loss")[0][-1] >= _last_logged(out)  # (nothing the loop logged is lost)
    if how == "never-closed":
        assert "is exiting with the run" in stderr and "still open on SIGTERM" in stderr, stderr
    assert main(["inspect", str(out), "--width", "300"]) == 0
    assert "worker 0 failed: SIGTERM: the process was asked to terminate" in capsys.readouterr().out


def test_a_handler_of_the_users_own_is_not_replaced(tmp_path: Path) -> None:
    rc, stdout, stderr, out = _child(tmp_path, "own-handler")
    assert rc == 0 and "stopping by my own handler" in stdout, stderr
    run = tripwire.open_run(out)
    assert run.status == "complete" and "stop_reason" not in run.end_markers[0]


def test_a_sigterm_while_the_run_closes_waits_until_it_is_closed(tmp_path: Path) -> None:
    rc, stdout, stderr, out = _child(tmp_path, "during-close", signal_it=False)
    assert rc == 143 and "closed, no SIGTERM raised" not in stdout, (stdout, stderr)
    run = tripwire.open_run(out)
    assert run.is_complete and [(f.rule, f.step) for f in run.findings] == [("exploding_tensor", 13)]
    assert run.series("loss")[0].tolist() == list(range(15))


@pytest.fixture
def no_open_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """No session of another test left open in this process (each keeps its handler installed)."""
    import tripwire._session as session_module

    monkeypatch.setattr(session_module, "_OPEN", set())
    monkeypatch.setattr(session_module, "_TERM", session_module._SigtermState())


def test_the_previous_handler_is_back_when_the_last_session_closes(tmp_path: Path, no_open_run: None) -> None:
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        from tripwire._session import _on_sigterm

        first = Session(out_dir=str(tmp_path / "a"), save_interval=1)
        assert signal.getsignal(signal.SIGTERM) is _on_sigterm
        second = Session(out_dir=str(tmp_path / "b"), save_interval=1)
        first.close()
        assert signal.getsignal(signal.SIGTERM) is _on_sigterm  # (a run still open)
        second.close()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        # a session that writes nothing has no run to close: no handler
        Session(write=False).close()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        # made in another thread: signal handlers belong to the main thread, nothing installed
        made: list[Session] = []
        worker = threading.Thread(target=lambda: made.append(Session(out_dir=str(tmp_path / "c"), save_interval=1)))
        worker.start()
        worker.join()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        made[0].close()
        # Lightning handles SIGTERM itself (its loop raises SIGTERMException): no handler of ours
        Session(out_dir=str(tmp_path / "d"), framework="lightning").close()
        lightning = Session(out_dir=str(tmp_path / "e"), framework="lightning")
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        lightning.close()
        # a handler installed after ours (it may call ours) is left in place at close
        third = Session(out_dir=str(tmp_path / "f"), save_interval=1)
        theirs = lambda signum, frame: None  # noqa: E731
        signal.signal(signal.SIGTERM, theirs)
        third.close()
        assert signal.getsignal(signal.SIGTERM) is theirs
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_handler_already_installed_is_kept(tmp_path: Path, no_open_run: None) -> None:
    mine = lambda signum, frame: None  # noqa: E731
    before = signal.signal(signal.SIGTERM, mine)
    try:
        s = Session(out_dir=str(tmp_path / "a"), save_interval=1)
        assert signal.getsignal(signal.SIGTERM) is mine
        s.close()
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)


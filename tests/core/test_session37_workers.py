"""Trial 37m: a session left open in a forked ``multiprocessing`` worker (its training raised, or it
never called ``close()``) lost its records and got no end marker: a forked worker leaves through
``os._exit``, past the interpreter's exit handlers that close such a session. The sessions of a
``multiprocessing`` worker are now closed by its own exit. A run closed at exit with no exception
known (``sys.exit`` in the loop, a worker's or a thread's exception) ended ``failed`` with no reason;
it now says what the session knows."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tripwire


def _train(out_dir: str, fail_at: int | None) -> None:
    session = tripwire.Session(out_dir=out_dir, save_interval=1)
    for step in range(20):
        if fail_at is not None and step == fail_at:
            raise ValueError("the worker's data broke")
        session.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    # (no close(): the worker ends with its session open)


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
@pytest.mark.parametrize("fail_at", [13, None])
def test_a_forked_workers_open_session_is_closed_at_its_exit(tmp_path: Path, fail_at: int | None) -> None:
    ctx = multiprocessing.get_context("fork")
    worker = ctx.Process(target=_train, args=(str(tmp_path / "run"), fail_at))
    worker.start()
    worker.join(60)
    assert worker.exitcode == (1 if fail_at is not None else 0)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "failed"
    assert run.steps() == list(range(fail_at if fail_at is not None else 20))
    assert "the process exited with the run still open" in run.stop_reasons[0]


def test_sys_exit_in_the_loop_leaves_a_failed_run_with_a_reason(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys, tripwire
        s = tripwire.Session(out_dir={str(tmp_path / 'run')!r}, save_interval=1)
        for step in range(5):
            s.step("train", step, {{"loss": (1.0, "losses")}})
        sys.exit("fatal: bad data")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "failed" and run.steps() == list(range(5))
    assert run.stop_reasons[0].startswith("the process exited with the run still open")


def _child_with_its_own_session(out_dir: str) -> None:
    session = tripwire.Session(out_dir=out_dir, save_interval=1)
    session.step("train", 0, {"loss": (1.0, "losses")})
    # (left open: closed at the worker's exit, and only this one)


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is Linux's default")
def test_a_forked_worker_closes_its_own_sessions_not_its_parents(tmp_path: Path) -> None:
    """A forked worker holds a copy of its parent's open sessions: closing those at the worker's exit
    would write the parent's run's end (failed) while the parent trains on."""
    parent = tripwire.Session(out_dir=tmp_path / "parent", save_interval=1)
    parent.step("train", 0, {"loss": (1.0, "losses")})
    parent.flush()
    worker = multiprocessing.get_context("fork").Process(target=_child_with_its_own_session,
                                                         args=(str(tmp_path / "child"),))
    worker.start()
    worker.join(60)
    assert worker.exitcode == 0
    assert tripwire.open_run(tmp_path / "child").status == "failed"
    assert tripwire.open_run(tmp_path / "parent").status == "running"  # (no end marker from the worker)
    parent.step("train", 1, {"loss": (0.5, "losses")})
    parent.close()
    run = tripwire.open_run(tmp_path / "parent")
    assert run.status == "complete" and run.steps() == [0, 1]


def test_sigterm_to_a_forked_child_of_a_process_with_an_open_session_ends_it_as_the_default_does(tmp_path: Path) -> None:
    """Trial 37m: a child forked while a session was open inherited tripwire's SIGTERM handler and
    exited 143 (SystemExit) where a plain child is killed by the signal (-15); the parent's run is
    the parent's, and it trains on."""
    script = textwrap.dedent(f"""
        import multiprocessing, os, signal, time, tripwire
        s = tripwire.Session(out_dir={str(tmp_path / 'run')!r}, save_interval=1)
        s.step("train", 0, {{"loss": (1.0, "losses")}})
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
        child.start()
        time.sleep(0.5)
        os.kill(child.pid, signal.SIGTERM)
        child.join(30)
        print("child", child.exitcode)
        s.step("train", 1, {{"loss": (0.5, "losses")}})
        s.close()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "child -15" in done.stdout
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and run.steps() == [0, 1]


def test_an_open_session_refuses_to_be_copied_or_pickled_by_name(tmp_path: Path) -> None:
    """Trial 37m: pickling or deep-copying an open Session raised internal TypeErrors (an open file,
    a weak reference) that did not name it, and ``copy.copy`` shared its open writer."""
    import copy
    import pickle

    session = tripwire.Session(out_dir=tmp_path / "run", save_interval=1)
    session.step("train", 0, {"loss": (1.0, "losses")})
    for how in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match=r"cannot copy or pickle Session\(out_dir='.*run'\) while it writes its run"):
            how(session)
    session.step("train", 1, {"loss": (0.5, "losses")})
    session.close()
    assert tripwire.open_run(tmp_path / "run").steps() == [0, 1]
    with pytest.raises(TypeError, match=r"\(its run is closed\).*tripwire.open_run\('.*run'\)"):
        copy.deepcopy(session)
    unwritten = tripwire.Session(write=False)
    unwritten.step("train", 0, {"loss": (1.0, "losses")})
    assert copy.deepcopy(unwritten).global_step == unwritten.global_step  # (no writer: copies)


def _interrupted_loop(out_dir: Path) -> None:
    session = tripwire.Session(out_dir=out_dir, save_interval=1)
    for step in range(5):
        session.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    raise KeyboardInterrupt  # (the notebook's interrupt: the session is left open, out of reach)


def test_a_loops_session_left_open_in_this_thread_is_ended_by_the_next_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Trial 38k: a hand loop interrupted in a notebook left its session open with no handle to it;
    the cell run again was refused ("end that one first ... Session.close()") until the kernel restarted."""
    import logging

    with pytest.raises(KeyboardInterrupt):
        _interrupted_loop(tmp_path / "run")
    assert tripwire.open_run(tmp_path / "run").status == "running"
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        again = tripwire.Session(out_dir=tmp_path / "run", save_interval=1)
    assert any("was left open by an earlier Session of this process, made in this thread" in r.getMessage()
               for r in caplog.records)
    again.step("train", 0, {"loss": (0.5, "losses")})
    again.close()
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and len(run.series("loss")[0]) == 6


def test_a_session_open_in_another_thread_still_refuses_the_out_dir(tmp_path: Path) -> None:
    import threading

    made: list[tripwire.Session] = []
    worker = threading.Thread(target=lambda: made.append(tripwire.Session(out_dir=tmp_path / "run", save_interval=1)))
    worker.start()
    worker.join()
    with pytest.raises(tripwire.ConfigError, match="is being written by another training"):
        tripwire.Session(out_dir=tmp_path / "run")
    made[0].close()

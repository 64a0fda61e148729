"""Trial 38n: a SIGTERM to a DDP rank blocked in a collective (its peer stalled) was not handled until
the collective returned: Python runs a signal handler only between bytecodes, and the main thread
sat in gloo's wait. The rank outlived its SIGTERM by a minute (a deadlocked job: until torchrun's
SIGKILL, its run left ``running``). A watchdog thread now ends such a process after
``SIGTERM_GRACE`` seconds: the runs' queued records written, their end markers ``failed`` with the
signal as the reason, exit status 143."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

import tripwire  # noqa: E402

_RANK = textwrap.dedent("""
    import os, sys, time
    import torch, torch.distributed as dist
    rank, out, port = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    if rank == 1:
        time.sleep(60)  # (the stalled peer)
        sys.exit(0)
    import tripwire
    session = tripwire.Session(out_dir=out, rank=0, world_size=2, save_interval=1)
    for step in range(3):
        session.step("train", step, {"loss": (1.0, "losses")})
    print("blocking", flush=True)
    dist.all_reduce(torch.ones(1))  # (blocked: rank 1 stalls)
    print("returned", flush=True)
""")


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals, gloo on loopback")
def test_sigterm_to_a_rank_blocked_in_a_collective_ends_it_and_its_run(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    port, out = _free_port(), str(tmp_path / "run")
    peer = subprocess.Popen([sys.executable, str(script), "1", out, port])
    rank0 = subprocess.Popen([sys.executable, str(script), "0", out, port], stdout=subprocess.PIPE, text=True)
    try:
        assert rank0.stdout is not None and rank0.stdout.readline().strip() == "blocking"
        time.sleep(0.5)
        began = time.monotonic()
        rank0.send_signal(signal.SIGTERM)
        status = rank0.wait(30)
        took = time.monotonic() - began
    finally:
        for p in (rank0, peer):
            p.kill()
            p.wait()
    assert status == 143
    assert took < 15, took  # (SIGTERM_GRACE, 3 s, and the writer's close; not the peer's 60 s)
    run = tripwire.open_run(out)
    assert run.status == "failed" and run.steps() == [0, 1, 2]
    assert run.stop_reasons[0].startswith("SIGTERM: the process was asked to terminate")
    assert "the main thread was blocked" in run.stop_reasons[0]


_RAISE_THEN_TERM = textwrap.dedent("""
    import os, signal, threading, time
    import tripwire
    slow = {{"on": False}}
    def slow_rule(history, step, mode):
        if slow["on"]:
            time.sleep(2)  # (the exit handler's close runs the rules: a SIGTERM comes meanwhile)
        return None
    rule = tripwire.FunctionRule(slow_rule, requirements=[tripwire.Requirement("losses", ())])
    session = tripwire.Session(out_dir={out!r}, rules=[rule])
    for step in range(5):
        session.step("train", step, {{"loss": (1.0, "losses")}})
    slow["on"] = True
    threading.Thread(target=lambda: (time.sleep(0.5), os.kill(os.getpid(), signal.SIGTERM)), daemon=True).start()
    raise RuntimeError("Connection closed by peer")
""")


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals")
def test_a_sigterm_while_an_exception_ends_the_process_keeps_that_exception_as_the_reason(tmp_path: Path) -> None:
    """Trial 38n: a SIGTERM that came while the exit handler closed a run an uncaught exception left open
    (a DDP launcher terminating the rank that crashed) made the signal the run's stop_reason."""
    out = str(tmp_path / "run")
    done = subprocess.run([sys.executable, "-c", _RAISE_THEN_TERM.format(out=out)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert tripwire.open_run(out).stop_reasons[0] == "RuntimeError: Connection closed by peer"


def _run_until_ready(code: str, tmp_path: Path, signals: int = 1, gap: float = 0.0) -> tuple[int | str, float]:
    """Run ``code`` (which prints READY), send it ``signals`` SIGTERMs ``gap`` s apart; its status and
    how long it took to end after the first."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(code))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        while "READY" not in proc.stdout.readline():
            pass
        began = time.monotonic()
        for i in range(signals):
            if i:
                time.sleep(gap)
            proc.send_signal(signal.SIGTERM)
        try:
            status: int | str = proc.wait(20)
        except subprocess.TimeoutExpired:
            status = "hung"
        return status, time.monotonic() - began
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals")
def test_sigterm_with_a_thread_that_is_no_daemon_ends_the_process_and_its_run(tmp_path: Path) -> None:
    """Trial 38o: the handler's SystemExit left the interpreter waiting for a non-daemon thread (a
    prefetcher's) before the exit handlers that close the run: the process outlived its SIGTERM, its
    run left running; without a session the default handler ended it at once."""
    out = str(tmp_path / "run")
    status, took = _run_until_ready(f"""
        import threading, time, tripwire
        threading.Thread(target=threading.Event().wait, name="prefetcher").start()  # (never ends)
        session = tripwire.Session(out_dir={out!r}, save_interval=1)
        for step in range(10**6):
            session.step("train", step, {{"loss": (1.0, "losses")}})
            if step == 20:
                print("READY", flush=True)
            time.sleep(0.01)
    """, tmp_path)
    assert status == 143 and took < 10, (status, took)
    run = tripwire.open_run(out)
    assert run.status == "failed" and run.stop_reasons[0].startswith("SIGTERM: ") and len(run.steps()) > 20


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals")
def test_a_second_sigterm_while_a_run_closes_ends_the_process_at_once(tmp_path: Path) -> None:
    """Trial 38o: every SIGTERM during close() waited for it (3 s here), where the docs say a second one
    ends the process at once."""
    status, took = _run_until_ready(f"""
        import time, tripwire
        def slow(history, step, mode):
            if step == 5:
                print("READY", flush=True)
                time.sleep(5)  # (the rules close() runs: a slow one)
            return None
        rule = tripwire.FunctionRule(slow, requirements=[tripwire.Requirement("losses", ())])
        session = tripwire.Session(out_dir={str(tmp_path / 'run')!r}, rules=[rule], save_interval=10)
        for step in range(6):
            session.step("train", step, {{"loss": (1.0, "losses")}})
        session.close()
    """, tmp_path, signals=2, gap=0.3)
    assert status in (-15, 143) and took < 3, (status, took)


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals, fork")
def test_a_forked_childs_own_session_gets_its_own_watchdog(tmp_path: Path) -> None:
    """Trial 38o: a child forked from a process with an open session inherited its handler, so its own
    session started no watchdog, and a SIGTERM while it was blocked in native code went unhandled."""
    out = str(tmp_path / "child")
    code = textwrap.dedent(f"""
        import multiprocessing, os, signal, sqlite3, sys, time, tripwire
        def child():
            session = tripwire.Session(out_dir={out!r}, save_interval=1)
            session.step("train", 0, {{"loss": (1.0, "losses")}})
            session.flush()
            held = sqlite3.connect({str(tmp_path / 'db')!r}, timeout=60, isolation_level=None)
            held.execute("INSERT INTO t VALUES (1)")  # (blocked in native code: the parent holds the lock)
        lock = sqlite3.connect({str(tmp_path / 'db')!r}, isolation_level=None)
        lock.execute("CREATE TABLE t (x)")
        lock.execute("BEGIN EXCLUSIVE")
        parent = tripwire.Session(out_dir={str(tmp_path / 'parent')!r}, save_interval=1)
        parent.step("train", 0, {{"loss": (1.0, "losses")}})
        p = multiprocessing.get_context("fork").Process(target=child)
        p.start()
        time.sleep(2)
        began = time.monotonic()
        p.terminate()
        p.join(20)
        print("child", p.exitcode, round(time.monotonic() - began, 1))
        parent.close()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    line = next(l for l in done.stdout.splitlines() if l.startswith("child"))
    assert line.split()[1] == "143" and float(line.split()[2]) < 10, (line, done.stderr[-2000:])
    run = tripwire.open_run(out)
    assert run.status == "failed" and "the main thread was blocked" in run.stop_reasons[0]


def test_an_error_shown_at_an_interactive_prompt_does_not_end_a_run_failed(tmp_path: Path) -> None:
    """Trial 38o: in the REPL, an earlier error at the prompt (sys.last_value) was taken for the one that
    ended the process: a session left open ended failed with a ZeroDivisionError of another line."""
    out = str(tmp_path / "run")
    lines = f"""import tripwire
1/0
s = tripwire.Session(out_dir={out!r}, save_interval=1, rules=[{{"name": "exploding_tensor", "actions": ["stop_training"]}}])
for step in range(10): s.step("train", step, {{"loss": (float("nan") if step == 5 else 1.0, "losses")}})

"""
    subprocess.run([sys.executable, "-i"], input=lines, capture_output=True, text=True, timeout=60)
    run = tripwire.open_run(out)
    assert run.status == "stopped" and "ZeroDivisionError" not in run.stop_reasons[0], run.stop_reasons

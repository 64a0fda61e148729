"""Trial 31g F2: a trial past ``trial_timeout`` sometimes had no thread stacks in its error (the
tuner waited 1 s for the worker's ``faulthandler`` dump; a niced worker on a busy host wrote it
later), and nothing said that the stack was missing. The tuner now waits up to
``_executor.STACK_WAIT_S`` (5 s) and, where none came, the error says so."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tripwire.tune import Continuous, RandomSearch, Tuner
from tripwire.tune import _executor

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGUSR2"), reason="the stack dump needs SIGUSR2")


def train_ignores_the_dump_signal(params: dict[str, Any], trial: Any) -> float:
    """Trial 0 ignores SIGUSR2 (so it never dumps its stacks) and hangs; the others return."""
    if trial.number == 0:
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        time.sleep(120)
    return float(params["x"])


def train_hangs_and_says_its_pid(params: dict[str, Any], trial: Any) -> float:
    Path(os.environ["T31G_PID_FILE"]).write_text(str(os.getpid()))
    time.sleep(120)
    return 0.0


def test_a_timed_out_trial_whose_worker_wrote_no_stack_says_so(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_executor, "STACK_WAIT_S", 1.0, raising=False)  # (before trial 31g: 1 s)
    result = Tuner(train_ignores_the_dump_signal, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(),
                   max_jobs=2, seed=0, trial_timeout=1.5, journal=str(tmp_path / "j.db")).fit()
    t0 = result.trials[0]
    assert t0.status == "failed" and t0.reason == "failed (timeout)"
    assert t0.error.startswith("trial 0 ran past trial_timeout=1.5 s; its worker (pid ")
    assert t0.error.endswith(") was killed; no stack of its threads: the worker did not write them within 1 s of "
                             "SIGUSR2 (a busy host, or a worker that blocks or ignores the signal)"), t0.error
    assert "where its threads were" not in t0.error
    assert result.trials[1].status == "completed"


def test_a_worker_that_dumps_its_stack_late_still_has_it_in_the_error(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker is stopped (SIGSTOP, as a host too busy to run it) when the tuner asks for its
    stacks, and runs again 2.5 s later: its dump, then, is in the error (after 1 s it was not)."""
    pid_file = tmp_path / "pid"
    monkeypatch.setenv("T31G_PID_FILE", str(pid_file))
    held: list[float] = []

    def stop_the_worker_for_a_while() -> None:
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        time.sleep(1.0)  # (the trial times out 2 s after it starts)
        os.kill(pid, signal.SIGSTOP)
        t = time.monotonic()
        time.sleep(3.5)
        held.append(time.monotonic() - t)
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:  # (killed meanwhile: the tuner did not wait for its dump)
            pass

    helper = threading.Thread(target=stop_the_worker_for_a_while, daemon=True)
    helper.start()
    result = Tuner(train_hangs_and_says_its_pid, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(), max_jobs=1,
                   seed=0, trial_timeout=2, journal=str(tmp_path / "j.db")).fit()
    helper.join(timeout=30)
    t0 = result.trials[0]
    assert held, "the helper did not stop the worker"
    assert t0.status == "failed" and "trial_timeout=2 s" in t0.error
    assert "where its threads were when it was stopped" in t0.error, t0.error
    assert "in train_hangs_and_says_its_pid" in t0.error, t0.error
    assert "no stack of its threads" not in t0.error

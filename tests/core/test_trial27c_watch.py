"""Trial 27c: ``tripwire watch --timeout`` is honoured whatever ``--interval`` is (finding 1)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import tripwire
from tripwire._watch import Watcher

_TRIPWIRE = str(Path(sys.executable).parent / "tripwire")


def _watch(*argv: str, cwd: Path) -> tuple[int, float, str]:
    """``tripwire watch ...`` in a process of its own: (exit status, seconds it took, stderr)."""
    began = time.monotonic()
    # (a watch that sleeps its whole --interval of 120 s is killed at 90 s: the test fails, not hangs)
    done = subprocess.run([_TRIPWIRE, "watch", *argv], cwd=cwd, capture_output=True, text=True, timeout=90)
    return done.returncode, time.monotonic() - began, done.stderr


def test_a_timeout_shorter_than_the_interval_ends_the_watch_of_a_run_that_never_appears(tmp_path: Path) -> None:
    # trial 27c: --timeout 2 --interval 30 returned after 30.7 s; the watch slept a whole interval
    rc, took, err = _watch("not-yet", "--timeout", "1", "--interval", "120", cwd=tmp_path)
    assert rc == 3, err
    assert "--timeout=1 s ran out and no run appeared" in err
    assert took < 45, took  # (the process's start-up on a loaded 2-CPU machine: seconds; the interval: 120 s)


def test_a_timeout_shorter_than_the_interval_ends_the_watch_of_a_live_run(tmp_path: Path) -> None:
    # the same on a run still written (trial 27c: --timeout 3 --interval 20 returned after 20.4 s)
    with tripwire.Session({"out_dir": str(tmp_path / "run"), "save": {"interval": 1}, "rules": ["default"]}) as s:
        for step in range(3):
            s.step("train", step, {"loss": (np.float64(1.0 / (step + 1)), "losses")})
        rc, took, err = _watch("run", "--timeout", "1", "--interval", "120", cwd=tmp_path)
    assert rc == 3, err
    assert "--timeout=1 s ran out before the run ended" in err
    assert took < 45, took


def test_the_watcher_reads_the_run_once_more_at_the_deadline(tmp_path: Path) -> None:
    # (Python API: the wait is cut to the time left, then the run is read again before giving up)
    watcher = Watcher(tmp_path / "absent")
    polls: list[float] = []
    watcher.poll = lambda now=None: polls.append(time.monotonic()) or []  # type: ignore[method-assign]
    began = time.monotonic()
    watcher.watch(interval=20.0, timeout=0.5)
    assert watcher.timed_out
    assert time.monotonic() - began < 10
    assert len(polls) == 2 and polls[1] - began >= 0.5


def test_a_replay_reads_each_series_once_a_poll_not_once_a_record(tmp_path: Path, monkeypatch) -> None:
    # trial 27c finding 7: watch --once on 20,000 steps of 21 tensors took 37 s where reading the
    # run took 1.6 s: the replay read every series again (and its reductions) at every record, 84
    # reads of 52 series a record; now a series is read once a poll and cut to each record's limit
    from tripwire._history import History

    with tripwire.Session({"out_dir": str(tmp_path / "run"), "save": {"interval": 1}, "rules": [],
                           "collections": ["losses", "gradients", "weights"]}) as s:
        rng = np.random.default_rng(0)
        for step in range(200):
            arrays = {f"gradients/l{i}.weight": (rng.normal(size=(4, 4)) * 0.01, "gradients") for i in range(3)}
            arrays.update({f"l{i}.weight": (rng.normal(size=(4, 4)), "weights") for i in range(3)})
            s.step("train", step, {"loss": (float(np.exp(-step / 50)), "losses"), **arrays})
    reads = {"series": 0, "reductions": 0}
    for name in reads:
        real = getattr(History, name)

        def counted(self: Any, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            reads[_name] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(History, name, counted)
    watcher = Watcher(tmp_path / "run", echo=lambda f: None)
    watcher.watch(once=True)
    assert watcher.findings == []  # (a healthy run: the replay judged all 200 records)
    assert watcher._done[("train", 0)] == 200
    assert reads["series"] < 200 and reads["reductions"] < 200, reads  # (before: 5,600 series reads)

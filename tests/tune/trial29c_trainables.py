"""Training functions of the trial 29c tests (importable by module name in worker processes)."""

from __future__ import annotations

import os
import time
from typing import Any

#: The environment variable that names the journal a trainable below removes or replaces.
JOURNAL_ENV = "TRIPWIRE_TEST_29C_JOURNAL"


def _three_reports(params: dict[str, Any], trial: Any, pause: float) -> float:
    value = 0.0
    for step in range(1, 4):
        time.sleep(pause)
        value = float(params["x"]) * step
        if trial.report(step=step, value=value):
            break
    return value


def train_removes_journal(params: dict[str, Any], trial: Any) -> float:
    """Trial 0's first attempt removes the journal (and its -wal and -shm), as a script's module-level
    "start fresh" os.remove run again by a worker does; every trial takes about 0.6 s."""
    if trial.number == 0 and trial.attempt == 1:
        for suffix in ("", "-wal", "-shm"):
            path = os.environ[JOURNAL_ENV] + suffix
            if os.path.exists(path):
                os.remove(path)
    return _three_reports(params, trial, 0.2)


def train_replaces_journal(params: dict[str, Any], trial: Any) -> float:
    """Trial 0 puts another file at the journal's path (``os.replace``)."""
    if trial.number == 0 and trial.attempt == 1:
        other = os.environ[JOURNAL_ENV] + ".other"
        with open(other, "w") as fh:
            fh.write("not the journal\n")
        os.replace(other, os.environ[JOURNAL_ENV])
    return _three_reports(params, trial, 0.2)


def train_removes_journal_at_once(params: dict[str, Any], trial: Any) -> float:
    """Removes the journal and returns at once (a job shorter than the tuner's check period)."""
    path = os.environ[JOURNAL_ENV]
    if os.path.exists(path):
        os.remove(path)
    return float(params["x"])


def train_worsens(params: dict[str, Any], trial: Any) -> float:
    """A metric (``mode="min"``) that grows with the resource: every configuration is best at step 1,
    so an early-stopped trial is ``best``."""
    value = 0.0
    for step in range(1, trial.max_resource + 1):
        value = float(params["x"]) * step
        if trial.report(step=step, value=value):
            break
    return value

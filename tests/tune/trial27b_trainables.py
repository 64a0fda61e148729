"""Training functions of trial 27b's tests (importable by module name in the worker processes)."""

from __future__ import annotations

import atexit
import os
import time
from typing import Any

from tune_trainables import curve

#: Seconds a trial told to stop lingers before it returns (as Lightning finishing its epoch).
LINGER_ENV = "TRIPWIRE_TEST27B_LINGER_S"
#: Seconds a Dask worker process takes to exit (as one that imported torch and Lightning, on a loaded host).
SLOW_EXIT_S = 5.0
_slow_exit = False


def train_linger(params: dict[str, Any], trial: Any) -> float:
    """Reports each step; once told to stop it lingers ``$TRIPWIRE_TEST27B_LINGER_S`` seconds."""
    value = 0.0
    for step in range(1, trial.max_resource + 1):
        value = curve(params, step)
        if trial.report(step=step, value=value):
            time.sleep(float(os.environ.get(LINGER_ENV, "0")))
            break
    return value


def train_slow_exit(params: dict[str, Any], trial: Any) -> float:
    """Makes its worker process take :data:`SLOW_EXIT_S` to exit (an atexit handler that sleeps)."""
    global _slow_exit
    if not _slow_exit:
        atexit.register(time.sleep, SLOW_EXIT_S)
        _slow_exit = True
    value = curve(params, 1)
    trial.report(step=1, value=value)
    return value


def train_imports_slowly(params: dict[str, Any], trial: Any) -> float:
    """Imports a module that takes 30 s to import inside train (a framework imported there)."""
    import trial27b_slow_import  # noqa: F401

    return curve(params, 1)

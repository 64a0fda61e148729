"""Trainables of test_session43_dask_plugin.py that the worker processes of a ``LocalCluster`` the
tuner starts must import (this folder is on their path, as for trial27b_trainables)."""

from __future__ import annotations

import os
import time
from typing import Any

#: The setup() of every worker process: slow, so that a dead worker's replacement is not ready before
#: the trial's time limit.
SETUP_S = 6.0


def slow_setup() -> None:
    time.sleep(SETUP_S)


def train_kills_its_worker(params: dict[str, Any], trial: Any) -> float:
    if trial.number == 0:
        os.kill(os.getpid(), 9)  # as the OOM killer would
    time.sleep(0.2)
    return float(params["x"])

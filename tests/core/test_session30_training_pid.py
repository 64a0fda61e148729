"""Each training entry of a worker's meta file names the process that wrote it (pid, host), so three
trainings written by one notebook kernel, each by a new session, are each said to be "by the same
process" (session 30, after trial 30f F3: the middle one read "by a later session")."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np

import tripwire


def _one_training(out: Path) -> None:
    with tripwire.Session(out_dir=str(out), rules=[]) as session:
        for step in range(3):
            session.step("train", step, {"loss": (np.float32(1.0 / (step + 1)), "losses")})


def test_three_trainings_of_one_process_each_name_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    for _ in range(3):
        _one_training(out)
    run = tripwire.open_run(str(out))
    trainings = run.trainings[0]
    assert len(trainings) == 3
    assert [t.get("pid") for t in trainings] == [os.getpid()] * 3
    assert run.training_processes(0) == [(socket.gethostname(), os.getpid())] * 3

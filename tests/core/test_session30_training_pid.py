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


def test_the_different_histograms_warning_gives_the_ranges_exactly(caplog) -> None:
    """The WARNING's ranges are the configs' own numbers (``:g`` printed [0.9999995, 1.0000004] as
    [1, 1]: session 30, found by the 30a histogram fixer)."""
    import logging

    from tripwire._session import _say_histograms_differ

    def hist(lo: float, hi: float) -> tripwire.ReductionConfig:
        return tripwire.ReductionConfig(reductions=["histogram"], histogram_bins=8, histogram_range=(lo, hi))

    narrow = tripwire.Collection("narrow", kinds=["weights"], reduction=hist(0.9999995, 1.0000004))
    wide = tripwire.Collection("wide", kinds=["weights"], reduction=hist(-1, 1))
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _say_histograms_differ("w", (narrow, wide))
    assert "8 bins over [0.9999995, 1.0000004]" in caplog.text, caplog.text
    assert "8 bins over [-1, 1]" in caplog.text, caplog.text

"""Trial 42d F3: a hand loop that restarts its step count every epoch, in one session, read two of
its three epochs' losses as ``superseded`` in ``run.dataframe()`` (``df[~df.superseded]`` dropped two
thirds of the training), where docs/format.md says a value is superseded when "a later writing
session went back over" its record. One session's records now supersede none of its own; a second
training's still supersede the first's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire._history import live_records

pytest.importorskip("pandas")


def _loop(out: Path, epochs: int, per_epoch: int, offset: float = 0.0) -> None:
    with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
        for e in range(epochs):
            for i in range(per_epoch):  # the batch index as the step
                s.step("train", i, {"loss": (offset + 10 * e + i, "losses")})


def test_one_session_restarting_its_steps_supersedes_nothing(tmp_path: Path) -> None:
    _loop(tmp_path / "run", epochs=3, per_epoch=5)
    df = tripwire.open_run(tmp_path / "run").dataframe()
    loss = df[df.tensor == "loss"]
    assert len(loss) == 15 and not loss.superseded.any()


def test_a_second_training_still_supersedes_the_first(tmp_path: Path) -> None:
    _loop(tmp_path / "run", epochs=2, per_epoch=5)
    _loop(tmp_path / "run", epochs=1, per_epoch=3, offset=100.0)
    df = tripwire.open_run(tmp_path / "run").dataframe()
    loss = df[df.tensor == "loss"]
    kept = loss[~loss.superseded]
    # (the second training began again at step 0: every record of the first is at or after a later one)
    assert list(kept.value) == [100.0, 101.0, 102.0]
    assert loss.superseded.sum() == 10


def test_live_records_with_attempts() -> None:
    steps = np.array([0, 1, 2, 0, 1, 2, 1, 2])
    one = np.zeros(8, dtype=np.int64)
    assert live_records(steps, one).all()
    two = np.array([0, 0, 0, 0, 0, 0, 1, 1])
    assert live_records(steps, two).tolist() == [True, False, False, True, False, False, True, True]
    # (without attempts, as before: what stays ascends)
    assert live_records(steps).tolist() == [False, False, False, True, False, False, True, True]

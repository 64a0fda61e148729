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
from tripwire._history import gone_back_over, live_records

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


def test_gone_back_over() -> None:
    # (one session, steps restarting: nothing)
    assert not gone_back_over(np.arange(8)).any()
    # (trial 42h: the second session resumed at global step 4)
    assert gone_back_over([0, 1, 2, 3, 4, 5, 4, 5]).tolist() == [False] * 4 + [True, True, False, False]
    # (a second training, its global steps from 0: it goes back over every record of the first)
    assert gone_back_over([0, 1, 2, 3, 4, 5, 0, 1]).tolist() == [True] * 6 + [False, False]
    # (without global steps, live_records as before: what stays ascends, a resumed session's rules reading it)
    steps = np.array([0, 1, 2, 0, 1, 2, 1, 2])
    assert live_records(steps, [0, 0, 0, 0, 0, 0, 1, 1]).tolist() == [False, False, False, True, False, False, True,
                                                                      True]
    assert live_records(steps).tolist() == [False, False, False, True, False, False, True, True]


def test_a_longer_second_training_supersedes_the_first_ones_validation_too(tmp_path: Path) -> None:
    """Trial 42l F1: a first training of 4 train steps and an evaluation, a second of 8 and an
    evaluation, into one out_dir: the first's eval record (global step 4) stayed live beside the
    second's (global step 8), the sessions told apart per mode."""
    out = tmp_path / "run"
    for n, val in ((4, 9.0), (8, 1.0)):
        with tripwire.Session(out_dir=str(out), save_interval=1, rules=[]) as s:
            for step in range(n):
                s.step("train", step, {"loss": (1.0, "losses")})
            s.step("eval", 0, {"val_loss": (val, "losses")}, summary=True)
    df = tripwire.open_run(out).dataframe()
    live = df[~df.superseded]
    assert live[live.tensor == "val_loss"].value.tolist() == [1.0]
    assert len(live[live.tensor == "loss"]) == 8


def test_a_resume_of_a_loop_restarting_its_steps_supersedes_what_it_ran_again(tmp_path: Path) -> None:
    """Trial 42h F1: steps 0-9 three epochs a session; a checkpoint after the second epoch; the first
    session dies in its third; the resumed session runs the third and a fourth. Only the first
    session's third epoch is superseded (it was 30 records, then 20 after session 42d's change)."""
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    state = None
    for e in range(3):
        for i in range(10):
            s.step("train", i, {"loss": (e + i / 100, "losses")})
        if e == 1:
            state = s.state_dict()
    s.close("failed")
    s = tripwire.Session(out_dir=str(out), save_interval=1, rules=[])
    s.load_state_dict(state)
    for e in (2, 3):
        for i in range(10):
            s.step("train", i, {"loss": (10 + e + i / 100, "losses")})
    s.close()
    df = tripwire.open_run(out).dataframe()
    loss = df[df.tensor == "loss"]
    assert len(loss) == 50
    assert sorted(loss[loss.superseded].value.round(2)) == [2 + i / 100 for i in range(10)]

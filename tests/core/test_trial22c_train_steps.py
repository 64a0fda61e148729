"""Trial 22c: eval steps count validation batches, and a user plotting ``val_loss`` beside ``loss``
had no way to put them on the training's steps: ``History.train_steps`` gives the train step each
step of another mode came after."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tripwire


def _loop(out: Path) -> tripwire.Session:
    session = tripwire.Session(out_dir=out, rules=[], save_interval=1)
    session.step("eval", 0, {"val_loss": (3.0, "losses")}, summary=True)  # a sanity check before training
    eval_step = 1
    for step in range(12):
        session.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
        if step % 4 == 3:  # a validation of two batches after every 4th train step
            for _ in range(2):
                session.step("eval", eval_step, {"val_loss": (2.0 - step / 10, "losses")}, summary=True)
                eval_step += 1
    session.step("test", 0, {"test_loss": (0.5, "losses")}, summary=True)
    return session


def test_train_steps_puts_eval_steps_on_the_training_steps(tmp_path: Path) -> None:
    session = _loop(tmp_path / "run")
    in_process = session.history
    session.close()
    stored = tripwire.open_run(tmp_path / "run")
    for history in (in_process, stored):
        steps, values = history.series("val_loss", mode="eval")
        assert steps.tolist() == [0, 1, 2, 3, 4, 5, 6]
        assert history.train_steps("eval", steps).tolist() == [-1, 3, 3, 7, 7, 11, 11]
        assert history.train_steps("eval").tolist() == [-1, 3, 3, 7, 7, 11, 11]
        assert history.train_steps("test").tolist() == [11]
        assert history.train_steps("train", [0, 5, 99]).tolist() == [0, 5, -1]
        assert history.train_steps("eval", [42]).tolist() == [-1]  # no such eval step
    with pytest.raises(ValueError, match="mode"):
        stored.train_steps("validation")


def test_train_steps_of_a_run_without_training_is_minus_one(tmp_path: Path) -> None:
    session = tripwire.Session(out_dir=tmp_path / "run", rules=[])
    session.step("eval", 0, {"val_loss": (1.0, "losses")}, summary=True)
    session.close()
    assert tripwire.open_run(tmp_path / "run").train_steps("eval").tolist() == [-1]
    assert np.asarray(tripwire.open_run(tmp_path / "run").train_steps("predict")).size == 0

"""Trial 29i (a Keras 3 power user, torch backend): a fit resumed into the run it continues, and a fit
after one that raised where no hook of the callback saw it.

F1: a healthy fit resumed by ``keras.callbacks.BackupAndRestore`` (or ``fit(initial_epoch=N)``) into the
same ``out_dir``, with a new ``TripwireCallback`` that has no state, was stopped by a false
``oscillating_loss`` 48 steps after the resume: its rules started afresh and took the converged loss
for the loss's initial level, while ``tripwire watch`` on the same records found nothing. The rules
now judge the whole training: the session reads back the records of the steps before the resumed
epoch, and a finding the run holds from them is not made again.

F5: a second fit after a fit that raised in its validation pass (a layer, where no hook of the
callback sees the error) was not recorded as a training of its own (``open_run(...).trainings`` was
``{}``), while docs/keras.md says a fit after one that ended with an error is a new training.

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import logging
import os

os.environ["KERAS_BACKEND"] = "torch"

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype("float32")
    y = (x @ rng.normal(size=(8, 3))).argmax(1).astype("int64")
    return x, y


def mlp(lr: float = 0.01) -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu", name="h"),
                              keras.layers.Dense(3, name="out")])
    model.compile(keras.optimizers.Adam(lr), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


class Preempt(keras.callbacks.Callback):
    """Raises at the start of epoch ``epoch`` (or at its train batch ``batch``): a preemption."""

    def __init__(self, epoch: int, batch: int | None = None) -> None:
        super().__init__()
        self.epoch, self.batch, self.now = epoch, batch, -1

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.now = epoch
        if epoch == self.epoch and self.batch is None:
            raise RuntimeError("simulated preemption")

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self.now == self.epoch and batch == self.batch:
            raise RuntimeError("simulated preemption")


def test_a_healthy_fit_resumed_by_backup_and_restore_is_judged_as_the_whole_training(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # the trial's reproducer (t20_resume_rules.py crash): 12 epochs of 52 batches, preempted at epoch 6
    x, y = data(1024)
    fit: dict[str, Any] = dict(batch_size=16, epochs=12, shuffle=True, verbose=0, validation_split=0.2)
    backup, out = str(tmp_path / "backup"), tmp_path / "run"
    kw: dict[str, Any] = dict(out_dir=out, rules=["default"], actions=["log", "stop_training"])
    with pytest.raises(RuntimeError, match="simulated preemption"):
        mlp().fit(x, y, callbacks=[keras.callbacks.BackupAndRestore(backup), TripwireCallback(**kw), Preempt(6)],
                  **fit)
    resumed = TripwireCallback(**kw)
    with caplog.at_level(logging.INFO, logger="tripwire"):
        history = mlp().fit(x, y, callbacks=[keras.callbacks.BackupAndRestore(backup), resumed], **fit)
    assert resumed.stopped_by is None and resumed.findings == [], [str(f) for f in resumed.findings]
    assert len(history.history["loss"]) == 6  # epochs 6..11: the whole budget
    run = tripwire.open_run(out)
    assert run.status == "complete" and run.findings == []
    # the rules read the whole training: the resumed fit's steps after the earlier fit's, each once
    steps, _ = resumed.history.series("loss")
    assert steps.tolist() == list(range(12 * 52))
    eval_steps = resumed.history.steps("eval")
    assert eval_steps == run.steps("eval") and eval_steps == sorted(set(eval_steps))
    summaries = resumed.history.series("val_loss", mode="eval")[0].tolist()
    assert summaries == [k * 14 + 13 for k in range(12)]  # (13 batches a validation, then its summary)
    said = " | ".join(r.getMessage() for r in caplog.records if r.name == "tripwire")
    assert "continues from epoch 6" in said and "written after this checkpoint" not in said, said
    # tripwire watch on the same records agrees: nothing
    assert tripwire.watch(out, once=True, record=False) == []


def test_a_finding_before_the_resumed_epoch_is_not_made_again(tmp_path: Path) -> None:
    # input_not_normalized fires at step 0 of the first fit; a fit(initial_epoch=2) with a new callback
    # in the same out_dir used to find it again at its first save step and record it a second time
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(48, 8)) * 1000 + 5000).astype("float32")
    y = (x[:, 0] > 5000).astype("int64")
    model = mlp()
    first = TripwireCallback(out_dir=tmp_path, rules=["input_not_normalized"], save_interval=1)
    model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[first])
    assert [(f.rule, f.step) for f in first.findings] == [("input_not_normalized", 0)]
    resumed = TripwireCallback(out_dir=tmp_path, rules=["input_not_normalized"], save_interval=1)
    model.fit(x, y, batch_size=16, epochs=4, initial_epoch=2, verbose=0, callbacks=[resumed])
    assert resumed.findings == []
    assert [(f.rule, f.step) for f in tripwire.open_run(tmp_path).findings] == [("input_not_normalized", 0)]
    assert resumed.history.steps("train") == list(range(12))  # (read back: steps 0..5, then its own)


def test_a_fit_preempted_mid_epoch_resumes_with_each_step_once_in_the_rules_history(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # BackupAndRestore saves at epoch ends: a crash at batch 1 of epoch 2 leaves the run holding train
    # steps 6 and 7, which the resumed fit runs again; the rules read the resumed ones, once each, and
    # the session says the steps the run holds twice
    x, y = data(48)
    fit: dict[str, Any] = dict(batch_size=16, epochs=4, shuffle=False, verbose=0, validation_data=data(20, 1))
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="simulated preemption"):
        mlp().fit(x, y, callbacks=[keras.callbacks.BackupAndRestore(backup),
                                   TripwireCallback(out_dir=tmp_path / "run", save_interval=1), Preempt(2, batch=1)],
                  **fit)
    resumed = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        mlp().fit(x, y, callbacks=[keras.callbacks.BackupAndRestore(backup), resumed], **fit)
    said = [r.getMessage() for r in caplog.records if r.name == "tripwire"]
    assert any("train steps 6 to 7" in m and "written after this checkpoint" in m for m in said), said
    steps, losses = resumed.history.series("loss")
    assert steps.tolist() == list(range(12))
    run = tripwire.open_run(tmp_path / "run")
    assert run.steps("train") == list(range(12)) and run.status == "complete"
    # the values the rules read at the steps run again are the resumed fit's (the run holds both: series()
    # returns such a step twice, the resumed one second)
    held = dict(zip(*(a.tolist() for a in run.series("loss"))))
    assert len(run.series("loss")[0]) == 14 and losses.tolist() == [held[s] for s in range(12)]
    assert resumed.history.series("val_loss", mode="eval")[0].tolist() == [2, 5, 8, 11]


class FailsInValidation(keras.layers.Layer):
    """The identity, but raises in the validation pass while ``armed``."""

    armed = True

    def compute_output_shape(self, shape: Any) -> Any:
        return shape

    def call(self, x: Any, training: Any = None) -> Any:
        if not training and FailsInValidation.armed and getattr(getattr(x, "device", None), "type", "meta") != "meta":
            raise ValueError("planted failure in validation")
        return x


def test_a_fit_after_one_that_raised_in_its_validation_is_a_new_training(tmp_path: Path) -> None:
    # trial 29i F5 (t30_val_raise.py): the run stayed open after the first fit, and the second fit
    # through the same callback was taken for the same training: no boundary in the run
    x, y = data(128)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, name="h"), FailsInValidation(name="bv"),
                              keras.layers.Dense(3, name="out")])
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, include_collections=["activations"])
    fit: dict[str, Any] = dict(batch_size=32, verbose=0, validation_split=0.25)
    FailsInValidation.armed = True
    try:
        with pytest.raises(ValueError, match="planted failure in validation"):
            model.fit(x, y, epochs=2, callbacks=[cb], **fit)
        assert tripwire.open_run(tmp_path).status == "running"  # (as documented: no hook saw the error)
        FailsInValidation.armed = False
        model.fit(x, y, epochs=1, callbacks=[cb], **fit)
    finally:
        FailsInValidation.armed = True
    run = tripwire.open_run(tmp_path)
    assert run.status == "complete" and run.steps("train") == list(range(6))
    trainings = run.trainings[0]
    assert [t["continued"] for t in trainings] == [False, False]
    assert trainings[1]["steps"]["train"] == 3
    # the validation batch that raised keeps its eval step: the new training's validation follows it
    assert trainings[1]["steps"]["eval"] == 1 and run.steps("eval") == [1, 2]

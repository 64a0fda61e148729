"""Trial 28x2 (the Keras twin of trial 28a F7): a fit stopped by Keras's ``EarlyStopping``
(``model.stop_training`` set by another callback) read ``complete`` with no ``stop_reason``, like a
fit that ran its whole budget, where the Lightning callback records such a stop. It now ends
``stopped`` with that callback's reason (its monitor, epoch, patience, best value), or "by another
callback (...) or the model's own code" where no EarlyStopping stopped it; ``stopped_by`` stays None,
and a rule's or the tuner's stop keeps its own reason.

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import json
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

RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 4)).astype("float32")
Y = (X[:, 0] > 0).astype("float32")


def model_of(regression: bool = False) -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="d1"),
                              keras.layers.Dense(1, activation=None if regression else "sigmoid", name="out")])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse" if regression else "binary_crossentropy")
    return model


def never_improving() -> Any:
    """Stops at the end of the second epoch (epoch 1): no val_loss improves by 1e9."""
    return keras.callbacks.EarlyStopping(monitor="val_loss", patience=0, min_delta=1e9)


def fit(out: Path, *more: Any, model: Any = None, epochs: int = 6, **kw: Any) -> tuple[TripwireCallback, Any]:
    cb = kw.pop("cb", None) or TripwireCallback(out_dir=str(out), rules=["default"], save_interval=2, **kw)
    history = (model or model_of()).fit(X, Y, batch_size=16, epochs=epochs, verbose=0, validation_data=(X, Y),
                                        callbacks=[cb, *more])
    return cb, history


def end_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "workers" / "worker-00000.end.json").read_text())


@pytest.mark.parametrize("order", ["after", "before"])
def test_an_early_stopping_stop_is_the_runs_stop_reason(tmp_path: Path, order: str) -> None:
    out = tmp_path / "run"
    stopper = never_improving()
    cb = TripwireCallback(out_dir=str(out), rules=["default"], save_interval=2)
    model = model_of()
    callbacks = [cb, stopper] if order == "after" else [stopper, cb]
    history = model.fit(X, Y, batch_size=16, epochs=6, verbose=0, validation_data=(X, Y), callbacks=callbacks)
    assert len(history.history["loss"]) == 2 and stopper.stopped_epoch == 1  # (2 of 6 epochs, 4 steps each)
    assert cb.stopped_by is None  # (no finding stopped it)
    best = history.history["val_loss"][0]
    assert cb.stop_reason == (
        "model.stop_training was set outside tripwire (train step 7): EarlyStopping(monitor='val_loss'): epoch 2: "
        f"early stopping: val_loss did not improve by more than min_delta=1e+09 in the last 1 epoch(s) (patience=0); "
        f"best {best:.6g} at epoch 1")
    run = tripwire.open_run(out)
    assert run.status == "stopped"
    assert run.stop_reasons == {0: cb.stop_reason}
    assert end_of(out)["status"] == "stopped"


def test_another_callbacks_stop_is_said_as_set_outside_tripwire(tmp_path: Path) -> None:
    def stop(batch: int, logs: Any) -> None:
        if batch == 2:
            model.stop_training = True

    model = model_of()
    cb, history = fit(tmp_path / "run", keras.callbacks.LambdaCallback(on_train_batch_end=stop),
                      keras.callbacks.EarlyStopping(monitor="val_loss", patience=50), model=model)
    assert len(history.history["loss"]) == 1 and cb.steps["train"] == 3
    assert cb.stop_reason == ("model.stop_training was set outside tripwire (train step 2): by another callback "
                              "(LambdaCallback) or the model's own code (a train_step)")
    assert cb.stopped_by is None
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


def test_a_fit_that_ran_its_budget_stays_complete_without_a_reason(tmp_path: Path) -> None:
    cb, history = fit(tmp_path / "run", keras.callbacks.EarlyStopping(monitor="val_loss", patience=50), epochs=2)
    assert len(history.history["loss"]) == 2 and cb.stop_reason is None
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and run.stop_reasons == {}


def test_a_rules_stop_keeps_its_own_reason(tmp_path: Path) -> None:
    """A rule stops the fit at its first save step; another callback sets model.stop_training too at
    the epoch's end: the rule's finding is why it stopped."""
    model = model_of(regression=True)
    also = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: setattr(model, "stop_training", True))
    x = X.copy()
    x[:, 1] = np.nan  # (a NaN loss from the first step)
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"], actions=["log", "stop_training"],
                          save_interval=2)
    model.fit(x, Y, batch_size=16, epochs=3, verbose=0, callbacks=[cb, also])
    assert cb.stopped_by is not None and cb.stopped_by.rule == "exploding_tensor"
    assert cb.stop_reason == str(cb.stopped_by)


def test_a_tuners_stop_at_max_resource_is_no_outside_stop(tmp_path: Path) -> None:
    """The tuner's stop at the trial's max_resource sets model.stop_training with no reason (its
    training ran its whole budget): not read as a stop of another callback's."""
    from tripwire.tune._trial import Trial

    trial = Trial(0, {}, max_resource=2)
    cb, history = fit(tmp_path / "run", trial=trial, trial_metric="val_loss")
    assert len(history.history["loss"]) == 2 and trial.should_stop
    assert cb.stop_reason is None and cb.trial_stopped
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and run.stop_reasons == {}


def test_a_later_fit_starts_without_the_early_stop(tmp_path: Path) -> None:
    """An evaluate after the stopped fit keeps its reason; a later fit through the callback that runs
    its length ends complete, with none."""
    model = model_of()
    cb, _ = fit(tmp_path / "run", never_improving(), model=model)
    reason = cb.stop_reason
    assert reason is not None and "EarlyStopping" in reason
    model.evaluate(X, Y, verbose=0, callbacks=[cb])
    assert cb.stop_reason == reason
    fit(tmp_path / "run", model=model, epochs=1, cb=cb)
    assert cb.stop_reason is None
    assert end_of(tmp_path / "run")["status"] == "complete"


def test_terminate_on_nan_between_save_steps_is_the_stop_and_the_rule_finds_the_nan_at_the_close(tmp_path: Path) -> None:
    """TerminateOnNaN stops at a NaN loss at step 5 (no save step: every 10th); the loss kept there is
    judged as the run closes: the finding is recorded, stop_reason names the callback that stopped, and
    stopped_by is None: the rule's stop came after training had ended (trial 29j F2)."""
    x = np.repeat(X, 2, axis=0)
    x[20:, 1] = np.nan  # (from the sixth batch of 4 on, unshuffled)
    model = model_of(regression=True)
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"], actions=["log", "stop_training"],
                          save_interval=10)
    model.fit(x, np.repeat(Y, 2), batch_size=4, epochs=2, verbose=0, shuffle=False,
              callbacks=[cb, keras.callbacks.TerminateOnNaN()])
    assert cb.stop_reason == ("model.stop_training was set outside tripwire (train step 5): by another callback "
                              "(TerminateOnNaN) or the model's own code (a train_step)")
    assert cb.stopped_by is None and ("exploding_tensor", 5) in [(f.rule, f.step) for f in cb.findings]
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and run.stop_reasons == {0: cb.stop_reason}

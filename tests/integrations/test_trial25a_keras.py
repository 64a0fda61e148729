"""Trial 25a's Keras findings (the notebook user): a callback after tripwire's that raises in
``on_train_begin`` (a user's, or a second TripwireCallback refused the same out_dir) ends the run
``failed`` with every wrapper undone before the error leaves ``fit``; a retry with a new callback and
the same out_dir after a fit that died where no wrapper saw it (a data pipeline, a Ctrl-C in the
validation pass) ends the old run ``failed`` and captures, while a fit still running with that
out_dir (another thread) keeps it; a rule that stops training says so in one line, as on Lightning.

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

import gc  # noqa: E402
import logging  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(80, 6)).astype("float32")
Y = (X[:, 0] > 0).astype("int64")


def model_of(seed: int = 0, lr: float = 0.05) -> Any:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu", name="d1"),
                              keras.layers.Dense(2, name="out")], name="s")
    model.compile(keras.optimizers.SGD(lr), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def no_wrapper_left(model: Any) -> bool:
    opt = model.optimizer
    return ("apply" not in vars(opt) and "scale_loss" not in vars(opt)
            and not hasattr(model.train_function, "__wrapped__")
            and all("call" not in vars(layer) for layer in model.layers))


class Batches(keras.utils.PyDataset):
    """5 batches of 16; ``bad``: reading batch ``bad`` raises ``error`` (a corrupt file, a Ctrl-C)."""

    def __init__(self, bad: int | None = None, error: type[BaseException] = OSError) -> None:
        super().__init__()
        self.bad, self.error = bad, error

    def __len__(self) -> int:
        return 5

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if i == self.bad:
            raise self.error(f"batch {i}")
        return X[16 * i:16 * i + 16], Y[16 * i:16 * i + 16]


class RaiseAtTrainBegin(keras.callbacks.Callback):
    def on_train_begin(self, logs: Any = None) -> None:
        raise RuntimeError("user callback failed in on_train_begin")


@pytest.mark.parametrize("second", ["user", "tripwire"])
def test_a_callback_after_tripwire_raising_in_on_train_begin_ends_the_run_failed_without_wrappers(
        tmp_path: Path, second: str) -> None:
    # trial 25a finding 1: the run read `running`, optimizer.apply and scale_loss stayed wrapped, and
    # the cell run again with a new callback was refused its out_dir (on_epoch_begin was handled)
    model = model_of()
    model.fit(X, Y, batch_size=16, epochs=1, verbose=0)  # (the optimizer and train_function built)
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1)
    other = RaiseAtTrainBegin() if second == "user" else TripwireCallback(out_dir=tmp_path)
    error = (RuntimeError, "user callback failed") if second == "user" else (ConfigError, "this very fit's callbacks")
    with pytest.raises(error[0], match=error[1]):
        model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb, other])
    assert tripwire.open_run(tmp_path).status == "failed"
    assert no_wrapper_left(model) and "on_train_begin" not in vars(other)
    retry = TripwireCallback(out_dir=tmp_path, save_interval=1)  # the cell run again without the other one
    model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[retry])
    run = tripwire.open_run(tmp_path)
    assert run.status == "complete" and run.series("loss", mode="train")[0].tolist() == [0, 1, 2, 3, 4]
    assert no_wrapper_left(model)


@pytest.mark.parametrize("keep_old", [True, False], ids=["old-kept", "old-dropped"])
def test_a_retry_with_a_new_callback_and_the_same_out_dir_after_a_data_error_ends_the_old_run(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, keep_old: bool) -> None:
    # trial 25a finding 2: the retry (the notebook cell run again: a new callback, the same out_dir)
    # was refused for the rest of the kernel's life, naming a remedy that needed the old callback
    model = model_of()
    old = TripwireCallback(out_dir=tmp_path, save_interval=1)
    with pytest.raises(OSError, match="batch 3"):
        model.fit(Batches(bad=3), epochs=1, verbose=0, shuffle=False, callbacks=[old])
    assert tripwire.open_run(tmp_path).status == "running"
    if not keep_old:  # (the cell's name now points at the new callback; a new model too)
        del old
        model = model_of()
        gc.collect()
    for attempt in range(2):
        retry = TripwireCallback(out_dir=tmp_path, save_interval=1)
        with caplog.at_level(logging.WARNING, logger="tripwire"):
            caplog.clear()
            model.fit(Batches(), epochs=1, verbose=0, shuffle=False, callbacks=[retry])
        left_open = [r.getMessage() for r in caplog.records if "was left open" in r.getMessage()]
        assert len(left_open) == (1 if attempt == 0 else 0)
        if attempt == 0:
            assert str(tmp_path) in left_open[0] and "ends as failed" in left_open[0]
        assert tripwire.open_run(tmp_path).status == "complete" and retry.stopped_by is None
        assert no_wrapper_left(model)
    if keep_old:
        assert old.session.writer is not None and old.session.writer.closed


def test_a_retry_after_a_ctrl_c_in_the_validation_pass_ends_the_old_run(tmp_path: Path) -> None:
    # trial 25a finding 2: a KeyboardInterrupt while Keras reads the validation data (no wrapper sees it)
    model = model_of()
    with pytest.raises(KeyboardInterrupt):
        model.fit(Batches(), validation_data=Batches(bad=1, error=KeyboardInterrupt), epochs=1, verbose=0,
                  shuffle=False, callbacks=[TripwireCallback(out_dir=tmp_path, save_interval=1)])
    assert tripwire.open_run(tmp_path).status == "running"  # (no wrapper saw it: as documented)
    gc.collect()
    retry = TripwireCallback(out_dir=tmp_path, save_interval=1)
    model.fit(Batches(), validation_data=Batches(), epochs=1, verbose=0, shuffle=False, callbacks=[retry])
    assert tripwire.open_run(tmp_path).status == "complete" and no_wrapper_left(model)


def test_a_run_being_written_by_a_fit_in_another_thread_is_still_refused(tmp_path: Path) -> None:
    # trial 25a: only a run whose fit has exited is ended by a new callback; a live one keeps its out_dir
    started, release = threading.Event(), threading.Event()

    class Hold(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if batch == 1:
                started.set()
                release.wait(60)

    live = TripwireCallback(out_dir=tmp_path, save_interval=1)
    errors: list[BaseException] = []

    def train() -> None:
        try:
            model_of().fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[live, Hold()])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=train, name="trainer")
    thread.start()
    try:
        assert started.wait(60)
        model = model_of(1)
        with pytest.raises(ConfigError, match="a fit running in thread 'trainer' writes it"):
            model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[TripwireCallback(out_dir=tmp_path)])
        assert no_wrapper_left(model)
    finally:
        release.set()
        thread.join(60)
    assert not errors and tripwire.open_run(tmp_path).status == "complete"
    assert tripwire.open_run(tmp_path).series("loss", mode="train")[0].tolist() == [0, 1, 2, 3, 4]


def test_a_rule_that_stops_training_says_so_in_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 25a (note): Keras logged only the rule's finding; Lightning adds the line below
    model = model_of(lr=1e38)  # (overflows float32)
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1,
                          rules=[{"name": "exploding_tensor", "actions": ["log", "stop_training"]}])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        model.fit(X, Y, batch_size=4, epochs=3, verbose=0, callbacks=[cb])
    assert cb.stopped_by is not None
    said = [r for r in caplog.records if r.getMessage().startswith("tripwire: stopping training")]
    assert [r.getMessage() for r in said] == [
        f"tripwire: stopping training: rule 'exploding_tensor' at step {cb.stopped_by.step} (train)"]
    assert said[0].levelno == logging.WARNING

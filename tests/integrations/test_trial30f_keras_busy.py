"""Trial 30f (a data scientist in notebooks), Keras: the same TripwireCallback given to a second
``fit`` (or ``evaluate``) while its first ``fit`` still runs in a background thread is refused at
the second call's start with a ConfigError naming the thread, and the running fit is left as it is
(F1: the second fit took the callback over, its end closed the run under the first, which died with
StoreClosedError, and the run read ``complete`` with part of its steps).

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

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


def model_of(seed: int = 0) -> Any:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu", name="d1"),
                              keras.layers.Dense(2, name="out")], name="s")
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class Hold(keras.callbacks.Callback):
    """Holds the fit at its second batch's end until released."""

    def __init__(self) -> None:
        super().__init__()
        self.started, self.release = threading.Event(), threading.Event()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if batch == 1:
            self.started.set()
            self.release.wait(60)


def in_background(cb: TripwireCallback, hold: Hold, model: Any, errors: list[BaseException]) -> threading.Thread:
    def train() -> None:
        try:
            model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb, hold])
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    thread = threading.Thread(target=train, name="trainer")
    thread.start()
    assert hold.started.wait(60)
    return thread


@pytest.mark.parametrize("second", ["fit", "evaluate"])
def test_the_same_callback_in_a_second_call_while_its_fit_runs_in_a_thread_is_refused(tmp_path: Path,
                                                                                     second: str) -> None:
    cb, hold, errors = TripwireCallback(out_dir=tmp_path, save_interval=1), Hold(), []
    first = model_of()
    thread = in_background(cb, hold, first, errors)
    try:
        other = model_of(1)
        call = (lambda: other.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])) if second == "fit" \
            else (lambda: other.evaluate(X, Y, batch_size=16, verbose=0, callbacks=[cb]))
        with pytest.raises(ConfigError, match=rf"callbacks: this {second} was given a TripwireCallback \(out_dir "
                                              rf"'.*'\) that a fit running in thread 'trainer' is using"):
            call()
        assert cb.model is first  # (the running fit's model stays the callback's)
    finally:
        hold.release.set()
        thread.join(60)
    assert not errors
    run = tripwire.open_run(tmp_path)
    assert run.status == "complete"
    assert run.series("loss", mode="train")[0].tolist() == [0, 1, 2, 3, 4]
    assert run.steps("test") == []
    # once the fit has ended, the callback takes the next fit as before
    model_of(2).fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    assert tripwire.open_run(tmp_path).series("loss", mode="train")[0].tolist() == list(range(10))


class Peek(keras.callbacks.Callback):
    """Keeps the TripwireCallback's repr at the third train batch's end."""

    def __init__(self, cb: TripwireCallback) -> None:
        super().__init__()
        self.cb, self.seen = cb, ""

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if batch == 2:
            self.seen = repr(self.cb)


def test_the_callback_repr_says_out_dir_rules_and_state(tmp_path: Path) -> None:
    # trial 30f F6: a notebook cell showing the callback printed <...TripwireCallback object at 0x...>
    cb = TripwireCallback(out_dir=tmp_path, rules=["exploding_tensor"], actions=["log", "stop_training"],
                           save_interval=1)
    assert repr(cb) == f"TripwireCallback(out_dir={str(tmp_path)!r}, rules=['exploding_tensor'], not fitted, findings=0)"
    peek = Peek(cb)
    model_of().fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb, peek])
    assert peek.seen == f"TripwireCallback(out_dir={str(tmp_path)!r}, rules=['exploding_tensor'], fitting, 3 train steps, findings=0)"
    assert repr(cb) == f"TripwireCallback(out_dir={str(tmp_path)!r}, rules=['exploding_tensor'], run complete, findings=0)"
    stopping = TripwireCallback(out_dir=tmp_path / "nan", rules=["exploding_tensor"], actions=["log", "stop_training"],
                           save_interval=1)
    model = model_of()
    model.fit(X * np.float32("nan"), Y, batch_size=16, epochs=1, verbose=0, callbacks=[stopping])
    assert repr(stopping) == (f"TripwireCallback(out_dir={str(tmp_path / 'nan')!r}, rules=['exploding_tensor'], run stopped, "
                              f"findings=1, stopped_by='exploding_tensor')")

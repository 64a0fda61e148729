"""TripwireCallback for Keras 3: when the callback claims its run, and which kinds it offers.

- A fit that raises before Keras calls any callback (the loss traced on a first batch during
  Keras's build, before ``on_train_begin``: a loss that does not fit the labels' shape) claims no
  run: nothing is left that reads ``running`` for ever, or ``complete`` with 0 records at exit.
- The callback offers only the kinds some due collection wants: an opt-in rule or a short
  collections list does not end the run with a warning that kinds nobody asked for "went to no
  collection".

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

import gc  # noqa: E402
import logging  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
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

from test_keras import ALL, X, Y, compiled, sequential  # noqa: E402  (the Keras tests' data and models)

NOWHERE = "went to no collection"


def mismatched() -> Any:
    """A 10-way softmax under binary_crossentropy with labels of shape (n,): Keras raises while it
    builds the model (a first symbolic pass of the loss), before it calls any callback."""
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(10, activation="softmax", name="d")])
    model.compile("adam", "binary_crossentropy")
    return model


class Began(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.began = False

    def on_train_begin(self, logs: Any = None) -> None:
        self.began = True


# ------------------------------------------------------------------------------------ finding 2
def test_a_fit_that_raises_before_its_first_hook_claims_no_run(tmp_path: Path) -> None:
    labels = np.arange(48, dtype="float32") % 10
    for i in range(2):  # a second fit in the same process, with a new callback: the same
        out = tmp_path / f"run-{i}"
        began, cb = Began(), TripwireCallback(rules=["default"], actions=["log", "stop_training"], out_dir=out)
        with pytest.raises(ValueError, match="same shape"):
            mismatched().fit(X, labels, batch_size=8, epochs=1, verbose=0, callbacks=[began, cb])
        assert not began.began  # (the premise: Keras raised before on_train_begin)
        assert not (out / "run.json").exists() and not (out / "workers").exists()  # no run to read 'running'
        assert cb.findings == [] and cb.stopped_by is None
        cb.close()  # nothing to end: it claims nothing either
        assert not (out / "run.json").exists()
        del cb
        gc.collect()
        assert not (out / "run.json").exists()


def test_the_next_fit_of_a_callback_whose_fit_raised_before_its_first_hook_starts_the_run(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path, save_interval=2)
    with pytest.raises(ValueError, match="same shape"):
        mismatched().fit(X, np.arange(48, dtype="float32") % 10, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    compiled(sequential()).fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    run = tripwire.open_run(tmp_path)
    assert run.status == "complete" and run.steps() == [0, 1, 2]


def test_the_run_is_claimed_at_the_first_hook_or_when_the_session_is_read(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "a")
    assert not (tmp_path / "a").exists()
    assert cb.session.out_dir == tmp_path / "a" and (tmp_path / "a" / "run.json").exists()  # asked for: claimed
    cb.close()
    assert tripwire.open_run(tmp_path / "a").status == "complete"
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path / "b")
    model.evaluate(X, Y, batch_size=16, verbose=0, callbacks=[cb])  # evaluate's first hook claims it too
    run = tripwire.open_run(tmp_path / "b")
    assert run.status == "complete" and run.steps(mode="test") != []


EXIT_SCRIPT = r"""
import gc, sys
import numpy as np
import keras
from tripwire.integrations.keras import TripwireCallback
out = sys.argv[1]
X = np.random.default_rng(0).normal(size=(48, 6)).astype("float32")
for i in range(2):  # the loss does not fit the labels: Keras raises before any callback hook, twice
    m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(10, activation="softmax")])
    m.compile("adam", "binary_crossentropy")
    cb = TripwireCallback(rules=["default"], out_dir=f"{out}/pre-{i}")
    try:
        m.fit(X, np.arange(48.0) % 10, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    except ValueError:
        pass
def batches():
    for _ in range(3):
        yield X[:8], (X[:8, 0] > 0).astype("int64")
    raise RuntimeError("the data pipeline broke")
m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(2)])
m.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
cb = TripwireCallback(out_dir=f"{out}/pipeline", save_interval=2)
try:  # raises where no wrapper sees it, after 3 steps; then the callback and the model are dropped
    m.fit(batches(), steps_per_epoch=6, epochs=1, verbose=0, callbacks=[cb])
except RuntimeError:
    pass
del m, cb
gc.collect()
class Breaks(keras.callbacks.Callback):  # a later callback raises in on_train_begin: no batch ever ran
    def on_train_begin(self, logs=None):
        raise RuntimeError("another callback broke")
m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(2)])
m.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
begun = TripwireCallback(out_dir=f"{out}/begun", save_interval=2)
try:
    m.fit(X, (X[:, 0] > 0).astype("int64"), batch_size=8, epochs=1, verbose=0, callbacks=[begun, Breaks()])
except RuntimeError:
    pass
"""


def test_at_exit_a_fit_that_raised_is_failed_or_left_no_run(tmp_path: Path) -> None:
    env = {**os.environ, "KERAS_BACKEND": "torch"}
    proc = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / "pre-0").exists() and not (tmp_path / "pre-1").exists()  # neither running nor complete
    run = tripwire.open_run(tmp_path / "pipeline")  # dropped mid-fit: still ended at exit, as failed
    assert run.status == "failed" and run.steps() == [0, 1, 2]
    assert "still open" in proc.stderr and "marked failed" in proc.stderr, proc.stderr[-3000:]
    # a fit that began (on_train_begin) and raised before its first batch: failed, not complete
    assert tripwire.open_run(tmp_path / "begun").status == "failed"


# ------------------------------------------------------------------------------------ finding 9
@pytest.mark.parametrize("kind", ALL)
def test_only_the_kinds_asked_for_are_offered(tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, save_interval=2, collections=[kind])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb], validation_data=(X[:16], Y[:16]))
    assert not [r for r in caplog.records if NOWHERE in r.getMessage()], caplog.text
    assert set(cb.session._offered) == {kind}, cb.session._offered  # what was handed to the session
    assert list(tripwire.open_run(tmp_path).collections()) == [kind]


@pytest.mark.parametrize("config", [
    {"rules": [{"name": "dead_relu"}]},
    {"rules": [{"name": "saturated_activation"}]},
    {"rules": ["poor_weight_initialization"], "collections": ["losses", "weights"]},
    {"rules": ["default"], "collections": ["losses", "weights"]},
], ids=["dead_relu", "saturated_activation", "poor_weight_initialization", "default+weights"])
def test_an_opt_in_rule_ends_without_a_warning_about_kinds_nobody_asked_for(
        tmp_path: Path, config: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, **config)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=8, epochs=3, verbose=0, callbacks=[cb])
    assert not [r for r in caplog.records if NOWHERE in r.getMessage()], caplog.text
    assert set(cb.session._offered) <= set(cb.session.collections)
    assert tripwire.open_run(tmp_path).status == "complete"


def test_a_collection_that_drops_a_kind_the_user_asked_for_still_says_so(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    # a collection of the user's own that takes nothing of what its kind offers is still named
    # (the callback offers the weights: the 'w' collection wants that kind)
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, save_interval=2,
                          collections={"w": {"kinds": ["weights"], "include": ["nothing.*"], "reductions": ["l2"]}})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    assert any("collection 'w' matched no tensor" in r.getMessage() for r in caplog.records), caplog.text

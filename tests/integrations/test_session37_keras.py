"""Session 37, the Keras callback:

- Trial 36q: a fit that trains nothing (``fit(epochs=2, initial_epoch=2)``, the notebook cell run
  again after a fit a rule stopped) made the run ``complete``, dropped its stop reason and
  ``stopped_by``, and added an empty training. It now leaves the run and the callback as the last
  fit left them, as the Lightning callback does; a later fit that trains goes on as before.
- Trial 36k (the Lightning twin fixed in session 36): a collection of the user's that takes one
  layer's tensors, beside the default rules, counted as one that may take the optimizer's learning
  rates and update ratios, so every save step readied them (a host sync of every variable). The
  callback now asks ``Session.optimizer_wanted`` with the names it would offer.

Keras runs on the torch backend, set before keras is imported."""


from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


def _model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model


def test_a_fit_that_trains_nothing_leaves_the_stopped_run_as_it_was(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 4)).astype("float32"), rng.normal(size=(64, 1)).astype("float32")
    bad = x.copy()
    bad[20:] = np.nan
    cb = TripwireCallback(rules=["default"], actions=["log", "stop_training"], out_dir=tmp_path / "run")
    model = _model()
    model.fit(bad, y, batch_size=16, epochs=2, callbacks=[cb], verbose=0)
    first = (cb.stopped_by, cb.stop_reason)
    assert first[0] is not None and first[0].rule == "exploding_tensor"
    before = tripwire.open_run(tmp_path / "run")
    model.fit(x, y, batch_size=16, epochs=2, initial_epoch=2, callbacks=[cb], verbose=0)  # (trains nothing)
    assert (cb.stopped_by, cb.stop_reason) == first
    after = tripwire.open_run(tmp_path / "run")
    assert after.status == "stopped" and after.trainings == before.trainings
    assert after.steps() == before.steps()
    # a fit that trains goes on, in a training of its own (the model is the one the stop left)
    model.fit(x, y, batch_size=16, epochs=1, callbacks=[cb], verbose=0)
    last = tripwire.open_run(tmp_path / "run")
    assert last.status == "complete" and cb.stopped_by is None
    assert len(last.steps()) > len(before.steps())


@pytest.mark.parametrize("include, full", [(["^dense_a/kernel$"], False), (["^update_ratio/dense_a/kernel$"], True)])
def test_a_collection_of_one_layer_does_not_capture_the_optimizer_in_full(tmp_path: Path, include: list[str],
                                                                           full: bool) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="dense_a"),
                              keras.layers.Dense(1, name="dense_b")])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    cb = TripwireCallback(rules=["default"], out_dir=tmp_path / "run", save_interval=2,
                          collections={"mine": {"include": include, "reductions": ["l2"]}, "losses": None})
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 4)).astype("float32"), rng.normal(size=(64, 1)).astype("float32")
    model.fit(x, y, batch_size=16, epochs=1, callbacks=[cb], verbose=0)
    assert cb._full_optimizer() is full
    names = tripwire.open_run(tmp_path / "run").tensor_names()
    assert ("update_ratio/dense_a/kernel" in names) is full
    if not full:
        assert not any(n.startswith(("update_ratio/", "lr/")) for n in names), names


def test_a_callback_copies_before_its_first_fit_and_says_why_not_after(tmp_path: Path) -> None:
    """Trial 37m (and 36q): a fitted callback's copy raised internal TypeErrors (a weak reference, then
    the Session's); before a fit a copy works (KerasTuner and scikit-learn's clone copy callbacks)."""
    import copy
    import pickle

    cb = TripwireCallback(out_dir=tmp_path / "run")
    twin = copy.deepcopy(cb)
    assert pickle.loads(pickle.dumps(cb)).out_dir == cb.out_dir
    x, y = np.zeros((16, 4), dtype="float32"), np.zeros((16, 1), dtype="float32")
    _model().fit(x, y, epochs=1, batch_size=8, verbose=0, callbacks=[twin])
    assert tripwire.open_run(tmp_path / "run").status == "complete"
    for how in (copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match=r"cannot copy or pickle TripwireCallback\(out_dir='.*run'\) once a fit has "
                                            r"begun with it: it holds its run, which its next fit continues; copy it "
                                            r"before its first fit"):
            how(twin)


def test_a_stop_at_an_eval_step_names_the_train_step_it_followed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Trial 38f: "stopping training at eval step 0: rule 'exploding_tensor' at step 5 (train)" named
    no train step, where an eval step elsewhere says the train step it followed."""
    import logging

    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(200, 4)).astype("float32")
    y = (x.sum(1) > 0).astype("float32")[:, None]
    x[5 * 20 + 3, 0] = np.nan  # (batch 5 of the first epoch: a NaN loss at train step 5)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=10, rules=["default"], actions=["log", "stop_training"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _model().fit(x, y, batch_size=20, epochs=3, shuffle=False, validation_data=(np.ones((40, 4), "float32"), y[:40]),
                     callbacks=[cb], verbose=0)
    said = [r.getMessage() for r in caplog.records if "stopping training" in r.getMessage()]
    assert said == ["tripwire: stopping training at eval step 0, after train step 9: rule 'exploding_tensor' at step 5 "
                    "(train)"]


def test_the_repr_after_a_fit_that_raised_where_no_hook_saw_it(tmp_path: Path) -> None:
    """Trial 38k: ``fitting, 28 train steps`` after the fit had raised in its data pipeline and returned."""

    class Broken(keras.utils.PyDataset):
        def __len__(self) -> int:
            return 10

        def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
            if i == 4:
                raise OSError("the data's disk went away")
            return np.ones((8, 4), "float32"), np.zeros((8, 1), "float32")

    cb = TripwireCallback(out_dir=tmp_path / "run")
    with pytest.raises(OSError):
        _model().fit(Broken(), epochs=1, verbose=0, callbacks=[cb])
    shown = repr(cb)
    assert "fitting" not in shown and "run open, its fit exited after" in shown, shown
    cb.close()


def test_an_evaluate_through_a_new_callback_keeps_a_stopped_runs_end_and_counts_on(tmp_path: Path) -> None:
    """Trial 38p (found on Lightning, the same on Keras): evaluate() through a new callback on the out_dir of
    a fit a rule stopped made the run complete with no stop reason; a second such evaluate wrote its test
    steps over the first's."""
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(200, 4)).astype("float32")
    y = x.sum(1, keepdims=True)
    x[5 * 20 + 3, 0] = np.nan  # (a NaN loss at train step 5)
    out = tmp_path / "run"
    model = _model()
    model.fit(x, y, batch_size=20, epochs=2, verbose=0,
              callbacks=[TripwireCallback(out_dir=out, save_interval=10, rules=["default"],
                                          actions=["log", "stop_training"])])
    fitted = tripwire.open_run(out)
    assert fitted.status == "stopped"
    for _ in range(2):
        model.evaluate(x[110:], y[110:], verbose=0, callbacks=[TripwireCallback(out_dir=out)])
    run = tripwire.open_run(out)
    assert run.status == "stopped" and run.stop_reasons == fitted.stop_reasons
    assert not run.dataframe()["superseded"].any() and len(run.steps("test")) == 3

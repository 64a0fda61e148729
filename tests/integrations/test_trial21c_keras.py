"""Trial 21c's Keras findings: a retry with a new callback after a fit that raised in the data
pipeline captures as a first fit does (the old run ends failed); two callbacks in one fit leave
no wrapper behind (nested wrappers undone in any order); train-side epoch logs another callback
adds before tripwire's ``on_epoch_end`` (ReduceLROnPlateau's ``learning_rate``) are metrics.

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

import logging  # noqa: E402
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
X = RNG.normal(size=(80, 6)).astype("float32")
Y = (X[:, 0] > 0).astype("int64")


def model_of(seed: int = 0) -> Any:
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu", name="d1"),
                              keras.layers.Dense(2, name="out")], name="s")
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class Batches(keras.utils.PyDataset):
    """5 batches of 16; ``bad``: reading batch 3 raises (a corrupt file), as in the trial's repro."""

    def __init__(self, bad: bool) -> None:
        super().__init__()
        self.bad = bad

    def __len__(self) -> int:
        return 5

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if self.bad and i == 3:
            raise OSError("corrupt file at batch 3")
        return X[16 * i:16 * i + 16], Y[16 * i:16 * i + 16]


def no_wrapper_left(model: Any) -> bool:
    opt = model.optimizer
    return ("apply" not in vars(opt) and "scale_loss" not in vars(opt)
            and not hasattr(model.train_function, "__wrapped__")
            and all("call" not in vars(layer) for layer in model.layers)
            and [layer.activation for layer in model.layers] == [keras.activations.relu, keras.activations.linear])


def test_a_retry_with_a_new_callback_after_a_data_error_captures_as_a_first_fit(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 21c: the first fit's wrappers stayed on the optimizer and train_function; the new
    # callback wrapped them, and the old one, ending its run at the retry's first step, undid the
    # new one's too: no gradients, Keras's running-mean loss, and warnings blaming a custom
    # train_step and a LossScaleOptimizer
    kw: dict[str, Any] = {"save_interval": 1, "include_collections": ["gradients", "activations"]}
    model = model_of()
    first = TripwireCallback(out_dir=tmp_path / "a", **kw)
    with pytest.raises(OSError, match="corrupt file"):
        model.fit(Batches(bad=True), epochs=1, verbose=0, shuffle=False, callbacks=[first])
    start = model.get_weights()
    retry = TripwireCallback(out_dir=tmp_path / "b", **kw)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(Batches(bad=False), epochs=1, verbose=0, shuffle=False, callbacks=[retry])
    said = " | ".join(r.getMessage() for r in caplog.records)
    assert "scale_loss" not in said and "apply did not run" not in said and "captured nothing" not in said, said
    assert tripwire.open_run(tmp_path / "a").status == "failed"  # ended at the retry's first step
    assert no_wrapper_left(model)
    # the same fit from the same weights, as a first fit (SGD keeps no state but its step count)
    control = model_of()
    control.set_weights(start)
    model_first = TripwireCallback(out_dir=tmp_path / "c", **kw)
    control.fit(Batches(bad=False), epochs=1, verbose=0, shuffle=False, callbacks=[model_first])
    b, c = tripwire.open_run(tmp_path / "b"), tripwire.open_run(tmp_path / "c")
    assert b.status == "complete" and b.tensor_names() == c.tensor_names()
    assert any(name.startswith("gradients/") for name in b.tensor_names())
    for name, reduction in (("loss", "raw"), ("gradients/d1/kernel", "l2"), ("d1/output", "mean")):
        steps, values = b.series(name, reduction)
        assert steps.tolist() == list(range(5)), name
        np.testing.assert_allclose(values, c.series(name, reduction)[1], rtol=1e-5, err_msg=name)


@pytest.mark.parametrize("with_data_error", [False, True])
def test_two_callbacks_in_one_fit_leave_no_wrapper_and_both_capture(tmp_path: Path, with_data_error: bool) -> None:
    # trial 21c (issue 5: the optimizer restored after fit): the first callback's end undid both
    # wrappers, and the second's then put the first's back on the optimizer for good
    model = model_of()
    kw: dict[str, Any] = {"save_interval": 1, "include_collections": ["gradients", "activations"]}
    a = TripwireCallback(out_dir=tmp_path / "a", **kw)
    b = TripwireCallback(out_dir=tmp_path / "b", **kw)
    if with_data_error:  # stale wrappers of a third under both: undone at the first step
        with pytest.raises(OSError, match="corrupt file"):
            model.fit(Batches(bad=True), epochs=1, verbose=0, callbacks=[TripwireCallback(out_dir=tmp_path / "x")])
    model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[a, b])
    assert no_wrapper_left(model)
    for run in (tripwire.open_run(tmp_path / "a"), tripwire.open_run(tmp_path / "b")):
        assert run.status == "complete"
        assert run.tensor("gradients/d1/kernel").steps() == list(range(5))
        assert run.tensor("d1/output").steps() == list(range(5))
    np.testing.assert_allclose(tripwire.open_run(tmp_path / "a").series("gradients/d1/kernel", "l2")[1],
                               tripwire.open_run(tmp_path / "b").series("gradients/d1/kernel", "l2")[1], rtol=1e-6)
    if with_data_error:
        assert tripwire.open_run(tmp_path / "x").status == "failed"
    history = model.fit(X, Y, batch_size=16, epochs=1, verbose=0)  # a plain fit after: nothing of ours runs
    assert np.isfinite(history.history["loss"]).all() and no_wrapper_left(model)


class Target:
    def f(self, x: int) -> int:
        return x


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (0, 2, 1), (1, 2, 0), (2, 0, 1)])
def test_nested_wrappers_are_undone_in_any_order(order: tuple[int, ...]) -> None:
    """Three callbacks wrap one method in turn and undo their wrappers in any order: while some
    remain, each call runs the remaining ones (a wrapper undone under another passes straight
    through); once all are undone the method is the class's again."""
    target = Target()
    cbs = [TripwireCallback(out_dir=None) for _ in range(3)]
    seen: list[int] = []

    def wrapping(i: int, original: Any) -> Any:
        def f(x: int) -> int:
            seen.append(i)
            return original(x)
        return f

    for i, cb in enumerate(cbs):
        cb._patch(cb._patches, target, "f", wrapping(i, target.f))
    undone: set[int] = set()
    for i in order:
        cbs[i]._undo(cbs[i]._patches)
        undone.add(i)
        seen.clear()
        assert target.f(7) == 7
        assert seen == [j for j in (2, 1, 0) if j not in undone], (order, i)
    assert "f" not in vars(target)


def test_a_value_set_over_a_wrapper_is_kept_when_it_is_undone() -> None:
    # (Keras's compile() sets model.train_function = None: undoing our wrapper must not put it back)
    target = Target()
    cb = TripwireCallback(out_dir=None)
    cb._patch(cb._patches, target, "f", lambda x: -x)
    assert target.f(3) == -3
    object.__setattr__(target, "f", None)
    cb._undo(cb._patches)
    assert vars(target)["f"] is None


def _lr_fit(tmp_path: Path, tripwire_first: bool) -> tuple[Any, list[dict[str, Any]]]:
    model = model_of()
    logs: list[dict[str, Any]] = []
    plateau = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=0, min_delta=10.0)
    seen = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, l: logs.append(dict(l)))
    cb = TripwireCallback(out_dir=tmp_path, save_interval=4)
    model.fit(X, Y, batch_size=16, epochs=3, verbose=0, validation_data=(X[:32], Y[:32]),
              callbacks=[cb, plateau, seen] if tripwire_first else [plateau, seen, cb])
    return tripwire.open_run(tmp_path), logs


def test_learning_rate_from_reduce_lr_on_plateau_is_a_metric_when_tripwire_comes_after(tmp_path: Path) -> None:
    # trial 21c: the train-side epoch logs were never stored, whatever the order (docs/keras.md
    # implied they were with tripwire after ReduceLROnPlateau)
    run, logs = _lr_fit(tmp_path, tripwire_first=False)
    steps, values = run.series("learning_rate")
    assert steps.tolist() == [4, 9, 14]  # each epoch's last train step (5 batches an epoch), mode train
    np.testing.assert_allclose(values, [float(log["learning_rate"]) for log in logs], rtol=1e-6)
    assert run.tensor("learning_rate").modes() == ["train"]
    assert "learning_rate" in run.tensor_names("metrics")
    # the batch's own loss stays the train loss at those steps (not the epoch's running mean)
    assert run.series("loss")[0].tolist() == list(range(15))


def test_learning_rate_written_after_tripwire_is_not_captured(tmp_path: Path) -> None:
    run, logs = _lr_fit(tmp_path, tripwire_first=True)
    assert all("learning_rate" in log for log in logs) and "learning_rate" not in run.tensor_names()

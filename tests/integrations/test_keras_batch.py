"""The Keras callback's ``inputs``, ``labels`` and ``predictions``: taken from the arguments of
``model.compute_loss`` (wrapped on save steps that want them only), in train, eval and test modes;
the rules that need them (``input_not_normalized``, ``class_imbalance``) on real fits; a model's
own Rescaling/Normalization layer; structured inputs and outputs; a custom ``train_step`` that does
not call ``compute_loss``.

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

BATCH_KINDS = ["inputs", "labels", "predictions"]
RNG = np.random.default_rng(0)
X = RNG.normal(size=(48, 6)).astype("float32")
Y = (X[:, 0] > 0).astype("int64")


def mlp(*first: Any, out: int = 2, activation: str | None = None) -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((X.shape[1],)), *first, keras.layers.Dense(8, activation="relu", name="d1"),
                              keras.layers.Dense(out, activation=activation, name="out")])
    model.compile(keras.optimizers.SGD(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=activation is None))
    return model


class Spy(keras.callbacks.Callback):
    """Placed after tripwire's callback: whether ``compute_loss`` is wrapped during each batch."""

    def __init__(self) -> None:
        super().__init__()
        self.wrapped: list[bool] = []

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.wrapped.append("compute_loss" in vars(self.model))


def test_train_eval_and_test_batches_are_captured_on_save_steps_only(tmp_path: Path) -> None:
    model, spy = mlp(), Spy()
    cb = TripwireCallback(out_dir=tmp_path, include_collections=BATCH_KINDS, save_interval=2)
    model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, validation_data=(X[:16], Y[:16]), callbacks=[cb, spy],
              verbose=0)
    # the wrapper exists on the save steps' batches only (0, 2, 4), and is gone after the fit
    assert spy.wrapped == [True, False, True, False, True, False]
    assert "compute_loss" not in vars(model)
    model.evaluate(X[:8], Y[:8], batch_size=8, callbacks=[cb], verbose=0)
    run = tripwire.open_run(tmp_path)
    labels, inputs, preds = run.tensor("labels"), run.tensor("inputs"), run.tensor("predictions")
    assert labels.steps("train") == inputs.steps("train") == preds.steps("train") == [0, 2, 4]
    for step in (0, 2, 4):
        np.testing.assert_array_equal(labels.value(step, mode="train"), Y[8 * step:8 * step + 8])
        assert inputs.value("mean", step, mode="train") == pytest.approx(float(X[8 * step:8 * step + 8].mean()), rel=1e-5)
        assert inputs.value("max", step, mode="train") == pytest.approx(float(X[8 * step:8 * step + 8].max()))
        assert preds.value(step, mode="train").shape == (8, 2)
    # validation (eval) batches 0 and 1 are saved (every step of an evaluation); the predictions
    # there are the trained model's own outputs on those batches
    assert labels.steps("eval") == [0]  # save_interval=2 in eval as well: batches 0 (and 2, 4 ... of later epochs)
    np.testing.assert_allclose(preds.value(0, mode="eval"), model.predict(X[:8], verbose=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(labels.value(0, mode="test"), Y[:8])


def test_input_not_normalized_stops_a_fit_on_raw_inputs(tmp_path: Path) -> None:
    model = mlp()
    raw = X * 40 + 250
    cb = TripwireCallback(out_dir=tmp_path / "raw", rules=[{"name": "input_not_normalized", "actions": ["stop_training"]}])
    history = model.fit(raw, Y, batch_size=8, epochs=3, shuffle=False, callbacks=[cb], verbose=0)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "input_not_normalized"
    assert cb.stopped_by.step == 0 and cb.stopped_by.details["mean"] == pytest.approx(float(raw[:8].mean()), rel=1e-5)
    assert len(history.history["loss"]) == 1  # stopped in the first epoch
    # the twin on standardised inputs: no finding, all epochs
    twin = TripwireCallback(out_dir=tmp_path / "std", rules=[{"name": "input_not_normalized", "actions": ["stop_training"]}])
    history = mlp().fit(X, Y, batch_size=8, epochs=3, callbacks=[twin], verbose=0)
    assert twin.findings == [] and len(history.history["loss"]) == 3


@pytest.mark.parametrize("layer, name", [("rescaling", None), ("rescaling", "pixels_to_unit"), ("normalization", None),
                                         ("normalization", "norm")])
def test_a_model_that_rescales_its_inputs_itself_is_not_flagged(tmp_path: Path, layer: str, name: str | None) -> None:
    # trial 16c: a Rescaling named "scale" or "pixels_to_unit" was flagged (the rule matched names)
    raw = X * 40 + 250
    if layer == "rescaling":
        first = keras.layers.Rescaling(1 / 40, offset=-250 / 40, name=name)
    else:
        first = keras.layers.Normalization(name=name)
        first.adapt(raw)
    cb = TripwireCallback(out_dir=tmp_path, rules=["input_not_normalized"], save_interval=1)
    mlp(first).fit(raw, Y, batch_size=8, epochs=1, shuffle=False, callbacks=[cb], verbose=0)
    assert cb.findings == []
    run = tripwire.open_run(tmp_path)
    # the input is captured as the model's own layer makes it: what the rest of the model learns from
    assert run.tensor_names("inputs") == ["inputs"]
    expected = (raw[:8] - raw.mean(axis=0)) / raw.std(axis=0) if layer == "normalization" else X[:8]
    assert run.tensor("inputs").value("mean", 0) == pytest.approx(float(expected.mean()), abs=1e-3)


def test_only_the_inputs_a_model_rescales_are_let_off(tmp_path: Path) -> None:
    # trial 16c: one rescaled input of a dict model silenced the rule for an unscaled other input
    keras.utils.set_random_seed(0)
    image, tabular = keras.Input((4,), name="image"), keras.Input((2,), name="tabular")
    h = keras.layers.Concatenate()([keras.layers.Rescaling(1 / 255, name="scale")(image), tabular])
    model = keras.Model({"image": image, "tabular": tabular}, keras.layers.Dense(2, name="out")(h))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = {"image": RNG.integers(0, 256, (48, 4)).astype("float32"), "tabular": (RNG.normal(size=(48, 2)) * 5e4 + 6e4).astype("float32")}
    cb = TripwireCallback(out_dir=tmp_path, rules=["input_not_normalized"])
    model.fit(data, Y, batch_size=16, epochs=1, shuffle=False, callbacks=[cb], verbose=0)
    assert [(f.rule, f.tensors) for f in cb.findings] == [("input_not_normalized", ("inputs/tabular",))]
    run = tripwire.open_run(tmp_path)
    assert 0 < run.tensor("inputs/image").value("mean", 0) < 1  # (rescaled: as the model sees it)
    # a rescaling that leaves the inputs far from unit scale is flagged too (1/255 of 16-bit values)
    wide = keras.Sequential([keras.Input((6,)), keras.layers.Rescaling(1 / 255), keras.layers.Dense(2)])
    wide.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path / "wide", rules=["input_not_normalized"])
    wide.fit(RNG.integers(0, 65536, (48, 6)).astype("float32"), Y, batch_size=16, epochs=1, callbacks=[cb], verbose=0)
    assert [f.rule for f in cb.findings] == ["input_not_normalized"] and "'inputs' has mean 1" in cb.findings[0].message


def test_a_model_built_on_a_list_of_inputs_fed_a_dict(tmp_path: Path) -> None:
    # trial 16h: keras.Model([a, b], ...) fed {"a": ..., "b": ...}: the batch's names (inputs/a) did not
    # meet the graph's (inputs/0), the Rescaling output came as an input of its own whose name
    # silenced the rule, and the unscaled input b went unflagged
    keras.utils.set_random_seed(0)
    a, b = keras.Input((4,), name="a"), keras.Input((2,), name="b")
    h = keras.layers.Concatenate()([keras.layers.Rescaling(1 / 255)(a), b])
    model = keras.Model([a, b], keras.layers.Dense(2, name="out")(h))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = {"a": RNG.integers(0, 256, (48, 4)).astype("float32"), "b": (RNG.normal(size=(48, 2)) * 30 + 500).astype("float32")}
    cb = TripwireCallback(out_dir=tmp_path, rules=["input_not_normalized"])
    model.fit(data, Y, batch_size=16, epochs=1, shuffle=False, callbacks=[cb], verbose=0)
    assert [(f.rule, f.tensors) for f in cb.findings] == [("input_not_normalized", ("inputs/b",))]
    assert tripwire.open_run(tmp_path).tensor_names("inputs") == ["inputs/a", "inputs/b"]


class RescalingInside(keras.Model):
    """A subclassed model: no graph that says which input its Rescaling layer takes."""

    def __init__(self) -> None:
        super().__init__()
        self.rescaling = keras.layers.Rescaling(1 / 40, offset=-250 / 40, name="rescaling")
        self.d = keras.layers.Dense(2, name="d")

    def call(self, x: Any) -> Any:
        return self.d(self.rescaling(x))


def test_a_subclassed_models_rescaling_is_captured_as_an_input_of_its_own(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    model = RescalingInside()
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path, rules=["input_not_normalized"], save_interval=1)
    model.fit(X * 40 + 250, Y, batch_size=8, epochs=1, shuffle=False, callbacks=[cb], verbose=0)
    assert cb.findings == []  # (read by its name: normalized_by)
    run = tripwire.open_run(tmp_path)
    assert run.tensor_names("inputs") == ["inputs", "rescaling/output"]
    assert run.tensor("inputs").value("mean", 0) == pytest.approx(float((X[:8] * 40 + 250).mean()), rel=1e-5)


def test_class_imbalance_fires_on_validation_where_a_minority_class_is_never_predicted(tmp_path: Path) -> None:
    # 90% class 0: a model whose output bias favours class 0 by far never predicts class 1
    n = 200
    x = RNG.normal(size=(n, 6)).astype("float32")
    y = (np.arange(n) % 10 == 0).astype("int64")
    model = mlp(out=2, activation="softmax")
    model.get_layer("out").bias.assign(np.array([20.0, -20.0], dtype="float32"))
    model.optimizer.learning_rate.assign(0.0)  # (nothing learns: the verdict is the same every round)
    cb = TripwireCallback(out_dir=tmp_path, rules=["class_imbalance"])
    model.fit(x, y, batch_size=50, epochs=3, validation_data=(x, y), callbacks=[cb], verbose=0)
    assert [f.rule for f in cb.findings] == ["class_imbalance"] and cb.findings[0].mode == "eval"
    assert "recall" in cb.findings[0].message


def test_structured_inputs_and_outputs_are_named_by_key_and_position(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    a, b = keras.Input((3,), name="a"), keras.Input((3,), name="b")
    h = keras.layers.Dense(4, activation="relu", name="h")(keras.layers.Concatenate()([a, b]))
    model = keras.Model({"a": a, "b": b}, [keras.layers.Dense(2, name="p")(h), keras.layers.Dense(1, name="q")(h)])
    model.compile("sgd", ["mse", "mse"])
    y = [X[:, :2], X[:, 2:3]]
    cb = TripwireCallback(out_dir=tmp_path, include_collections=BATCH_KINDS, save_interval=1)
    model.fit({"a": X[:, :3], "b": X[:, 3:]}, y, batch_size=48, epochs=1, shuffle=False, callbacks=[cb], verbose=0)
    run = tripwire.open_run(tmp_path)
    assert {"inputs/a", "inputs/b", "labels/0", "labels/1", "predictions/0", "predictions/1"} <= set(run.tensor_names())
    assert run.tensor("inputs/b").value("min", 0) == pytest.approx(float(X[:, 3:].min()))
    np.testing.assert_allclose(run.tensor("labels/1").value(0), X[:, 2:3])
    assert run.tensor("predictions/0").value(0).shape == (48, 2)


class NoComputeLoss(keras.Model):
    """A custom train_step that computes its loss without ``compute_loss``."""

    def __init__(self) -> None:
        super().__init__()
        self.d = keras.layers.Dense(2, name="d")

    def call(self, x: Any) -> Any:
        return self.d(x)

    def train_step(self, data: Any) -> Any:
        x, y = data
        self.zero_grad()
        loss = keras.losses.sparse_categorical_crossentropy(y, self(x), from_logits=True).mean()
        loss.backward()
        with torch.no_grad():
            self.optimizer.apply([v.value.grad for v in self.trainable_weights], self.trainable_weights)
        return {"loss": loss}


def test_a_train_step_without_compute_loss_is_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    keras.utils.set_random_seed(0)
    model = NoComputeLoss()
    model.compile("sgd")
    cb = TripwireCallback(out_dir=tmp_path, include_collections=["inputs", "labels"], save_interval=1)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=16, epochs=1, callbacks=[cb], verbose=0)
    said = [r.getMessage() for r in caplog.records if "compute_loss" in r.getMessage()]
    assert len(said) == 1 and "inputs and labels are taken from the arguments of model.compute_loss" in said[0]
    assert "compute_loss" not in vars(model)
    # (trial 16h: and not said again at the end, as collections that captured nothing)
    assert not [r for r in caplog.records if "captured nothing" in r.getMessage()]

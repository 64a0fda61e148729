"""TripwireCallback for Keras 3, trial 27e (a Keras user who wants real bugs caught without false alarms).

- Finding 1: the loss/output mismatch (a softmax output under ``from_logits=True``, logits under
  ``from_logits=False``) was a WARNING only: not in ``cb.findings``, not in the run, ``tripwire
  inspect`` said "findings: none". It is a finding ``loss_output_mismatch`` (severity warning, at the
  fit's first train step, mode train) now, which runs no action; and the layer that makes the output
  is found through layers that are the identity at inference (a ``Dropout`` after the logits).
- Finding 4: ``input_not_normalized`` judged integer token ids fed to an ``Embedding`` as features
  ("scale images to [0, 1]"); an input that only such index layers take is not captured as an input.
- Finding 5: with ``gradient_accumulation_steps=N`` and a save interval sharing a factor with N no
  update ratio was ever recorded; they are recorded at the first optimizer update at or after a
  save step that asked for them.

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

import logging  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

from keras import ops  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")

L = keras.layers
RNG = np.random.default_rng(0)
X = RNG.normal(size=(48, 6)).astype("float32")
Y = (X[:, 0] > 0).astype("int64")
TWICE = "has from_logits=True, but"
AS_PROBABILITIES = "reads the model's outputs as probabilities"


def _said(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


# ------------------------------------------------------------------------ finding 1: loss_output_mismatch
def softmax_model() -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), L.Dense(8, activation="relu", name="d1"),
                              L.Dense(2, activation="softmax", name="out")])
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_a_mismatch_is_a_finding_of_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = softmax_model()
    out = tmp_path / "run"
    # stop_training for every rule: the mismatch is no rule and runs no action
    cb = TripwireCallback(out_dir=out, rules=["default"], actions=["log", "stop_training"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        history = model.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=[cb])
    assert len(history.history["loss"]) == 2 and cb.stopped_by is None  # it trains on
    said = _said(caplog, TWICE)
    assert len(said) == 1 and "'out' applies softmax" in said[0]  # the WARNING stays
    [found] = cb.findings
    assert (found.rule, found.step, found.mode, found.severity) == ("loss_output_mismatch", 0, "train", "warning")
    assert said[0] == f"tripwire: {found.message}"  # (the WARNING's text, as a rule's finding reads)
    assert found.details["layer"] == "out" and found.details["activation"] == "softmax"
    assert found.details["loss"] == "sparse_categorical_crossentropy" and found.details["from_logits"] is True
    run = tripwire.open_run(out)
    assert run.status == "complete"
    assert [(f.rule, f.step, f.mode) for f in run.findings] == [("loss_output_mismatch", 0, "train")]
    # tripwire inspect lists it (a finding whose rule is no registered rule, as distributed_stop)
    shown = subprocess.run([sys.executable, "-m", "tripwire", "inspect", str(out)], capture_output=True, text=True,
                           timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert "loss_output_mismatch" in shown.stdout and "findings: none" not in shown.stdout
    watched = subprocess.run([sys.executable, "-m", "tripwire", "watch", str(out), "--once"], capture_output=True,
                             text=True, timeout=300)
    assert watched.returncode in (0, 1) and "Traceback" not in watched.stderr, watched.stderr


def test_a_continued_fit_does_not_record_it_again_a_new_model_does(tmp_path: Path) -> None:
    model = softmax_model()
    cb = TripwireCallback(out_dir=tmp_path / "run")
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])  # steps 0..5
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])  # continues: steps 6..11
    assert [f.step for f in cb.findings] == [0]
    softmax_model().fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])  # a new training, at step 12
    assert [(f.rule, f.step) for f in cb.findings] == [("loss_output_mismatch", 0), ("loss_output_mismatch", 12)]


def test_the_finding_is_at_the_first_train_step_of_a_resumed_fit(tmp_path: Path) -> None:
    model = softmax_model()
    cb = TripwireCallback(out_dir=tmp_path / "run")
    model.fit(X, Y, batch_size=8, epochs=3, initial_epoch=2, verbose=0, callbacks=[cb])  # 6 batches an epoch
    assert [(f.rule, f.step) for f in cb.findings] == [("loss_output_mismatch", 12)]


def test_a_matching_loss_records_nothing(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), L.Dense(2, name="out"), L.Dropout(0.2)])
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path / "run")
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    assert cb.findings == []


def test_logits_behind_a_dropout_are_judged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # the trial's miss: Dense(10) then Dropout as the last layer, SparseCategoricalCrossentropy() (from_logits=False)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), L.Dense(8, activation="relu"), L.Dense(2, name="logits"),
                              L.Dropout(0.3, name="drop")])
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy())
    cb = TripwireCallback(out_dir=tmp_path / "run")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    said = _said(caplog, AS_PROBABILITIES)
    assert len(said) == 1 and "the layer 'logits' that makes the model's output (through 'drop'" in said[0]
    assert "has no activation" in said[0]
    assert [f.rule for f in cb.findings] == ["loss_output_mismatch"] and cb.findings[0].details["through"] == ["drop"]


def test_a_functional_softmax_behind_noise_and_regularization_is_judged(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    inp = keras.Input((6,))
    h = L.Dense(2, activation="softmax", name="probs")(L.Dense(8, activation="relu")(inp))
    h = L.ActivityRegularization(l2=1e-4, name="reg")(L.GaussianNoise(0.1, name="noise")(h))
    model = keras.Model(inp, h)
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path / "run")
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    [found] = cb.findings
    assert "the layer 'probs' that makes the model's output (through 'noise', 'reg'" in found.message
    assert "applies softmax" in found.message and found.details["through"] == ["noise", "reg"]


# ------------------------------------------------------------------------ finding 4: token ids
V, T = 500, 12
TOKENS = np.random.default_rng(1).integers(1, V, size=(64, T))
TOKEN_Y = (TOKENS[:, 0] < V // 2).astype("float32")


def _token_model() -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((T,), dtype="int32"), L.Embedding(V, 8, name="embedding"),
                              L.GlobalAveragePooling1D(), L.Dense(1, activation="sigmoid", name="out")])
    model.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
    return model


def test_token_ids_fed_to_an_embedding_are_not_judged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 27e: "input 'inputs' has mean 253.8 ... scale images to [0, 1]" at step 0, 3 seeds of 3
    assert float(TOKENS.mean()) > 200
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["input_not_normalized"], save_interval=1)
    with caplog.at_level(logging.INFO, logger="tripwire"):
        _token_model().fit(TOKENS, TOKEN_Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    assert cb.findings == []
    assert "inputs" not in tripwire.open_run(tmp_path / "run").tensor_names()
    said = _said(caplog, "goes straight into an index layer")
    assert len(said) == 1 and "input 'inputs'" in said[0] and "Embedding" in said[0]
    # the rule's "had nothing to read" at the end gives that reason
    assert _said(caplog, "token ids or category indices")


def test_a_sequential_built_at_fit_is_read_likewise(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([L.Embedding(V, 8), L.GlobalAveragePooling1D(), L.Dense(1, activation="sigmoid")])
    model.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["input_not_normalized"], save_interval=1)
    model.fit(TOKENS, TOKEN_Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    assert cb.findings == []


def test_unscaled_float_features_are_still_flagged(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), L.Dense(8, activation="relu"), L.Dense(1, activation="sigmoid")])
    model.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["input_not_normalized"], save_interval=1)
    model.fit(X * 100 + 250, Y.astype("float32"), batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    assert [(f.rule, f.tensors) for f in cb.findings] == [("input_not_normalized", ("inputs",))]


def test_a_model_with_token_ids_and_unscaled_features_is_flagged_on_the_features(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    tok, num = keras.Input((T,), dtype="int32", name="tok"), keras.Input((6,), name="num")
    h = L.Concatenate()([L.GlobalAveragePooling1D()(L.Embedding(V, 8)(tok)), L.Dense(8, activation="relu")(num)])
    model = keras.Model({"tok": tok, "num": num}, L.Dense(1, activation="sigmoid")(h))
    model.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["input_not_normalized"], save_interval=1)
    x = {"tok": TOKENS[:48], "num": X * 100 + 250}
    model.fit(x, Y.astype("float32"), batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    [found] = cb.findings
    assert found.tensors == ("inputs/num",)
    assert [n for n in tripwire.open_run(tmp_path / "run").tensor_names() if n.startswith("inputs")] == ["inputs/num"]


def test_category_indices_into_a_category_encoding_are_not_judged(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((1,), dtype="int32"), L.CategoryEncoding(num_tokens=V, output_mode="one_hot"),
                              L.Dense(1, activation="sigmoid")])
    model.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["input_not_normalized"], save_interval=1)
    model.fit(TOKENS[:, :1], TOKEN_Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    assert cb.findings == []


# ------------------------------------------------------------------------ finding 5: gradient accumulation
class KernelSteps(keras.callbacks.Callback):
    """The ``d1`` kernel before and after each training batch (the update a step made)."""

    def __init__(self) -> None:
        super().__init__()
        self.before: list[np.ndarray] = []
        self.after: list[np.ndarray] = []

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.before.append(ops.convert_to_numpy(self.model.get_layer("d1").kernel.value).astype(np.float64))

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.after.append(ops.convert_to_numpy(self.model.get_layer("d1").kernel.value).astype(np.float64))


def _accumulating(steps: int) -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), L.Dense(8, activation="relu", name="d1"), L.Dense(2, name="out")])
    model.compile(keras.optimizers.Adam(1e-2, gradient_accumulation_steps=steps),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_update_ratios_at_the_first_update_after_a_save_step(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # N = 4, the default interval 10: saves at 0, 10, 20, 30 are micro-steps; updates at 3, 7, 11, ... 35
    kernels = KernelSteps()
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default", "weight_update_ratio"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _accumulating(4).fit(X, Y, batch_size=4, epochs=3, verbose=0, shuffle=False, callbacks=[kernels, cb])
    assert len(kernels.after) == 36 and not _said(caplog, "no update ratio was recorded")
    run = tripwire.open_run(tmp_path / "run")
    steps, ratios = run.tensor("update_ratio/d1/kernel").series()
    assert steps.tolist() == [3, 11, 23, 31]
    # each the whole update that step made
    real = [np.linalg.norm(kernels.after[s] - kernels.before[s]) / np.linalg.norm(kernels.before[s]) for s in steps]
    np.testing.assert_allclose(ratios, real, rtol=1e-5)
    assert all(r > 0 for r in ratios) and cb.findings == []
    # the micro-steps' own gradients stay at the save steps; every step's loss once
    assert run.tensor("gradients/d1/kernel").steps() == [0, 10, 20, 30]
    assert run.tensor("loss").steps() == list(range(36))


def test_a_save_step_that_updates_records_its_own_ratio(tmp_path: Path) -> None:
    # N = 2, interval 3: saves 0 (micro: its ratio at 1), 3 (an update), 6 (micro: at 7), 9 (an update)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=3, collections=["optimizer"])
    _accumulating(2).fit(X, Y, batch_size=4, epochs=1, verbose=0, callbacks=[cb])
    steps = tripwire.open_run(tmp_path / "run").tensor("update_ratio/d1/kernel").steps()
    assert steps == [1, 3, 7, 9]


def test_a_fit_that_ends_before_the_update_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # N = 8 over 6 steps: the save step 0 asked, no update came before the fit ended
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["optimizer"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _accumulating(8).fit(X[:24], Y[:24], batch_size=4, epochs=1, verbose=0, callbacks=[cb])
    said = _said(caplog, "no update ratio was recorded")
    assert len(said) == 1 and "gradient_accumulation_steps=8" in said[0] and "no update of the weights" in said[0]

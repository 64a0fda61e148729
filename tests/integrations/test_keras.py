"""TripwireCallback for Keras 3: validation, hooks driven by hand against fakes, tiny real fits
(Sequential, functional, subclassed; frozen layers; mixed bfloat16; eval and test modes;
stopping; the optimizer restored even when fit raises; the tuner contract; scheduled learning
rates, also under a LossScaleOptimizer; LSTM/GRU/SimpleRNN/Bidirectional layers; predict-only use; each
batch's own training loss, not Keras's running mean; gradient accumulation; fits raising outside the step),
the missing-extra error, and the overhead benchmark's quick mode.

Keras runs on the torch backend, set before keras is imported; the jax backend's tests are in
test_trial26e_jax.py (a process of their own each, with KERAS_BACKEND=jax)."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

import json  # noqa: E402
import logging  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

from keras import ops  # noqa: E402

import tripwire  # noqa: E402
from tripwire import ConfigError, FunctionRule, TrainingStopped  # noqa: E402
from tripwire._errors import is_installed  # noqa: E402
from tripwire.integrations.keras import KerasBackend, TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")

ROOT = Path(__file__).resolve().parents[2]
ALL = ["weights", "biases", "gradients", "losses", "metrics", "activations", "activation_inputs", "relu_outputs",
       "optimizer"]
RNG = np.random.default_rng(0)
X = RNG.normal(size=(48, 6)).astype("float32")
Y = (X[:, 0] > 0).astype("int64")


# ------------------------------------------------------------------------------------ models
def sequential() -> Any:
    return keras.Sequential([
        keras.Input((6,)),
        keras.layers.Dense(8, activation="relu", name="d1"),
        keras.layers.Dense(8, activation="tanh", name="d2"),
        keras.layers.Dense(2, name="out"),
    ])


def functional_frozen() -> Any:
    inp = keras.Input((6,))
    frozen = keras.layers.Dense(8, name="frozen")
    frozen.trainable = False
    h = frozen(inp)
    h = keras.layers.BatchNormalization(name="bn")(h)
    h = keras.layers.Activation("sigmoid", name="act")(h)
    h = keras.layers.ReLU(name="relu")(keras.layers.Dense(8, name="d")(h))
    return keras.Model(inp, keras.layers.Dense(2, name="out")(h))


class Subclassed(keras.Model):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = keras.layers.Dense(8, activation="relu", name="hidden")
        self.head = keras.layers.Dense(2, name="head")

    def call(self, x: Any) -> Any:
        return self.head(self.hidden(x))


def compiled(model: Any, lr: float = 0.01, **kw: Any) -> Any:
    keras.utils.set_random_seed(0)
    model.compile(keras.optimizers.SGD(lr), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], **kw)
    return model


class Recorder(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.batch_logs: list[dict[str, float]] = []
        self.batches: list[int] = []  # each train batch's index in its epoch
        self.epoch_logs: list[dict[str, float]] = []
        self.test_batches = 0

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.batch_logs.append(dict(logs))
        self.batches.append(batch)

    def batch_losses(self) -> list[float]:
        """Each batch's own loss, recovered from Keras's logged running means over the epoch
        (``m_k = (l_0 + ... + l_k) / (k + 1)`` for batches of one size): ``l_k = (k + 1) m_k - k m_{k-1}``."""
        means = [logs["loss"] for logs in self.batch_logs]
        return [m if k == 0 else (k + 1) * m - k * means[i - 1] for i, (k, m) in enumerate(zip(self.batches, means))]

    def on_test_batch_end(self, batch: int, logs: Any = None) -> None:
        self.test_batches += 1

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self.epoch_logs.append(dict(logs))


def stop_at(step: int) -> FunctionRule:
    return FunctionRule(lambda h, s, m: f"planted at {s}" if s >= step else None, name="planted",
                        actions=["stop_training"])


# ------------------------------------------------------------------------------------ validation
def test_validation_errors(tmp_path: Path) -> None:
    trial = SimpleNamespace(report=lambda step, value: False)
    with pytest.raises(ConfigError, match="trial_metric: got None with a trial"):
        TripwireCallback(out_dir=tmp_path, trial=trial)
    with pytest.raises(ConfigError, match="trial_metric: got 'val_loss' without a trial"):
        TripwireCallback(out_dir=tmp_path, trial_metric="val_loss")
    with pytest.raises(ConfigError, match=r"trial: got 42; accepted: None or an object with report"):
        TripwireCallback(out_dir=tmp_path, trial=42, trial_metric="val_loss")
    with pytest.raises(ConfigError, match="trial_metric"):
        TripwireCallback(out_dir=tmp_path, trial=trial, trial_metric=3)
    with pytest.raises(ConfigError, match="unknown argument 'save_intervall'; did you mean 'save_interval'"):
        TripwireCallback(out_dir=tmp_path, save_intervall=3)
    with pytest.raises(ConfigError, match="unknown rule 'exploding_tensr'; did you mean 'exploding_tensor'"):
        TripwireCallback(out_dir=tmp_path, rules=["exploding_tensr"])
    with pytest.raises(ConfigError, match=r"save.interval: got 0"):
        TripwireCallback({"save": {"interval": 0}}, out_dir=tmp_path)
    # what the Keras callback never captures (XGBoost's trees) is refused, naming what it does
    with pytest.raises(ConfigError, match=r"rules\[0\]: tree_depth needs 'trees', which the keras integration does "
                                          r"not capture \(it captures: .*inputs, labels"):
        TripwireCallback(out_dir=tmp_path, rules=["tree_depth"])
    with pytest.raises(ConfigError, match=r"collections\.trees: the keras integration does not capture 'trees'"):
        TripwireCallback(out_dir=tmp_path, include_collections=["trees"])


def test_missing_keras_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['keras'] = None\n"
        "try:\n    from tripwire.integrations.keras import TripwireCallback\n"
        "except ImportError as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "MissingDependencyError" in out.stdout and "pip install 'tripwire[keras]'" in out.stdout, out.stdout + out.stderr


# ------------------------------------------------------------------------------------ fakes
class FakeVar:
    def __init__(self, path: str, value: np.ndarray) -> None:
        self.path, self.name = path, path.rsplit("/", 1)[-1]
        self.value = ops.convert_to_tensor(value)


class FakeOptimizer:
    def __init__(self) -> None:
        self.learning_rate = 0.5
        self.applied: list[Any] = []

    def apply(self, grads: Any, variables: Any = None) -> None:
        self.applied.append(grads)
        for g, v in zip(grads, variables):
            v.value = v.value - self.learning_rate * g


def fake_model() -> Any:
    w = FakeVar("dense/kernel", np.ones((3, 2), "float32"))
    b = FakeVar("dense/bias", np.zeros((2,), "float32"))
    return SimpleNamespace(optimizer=FakeOptimizer(), weights=[w, b], trainable_variables=[w, b], stop_training=False,
                           layers=[])


def test_hooks_by_hand_against_fakes(tmp_path: Path) -> None:
    model = fake_model()
    opt = model.optimizer
    cb = TripwireCallback(out_dir=tmp_path, save_interval=2, collections=ALL, rules=[stop_at(2)])
    cb.set_model(model)
    cb.on_train_begin()
    assert "apply" in vars(opt)  # wrapped for the fit
    for step in range(3):
        cb.on_train_batch_begin(step)
        grads = [ops.convert_to_tensor(np.full((3, 2), 0.1 * (step + 1), "float32")), ops.convert_to_tensor(np.ones(2, "float32"))]
        opt.apply(grads, model.weights)
        cb.on_train_batch_end(step, {"loss": 1.0 / (step + 1), "accuracy": 0.5})
        assert model.stop_training == (step == 2)
    cb.on_train_end()
    assert "apply" not in vars(opt) and len(opt.applied) == 3  # restored, and every step reached the optimizer
    h = cb.session.history
    assert h.steps("train") == [0, 1, 2]  # the loss of every step (every_step losses, the default)
    assert h.series("gradients/dense/kernel", "mean")[0].tolist() == [0, 2]
    assert h.series("gradients/dense/kernel", "mean")[1].tolist() == pytest.approx([0.1, 0.3])
    assert h.series("lr/0")[1].tolist() == [0.5, 0.5]
    # ||dw|| / ||w|| at step 0: 0.5 * 0.1 * sqrt(6) / sqrt(6); the all-zero bias's ratio is +inf at step 0
    assert h.series("update_ratio/dense/kernel")[1][0] == pytest.approx(0.05)
    steps, ratios = h.series("update_ratio/dense/bias")
    assert steps.tolist() == [0, 2] and ratios[0] == np.inf and np.isfinite(ratios[1])
    assert h.series("dense/kernel", "min")[1][0] == pytest.approx(0.95)  # weights after the update
    assert h.series("loss")[1].tolist() == pytest.approx([1.0, 1 / 2, 1 / 3])
    assert h.series("accuracy")[0].tolist() == [0, 2]  # other logs on save steps only
    assert cb.stopped_by is not None and cb.stopped_by.rule == "planted" and cb.findings[0].step == 2
    assert tripwire.open_run(tmp_path).status == "stopped"


def test_no_work_on_steps_not_saved(tmp_path: Path) -> None:
    model = fake_model()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=5, collections=ALL)
    calls: list[int] = []
    reduce = cb.backend.reduce
    cb.backend.reduce = lambda *a, **k: calls.append(1) or reduce(*a, **k)  # type: ignore[method-assign]
    cb.set_model(model)
    cb.on_train_begin()
    for step in range(1, 5):  # steps 1..4: none saved
        cb.steps["train"] = step
        cb.on_train_batch_begin(step)
        assert cb._grad_plan is None and not cb._step_patches
        model.optimizer.apply([ops.ones((3, 2)), ops.ones((2,))], model.weights)
        cb.on_train_batch_end(step, {"loss": 1.0})
    cb.on_train_end()
    h = cb.session.history
    assert calls == [] and h.series("loss")[0].tolist() == [1, 2, 3, 4]  # only the logged loss, kept until the end
    assert h.collections() == {"losses": ["loss"]}


# ------------------------------------------------------------------------------------ real fits
def test_sequential_fit_captures_every_kind(tmp_path: Path) -> None:
    model = compiled(sequential())
    rec = Recorder()
    kernels: list[np.ndarray] = []  # d1's kernel after each step's update
    after = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: kernels.append(
        model.get_layer("d1").kernel.numpy().copy()))
    cb = TripwireCallback(out_dir=tmp_path, save_interval=2, collections=ALL)
    model.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=[rec, after, cb], shuffle=False)
    h = cb.session.history
    assert h.series("d1/kernel", "l2")[0].tolist() == [0, 2, 4, 6, 8, 10]
    cols = h.collections()
    assert cols["weights"] == ["d1/kernel", "d2/kernel", "out/kernel"]
    assert cols["biases"] == ["d1/bias", "d2/bias", "out/bias"]
    assert sorted(cols["gradients"]) == sorted(f"gradients/{n}" for n in cols["weights"] + cols["biases"])
    assert cols["activations"] == ["d1/output", "d2/output", "out/output"]
    assert cols["activation_inputs"] == ["d1/relu/input", "d2/tanh/input"]
    assert cols["relu_outputs"] == ["d1/relu/output"]
    assert "lr/0" in cols["optimizer"] and "update_ratio/d1/kernel" in cols["optimizer"]
    # losses are each batch's own loss (not Keras's running-mean log), one per optimizer step
    # (every_step); weights are the values after the last saved step's update
    steps, losses = h.series("loss")
    assert steps.tolist() == list(range(len(rec.batch_logs))) == list(range(12))
    assert losses.tolist() == pytest.approx(rec.batch_losses(), rel=1e-5)
    assert h.series("accuracy")[1][-1] == pytest.approx(rec.batch_logs[10]["accuracy"])
    assert h.series("lr/0")[1][0] == pytest.approx(0.01)
    # the kernel after step 10's update, not step 11's (which changed its norm by about 1e-6: an
    # approximate comparison of norms could not tell them apart; the max is exact)
    assert kernels[11].max() != kernels[10].max()
    assert h.value("d1/kernel", "max", 10) == float(kernels[10].max())
    assert h.value("d1/kernel", "l2", 10) == pytest.approx(np.linalg.norm(kernels[10].astype(np.float64)), rel=1e-5)
    relu_zero = h.series("d1/relu/output", "zero_fraction")[1]
    assert np.all((relu_zero > 0) & (relu_zero < 1))
    pre = h.series("d1/relu/input", "min")[1]
    assert np.all(pre < 0)  # the pre-activation, not the ReLU output
    assert np.all(h.series("update_ratio/out/kernel")[1] > 0)
    assert "apply" not in vars(model.optimizer) and "call" not in vars(model.get_layer("d1"))
    run = tripwire.open_run(tmp_path)
    assert run.is_complete and run.status == "complete"
    assert run.series("gradients/d1/kernel", "l2")[0].tolist() == [0, 2, 4, 6, 8, 10]


def test_fit_records_one_loss_per_optimizer_step(tmp_path: Path) -> None:
    model = compiled(sequential())
    rec = Recorder()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=10, collections=["losses", "weights"])
    model.fit(X, Y, batch_size=4, epochs=2, verbose=0, callbacks=[rec, cb], shuffle=False)
    run = tripwire.open_run(tmp_path)
    steps, losses = run.series("loss")
    assert steps.tolist() == list(range(len(rec.batch_logs))) == list(range(24))  # the last 3 written at the end
    assert losses.tolist() == pytest.approx(rec.batch_losses(), rel=1e-5)
    assert run.series("d1/kernel", "l2")[0].tolist() == [0, 10, 20]


def test_gradients_match_a_manual_computation(tmp_path: Path) -> None:
    model = compiled(sequential(), lr=0.0)  # lr 0: weights stay, so the gradient can be recomputed
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=["gradients", "weights"])
    model.fit(X[:8], Y[:8], batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    x = torch.tensor(X[:8])
    model.zero_grad()
    with torch.enable_grad():
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(torch.tensor(Y[:8]), model(x))
        loss.backward()
    kernel = model.get_layer("d1").kernel
    expected = kernel.value.grad.detach().numpy().astype(np.float64)
    got = cb.session.history.value("gradients/d1/kernel", "l2", 0)
    assert got == pytest.approx(np.linalg.norm(expected), rel=1e-5)


def test_functional_with_frozen_layers_and_eval_mode(tmp_path: Path) -> None:
    model = compiled(functional_frozen())
    rec = Recorder()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=ALL)
    model.fit(X, Y, batch_size=16, epochs=2, verbose=0, validation_data=(X[:24], Y[:24]), callbacks=[rec, cb])
    h = cb.session.history
    cols = h.collections()
    grads = set(cols["gradients"])
    assert "gradients/frozen/kernel" not in grads and "gradients/d/kernel" in grads
    assert "frozen/kernel" in cols["weights"] and "bn/moving_mean" in cols["weights"]  # non-trainable too
    assert "update_ratio/frozen/kernel" not in cols["optimizer"]
    frozen = h.series("frozen/kernel", "l2")[1]
    assert np.allclose(frozen, frozen[0])
    assert "act/sigmoid/input" in cols["activation_inputs"] and "relu/relu/input" in cols["activation_inputs"]
    assert cols["relu_outputs"] == ["relu/relu/output"]
    # eval: 2 validation batches per epoch (steps 0,1 then 3,4), the epoch summary after them (2, 5)
    assert h.steps("eval") == [0, 1, 2, 3, 4, 5]
    steps, val_loss = h.series("val_loss", mode="eval")
    assert steps.tolist() == [2, 5]
    assert val_loss.tolist() == pytest.approx([e["val_loss"] for e in rec.epoch_logs])
    assert h.series("val_accuracy", mode="eval")[1].tolist() == pytest.approx([e["val_accuracy"] for e in rec.epoch_logs])
    assert h.series("loss", mode="eval")[0].tolist() == [0, 1, 3, 4]  # Keras's running means per batch
    assert h.series("d/output", "mean", mode="eval")[0].tolist() == [0, 1, 3, 4]  # activations in eval too
    # evaluate() outside fit: mode test, summary named test_*
    result = model.evaluate(X[:24], Y[:24], batch_size=8, verbose=0, callbacks=[cb], return_dict=True)
    assert h.steps("test") == [0, 1, 2, 3]
    assert h.series("test_loss", mode="test")[1].tolist() == pytest.approx([result["loss"]])
    assert tripwire.open_run(tmp_path).is_complete


def test_subclassed_model_and_second_fit_continue_the_run(tmp_path: Path) -> None:
    model = compiled(Subclassed())
    cb = TripwireCallback(out_dir=tmp_path, save_interval=3, collections=ALL)
    model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    h = cb.session.history
    assert h.series("hidden/kernel", "l2")[0].tolist() == [0, 3]  # steps 0..5 over both fits
    assert h.series("loss")[0].tolist() == list(range(6))
    cols = h.collections()
    assert cols["weights"] == ["head/kernel", "hidden/kernel"]
    assert cols["activations"] == ["head/output", "hidden/output"]
    assert cols["activation_inputs"] == ["hidden/relu/input"]
    run = tripwire.open_run(tmp_path)
    assert run.is_complete and run.series("hidden/kernel", "l2")[0].tolist() == [0, 3]
    assert run.series("loss")[0].tolist() == list(range(6))  # the second fit's kept losses written at its end
    assert run.every_step == {"losses": 3}  # the reopened run still tells readers the loss is every step


def test_a_fit_from_a_later_epoch_counts_steps_from_there(tmp_path: Path) -> None:
    # trial 18f: Keras's BackupAndRestore resumed a crashed fit at epoch 2 and a new callback stored its
    # batches as steps 0.. again, over the dead run's; fit(initial_epoch=2) is the same
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1)
    model.fit(X, Y, batch_size=16, epochs=4, initial_epoch=2, verbose=0, callbacks=[cb])  # 3 batches an epoch
    assert tripwire.open_run(tmp_path).series("loss")[0].tolist() == list(range(6, 12))
    # a callback with state of its own (load_state_dict) keeps its steps
    again = TripwireCallback(out_dir=tmp_path / "b", save_interval=1)
    again.load_state_dict({**cb.state_dict()})
    model.fit(X, Y, batch_size=16, epochs=5, initial_epoch=4, verbose=0, callbacks=[again])
    assert tripwire.open_run(tmp_path / "b").series("loss")[0].tolist() == [12, 13, 14]


XV = RNG.normal(size=(20, 6)).astype("float32")  # 2 validation batches of 16
YV = (XV[:, 0] > 0).astype("int64")


def _steps(path: Path) -> tuple[list[int], list[int], list[int]]:
    run = tripwire.open_run(path)
    return (run.series("loss")[0].tolist(), [int(s) for s in run.steps(mode="eval")],
            run.series("val_loss")[0].tolist())


@pytest.mark.parametrize("freq", [1, 2, [1, 3, 4]])
def test_a_fit_from_a_later_epoch_counts_eval_steps_on_too(tmp_path: Path, freq: Any) -> None:
    # trial 19b: a fit resumed at epoch 2 counted its train steps on from the earlier epochs' but its eval
    # steps from 0 again: the run held each validation step twice (val_loss at eval steps [2, 5, 2, 5])
    fit = dict(validation_data=(XV, YV), validation_freq=freq, batch_size=16, verbose=0)
    whole = compiled(sequential())
    whole.fit(X, Y, epochs=4, callbacks=[TripwireCallback(out_dir=tmp_path / "whole", save_interval=1)], **fit)
    model = compiled(sequential())
    model.fit(X, Y, epochs=2, callbacks=[TripwireCallback(out_dir=tmp_path / "first", save_interval=1)], **fit)
    model.fit(X, Y, epochs=4, initial_epoch=2, callbacks=[TripwireCallback(out_dir=tmp_path / "rest", save_interval=1)],
              **fit)
    first, rest = _steps(tmp_path / "first"), _steps(tmp_path / "rest")
    assert [a + b for a, b in zip(first, rest)] == list(_steps(tmp_path / "whole"))


def test_resumed_steps_count_batch_hooks_and_validated_epochs() -> None:
    # (trial 19b) compile(steps_per_execution=N) (jax, tensorflow) calls the batch hooks once per N
    # batches: a step each; fit(validation_freq=) validates every N-th epoch or those listed (from 1)
    from tripwire.integrations.keras._callback import _hook_steps, _validated_epochs

    assert [_hook_steps(b, n) for b, n in ((3, 1), (3, 2), (4, 2), (3, None))] == [3, 2, 2, 3]
    assert [_validated_epochs(e, f) for e, f in ((2, 1), (3, 2), (4, [1, 3, 4]), (2, "x"))] == [2, 1, 3, None]


def test_a_crashed_fit_resumed_into_its_out_dir_continues_its_steps(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    # trial 19b: Keras's BackupAndRestore resumed the fit at epoch 2 into the same out_dir: its eval steps
    # restarted at 0, and a WARNING said its steps may repeat the earlier training's and to give it its own out_dir
    class Crash(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            if epoch == 2:
                raise RuntimeError("boom")

    fit = dict(validation_data=(XV, YV), batch_size=16, epochs=4, verbose=0)
    model = compiled(sequential())
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="boom"):
        model.fit(X, Y, callbacks=[keras.callbacks.BackupAndRestore(backup),
                                   TripwireCallback(out_dir=tmp_path / "run", save_interval=1), Crash()], **fit)
    assert tripwire.open_run(tmp_path / "run").status == "failed"
    with caplog.at_level(logging.INFO, logger="tripwire"):
        compiled(sequential()).fit(X, Y, callbacks=[keras.callbacks.BackupAndRestore(backup),
                                                    TripwireCallback(out_dir=tmp_path / "run", save_interval=1)], **fit)
    loss, evals, val_loss = _steps(tmp_path / "run")
    assert loss == list(range(12)) and evals == list(range(12)) and val_loss == [2, 5, 8, 11]
    assert tripwire.open_run(tmp_path / "run").status == "complete"
    said = [r for r in caplog.records if r.name == "tripwire" and "holds records" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.INFO]  # not the WARNING to give it its own out_dir
    assert "continues from epoch 2" in said[0].getMessage()


def test_a_resumed_fit_with_validation_batches_unknown_counts_eval_steps_after_the_records(tmp_path: Path) -> None:
    # trial 19b: validation data whose length is not known before the pass (a torch IterableDataset):
    # the eval steps follow the run's records
    class Batches(torch.utils.data.IterableDataset):
        def __iter__(self) -> Any:
            return iter([(XV[:16], YV[:16]), (XV[16:], YV[16:])])

    fit = dict(validation_data=torch.utils.data.DataLoader(Batches(), batch_size=None), batch_size=16, verbose=0)
    model = compiled(sequential())
    model.fit(X, Y, epochs=2, callbacks=[TripwireCallback(out_dir=tmp_path, save_interval=1)], **fit)
    model.fit(X, Y, epochs=3, initial_epoch=2, callbacks=[TripwireCallback(out_dir=tmp_path, save_interval=1)], **fit)
    loss, evals, val_loss = _steps(tmp_path)
    assert loss == list(range(9)) and evals == list(range(9)) and val_loss == [2, 5, 8]


def test_mixed_bfloat16(tmp_path: Path) -> None:
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = compiled(sequential())
        cb = TripwireCallback(out_dir=tmp_path, save_interval=2, collections=ALL)
        model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    finally:
        keras.mixed_precision.set_global_policy("float32")
    h = cb.session.history
    assert keras.backend.standardize_dtype(model.get_layer("d1").compute_dtype) == "bfloat16"
    for name in ("d1/output", "d2/tanh/input", "gradients/d1/kernel", "d1/kernel"):
        values = h.series(name, "nonfinite_count")[1]
        assert values.tolist() == [0.0, 0.0], name
    assert 0 < h.value("d1/relu/output", "zero_fraction", 0) < 1


# ------------------------------------------------------------------------------------ stopping
def test_custom_rule_stops_after_the_current_batch(tmp_path: Path) -> None:
    model = compiled(sequential())
    rec = Recorder()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, rules=[stop_at(3)])
    model.fit(X, Y, batch_size=8, epochs=3, verbose=0, callbacks=[rec, cb])
    assert len(rec.batch_logs) == 4  # batches 0..3, then stop
    assert cb.stopped_by is not None and cb.stopped_by.step == 3 and cb.stopped_by.rule == "planted"
    assert [f.rule for f in cb.findings] == ["planted"]
    assert tripwire.open_run(tmp_path).status == "stopped"


def test_steps_reduced_in_the_background_stop_one_batch_later_and_lose_nothing(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from tripwire.integrations import _torch as torch_module

    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)  # every step with a weight goes to the background
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))  # whatever this machine's CPUs
    started: list[bool] = []
    original = torch_module._Program.start
    monkeypatch.setattr(torch_module._Program, "start",
                        lambda self, *a, **kw: started.append(kw.get("live", False)) or original(self, *a, **kw))
    model = compiled(sequential())
    rec = Recorder()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=ALL, rules=[stop_at(3)])
    model.fit(X, Y, batch_size=8, epochs=3, verbose=0, callbacks=[rec, cb])
    assert started and all(started) and len(rec.batch_logs) == 5  # live reads; step 3's rules ran at batch 4's end
    assert cb.stopped_by is not None and cb.stopped_by.step == 3
    run = tripwire.open_run(tmp_path)
    assert run.status == "stopped"
    steps, kernel_l2 = run.tensor("d1/kernel").series("l2")
    assert list(steps) == [0, 1, 2, 3, 4] and np.all(np.diff(kernel_l2) != 0)  # each step its own weights
    assert list(run.tensor("gradients/d1/kernel").series("l2")[0]) == [0, 1, 2, 3, 4]


class AssignsWeights(keras.Model):
    """A custom train_step that changes its weights without the optimizer's apply."""

    def __init__(self) -> None:
        super().__init__()
        self.d = keras.layers.Dense(2, name="d")

    def call(self, x: Any) -> Any:
        return self.d(x)

    def train_step(self, data: Any) -> Any:
        x, y = data[0], data[1]
        loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))
        self.d.kernel.assign(self.d.kernel * 0.9)
        return {"loss": loss}


def _every_series(run: tripwire.Run) -> dict[tuple[str, str], list[float]]:
    out = {}
    for name in run.tensor_names():
        view = run.tensor(name)
        for reduction in view.reductions():
            steps, values = view.series(reduction, mode="train")
            out[name, reduction] = [*map(int, steps), *map(float, values)]
    return out


@pytest.mark.parametrize("build", ["sequential", "functional_frozen", "assigns_weights"])
def test_background_steps_fence_at_the_optimizer_apply_and_equal_the_synchronous_run(
        build: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # The step in flight is copied by the background thread while the next step's forward and
    # backward passes run: the fence waits at the optimizer's apply, where the weights change in
    # place; at the batch's begin where a captured variable changes in the forward pass (a
    # BatchNormalization's moving statistics) or a step changes weights without apply.
    from tripwire.integrations import _torch as torch_module

    def fit(out: Path) -> tripwire.Run:
        keras.utils.set_random_seed(0)
        model = {"sequential": sequential, "functional_frozen": functional_frozen, "assigns_weights": AssignsWeights}[build]()
        compiled(model)
        cb = TripwireCallback(out_dir=out, save_interval=1, collections=ALL)
        model.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=[cb], shuffle=False)
        return tripwire.open_run(out)

    sync = _every_series(fit(tmp_path / "sync"))
    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))
    fenced_in: list[str] = []
    fence = torch_module.TorchBackend.fence

    def traced(self: Any) -> Any:
        if self._fence is not None:
            fenced_in.append(sys._getframe(3).f_code.co_name)  # fence <- Backend.fence <- Session.fence <- caller
        return fence(self)

    monkeypatch.setattr(torch_module.TorchBackend, "fence", traced)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        background = _every_series(fit(tmp_path / "background"))
    assert not [r for r in caplog.records if "changed in place" in r.getMessage()]
    assert background.keys() == sync.keys() and len(sync) > 10
    for key, values in sync.items():
        # the reduction process's figures (numpy's sums) equal the thread's to float32's resolution: a mean
        # within 1e-6 of the tensor's norm, the rest within 2e-6 relative (docs/lightning.md; trial 40: a
        # std 1.3e-6 apart failed rtol=1e-6 once the process answered within the timed steps)
        np.testing.assert_allclose(background[key], values, rtol=2e-6, atol=1e-6 if key[1] in ("mean", "sum") else 0,
                                   err_msg=str(key))
    if build == "sequential":  # after the first step: the copy overlaps the forward and backward passes
        assert fenced_in.count("apply") >= 8 and "on_train_batch_begin" not in fenced_in, fenced_in
    else:
        assert "apply" not in fenced_in and "on_train_batch_begin" in fenced_in, fenced_in


@pytest.mark.parametrize("where", ["after_end", "after_begin", "before_begin"])
def test_a_callback_that_changes_weights_around_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture, where: str) -> None:
    # after ours, at the batch end or the next batch's begin: each step holds its own end-of-step
    # weights (copied at the step's end; fenced at the batch's begin), no warning. Before ours, at a
    # batch's begin, after the step in flight was handed to the background thread: that step holds
    # the changed kernel, and a WARNING says so (the Keras backend dropped what the fence saw)
    from tripwire.integrations import _torch as torch_module

    monkeypatch.setattr(torch_module, "BACKGROUND_MIN", 2)
    monkeypatch.setattr(torch_module, "BACKGROUND_FREE_CPUS", -(1 << 20))
    at_end: list[float] = []

    class Reference(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            at_end.append(float(np.linalg.norm(ops.convert_to_numpy(self.model.get_layer("d1").kernel))))

    class Shrinks(keras.callbacks.Callback):
        def shrink(self, batch: int) -> None:
            if batch == 2:
                kernel = self.model.get_layer("d1").kernel
                kernel.assign(kernel * 0.5)

    if where == "after_end":
        Shrinks.on_train_batch_end = lambda self, batch, logs=None: self.shrink(batch + 1)  # type: ignore[method-assign]
    else:
        Shrinks.on_train_batch_begin = lambda self, batch, logs=None: self.shrink(batch)  # type: ignore[method-assign]
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=["weights", "losses"])
    order = [Reference(), Shrinks(), cb] if where == "before_begin" else [Reference(), cb, Shrinks()]
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=order, shuffle=False)
    warned = [r.getMessage() for r in caplog.records if "changed in place" in r.getMessage()]
    steps, norms = tripwire.open_run(tmp_path).tensor("d1/kernel").series("l2")
    assert list(steps) == list(range(6))
    if where == "before_begin":
        assert len(warned) == 1 and "'d1/kernel'" in warned[0] and "train step 1" in warned[0], warned
        assert norms[1] == pytest.approx(at_end[1] * 0.5, rel=1e-5)  # step 1 holds the halved kernel
        np.testing.assert_allclose(norms[2:], at_end[2:], rtol=1e-5)
    else:
        assert warned == []
        np.testing.assert_allclose(norms, at_end, rtol=1e-5)


def test_raise_action_ends_the_run_as_stopped(tmp_path: Path) -> None:
    model = compiled(sequential(), lr=1e38)  # overflows float32 within a few steps
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, rules=[{"name": "exploding_tensor", "actions": ["raise"]}])
    with pytest.raises(TrainingStopped) as info:
        model.fit(X, Y, batch_size=4, epochs=5, verbose=0, callbacks=[cb])
    assert cb.stopped_by is not None and cb.stopped_by == info.value.finding
    assert tripwire.open_run(tmp_path).status == "stopped"  # as on Lightning and XGBoost


def test_builtin_exploding_tensor_stops_a_diverging_fit(tmp_path: Path) -> None:
    assert "exploding_tensor" in tripwire.rules.available_rules()
    model = compiled(sequential(), lr=1e38)  # overflows float32 (1e30 can settle at a finite loss)
    rec = Recorder()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1,
                          rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    model.fit(X, Y, batch_size=4, epochs=5, verbose=0, callbacks=[rec, cb])
    assert cb.stopped_by is not None and cb.stopped_by.rule == "exploding_tensor"
    assert len(rec.batch_logs) == cb.stopped_by.step + 1 < 60
    assert not np.isfinite(rec.batch_logs[-1]["loss"]) or "gradients" in " ".join(cb.stopped_by.tensors)


def test_builtin_loss_not_decreasing_fires(tmp_path: Path) -> None:
    assert "loss_not_decreasing" in tripwire.rules.available_rules()
    model = compiled(sequential(), lr=0.0)  # nothing learns
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, rules=[
        {"name": "loss_not_decreasing", "num_steps": 10, "window": 3, "actions": ["stop_training"]}])
    # each batch's own loss is recorded: whole-data batches, so that with lr 0 it is the same at every step
    # (4-sample batches give a loss whose batch noise alone dips 5% below its start)
    model.fit(np.tile(X, (4, 1)), np.tile(Y, 4), batch_size=48, epochs=6, verbose=0, callbacks=[cb], shuffle=False)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "loss_not_decreasing"


# ------------------------------------------------------------------------------------ training loss
class KeptTypes:
    """The type of every training loss the session receives (kept or saved)."""

    def __init__(self, cb: TripwireCallback, monkeypatch: pytest.MonkeyPatch) -> None:
        self.types: list[Any] = []
        session = cb.session
        keep_at, add = session._keep_at, tripwire.StepPlan.add

        def spy_keep(step: int, every: Any, name: str, tensor: Any, kind: str, *rest: Any) -> bool:
            if name == "loss":
                self.types.append(tensor)
            return keep_at(step, every, name, tensor, kind, *rest)

        def spy_add(plan: Any, name: str, tensor: Any, kind: str) -> bool:
            if name == "loss" and plan and plan.mode == "train":
                self.types.append(tensor)
            return add(plan, name, tensor, kind)

        monkeypatch.setattr(session, "_keep_at", spy_keep)
        monkeypatch.setattr(tripwire.StepPlan, "add", spy_add)


def test_training_loss_is_each_batch_own_loss_as_a_tensor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Keras's batch log is its running mean over the epoch; loss rules are calibrated on each step's loss
    model = compiled(sequential(), lr=0.1)
    rec = Recorder()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=4, collections=["losses", "weights"])
    spy = KeptTypes(cb, monkeypatch)
    model.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=[rec, cb], shuffle=False)
    steps, losses = tripwire.open_run(tmp_path).series("loss")
    assert steps.tolist() == list(range(12))
    assert losses.tolist() == pytest.approx(rec.batch_losses(), rel=1e-5)
    means = [logs["loss"] for logs in rec.batch_logs]
    assert losses[0] == pytest.approx(means[0]) and losses[5] != pytest.approx(means[5], rel=1e-3)  # not the running mean
    # handed over as the step's own tensor (no host copy per step), outside autograd
    assert len(spy.types) == 12 and all(isinstance(t, torch.Tensor) and not t.requires_grad for t in spy.types)
    assert "scale_loss" not in vars(model.optimizer)  # restored after the fit


def test_training_loss_under_a_loss_scale_optimizer_is_unscaled(tmp_path: Path) -> None:
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = compiled(sequential(), lr=0.1)
        rec = Recorder()
        cb = TripwireCallback(out_dir=tmp_path, save_interval=4, collections=["losses"])
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[rec, cb], shuffle=False)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert "scale_loss" not in vars(model.optimizer)
    losses = tripwire.open_run(tmp_path).series("loss")[1]
    assert losses.tolist() == pytest.approx(rec.batch_losses(), rel=1e-3)  # not multiplied by the loss scale


class NoScaleLoss(keras.Sequential):
    """A custom train_step that never calls ``optimizer.scale_loss``."""

    def train_step(self, data: Any) -> Any:
        x, y = data
        y_pred = self(x, training=True)
        self.zero_grad()
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
        self._loss_tracker.update_state(loss, sample_weight=x.shape[0])
        loss.backward()
        weights = self.trainable_weights[:]
        with torch.no_grad():
            self.optimizer.apply([v.value.grad for v in weights], weights)
        return self.compute_metrics(x, y, y_pred)


def test_a_train_step_without_scale_loss_records_the_running_mean(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = compiled(NoScaleLoss(sequential().layers), lr=0.1)
    rec = Recorder()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=4, collections=["losses"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[rec, cb], shuffle=False)
    losses = tripwire.open_run(tmp_path).series("loss")[1]
    assert losses.tolist() == pytest.approx([logs["loss"] for logs in rec.batch_logs])  # Keras's log, as it is
    said = [r.getMessage() for r in caplog.records if "scale_loss" in r.getMessage()]
    assert len(said) == 1 and "running mean over the epoch" in said[0] and "docs/keras.md" in said[0]


def test_default_rules_spare_a_slow_healthy_fit_and_stop_a_learning_rate_of_0(tmp_path: Path) -> None:
    # fresh-user trial 13a: SGD(0.01) on the digits learns slowly; judged on Keras's running mean, which lags
    # the batch loss by half an epoch, loss_not_decreasing stopped it at step 50 of 215
    datasets = pytest.importorskip("sklearn.datasets")
    from sklearn.model_selection import train_test_split

    x, y = datasets.load_digits(return_X_y=True)
    xt, xv, yt, yv = train_test_split((x / 16.0).astype("float32"), y, test_size=0.25, random_state=0)  # 43 batches

    def fit(lr: float, out: Path) -> tuple[TripwireCallback, Any]:
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
        model.compile(keras.optimizers.SGD(lr), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        cb = TripwireCallback(out_dir=out, rules=["default"], actions=["stop_training"])
        return cb, model.fit(xt, yt, batch_size=32, epochs=5, verbose=0, callbacks=[cb], validation_data=(xv, yv))

    cb, history = fit(0.01, tmp_path / "slow")
    assert cb.stopped_by is None and len(history.history["loss"]) == 5
    assert history.history["loss"][-1] < 0.85 * history.history["loss"][0]  # it does learn
    cb, history = fit(0.0, tmp_path / "lr0")
    assert cb.stopped_by is not None and cb.stopped_by.rule == "loss_not_decreasing" and cb.stopped_by.step == 50


# ------------------------------------------------------------------------------------ gradient accumulation
def test_gradient_accumulation_update_ratios_only_at_update_steps(tmp_path: Path) -> None:
    # with gradient_accumulation_steps=2 Keras updates the weights at every 2nd step only: a ratio of 0 recorded
    # at the others read as "the parameters do not move" and weight_update_ratio stopped healthy runs
    model = sequential()
    keras.utils.set_random_seed(0)
    model.compile(keras.optimizers.SGD(0.1, gradient_accumulation_steps=2),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    kernels = KernelSteps()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=["optimizer", "gradients"])
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0, shuffle=False, callbacks=[kernels, cb])
    moved = [bool(np.any(a != b)) for a, b in zip(kernels.after, kernels.before)]
    assert moved == [False, True] * 3
    run = tripwire.open_run(tmp_path)
    steps, ratios = run.tensor("update_ratio/d1/kernel").series()
    assert steps.tolist() == [1, 3, 5] and np.all(ratios > 0)  # the update steps, and only those
    assert run.tensor("gradients/d1/kernel").steps() == list(range(6))  # each (micro-)batch's own gradient


def test_gradient_accumulation_does_not_stop_a_healthy_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = sequential()
    keras.utils.set_random_seed(0)
    model.compile(keras.optimizers.Adam(1e-3, gradient_accumulation_steps=2),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rec = Recorder()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=2, rules=[{"name": "weight_update_ratio", "low_saves": 2,
                                                                     "actions": ["stop_training"]}])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=4, epochs=2, verbose=0, callbacks=[rec, cb])  # saves at 0, 2, 4 ...: micro-steps
    assert cb.stopped_by is None and len(rec.batch_logs) == 24
    # no save step was an update step: each save step's ratios come at the update after it (trial 27e F5:
    # they were never recorded, and the rule judged nothing), the odd steps, and the rule judged them
    steps = cb.session.history.series("update_ratio/d1/kernel", "raw")[0].tolist()
    assert steps and all(s % 2 == 1 for s in steps), steps
    assert not [r for r in caplog.records if "no update ratio was recorded" in r.getMessage()]


def test_gradient_accumulation_without_a_readable_counter_records_no_update_ratio(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = fake_model()
    model.optimizer.gradient_accumulation_steps = 2  # and no _iterations
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=["optimizer", "gradients"])
    cb.set_model(model)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        cb.on_train_begin()
        for step in range(2):
            cb.on_train_batch_begin(step)
            model.optimizer.apply([ops.ones((3, 2)), ops.ones((2,))], model.weights)
            cb.on_train_batch_end(step, {"loss": 1.0})
        cb.on_train_end()
    h = cb.session.history
    assert h.collections()["optimizer"] == ["lr/0"] and h.series("gradients/dense/kernel", "mean")[0].tolist() == [0, 1]
    said = [r.getMessage() for r in caplog.records if "gradient_accumulation_steps=2" in r.getMessage()]
    assert len(said) == 1 and "update ratios are not recorded" in said[0]


# ------------------------------------------------------------------------------------ fits that raise
class Crash(Exception):
    pass


def crashing_batches(after: int) -> Any:
    """A data pipeline raising after ``after`` batches of 8."""
    for i in range(after):
        yield X[(8 * i) % 48:(8 * i) % 48 + 8], Y[(8 * i) % 48:(8 * i) % 48 + 8]
    raise Crash("bad batch in the data pipeline")


class RaiseAt(keras.callbacks.Callback):
    def __init__(self, batch: int) -> None:
        super().__init__()
        self.batch = batch

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if batch == self.batch:
            raise Crash("another callback raised")


@pytest.mark.parametrize("where", ["pipeline", "callback"])
def test_a_fit_that_raised_outside_the_step_closes_as_failed(tmp_path: Path, where: str) -> None:
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, save_interval=2)
    with pytest.raises(Crash):
        if where == "pipeline":
            model.fit(crashing_batches(5), steps_per_epoch=6, epochs=2, verbose=0, callbacks=[cb])
        else:
            model.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=[cb, RaiseAt(3)])
    # a pipeline error: no wrapper of ours saw it, open until closed; another callback's: fit's
    # callback list (its hooks guarded) ended the run before the error left fit
    assert tripwire.open_run(tmp_path).status == ("running" if where == "pipeline" else "failed")
    cb.close()
    run = tripwire.open_run(tmp_path)
    assert run.status == "failed" and run.steps() == list(range(5 if where == "pipeline" else 4))  # every step kept
    assert "apply" not in vars(model.optimizer) and "scale_loss" not in vars(model.optimizer)
    # the same callback's next fit continues the run and, reaching its end, completes it
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    assert tripwire.open_run(tmp_path).status == "complete"


@pytest.mark.parametrize("then", ["evaluate", "predict"])
def test_an_evaluate_or_predict_after_a_fit_another_callback_ended_ends_that_fit(tmp_path: Path, then: str) -> None:
    # trial 15d: evaluate(callbacks=[cb]) was stored as the fit's validation (mode eval, no test_loss)
    # and the run stayed open; predict did not end it either (docs: it ends the run as evaluate does)
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1)
    with pytest.raises(Crash):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb, RaiseAt(3)])
    if then == "evaluate":
        loss = model.evaluate(X, Y, batch_size=16, verbose=0, callbacks=[cb], return_dict=True)["loss"]
    else:
        model.predict(X, batch_size=16, verbose=0, callbacks=[cb])
    for attr in ("apply", "scale_loss"):
        assert attr not in vars(model.optimizer), attr  # the crashed fit's wrappers undone
    run = tripwire.open_run(tmp_path)
    assert run.steps("train") == [0, 1, 2, 3] and run.steps("eval") == []
    # the training failed, and an evaluate after it does not make the run complete (trial 19g: it did)
    assert run.status == "failed"
    if then == "evaluate":
        assert run.steps("test") == [0, 1, 2, 3] and run.series("test_loss")[1][-1] == pytest.approx(loss, rel=1e-5)


def test_steps_a_loss_scale_optimizer_skips_are_named_at_close(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 15d: every step's scaled gradients overflowed and were skipped; the run ended with
    # "this run has no 'gradients' collection" and nothing about why
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = sequential()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    keras.utils.set_random_seed(0)
    model.compile(keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=1e18),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [np.array(w) for w in model.get_weights()]
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=["gradients", "losses"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X[:24], Y[:24], batch_size=8, epochs=1, verbose=0, callbacks=[cb])  # float16 gradients overflow
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))  # every step skipped
    said = [r.getMessage() for r in caplog.records if "apply did not run" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("tripwire: at 3 save step(s) that asked for gradients or update ratios")
    assert "LossScaleOptimizer" in said[0]


def test_a_closing_warning_is_said_once_though_evaluate_closes_the_run_again(tmp_path: Path,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    model = compiled(keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, activation="tanh", name="t"),
                                       keras.layers.Dense(2, name="out")]))
    cb = TripwireCallback(out_dir=tmp_path, collections=["relu_outputs", "losses"])  # a tanh model: no ReLU
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
        model.evaluate(X, Y, verbose=0, callbacks=[cb])
    said = [r.getMessage() for r in caplog.records if "'relu_outputs'" in r.getMessage()]
    assert len(said) == 1, said


def test_out_dir_as_on_the_lightning_callback_claims_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert TripwireCallback(out_dir=tmp_path / "given").out_dir == tmp_path / "given"
    monkeypatch.chdir(tmp_path)
    cb = TripwireCallback()
    assert cb.out_dir is None and not (tmp_path / "tripwire-runs").exists()  # known at the first fit; nothing claimed
    compiled(sequential()).fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    assert cb.out_dir is not None and tripwire.open_run(cb.out_dir).status == "complete"
    assert TripwireCallback(name="exp").out_dir == Path("tripwire-runs") / "exp"


@pytest.mark.parametrize("order", ["ours_first", "theirs_first"])
def test_a_later_fit_without_the_callback_restores_the_optimizer_and_ends_the_crashed_run(
        tmp_path: Path, order: str) -> None:
    """Issue 5: the optimizer restored after fit even when fit raises. Another callback raised: the
    next fit without this callback, or train_on_batch, ran through our wrappers and the run read
    'running' until close() or exit; then (trial 17c) the optimizer stayed wrapped until that next
    fit. The fit's callback list, its hooks guarded, now restores it before the error leaves fit."""
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, save_interval=2)
    callbacks = [cb, RaiseAt(3)] if order == "ours_first" else [RaiseAt(3), cb]
    with pytest.raises(Crash):
        model.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=callbacks)
    assert "apply" not in vars(model.optimizer) and "scale_loss" not in vars(model.optimizer)
    assert tripwire.open_run(tmp_path).status == "failed"
    history = model.fit(X, Y, batch_size=8, epochs=1, verbose=0)  # a plain fit: unwrapped from its first step
    assert np.isfinite(history.history["loss"]).all()
    for attr in ("apply", "scale_loss"):
        assert attr not in vars(model.optimizer), attr
    assert "train_function" not in vars(model) or not hasattr(model.train_function, "__wrapped__")
    run = tripwire.open_run(tmp_path)
    assert run.status == "failed" and run.steps() == list(range(4 if order == "ours_first" else 3))
    model.train_on_batch(X[:8], Y[:8])  # and nothing of ours runs any more
    assert tripwire.open_run(tmp_path).steps() == run.steps()


def test_a_fit_that_raised_after_a_rule_stopped_it_closes_as_stopped(tmp_path: Path) -> None:
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, rules=[stop_at(2)])
    with pytest.raises(Crash):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb, RaiseAt(2)])  # after the stop, before the end
    cb.close()
    assert cb.stopped_by is not None and tripwire.open_run(tmp_path).status == "stopped"


def test_the_context_manager_closes_a_crashed_fit_as_failed(tmp_path: Path) -> None:
    model = compiled(sequential())
    with pytest.raises(Crash), TripwireCallback(out_dir=tmp_path, save_interval=2) as cb:
        model.fit(crashing_batches(3), steps_per_epoch=6, epochs=1, verbose=0, callbacks=[cb])
    assert tripwire.open_run(tmp_path).status == "failed"
    with TripwireCallback(out_dir=tmp_path / "b", save_interval=2) as cb:
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    assert tripwire.open_run(tmp_path / "b").status == "complete"


def test_trial_metric_missing_closes_the_run_as_failed(tmp_path: Path) -> None:
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, trial=FakeTrial(9), trial_metric="val_acc")
    with pytest.raises(ConfigError, match="trial_metric: 'val_acc' is not in the logs"):
        model.fit(X, Y, batch_size=16, epochs=2, verbose=0, callbacks=[cb], validation_data=(X, Y))
    run = tripwire.open_run(tmp_path)  # ended before the error left fit: no cb.close() needed
    assert run.status == "failed" and run.steps() == [0, 1, 2]
    assert "apply" not in vars(model.optimizer)


# ------------------------------------------------------------------------------------ restoring
class Bomb(keras.layers.Layer):
    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.calls = at, 0

    def call(self, x: Any, training: Any = None) -> Any:
        if not training:  # building the model, not training it
            return x
        self.calls += 1
        if self.calls > self.at:
            raise ValueError("planted failure")
        return x


@pytest.mark.parametrize("fail_at", [1, 2])  # a save step (activations wrapped) and one that is not
def test_optimizer_restored_when_fit_raises(tmp_path: Path, fail_at: int) -> None:
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, activation="relu", name="d"), Bomb(fail_at),
                              keras.layers.Dense(2, name="out")])
    compiled(model)
    opt = model.optimizer
    original_train_function = None
    cb = TripwireCallback(out_dir=tmp_path, save_interval=2, collections=ALL)
    with pytest.raises(ValueError, match="planted failure"):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    original_train_function = model.train_function
    assert "apply" not in vars(opt)
    assert not hasattr(original_train_function, "__wrapped__")
    assert all("call" not in vars(layer) for layer in model.layers)
    assert model.get_layer("d").activation is keras.activations.relu
    assert tripwire.open_run(tmp_path).status == "failed"


class BombInValidation(keras.layers.Layer):
    """Raises on real data outside training (the validation pass), not while Keras traces it."""

    def call(self, x: Any, training: Any = None) -> Any:
        if not training and getattr(getattr(x, "device", None), "type", "meta") != "meta":
            raise ValueError("planted failure in validation")
        return x


def test_a_layer_that_raises_in_validation_leaves_the_run_to_end_as_failed(tmp_path: Path) -> None:
    # trial 17c: the layer wrapper (activations captured there) undid every wrapper, the
    # train_function guard included, and ended nothing: the run read "running" until the process
    # exited, also after a later plain fit (which ends it as failed where no wrapper saw the error)
    model = compiled(keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, activation="relu", name="d"),
                                       BombInValidation(), keras.layers.Dense(2, name="out")]))
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, include_collections=["activations"])
    with pytest.raises(ValueError, match="planted failure in validation"):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, validation_data=(X, Y), callbacks=[cb])
    assert "apply" not in vars(model.optimizer) and all("call" not in vars(layer) for layer in model.layers)
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0)  # a plain fit: the crashed fit's run ends first
    run = tripwire.open_run(tmp_path)
    assert run.status == "failed" and run.steps("train") == list(range(6))
    assert not hasattr(model.train_function, "__wrapped__")


def test_raise_action_restores_and_closes(tmp_path: Path) -> None:
    model = compiled(sequential())
    rule = FunctionRule(lambda h, s, m: "boom" if s == 1 else None, name="boom", actions=["raise"])
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, rules=[rule], collections=ALL)
    with pytest.raises(TrainingStopped, match="boom"):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    assert "apply" not in vars(model.optimizer) and not cb._patches
    assert tripwire.open_run(tmp_path).is_complete


# ------------------------------------------------------------------------------------ tuner
class FakeTrial:
    def __init__(self, stop_at_step: int) -> None:
        self.reports: list[tuple[int, float]] = []
        self.stop_at_step = stop_at_step

    def report(self, step: int, value: float) -> bool:
        self.reports.append((step, value))
        return step >= self.stop_at_step


def test_trial_reports_each_epoch_and_stops(tmp_path: Path) -> None:
    model = compiled(sequential())
    rec = Recorder()
    trial = FakeTrial(stop_at_step=2)
    cb = TripwireCallback(out_dir=tmp_path, trial=trial, trial_metric="val_loss")
    model.fit(X, Y, batch_size=16, epochs=5, verbose=0, validation_data=(X[:16], Y[:16]), callbacks=[rec, cb])
    assert [s for s, _ in trial.reports] == [1, 2] and len(rec.epoch_logs) == 2
    assert [v for _, v in trial.reports] == pytest.approx([e["val_loss"] for e in rec.epoch_logs])


def test_trial_with_the_real_tuner_trial(tmp_path: Path) -> None:
    from tripwire.tune._trial import Trial

    trial = Trial(0, {}, max_resource=2)  # no scheduler: stops at max_resource
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, trial=trial, trial_metric="loss")
    history = model.fit(X, Y, batch_size=16, epochs=5, verbose=0, callbacks=[cb])
    assert len(history.history["loss"]) == 2 and trial.should_stop and trial.last_step == 2


def test_trial_told_at_the_epochs_validation_freq_validates(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Trial 17c: fit(validation_freq=2) failed every trial ('val_loss' is not in the logs of epoch
    0, "give fit validation_data=", which it had); the trial is told at the epochs that validate.
    Trial 23c: an epoch trained after the last validation is said (the journal holds the epochs told)."""
    trial = FakeTrial(99)
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, trial=trial, trial_metric="val_loss")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        history = model.fit(X, Y, batch_size=16, epochs=5, verbose=0, callbacks=[cb], validation_data=(X, Y),
                            validation_freq=2)
    assert [step for step, _ in trial.reports] == [2, 4]
    assert [v for _, v in trial.reports] == pytest.approx(history.history["val_loss"])
    assert tripwire.open_run(tmp_path).status == "complete"
    said = [r.getMessage() for r in caplog.records if "had no validation" in r.getMessage()]
    assert said == ["tripwire: the last 1 epoch(s) of this fit had no validation: the trial was told epoch 4 (its "
                    "resource in the journal) and that epoch's value, while epoch 5 was the last trained; validate at "
                    "the last epoch (a validation_freq that divides the number of epochs)"]
    caplog.clear()
    cb = TripwireCallback(out_dir=tmp_path / "b", trial=FakeTrial(99), trial_metric="val_loss")
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        compiled(sequential()).fit(X, Y, batch_size=16, epochs=4, verbose=0, callbacks=[cb], validation_data=(X, Y),
                                   validation_freq=2)
    assert not [r for r in caplog.records if "had no validation" in r.getMessage()]


def test_trial_metric_missing_lists_the_logs(tmp_path: Path) -> None:
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, trial=FakeTrial(9), trial_metric="val_los")
    with pytest.raises(ConfigError, match=r"'val_los' was in the logs of none of this fit's 2 epochs \(no validation "
                                          r"ran: give fit validation_data= or validation_split=.*\); available: "
                                          r"accuracy, loss"):
        model.fit(X, Y, batch_size=16, epochs=2, verbose=0, callbacks=[cb])
    assert tripwire.open_run(tmp_path).status == "failed"
    cb = TripwireCallback(out_dir=tmp_path / "b", trial=FakeTrial(9), trial_metric="val_los")
    with pytest.raises(ConfigError, match=r"'val_los' is not in the logs of epoch 1 \(the step its report would have\); did you mean 'val_loss'\?; "
                                          r"available: accuracy, loss, val_accuracy, val_loss"):
        model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb], validation_data=(X, Y))


def test_state_dict_round_trip(tmp_path: Path) -> None:
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path / "a", save_interval=2)
    model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    other = TripwireCallback(out_dir=tmp_path / "b", save_interval=2)
    other.load_state_dict(cb.state_dict())
    assert other.steps["train"] == 3 and other.session.mode_steps["train"] == 3
    assert isinstance(cb.backend, KerasBackend)
    other.close()  # (a session left open is ended at exit as failed, with a warning)


# ------------------------------------------------------------------------------------ benchmark
def test_overhead_benchmark_quick(tmp_path: Path) -> None:
    out_json = tmp_path / "overhead.json"
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--framework", "keras", "--quick",
                          "--json", str(out_json)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out_json.read_text())
    for model in ("mlp", "cnn"):
        entry = data["models"][model]
        assert all(entry[c]["ratio_median"] > 0 and entry[c]["thread_ratio_median"] > 0 for c in ("default", "everything", "wga"))
        assert entry["default_paired"]["thread"]["n"] == 2
    assert "everything" in out.stdout and "wga" in out.stdout and "goal <= 1.5" in out.stdout


# ------------------------------------------------------------------------------------ learning rate
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


def used_rates(kernels: KernelSteps, run: Any) -> list[float]:
    """The rate plain SGD applied at each step: ||w_after - w_before|| / ||gradient||."""
    grads = run.tensor("gradients/d1/kernel").series("l2")[1]
    return [float(np.linalg.norm(a - b) / g) for a, b, g in zip(kernels.after, kernels.before, grads)]


def _fit_with_a_schedule(tmp_path: Path) -> tuple[Any, Any, KernelSteps]:
    """SGD on an ExponentialDecay schedule, 6 steps, lr and gradients saved every step:
    ``(schedule, model, kernels)``."""
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    model = sequential()
    keras.utils.set_random_seed(0)
    model.compile(keras.optimizers.SGD(schedule), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    kernels = KernelSteps()
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=["optimizer", "gradients"])
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0, shuffle=False, callbacks=[kernels, cb])
    return schedule, model, kernels


def test_scheduled_learning_rate_is_the_rate_each_step_used(tmp_path: Path) -> None:
    schedule, _, kernels = _fit_with_a_schedule(tmp_path)
    run = tripwire.open_run(tmp_path)
    steps, lrs = run.tensor("lr/0").series()
    assert steps.tolist() == list(range(6))
    expected = [float(schedule(s)) for s in range(6)]  # 0.1, 0.1 * 2**-0.5, 0.05, ...
    assert lrs.tolist() == pytest.approx(expected, rel=1e-6)
    assert used_rates(kernels, run) == pytest.approx(expected, rel=1e-4)  # what SGD really applied


def test_learning_rate_set_by_a_callback_between_epochs(tmp_path: Path) -> None:
    model = compiled(sequential(), lr=0.1)
    scheduler = keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.1 / (epoch + 1))
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=["optimizer"])
    model.fit(X, Y, batch_size=16, epochs=2, verbose=0, callbacks=[scheduler, cb])
    assert cb.session.history.series("lr/0")[1].tolist() == pytest.approx([0.1] * 3 + [0.05] * 3)


def test_scheduled_learning_rate_under_a_loss_scale_optimizer(tmp_path: Path) -> None:
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        schedule, model, kernels = _fit_with_a_schedule(tmp_path)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert int(ops.convert_to_numpy(model.optimizer.iterations)) == 6  # no step skipped for non-finite gradients
    run = tripwire.open_run(tmp_path)
    expected = [float(schedule(s)) for s in range(6)]
    assert run.tensor("lr/0").series()[1].tolist() == pytest.approx(expected, rel=1e-6)
    assert used_rates(kernels, run) == pytest.approx(expected, rel=1e-3)  # float16 compute, unscaled gradients


# ------------------------------------------------------------------------------------ recurrent layers
def _stats(a: np.ndarray) -> dict[str, float]:
    a = a.astype(np.float64)
    return {"mean": a.mean(), "std": a.std(), "min": a.min(), "max": a.max()}


def test_recurrent_layers_capture_outputs_and_cell_activation_inputs(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(8, 5, 3)).astype("float32")
    y = rng.integers(0, 2, 8)
    keras.utils.set_random_seed(0)
    inp = keras.Input((5, 3))
    h = keras.layers.SimpleRNN(4, return_sequences=True, name="srnn")(inp)
    h = keras.layers.GRU(4, return_sequences=True, name="gru")(h)
    h = keras.layers.Bidirectional(keras.layers.LSTM(2, return_sequences=True), name="bi")(h)
    h = keras.layers.LSTM(3, name="lstm")(h)
    model = keras.Model(inp, keras.layers.Dense(2, name="out")(h))
    # lr 0: the weights stay, so the first cell call can be recomputed from them after the fit
    model.compile(keras.optimizers.SGD(0.0), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, collections=["activations", "activation_inputs"])
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False, callbacks=[cb])
    h5 = cb.session.history
    cols = h5.collections()
    # one output per recurrent layer (the fused LSTM/GRU paths never call the cell's call), none per cell
    assert cols["activations"] == ["bi/output", "gru/output", "lstm/output", "out/output", "srnn/output"]
    assert sorted(cols["activation_inputs"]) == sorted([
        "srnn/simple_rnn_cell/tanh/input", "gru/gru_cell/tanh/input", "lstm/lstm_cell/tanh/input",
        "bi/forward_lstm/lstm_cell/tanh/input", "bi/backward_lstm/lstm_cell/tanh/input"])
    lstm = model.get_layer("lstm")
    assert "call" not in vars(lstm) and lstm.cell.activation is keras.activations.tanh  # wrappers undone

    def output(name: str) -> np.ndarray:
        return np.asarray(keras.Model(inp, model.get_layer(name).output).predict(x, verbose=0))

    for name in ("srnn", "gru", "bi", "lstm"):  # the layer's whole output: all steps with return_sequences
        got = {r: h5.value(f"{name}/output", r, 0) for r in ("mean", "std", "abs_max")}
        out = output(name).astype(np.float64)
        assert got == pytest.approx({"mean": out.mean(), "std": out.std(), "abs_max": np.abs(out).max()}, rel=1e-5,
                                    abs=1e-7), name

    def weights(layer: str) -> list[np.ndarray]:
        return [np.asarray(ops.convert_to_numpy(w), dtype=np.float64) for w in model.get_layer(layer).cell.weights]

    # the cell's first call of `activation` in the step: time step 0, zero initial state (h0 @ U = 0)
    k, _, b = weights("srnn")
    srnn_pre = x[:, 0].astype(np.float64) @ k + b
    k, _, b = weights("gru")  # reset_after=True: bias rows are (input, recurrent)
    xp = output("srnn")[:, 0].astype(np.float64) @ k + b[0]
    r = 1 / (1 + np.exp(-(xp[:, 4:8] + b[1][4:8])))
    gru_pre = xp[:, 8:] + r * b[1][8:]
    k, _, b = weights("lstm")  # gates i, f, c, o: the candidate's pre-activation
    lstm_pre = (output("bi")[:, 0].astype(np.float64) @ k + b)[:, 6:9]
    for name, pre in (("srnn/simple_rnn_cell", srnn_pre), ("gru/gru_cell", gru_pre), ("lstm/lstm_cell", lstm_pre)):
        got = {r: h5.value(f"{name}/tanh/input", r, 0) for r in ("mean", "std", "min", "max")}
        assert got == pytest.approx(_stats(pre), rel=1e-5, abs=1e-7), name


# ------------------------------------------------------------------------------------ predict
def test_predict_alone_claims_no_run_and_a_later_fit_starts_it(tmp_path: Path) -> None:
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=2)
    model.predict(X, batch_size=16, verbose=0, callbacks=[cb])
    assert not (tmp_path / "run").exists()  # the run is claimed at a fit's or evaluate's first hook
    model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    assert tripwire.open_run(tmp_path / "run").is_complete
    model.predict(X, batch_size=16, verbose=0, callbacks=[cb])  # after fit: the ended run stays as it is
    run = tripwire.open_run(tmp_path / "run")
    assert run.is_complete and run.status == "complete" and run.steps(mode="train") == [0, 1, 2]
    assert run.steps(mode="predict") == []  # predict is not captured


@pytest.mark.skipif(is_installed("tensorflow"), reason="tensorflow is installed: Keras's default backend loads")
@pytest.mark.parametrize("backend", [None, "tensorflow"])
def test_a_missing_keras_backend_is_named_not_keras(tmp_path: Path, backend: str | None) -> None:
    # tripwire[keras] installs keras and torch; without KERAS_BACKEND Keras loads its default,
    # tensorflow, which is not there: the error said "'keras' is not installed" (it is)
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["KERAS_HOME"] = str(tmp_path)  # no keras.json of the user's
    if backend is not None:
        env["KERAS_BACKEND"] = backend
    code = (
        "try:\n    from tripwire.integrations.keras import TripwireCallback\n"
        "except ImportError as e:\n    print(type(e).__name__, '|', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    said = out.stdout
    assert "MissingDependencyError" in said and "is not installed" not in said.replace("'tensorflow' is not installed", ""), said + out.stderr
    assert "backend 'tensorflow'" in said and "KERAS_BACKEND=torch" in said, said + out.stderr


def test_a_fit_after_a_stopped_fit_is_a_training_of_its_own(tmp_path: Path) -> None:
    # the twin of trial 17a's Lightning finding: the first fit's stop stayed the callback's
    # stopped_by and made the second, complete fit's run "stopped"; the rule that fired never fired
    # again, so the same fault in a later fit went through
    nan = X.copy()
    nan[:] = np.nan
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1,
                          rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    compiled(sequential()).fit(nan, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    assert cb.stopped_by is not None and cb.stopped_by.step == 0
    history = compiled(sequential()).fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=[cb])
    assert len(history.history["loss"]) == 2 and cb.stopped_by is None
    assert tripwire.open_run(tmp_path).status == "complete"
    compiled(sequential()).fit(nan, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    assert cb.stopped_by is not None and tripwire.open_run(tmp_path).status == "stopped"
    assert [f.rule for f in cb.findings if f.kind == "finding"] == ["exploding_tensor", "exploding_tensor"]


def test_a_model_with_no_trainable_weight_is_named_as_the_cause(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 17i: model.trainable = False: the warning named a LossScaleOptimizer or a custom train_step
    model = sequential()
    model.trainable = False
    compiled(model)
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1, rules=["weight_update_ratio"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
    said = [r.getMessage() for r in caplog.records if "apply did not run" in r.getMessage()]
    assert len(said) == 1 and "the model has no trainable weight (model.trainable = False" in said[0], said
    assert "LossScaleOptimizer" not in said[0]


@pytest.mark.parametrize("pass_x", [False, True])
def test_a_custom_train_step_that_calls_compute_loss_without_x_is_said(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                       pass_x: bool) -> None:
    # trial 19g: a torch-backend train_step written as Keras's guide writes it
    # (self.compute_loss(y=y, y_pred=y_pred)) left the inputs out at train steps, without a word
    import torch

    class Net(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.dense = keras.layers.Dense(2, activation="softmax")

        def call(self, x: Any) -> Any:
            return self.dense(x)

        def train_step(self, data: Any) -> Any:
            x, y = data
            self.zero_grad()
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred) if pass_x else self.compute_loss(y=y, y_pred=y_pred)
            loss.backward()
            weights = list(self.trainable_weights)
            with torch.no_grad():
                self.optimizer.apply([w.value.grad for w in weights], weights)
            return {"loss": loss}

    model = Net()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, include_collections=["inputs"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X, Y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    said = "a train step called model.compute_loss without x= (a custom train_step" in caplog.text
    assert said is not pass_x
    assert ("inputs" in tripwire.open_run(tmp_path / "run").tensor_names()) is pass_x


def test_a_cancelled_trial_s_run_says_it_was_cancelled(tmp_path: Path) -> None:
    # trial 20c: a trial past trial_timeout (its report returns True) said "the tuner stopped the trial"
    trial = FakeTrial(stop_at_step=2)
    trial.cancelled, trial.stop_reason, trial.max_resource = True, "trial 0 ran past trial_timeout=2 s", 5
    model = compiled(sequential())
    cb = TripwireCallback(out_dir=tmp_path, trial=trial, trial_metric="loss")
    model.fit(X, Y, batch_size=16, epochs=5, verbose=0, callbacks=[cb])
    reasons = [m.get("stop_reason") for m in tripwire.open_run(tmp_path).end_markers.values()]
    assert reasons == ["the trial was cancelled after epoch 2: trial 0 ran past trial_timeout=2 s"], reasons

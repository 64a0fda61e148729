"""Trial 31a F5 (Keras on jax): the ``train_step`` of Keras's "customizing fit() with JAX" guide keeps its own
``self.loss_tracker = keras.metrics.Mean(name="loss")`` (listed in a ``metrics`` property of its own) and
logs its result as ``loss``; tripwire read Keras's own tracker, which that step never updates, stored the
running mean as the training loss and said the step "does not update" the tracker, as if the guide's
code were wrong. The ``Mean`` named ``loss`` among ``model.metrics`` is read now (each step's own loss,
checked against numpy's), and where no tracker tripwire reads counted the step the WARNING says the
stored loss is a running mean that lags, and how to record each batch's own.

Each script a fresh Python process with ``KERAS_BACKEND=jax``; skipped only where jax is not installed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed"),
    pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                       reason="jax is not installed (these tests run Keras on the jax backend: pip install jax jaxlib; "
                              "CI installs it)"),
]

SCRIPT = r"""
import json, logging, sys
import numpy as np
import jax
import keras
import tripwire
from tripwire.integrations.keras import TripwireCallback

assert keras.backend.backend() == "jax"
MESSAGES = []

class _Catch(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            MESSAGES.append(record.getMessage())

logging.getLogger("tripwire").addHandler(_Catch())
OUT = sys.argv[1]
rng = np.random.default_rng(0)
x = rng.normal(size=(96, 6)).astype("float32")
y = (x[:, :1] * 2).astype("float32")


class GuideModel(keras.Model):
    # Keras's "Customizing what happens in fit() with JAX" guide, its first example
    def __init__(self, *args, tracker="loss", **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_tracker = keras.metrics.Mean(name=tracker)
        self.mae_metric = keras.metrics.MeanAbsoluteError(name="mae")
        self.loss_fn = keras.losses.MeanSquaredError()

    def compute_loss_and_updates(self, trainable_variables, non_trainable_variables, x, y, training=False):
        y_pred, non_trainable_variables = self.stateless_call(trainable_variables, non_trainable_variables, x,
                                                              training=training)
        return self.loss_fn(y, y_pred), (y_pred, non_trainable_variables)

    def train_step(self, state, data):
        trainable_variables, non_trainable_variables, optimizer_variables, metrics_variables = state
        x, y = data
        grad_fn = jax.value_and_grad(self.compute_loss_and_updates, has_aux=True)
        (loss, (y_pred, non_trainable_variables)), grads = grad_fn(trainable_variables, non_trainable_variables, x, y,
                                                                   training=True)
        trainable_variables, optimizer_variables = self.optimizer.stateless_apply(optimizer_variables, grads,
                                                                                  trainable_variables)
        loss_tracker_vars = metrics_variables[: len(self.loss_tracker.variables)]
        mae_metric_vars = metrics_variables[len(self.loss_tracker.variables):]
        loss_tracker_vars = self.loss_tracker.stateless_update_state(loss_tracker_vars, loss)
        mae_metric_vars = self.mae_metric.stateless_update_state(mae_metric_vars, y, y_pred)
        logs = {"loss": self.loss_tracker.stateless_result(loss_tracker_vars),
                "mae": self.mae_metric.stateless_result(mae_metric_vars)}
        state = (trainable_variables, non_trainable_variables, optimizer_variables, loss_tracker_vars + mae_metric_vars)
        return logs, state

    @property
    def metrics(self):
        return [self.loss_tracker, self.mae_metric]


result = {}
for name, tracker, jit in (("guide_jit", "loss", True), ("guide_eager", "loss", False), ("other", "running", True)):
    keras.utils.set_random_seed(0)
    inputs = keras.Input(shape=(6,))
    model = GuideModel(inputs, keras.layers.Dense(1, name="o")(inputs), tracker=tracker)
    kernel, bias = (np.asarray(w, dtype=np.float64) for w in model.get_weights())
    model.compile(optimizer=keras.optimizers.SGD(0.1), jit_compile=jit)
    del MESSAGES[:]
    logged = []
    seen = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: logged.append(float(logs["loss"])))
    out = f"{OUT}/{name}"
    model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0,
              callbacks=[TripwireCallback(out_dir=out, save_interval=1, collections=["losses"]), seen])
    mine = []  # each step's own loss, at the weights before it (SGD replayed in numpy float64)
    for step in range(6):
        xb, yb = x[(step % 3) * 32:(step % 3 + 1) * 32], y[(step % 3) * 32:(step % 3 + 1) * 32]
        err = xb @ kernel + bias - yb
        mine.append(float((err ** 2).mean()))
        grad = 2 * err / len(yb)
        kernel, bias = kernel - 0.1 * xb.T @ grad, bias - 0.1 * grad.sum(0)
    result[name] = {"stored": tripwire.open_run(out).series("loss")[1].tolist(), "mine": mine, "logged": logged,
                    "messages": list(MESSAGES)}
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def fits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("jax_guide")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("JAX_ENABLE_X64", None)
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT, str(tmp)], capture_output=True, text=True,
                          env=env, timeout=420, cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["guide_jit", "guide_eager"])
def test_the_guides_own_loss_tracker_gives_each_steps_own_loss(fits: dict[str, Any], name: str) -> None:
    fit = fits[name]
    assert fit["stored"] == pytest.approx(fit["mine"], rel=1e-5), fit
    assert fit["stored"][1] != pytest.approx(fit["logged"][1], rel=1e-3)  # (not the running mean the step logs)
    assert not [m for m in fit["messages"] if "not the batch's own" in m], fit["messages"]


def test_a_loss_log_no_tracker_counted_is_said_without_blaming_the_step(fits: dict[str, Any]) -> None:
    fit = fits["other"]  # (its tracker is named 'running': not the one tripwire reads)
    assert fit["stored"] == pytest.approx(fit["logged"], rel=1e-7)  # the log, as it is
    said = [m for m in fit["messages"] if "not the batch's own" in m]
    assert len(said) == 1, fit["messages"]
    assert "does not update it" not in said[0] and "did not count this step" in said[0], said[0]
    assert "a running mean lags the batch loss" in said[0], said[0]
    assert "keep it in a keras.metrics.Mean named 'loss', listed in the model's metrics" in said[0], said[0]

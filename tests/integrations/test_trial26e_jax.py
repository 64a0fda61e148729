"""Keras 3 on the jax backend (trial 26e), each test a fresh Python process with ``KERAS_BACKEND=jax``
(the backend is fixed at Keras's first import; the rest of the suite runs Keras on torch). Skipped
only where jax is not installed; CI installs it (``.ci/run``). Nothing here imports torch, so a
jax-only environment runs them too.

Checked against values computed here, independently of tripwire: the weights stored at each step
(the model's own after the step), the training ``loss`` of each step (each batch's own, recovered
from Keras's running mean: the loss of the batch at the weights before the step, in numpy float64),
with a partial last batch and with ``steps_per_execution``; Sequential, functional and subclassed
models, jit-compiled, not, and run eagerly. Also: no WARNING blames a LossScaleOptimizer or a
custom train_step for the gradients jax does not give (finding 2); the "not captured" messages say
what is missing, why, and what helps on jax (finding 3); the planned length counts batch-hook calls
under ``steps_per_execution`` (finding 4); float32 reductions without ``jax_enable_x64`` (finding 6)."""

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

PRELUDE = r"""
import json, logging, os, sys
import numpy as np
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


def np_loss(ws, xb, yb):
    # Dense(relu) -> Dense(logits) -> sparse categorical cross-entropy, mean over the batch, float64
    h = np.maximum(xb @ ws[0] + ws[1], 0.0)
    z = h @ ws[2] + ws[3]
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(yb)), yb].mean())


def weights64(model):
    return [np.asarray(w, dtype=np.float64) for w in model.get_weights()]


class Sub(keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = keras.layers.Dense(8, activation="relu", name="d1")
        self.out = keras.layers.Dense(2, name="out")

    def call(self, x):
        return self.out(self.d1(x))


def make(kind):
    keras.utils.set_random_seed(0)
    if kind == "sequential":
        return keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu", name="d1"),
                                 keras.layers.Dense(2, name="out")])
    if kind == "functional":
        inp = keras.Input((6,))
        out = keras.layers.Dense(2, name="out")(keras.layers.Dense(8, activation="relu", name="d1")(inp))
        return keras.Model(inp, out)
    model = Sub()
    model(np.zeros((1, 6), "float32"))  # (its weights made)
    return model


def compile_(model, mode, lr=0.05, **kw):
    model.compile(keras.optimizers.SGD(lr), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=(mode == "jit"), run_eagerly=(mode == "eager"), **kw)


class After(keras.callbacks.Callback):
    # the model's weights after each train step (listed after tripwire's callback)
    def __init__(self):
        super().__init__()
        self.after = []

    def on_train_batch_end(self, batch, logs=None):
        self.model.jax_state_sync()
        self.after.append(weights64(self.model))
"""

FITS = PRELUDE + r"""
rng = np.random.default_rng(0)
X = rng.normal(size=(100, 6)).astype("float32")
Y = (X[:, 0] > 0).astype("int32")
BS = 32  # 100 samples: batches of 32, 32, 32 and a partial 4
result = {}
for kind, mode in (("sequential", "jit"), ("functional", "nojit"), ("subclassed", "eager")):
    model = make(kind)
    compile_(model, mode)
    start = weights64(model)
    rec = After()
    out = os.path.join(OUT, kind)
    cb = TripwireCallback(out_dir=out, save_interval=1, collections=["losses", "weights", "gradients", "optimizer"])
    del MESSAGES[:]
    model.fit(X, Y, batch_size=BS, epochs=2, shuffle=False, verbose=0, callbacks=[cb, rec])
    before = [start] + rec.after[:-1]
    bounds = [(i, min(i + BS, len(X))) for i in range(0, len(X), BS)] * 2
    expected = [np_loss(w, X[a:b].astype(np.float64), Y[a:b]) for w, (a, b) in zip(before, bounds)]
    run = tripwire.open_run(out)
    steps, losses = run.tensor("loss").series()
    kernel = run.tensor("d1/kernel")
    result[kind] = {
        "steps": steps.tolist(),
        "loss": losses.tolist(),
        "expected_loss": expected,
        "kernel_l2": kernel.series("l2")[1].tolist(),
        "kernel_max": kernel.series("max")[1].tolist(),
        "expected_l2": [float(np.linalg.norm(w[0])) for w in rec.after],
        "expected_max": [float(w[0].max()) for w in rec.after],
        "messages": list(MESSAGES),
        "status": run.status,
    }


class OwnLoss(keras.Sequential):
    # a custom train_step whose 'loss' log is not the loss tracker's mean: nothing to recover it from
    def train_step(self, state, data):
        logs, state = super().train_step(state, data)
        return {**logs, "loss": logs["loss"] * 2.0}, state


model = OwnLoss([keras.Input((6,)), keras.layers.Dense(8, activation="relu", name="d1"), keras.layers.Dense(2, name="out")])
compile_(model, "jit")
logged = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(logs["loss"]))
seen = []
del MESSAGES[:]
out = os.path.join(OUT, "own_loss")
model.fit(X, Y, batch_size=BS, epochs=1, shuffle=False, verbose=0,
          callbacks=[TripwireCallback(out_dir=out, save_interval=1, collections=["losses"]), logged])
result["own_loss"] = {"loss": tripwire.open_run(out).tensor("loss").series()[1].tolist(), "logged": seen,
                      "messages": list(MESSAGES)}
print(json.dumps(result))
"""

RULES = PRELUDE + r"""
rng = np.random.default_rng(0)
result = {}
# a model that cannot learn (SGD at lr=0, random labels): the default rule set stops it, as on torch
X = rng.normal(size=(16000, 6)).astype("float32")
Y = rng.integers(0, 2, 16000).astype("int32")
for n in (1, 4):
    model = make("sequential")
    ws = np.random.default_rng(5)  # (weights of numpy's: the same on torch, where this stops at step 100 for n=1)
    model.set_weights([(ws.normal(size=w.shape) * 0.5).astype("float32") for w in model.get_weights()])
    compile_(model, "jit", lr=0.0, steps_per_execution=n)
    cb = TripwireCallback(out_dir=os.path.join(OUT, f"frozen{n}"), rules=["default"], actions=["log", "stop_training"])
    calls = []
    counter = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: calls.append(b))
    model.fit(X, Y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[cb, counter])
    found = cb.stopped_by
    result[f"frozen{n}"] = {"planned": cb.session.history.planned_steps, "rule": found.rule if found else None,
                            "step": found.step if found else None, "batches": calls[-1] + 1, "hooks": len(calls)}
# steps_per_execution=4 over 13 batches (12 of 8 samples, one of 4): 4 hook calls, each step's loss the
# mean of its batches' losses weighted by their sizes
X2, Y2 = X[:100], Y[:100]
model = make("functional")
compile_(model, "jit", lr=0.0, steps_per_execution=4)
ws = weights64(model)
cb = TripwireCallback(out_dir=os.path.join(OUT, "spe"), save_interval=1, collections=["losses"])
model.fit(X2, Y2, batch_size=8, epochs=2, shuffle=False, verbose=0, callbacks=[cb])
bounds = [(i, min(i + 8, 100)) for i in range(0, 100, 8)]
per = [(np_loss(ws, X2[a:b].astype(np.float64), Y2[a:b]), b - a) for a, b in bounds]
groups = [per[i:i + 4] for i in range(0, len(per), 4)] * 2
run = tripwire.open_run(os.path.join(OUT, "spe"))
steps, losses = run.tensor("loss").series()
result["spe"] = {"planned": cb.session.history.planned_steps, "steps": steps.tolist(), "loss": losses.tolist(),
                 "expected": [sum(l * s for l, s in g) / sum(s for _, s in g) for g in groups]}
print(json.dumps(result))
"""

CAPTURE = PRELUDE + r"""
rng = np.random.default_rng(0)
X = (rng.normal(size=(256, 6)) * 1000).astype("float32")  # far from unit scale: input_not_normalized fires
Y = (X[:, 0] > 0).astype("int32")
result = {}
for mode in ("eager", "nojit", "jit"):
    model = make("sequential")
    compile_(model, mode, lr=1e-3)
    out = os.path.join(OUT, mode)
    cb = TripwireCallback(out_dir=out, save_interval=2,
                          include_collections=["inputs", "labels", "predictions", "activations", "relu_outputs"],
                          rules=[{"name": "input_not_normalized", "actions": ["record"]},
                                 {"name": "dead_relu", "actions": ["record"]}])
    del MESSAGES[:]
    model.fit(X, Y, batch_size=64, epochs=1, shuffle=False, verbose=0, callbacks=[cb])
    run = tripwire.open_run(out)
    names = run.tensor_names()
    entry = {"names": names, "messages": list(MESSAGES), "findings": sorted({f.rule for f in run.findings})}
    if "inputs" in names:
        t = run.tensor("inputs")
        entry["inputs"] = [[t.value("mean", s), t.value("max", s)] for s in t.steps()]
        entry["expected_inputs"] = [[float(X[s * 64:(s + 1) * 64].astype(np.float64).mean()),
                                     float(X[s * 64:(s + 1) * 64].max())] for s in t.steps()]
    if "labels" in names:
        t = run.tensor("labels")
        entry["labels"] = [np.asarray(t.value(s)).tolist() for s in t.steps()]
        entry["expected_labels"] = [Y[s * 64:(s + 1) * 64].tolist() for s in t.steps()]
    result[mode] = entry
# eval steps run no jax.value_and_grad: there, uncompiled, the layer outputs and predictions are real
model = make("sequential")
compile_(model, "nojit", lr=1e-3)
out = os.path.join(OUT, "eval")
cb = TripwireCallback(out_dir=out, save_interval=1, include_collections=["predictions", "activations"])
model.fit(X[:128], Y[:128], batch_size=64, epochs=1, verbose=0, validation_data=(X[128:192], Y[128:192]), callbacks=[cb])
run = tripwire.open_run(out)
result["eval"] = {"eval_steps": run.tensor("predictions").steps(mode="eval") if "predictions" in run.tensor_names() else [],
                  "activation_steps": run.tensor("d1/output").steps(mode="eval") if "d1/output" in run.tensor_names() else []}
print(json.dumps(result))
"""

PRECISION = r"""
import json
import numpy as np
import jax
import keras
from tripwire import BASIC_REDUCTIONS, NumpyBackend
from tripwire.integrations.keras import KerasBackend

assert keras.backend.backend() == "jax" and not jax.config.jax_enable_x64  # float32 only on the device
rng = np.random.default_rng(1)
arrays = {
    "offset": (1e4 + 1e-2 * rng.normal(size=(300,))).astype("float32"),   # variance tiny against the squared mean
    "offset_small": (1e3 + 1e-3 * rng.normal(size=(50,))).astype("float32"),
    "huge": (1e20 * rng.normal(size=(50,))).astype("float32"),             # squares overflow float32
    "huge_sum": np.full((64,), 3e37, "float32"),                           # the sum overflows float32
    "tiny": (1e-25 * rng.normal(size=(50,))).astype("float32"),            # squares underflow float32
    "tiny_matrix": (1e-30 * rng.normal(size=(40, 30))).astype("float32"),
    "normal": rng.normal(size=(200, 30)).astype("float32"),
    "zeros": np.zeros((16,), "float32"),
    "with_nan": np.where(np.arange(20) == 3, np.nan, rng.normal(size=(20,))).astype("float32"),
    "with_inf": np.where(np.arange(20) == 5, np.inf, rng.normal(size=(20,))).astype("float32"),
}
reductions = list(BASIC_REDUCTIONS)
values = [keras.ops.convert_to_tensor(a) for a in arrays.values()]
got = KerasBackend().reduce(values, reductions)
ref = NumpyBackend().reduce(list(arrays.values()), reductions)
bad = []
for i, name in enumerate(arrays):
    for j, r in enumerate(reductions):
        g, e = float(got[i, j]), float(ref[i, j])
        same = (np.isnan(g) and np.isnan(e)) or g == e or abs(g - e) <= 2e-6 * abs(e)
        if not same:
            bad.append([name, r, g, e])
print(json.dumps({"bad": bad}))
"""


def _run_jax(script: str, tmp_path: Path, timeout: int = 420) -> dict[str, Any]:
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("JAX_ENABLE_X64", None)
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", script, str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run_jax(FITS, tmp_path_factory.mktemp("jax_fits"))


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run_jax(RULES, tmp_path_factory.mktemp("jax_rules"))


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run_jax(CAPTURE, tmp_path_factory.mktemp("jax_capture"))


@pytest.mark.parametrize("kind", ["sequential", "functional", "subclassed"])
def test_jax_stores_the_weights_of_each_step(fits: dict[str, Any], kind: str) -> None:
    fit = fits[kind]
    assert fit["status"] == "complete" and fit["steps"] == list(range(8))
    assert fit["kernel_l2"] == pytest.approx(fit["expected_l2"], rel=1e-6)
    assert fit["kernel_max"] == pytest.approx(fit["expected_max"], rel=1e-6)


@pytest.mark.parametrize("kind", ["sequential", "functional", "subclassed"])
def test_jax_training_loss_is_each_batchs_own(fits: dict[str, Any], kind: str) -> None:
    # finding 1: the loss stored was Keras's running mean over the epoch; it is each batch's own loss
    # (at the weights before the step), the partial last batch of 4 samples and the epoch's restart included
    fit = fits[kind]
    assert fit["loss"] == pytest.approx(fit["expected_loss"], rel=1e-5)


def test_jax_a_loss_log_of_a_custom_train_step_is_recorded_as_it_is_and_said(fits: dict[str, Any]) -> None:
    own = fits["own_loss"]
    assert own["loss"] == pytest.approx(own["logged"], rel=1e-7)
    said = [m for m in own["messages"] if "is Keras's running mean over the epoch, not the batch's own" in m]
    assert len(said) == 1 and "is not the mean of Keras's loss tracker" in said[0], own["messages"]


def test_jax_fit_ends_without_blaming_a_loss_scaler_or_a_train_step(fits: dict[str, Any]) -> None:
    # finding 2: every jax fit ended with "the optimizer's apply did not run ... a LossScaleOptimizer ..."
    for kind in ("sequential", "functional", "subclassed"):
        fit = fits[kind]
        said = " | ".join(fit["messages"])
        assert "apply did not run" not in said and "LossScaleOptimizer" not in said, (kind, said)
        jax_notes = [m for m in fit["messages"] if "not captured on the jax backend" in m]
        assert len(jax_notes) == 1, (kind, fit["messages"])  # said once, with the real cause
        assert "loss recorded is each batch's own" in jax_notes[0] and "gradients" in jax_notes[0]


def test_jax_default_rules_stop_a_model_that_does_not_learn(rules: dict[str, Any]) -> None:
    # finding 1: lr=0 ran all its steps with no finding on jax (torch stops it at step 100 of 1000)
    frozen = rules["frozen1"]
    assert frozen["planned"] == 1000 and frozen["rule"] == "loss_not_decreasing", frozen
    assert frozen["step"] == 100 and frozen["batches"] == 101, frozen  # (torch, the same weights: step 100)


def test_jax_steps_per_execution_plans_hook_calls(rules: dict[str, Any]) -> None:
    # finding 4: planned 1000 (batches) where a step is a call of the batch hooks, every 4 batches:
    # loss_not_decreasing stopped at batch 404, 40% of the training (now at hook step 50, batch 204)
    frozen = rules["frozen4"]
    assert frozen["planned"] == 250 and frozen["rule"] == "loss_not_decreasing", frozen
    assert frozen["batches"] <= 0.25 * 1000 and frozen["hooks"] == frozen["step"] + 1, frozen
    spe = rules["spe"]
    assert spe["planned"] == 2 * 4 and spe["steps"] == list(range(8))
    assert spe["loss"] == pytest.approx(spe["expected"], rel=1e-5)


@pytest.mark.parametrize("mode", ["eager", "nojit"])
def test_jax_uncompiled_steps_capture_inputs_and_labels_and_say_why_not_predictions(capture: dict[str, Any],
                                                                                     mode: str) -> None:
    # finding 3: run_eagerly=True was advised with it set; inputs and labels were said not captured
    # (they were); dead_relu's "nothing to read" blamed a model with no ReLU layer
    fit = capture[mode]
    assert sum(fit["inputs"], []) == pytest.approx(sum(fit["expected_inputs"], []), rel=1e-5)
    assert fit["labels"] == fit["expected_labels"]
    assert "input_not_normalized" in fit["findings"]
    said = " | ".join(fit["messages"])
    assert "run_eagerly=True to capture" not in said and "inputs, labels and predictions are not" not in said, said
    note = [m for m in fit["messages"] if "are not captured at train steps on the jax backend" in m]
    assert len(note) == 1 and "predictions" in note[0] and "activations" in note[0], fit["messages"]
    head = note[0].split(" are not captured")[0]
    assert "inputs" not in head and "labels" not in head, note
    dead = [m for m in fit["messages"] if "'dead_relu' had nothing to read" in m]
    assert len(dead) == 1 and "no ReLU layer" not in dead[0] and "jax" in dead[0], dead


def test_jax_compiled_steps_say_what_helps(capture: dict[str, Any]) -> None:
    fit = capture["jit"]
    said = " | ".join(fit["messages"])
    assert "run_eagerly=True to capture" not in said, said
    assert "custom train_step" not in said, said  # (the compiled step runs no Python: not a custom step)
    note = [m for m in fit["messages"] if "are not captured in a compiled jax step" in m]
    assert len(note) == 1 and "jit_compile=False" in note[0], fit["messages"]
    assert all(k in note[0] for k in ("inputs", "labels", "predictions")), note
    dead = [m for m in fit["messages"] if "'dead_relu' had nothing to read" in m]
    assert len(dead) == 1 and "no ReLU layer" not in dead[0], dead


def test_jax_eval_steps_capture_predictions_and_activations_uncompiled(capture: dict[str, Any]) -> None:
    assert capture["eval"]["eval_steps"] == [0] and capture["eval"]["activation_steps"] == [0], capture["eval"]


def test_jax_float32_reductions_match_numpy(tmp_path: Path) -> None:
    # finding 6: without jax_enable_x64 a finite ~1e20 weight had l2=inf, a ~1e-25 one l2=0, and a
    # variance was off by 1.3%
    assert _run_jax(PRECISION, tmp_path)["bad"] == []

"""Keras 3 on the jax backend with fp16 mixed precision (trial 30i), each script a fresh Python process
with ``KERAS_BACKEND=jax`` (the rest of the suite runs Keras on torch). Skipped only where jax is not
installed; imports no torch.

F1: on jax the ``LossScaleOptimizer``'s scale was never recorded (the optimizer's state lives in the
trainer during an epoch), so ``loss_scale_collapse`` never judged and a NaN-gradient model that never
applied an update ran to ``complete``; torch stops it at step 20. Checked against the scale the
optimizer itself holds at each batch's begin (read after ``jax_state_sync`` by a callback listed after
tripwire's), jit-compiled or not, and with ``steps_per_execution=4``.
F4: tripwire's reductions asked jax for int64 indices, which jax without x64 truncates to int32 with a
UserWarning in the user's log."""

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
import json, os, sys, warnings
import numpy as np
import keras
import tripwire
from tripwire.integrations.keras import TripwireCallback

assert keras.backend.backend() == "jax"
OUT = sys.argv[1]
keras.mixed_precision.set_global_policy("mixed_float16")
rng = np.random.default_rng(0)
X = rng.normal(size=(1280, 16)).astype("float32")
Y = (X[:, 0] > 0).astype("int32")


class SqrtPos(keras.layers.Layer):
    # the usual NaN-gradient bug: sqrt's gradient at 0 is inf, times where's 0 in the untaken branch: NaN
    def call(self, t):
        return keras.ops.where(t > 0, keras.ops.sqrt(t), keras.ops.zeros_like(t))


def make(bug):
    keras.utils.set_random_seed(0)
    layers = [keras.Input((16,)), keras.layers.Dense(32)]
    layers += [SqrtPos()] if bug else [keras.layers.Activation("relu")]
    layers += [keras.layers.Dense(2), keras.layers.Activation("linear", dtype="float32")]
    return keras.Sequential(layers)


class Probe(keras.callbacks.Callback):
    # the optimizer's own dynamic_scale as each batch begins (listed after tripwire's callback)
    def __init__(self):
        super().__init__()
        self.scales = []

    def on_train_batch_begin(self, batch, logs=None):
        self.model.jax_state_sync()
        self.scales.append(float(keras.ops.convert_to_numpy(self.model.optimizer.dynamic_scale)))


result = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for name, bug, jit, spe, initial in (("bug_jit", True, True, 1, None), ("bug_nojit", True, False, 1, None),
                                         ("bug_spe4", True, True, 4, None), ("healthy", False, True, 1, 2.0 ** 30)):
        model = make(bug)
        opt = keras.optimizers.Adam(1e-3)
        if initial is not None:  # (overflows its first steps: the scale moves down, then stays)
            opt = keras.optimizers.LossScaleOptimizer(opt, initial_scale=initial)
        model.compile(opt, keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit,
                      steps_per_execution=spe)
        out = os.path.join(OUT, name)
        probe = Probe()
        if bug:
            cb = TripwireCallback(out_dir=out, rules=["default"], actions=["log", "stop_training"])
        else:
            cb = TripwireCallback(out_dir=out, rules=["default"], actions=["log", "stop_training"], save_interval=1,
                                  collections=["losses", "weights", "optimizer"])
        model.fit(X, Y, batch_size=16, epochs=2, shuffle=False, verbose=0, callbacks=[cb, probe])
        run = tripwire.open_run(out)
        stored = run.tensor("loss_scale").series() if "loss_scale" in run.tensor_names() else ([], [])
        result[name] = {"status": run.status, "findings": sorted({f.rule for f in run.findings}),
                        "stopped": [cb.stopped_by.rule, cb.stopped_by.step] if cb.stopped_by else None,
                        "steps": [int(s) for s in stored[0]], "stored": [float(v) for v in stored[1]],
                        "probe": probe.scales}
result["warnings"] = [str(w.message) for w in caught if "int64" in str(w.message) or "tripwire" in str(w.filename)]
print(json.dumps(result))
"""


def _run_jax(script: str, tmp_path: Path, timeout: int = 420) -> dict[str, Any]:
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("JAX_ENABLE_X64", None)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run_jax(SCRIPT, tmp_path_factory.mktemp("jax_loss_scale"))


@pytest.mark.parametrize("name", ["bug_jit", "bug_nojit"])
def test_jax_loss_scale_collapse_stops_a_nan_gradient_fit_as_on_torch(fits: dict[str, Any], name: str) -> None:
    # F1: the fit ran to 'complete' with no finding; torch stops it at step 30 (the scale 2^-15 below min_scale
    # 0.001, every step since the save before skipped; saves every 10: session 30, trial 30g F1)
    fit = fits[name]
    assert fit["stopped"] == ["loss_scale_collapse", 30] and fit["status"] == "stopped", fit
    assert fit["steps"] == [0, 10, 20, 30] and fit["stored"] == [2.0 ** 15, 2.0 ** 5, 2.0 ** -5, 2.0 ** -15], fit


def test_jax_loss_scale_is_recorded_under_steps_per_execution(fits: dict[str, Any]) -> None:
    # t5_spe.py 4 1 1: both epochs ran with stopped_by None while the scale fell to 1.9e-09
    fit = fits["bug_spe4"]
    assert fit["stopped"] == ["loss_scale_collapse", 10], fit
    assert fit["stored"] == [fit["probe"][s] for s in fit["steps"]] and fit["stored"][-1] < 1, fit


def test_jax_stored_loss_scale_is_the_optimizers_at_each_save_step(fits: dict[str, Any]) -> None:
    fit = fits["healthy"]
    assert fit["status"] == "complete" and "loss_scale_collapse" not in fit["findings"], fit
    assert fit["steps"] == list(range(160)), fit["steps"]  # (1280 / 16 batches x 2 epochs, saved each)
    assert fit["stored"] == fit["probe"], fit
    assert fit["stored"][0] == 2.0 ** 30 and min(fit["stored"]) < 2.0 ** 30  # (it moved: skips at the start)


def test_jax_reductions_raise_no_int64_warning(fits: dict[str, Any]) -> None:
    # F4: "Explicitly requested dtype int64 requested in asarray is not available, and will be truncated"
    assert fits["warnings"] == [], fits["warnings"]

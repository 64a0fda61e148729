"""Trial 32c F2, F3, F4 on Keras's jax backend: tensor names in nested models are the same as on torch
(the layer's place in the model's layer tree: ``tower_a/hidden/kernel``, ``backbone/enc_fc1/output``,
``features/relu1/output``), and ``loss_output_mismatch`` looks through a nested model. A fresh Python
process with ``KERAS_BACKEND=jax`` (the backend is fixed at Keras's first import; the rest of the
suite runs Keras on torch), skipped where jax is not installed. On jax weights are captured at train
steps and layer outputs at eval steps of a step compiled with ``jit_compile=False`` (docs/keras.md,
"Backends"); gradients are not captured there."""

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
                       reason="jax is not installed (this test runs Keras on the jax backend: pip install jax jaxlib)"),
]

SCRIPT = r"""
import json, logging, os, sys
import numpy as np
import keras
import tripwire
from tripwire.integrations.keras import TripwireCallback

assert keras.backend.backend() == "jax"
OUT = sys.argv[1]
rng = np.random.default_rng(0)
result = {}


def fit(name, model, x, y, loss="mse", **kw):
    model.compile(keras.optimizers.SGD(0.01), loss, jit_compile=False)
    out = os.path.join(OUT, name)
    cb = TripwireCallback(out_dir=out, save_interval=1, rules=[], **kw)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[cb], validation_data=(x, y))
    run = tripwire.open_run(out)
    result[name] = {"names": run.tensor_names(), "findings": [(f.rule, f.details) for f in run.findings]}
    return run


keras.utils.set_random_seed(0)
features = keras.Sequential([
    keras.Input((6, 6, 1)), keras.layers.Conv2D(4, 3, padding="same", name="conv1"),
    keras.layers.BatchNormalization(name="bn1"), keras.layers.ReLU(name="relu1"),
    keras.layers.Conv2D(4, 3, padding="same", activation="relu", name="conv2")], name="features")
model = keras.Sequential([keras.Input((6, 6, 1)), features, keras.layers.Flatten(name="flat"),
                          keras.layers.Dense(1, name="logits")])
fit("features", model, rng.normal(size=(32, 6, 6, 1)).astype("float32"), rng.normal(size=(32, 1)).astype("float32"),
    include_collections=["weights", "activations", "relu_outputs"])

bi = keras.Input((10,))
bh = keras.layers.Dense(8, activation="tanh", name="enc_fc2")(keras.layers.Dense(8, activation="relu", name="enc_fc1")(bi))
backbone = keras.Model(bi, bh, name="backbone")
inp = keras.Input((10,))
x10, y1 = rng.normal(size=(32, 10)).astype("float32"), rng.normal(size=(32, 1)).astype("float32")
fit("backbone", keras.Model(inp, keras.layers.Dense(1, name="head")(backbone(inp))), x10, y1,
    include_collections=["weights", "activations"])


def tower(name, scale):
    i = keras.Input((10,))
    init = keras.initializers.RandomNormal(stddev=scale)
    return keras.Model(i, keras.layers.Dense(16, activation="relu", name="hidden", kernel_initializer=init)(i), name=name)


ta, tb = tower("tower_a", 0.01), tower("tower_b", 1.0)
ia, ib = keras.Input((10,)), keras.Input((10,))
towers = keras.Model([ia, ib], keras.layers.Dense(1, name="head")(keras.layers.Concatenate(name="cat")([ta(ia), tb(ib)])))
run = fit("towers", towers, [x10, rng.normal(size=(32, 10)).astype("float32")], y1,
          include_collections=["weights", "activations"])
result["towers"]["std"] = {t: float(run.tensor(f"{t}/hidden/kernel").series("std")[1][-1]) for t in ("tower_a", "tower_b")}
result["towers"]["model_std"] = {t.name: float(np.asarray(t.get_layer("hidden").kernel.value).std()) for t in (ta, tb)}

i3 = keras.Input((10,))
head = keras.Sequential([keras.layers.Dense(3, activation="softmax", name="probs")], name="head")
fit("mismatch", keras.Model(i3, head(keras.layers.Dense(8, name="hid")(i3))), x10, rng.integers(0, 3, size=32),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def jax_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp_path = tmp_path_factory.mktemp("jax_names")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=420, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_jax_nested_sequential_names(jax_result: dict[str, Any]) -> None:
    got = jax_result["features"]["names"]
    for name in ("features/conv1/kernel", "features/bn1/moving_mean", "features/relu1/output",
                 "features/relu1/relu/output", "features/conv2/relu/output", "logits/output"):
        assert name in got, (name, got)
    assert not [n for n in got if n.startswith("relu1")], got


def test_jax_functional_backbone_names(jax_result: dict[str, Any]) -> None:
    got = jax_result["backbone"]["names"]
    for name in ("backbone/enc_fc1/kernel", "backbone/enc_fc1/output", "backbone/enc_fc2/output", "head/kernel"):
        assert name in got, (name, got)
    assert not [n for n in got if n.startswith("enc_fc")], got


def test_jax_towers_names_and_values(jax_result: dict[str, Any]) -> None:
    towers = jax_result["towers"]
    for name in ("tower_a/hidden/kernel", "tower_b/hidden/kernel", "tower_a/hidden/output", "tower_b/hidden/output"):
        assert name in towers["names"], (name, towers["names"])
    assert not [n for n in towers["names"] if "hidden_1" in n or "kernel_1" in n], towers["names"]
    for tower in ("tower_a", "tower_b"):
        assert towers["std"][tower] == pytest.approx(towers["model_std"][tower], rel=1e-4)


def test_jax_nested_head_mismatch(jax_result: dict[str, Any]) -> None:
    found = [d for rule, d in jax_result["mismatch"]["findings"] if rule == "loss_output_mismatch"]
    assert len(found) == 1 and found[0]["layer"] == "head/probs", jax_result["mismatch"]["findings"]

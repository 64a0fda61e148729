"""TripwireCallback for Keras 3 (torch backend), trial 32c: tensor names in nested models, the loss /
output check through a nested model, and the stop line's step.

F2: the layers of a nested model were named by Keras's name scopes (``layer.path``), which hold the
nested model's name only for layers built inside it: in a nested Sequential ``features``, the
weightless ``relu1`` was ``relu1/output`` beside ``features/conv1/output``; a functional ``backbone``
built on its own and then nested had no prefix at all (``enc_fc1/output``), so ``include:
["^backbone"]`` captured nothing. F3: two nested towers with a Dense ``hidden`` each were stored as
``hidden/kernel``, ``hidden/kernel_1`` (suffix on the variable) beside ``hidden/output``,
``hidden_1/output`` (suffix on the layer). Now every tensor of a layer is named by the layer's place
in the model's layer tree, for weights, gradients, update ratios and activations alike; a flat
model's names are unchanged.

F4: ``loss_output_mismatch`` did not look through a nested model that makes the output (a Sequential
head, a functional body ending in softmax). F5: the stop line named the step of a NaN kept between
save steps ("at step 1") where training stopped at the save step that judged it (10)."""

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

ALL = ["weights", "biases", "gradients", "optimizer", "activations", "activation_inputs", "relu_outputs"]


def fit(model: Any, x: Any, y: Any, out: Path, loss: Any = "mse", **kw: Any) -> TripwireCallback:
    model.compile(keras.optimizers.SGD(0.01), loss)
    cb = TripwireCallback(out_dir=str(out), save_interval=1, rules=[], **kw)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[cb])
    return cb


def names(out: Path) -> list[str]:
    return tripwire.open_run(str(out)).tensor_names()


def features_model() -> Any:
    keras.utils.set_random_seed(0)
    features = keras.Sequential([
        keras.Input((6, 6, 1)), keras.layers.Conv2D(4, 3, padding="same", name="conv1"),
        keras.layers.BatchNormalization(name="bn1"), keras.layers.ReLU(name="relu1"),
        keras.layers.Conv2D(4, 3, padding="same", activation="relu", name="conv2")], name="features")
    return keras.Sequential([keras.Input((6, 6, 1)), features, keras.layers.Flatten(name="flat"),
                             keras.layers.Dense(1, name="logits")])


def test_nested_sequential_names_every_layer_under_the_nested_model(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 6, 6, 1)).astype("float32"), rng.normal(size=(32, 1)).astype("float32")
    fit(features_model(), x, y, tmp_path / "r", include_collections=ALL)
    got = names(tmp_path / "r")
    # the weightless ReLU inside `features` is named under it, as the layers with weights are
    for name in ("features/relu1/output", "features/relu1/relu/output", "features/relu1/relu/input",
                 "features/conv1/output", "features/conv1/kernel", "gradients/features/conv1/kernel",
                 "update_ratio/features/conv1/kernel", "features/bn1/moving_mean", "features/conv2/relu/output",
                 "flat/output", "logits/kernel", "gradients/logits/bias"):
        assert name in got, (name, got)
    assert not [n for n in got if n.startswith("relu1")], got


def test_a_collection_by_regex_selects_the_nested_models_layers(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 6, 6, 1)).astype("float32"), rng.normal(size=(32, 1)).astype("float32")
    cols = {"feats": {"kinds": ["activations"], "include": ["^features/"], "reductions": ["mean"]}}
    fit(features_model(), x, y, tmp_path / "r", collections=cols)
    got = tripwire.open_run(str(tmp_path / "r")).tensor_names(collection="feats")
    assert got == sorted(f"features/{n}/output" for n in ("conv1", "bn1", "relu1", "conv2")), got


def backbone_model() -> tuple[Any, Any]:
    keras.utils.set_random_seed(0)
    bi = keras.Input((10,))
    bh = keras.layers.Dense(8, activation="relu", name="enc_fc1")(bi)
    bh = keras.layers.Dense(8, activation="tanh", name="enc_fc2")(bh)
    backbone = keras.Model(bi, bh, name="backbone")  # built on its own, then nested
    inp = keras.Input((10,), name="x")
    return keras.Model(inp, keras.layers.Dense(1, name="head")(backbone(inp))), backbone


def test_a_functional_backbone_built_alone_is_named_under_its_name(tmp_path: Path) -> None:
    model, backbone = backbone_model()
    assert [v.path for v in backbone.weights][0] == "enc_fc1/kernel"  # (Keras's own path has no prefix)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 10)).astype("float32"), rng.normal(size=(32, 1)).astype("float32")
    cols = {"bb": {"include": ["^backbone/"], "reductions": ["l2"]},
            "bb_grads": {"kinds": ["gradients"], "include": ["^gradients/backbone/enc_fc1/"], "reductions": ["l2"]}}
    fit(model, x, y, tmp_path / "r", collections=cols, include_collections=ALL)
    run = tripwire.open_run(str(tmp_path / "r"))
    got = run.tensor_names()
    for name in ("backbone/enc_fc1/output", "backbone/enc_fc1/kernel", "backbone/enc_fc2/tanh/input",
                 "gradients/backbone/enc_fc1/kernel", "update_ratio/backbone/enc_fc2/bias", "head/output"):
        assert name in got, (name, got)
    assert not [n for n in got if "enc_fc" in n and "backbone/enc_fc" not in n], got
    assert set(run.tensor_names(collection="bb")) == {
        "backbone/enc_fc1/kernel", "backbone/enc_fc1/bias", "backbone/enc_fc1/output", "backbone/enc_fc1/relu/input",
        "backbone/enc_fc1/relu/output", "backbone/enc_fc2/kernel", "backbone/enc_fc2/bias",
        "backbone/enc_fc2/output", "backbone/enc_fc2/tanh/input"}
    assert run.tensor_names(collection="bb_grads") == ["gradients/backbone/enc_fc1/bias",
                                                       "gradients/backbone/enc_fc1/kernel"]
    # the stored kernel is the backbone's own, after the step
    stored = run.tensor("backbone/enc_fc1/kernel").series("l2")[1][-1]
    assert stored == pytest.approx(float(np.linalg.norm(backbone.get_layer("enc_fc1").kernel.numpy())), rel=1e-5)


def towers() -> tuple[Any, Any, Any]:
    keras.utils.set_random_seed(0)

    def tower(name: str, scale: float) -> Any:
        i = keras.Input((10,))
        init = keras.initializers.RandomNormal(stddev=scale)
        return keras.Model(i, keras.layers.Dense(16, activation="relu", name="hidden", kernel_initializer=init)(i),
                           name=name)

    ta, tb = tower("tower_a", 0.01), tower("tower_b", 1.0)
    ia, ib = keras.Input((10,), name="a"), keras.Input((10,), name="b")
    c = keras.layers.Concatenate(name="cat")([ta(ia), tb(ib)])
    return keras.Model([ia, ib], keras.layers.Dense(1, name="head")(c)), ta, tb


def test_two_towers_with_the_same_inner_names_are_told_apart_by_the_tower(tmp_path: Path) -> None:
    model, ta, tb = towers()
    rng = np.random.default_rng(0)
    xa, xb = rng.normal(size=(32, 10)).astype("float32"), rng.normal(size=(32, 10)).astype("float32")
    y = rng.normal(size=(32, 1)).astype("float32")
    fit(model, [xa, xb], y, tmp_path / "r", include_collections=ALL)
    run = tripwire.open_run(str(tmp_path / "r"))
    got = run.tensor_names()
    for tower in ("tower_a", "tower_b"):
        for name in ("hidden/kernel", "hidden/bias", "hidden/output", "hidden/relu/output"):
            assert f"{tower}/{name}" in got, (tower, name, got)
        assert f"gradients/{tower}/hidden/kernel" in got and f"update_ratio/{tower}/hidden/kernel" in got
    assert not [n for n in got if "hidden_1" in n or "kernel_1" in n or n.startswith("hidden")], got
    # each name holds its own tower's tensors (tower_b's kernel has std 1, tower_a's 0.01)
    for tower, model_tower in (("tower_a", ta), ("tower_b", tb)):
        stored = run.tensor(f"{tower}/hidden/kernel").series("std")[1][-1]
        assert stored == pytest.approx(float(model_tower.get_layer("hidden").kernel.numpy().std()), rel=1e-4)
    assert run.tensor("tower_b/hidden/output").series("std")[1][0] > 10 * run.tensor(
        "tower_a/hidden/output").series("std")[1][0]


class TwoProj(keras.layers.Layer):
    """Two sub-layers given one name: the second is suffixed, the same for every kind of its tensors."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.first = keras.layers.Dense(4, activation="relu", name="proj")
        self.second = keras.layers.Dense(4, activation="relu", name="proj",
                                         bias_initializer=keras.initializers.Constant(5.0))

    def call(self, x: Any) -> Any:
        return self.first(x) + self.second(x)


def test_a_name_still_shared_gets_one_suffix_for_every_kind(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    inp = keras.Input((3,))
    model = keras.Model(inp, keras.layers.Dense(1, name="out")(TwoProj(name="block")(inp)))
    assert [v.path for v in model.weights][:4] == ["block/proj/kernel", "block/proj/bias"] * 2  # (Keras: the same)
    rng = np.random.default_rng(0)
    fit(model, rng.normal(size=(32, 3)).astype("float32"), rng.normal(size=(32, 1)).astype("float32"),
        tmp_path / "r", include_collections=ALL)
    run = tripwire.open_run(str(tmp_path / "r"))
    got = run.tensor_names()
    for name in ("block/proj/kernel", "block/proj/output", "gradients/block/proj/kernel",
                 "block/proj_1/kernel", "block/proj_1/bias", "block/proj_1/output", "block/proj_1/relu/input",
                 "gradients/block/proj_1/kernel", "update_ratio/block/proj_1/kernel"):
        assert name in got, (name, got)
    assert not [n for n in got if "kernel_1" in n or "bias_1" in n], got
    # the suffixed name is the second sub-layer's (its bias starts at 5)
    assert run.tensor("block/proj_1/bias").series("mean")[1][0] == pytest.approx(5.0, abs=0.1)
    assert run.tensor("block/proj/bias").series("mean")[1][0] == pytest.approx(0.0, abs=0.1)


class Block(keras.layers.Layer):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.ffn = keras.Sequential([keras.layers.Dense(8, activation="relu", name="ff1"),
                                     keras.layers.Dense(4, name="ff2")], name="ffn")

    def call(self, x: Any) -> Any:
        return self.ffn(x)


class Scaled(keras.Model):
    def __init__(self) -> None:
        super().__init__(name="scaled")
        self.d1 = keras.layers.Dense(8, activation="tanh", name="d1")
        self.d2 = keras.layers.Dense(1, name="d2")
        self.scale = self.add_weight(shape=(1,), initializer="ones", name="scale")

    def call(self, x: Any) -> Any:
        return self.d2(self.d1(x)) * self.scale


def test_flat_models_keep_their_names(tmp_path: Path) -> None:
    """No nested model: Keras's variable paths less the model's name, as before trial 32c; a custom
    layer's sub-layers under it (``block1/ffn/ff1``)."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 4)).astype("float32"), rng.normal(size=(32, 1)).astype("float32")
    keras.utils.set_random_seed(0)
    seq = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="d1"),
                            keras.layers.BatchNormalization(name="bn"), keras.layers.ReLU(name="r"),
                            keras.layers.Dense(1, name="d2")])
    fit(seq, x, y, tmp_path / "seq", include_collections=ALL)
    assert set(names(tmp_path / "seq")) == {
        "loss", "lr/0", "d1/kernel", "d1/bias", "bn/gamma", "bn/beta", "bn/moving_mean", "bn/moving_variance",
        "d2/kernel", "d2/bias", "d1/output", "d1/relu/input", "d1/relu/output", "bn/output", "r/output",
        "r/relu/input", "r/relu/output", "d2/output",
        *(f"{k}/{n}" for k in ("gradients", "update_ratio")
          for n in ("d1/kernel", "d1/bias", "bn/gamma", "bn/beta", "d2/kernel", "d2/bias"))}
    inp = keras.Input((4,))
    blocks = keras.Model(inp, keras.layers.Dense(1, name="out")(Block(name="block1")(inp)))
    fit(blocks, x, y, tmp_path / "blocks", include_collections=["weights", "biases", "activations"])
    assert set(names(tmp_path / "blocks")) == {
        "loss", "block1/ffn/ff1/kernel", "block1/ffn/ff1/bias", "block1/ffn/ff2/kernel", "block1/ffn/ff2/bias",
        "out/kernel", "out/bias", "block1/ffn/ff1/output", "block1/ffn/ff2/output", "out/output"}
    sub = Scaled()
    fit(sub, x, y, tmp_path / "sub", include_collections=["weights", "biases", "gradients"])
    assert set(names(tmp_path / "sub")) == {"loss", "scale", "d1/kernel", "d1/bias", "d2/kernel", "d2/bias",
                                            "gradients/scale", "gradients/d1/kernel", "gradients/d1/bias",
                                            "gradients/d2/kernel", "gradients/d2/bias"}


def test_a_nested_model_called_twice_and_a_shared_layer_are_named_once(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    enc = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, name="e1")], name="enc")
    shared = keras.layers.Dense(3, name="shared")
    a, b = keras.Input((5,)), keras.Input((5,))
    model = keras.Model([a, b], keras.layers.Subtract(name="sub")([shared(enc(a)), shared(enc(b))]))
    rng = np.random.default_rng(0)
    xa, xb = rng.normal(size=(32, 5)).astype("float32"), (5 + rng.normal(size=(32, 5))).astype("float32")
    kernel, bias = (w.copy() for w in enc.get_layer("e1").get_weights())
    fit(model, [xa, xb], rng.normal(size=(32, 3)).astype("float32"), tmp_path / "r",
        include_collections=["weights", "biases", "gradients", "activations"])
    run = tripwire.open_run(str(tmp_path / "r"))
    assert set(run.tensor_names()) == {"loss", "enc/e1/kernel", "enc/e1/bias", "shared/kernel", "shared/bias",
                                       "gradients/enc/e1/kernel", "gradients/enc/e1/bias", "gradients/shared/kernel",
                                       "gradients/shared/bias", "enc/e1/output", "shared/output", "sub/output"}
    # one call's output at step 0 (the first Keras runs: the name stands for one call, not both)
    stored = run.tensor("enc/e1/output").series("mean")[1][0]
    calls = [float((xs[:16] @ kernel + bias).mean()) for xs in (xa, xb)]
    assert [stored == pytest.approx(c, abs=1e-4) for c in calls].count(True) == 1, (stored, calls)


# ------------------------------------------------------------------------------------------- F4
X64 = np.random.default_rng(0).normal(size=(64, 8)).astype("float32")
Y64 = np.random.default_rng(1).integers(0, 3, size=64)


def mismatch(model: Any, out: Path, caplog: pytest.LogCaptureFixture) -> tuple[list[Any], list[str]]:
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=str(out), rules=[])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(X64, Y64, batch_size=32, epochs=1, verbose=0, callbacks=[cb])
    said = [r.getMessage() for r in caplog.records if "from_logits" in r.getMessage()]
    return [f for f in tripwire.open_run(str(out)).findings if f.rule == "loss_output_mismatch"], said


def test_a_softmax_in_a_nested_sequential_head_is_a_mismatch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    keras.utils.set_random_seed(0)
    inp = keras.Input((8,))
    h = keras.layers.Dense(16, activation="relu", name="hid")(inp)
    head = keras.Sequential([keras.layers.Dense(3, activation="softmax", name="probs"),
                             keras.layers.Dropout(0.1, name="drop")], name="head")
    found, said = mismatch(keras.Model(inp, head(h)), tmp_path / "r", caplog)
    assert len(found) == 1 and len(said) == 1, (found, said)
    assert found[0].details["layer"] == "head/probs" and found[0].details["through"] == ["head/drop"]
    assert found[0].details["activation"] == "softmax"
    assert ("the layer 'head/probs' (inside the nested model 'head') that makes the model's output (through "
            "'head/drop': the identity at inference) applies softmax") in said[0]


def test_a_nested_functional_model_ending_in_softmax_is_a_mismatch(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    keras.utils.set_random_seed(0)
    i = keras.Input((8,))
    body = keras.Model(i, keras.layers.Dense(3, activation="softmax", name="probs")(
        keras.layers.Dense(16, activation="relu", name="hid")(i)), name="body")
    inp = keras.Input((8,))
    found, said = mismatch(keras.Model(inp, body(inp)), tmp_path / "r", caplog)
    assert len(found) == 1, found
    assert found[0].details["layer"] == "body/probs" and found[0].details["through"] == []
    assert "the model's output layer 'body/probs' (inside the nested model 'body') applies softmax" in said[0]


class Head(keras.Model):
    def __init__(self) -> None:
        super().__init__(name="subhead")
        self.d = keras.layers.Dense(3, activation="softmax", name="probs")

    def call(self, x: Any) -> Any:
        return self.d(x)


def test_a_nested_subclassed_model_is_not_judged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    keras.utils.set_random_seed(0)
    inp = keras.Input((8,))
    found, said = mismatch(keras.Model(inp, Head()(inp)), tmp_path / "r", caplog)
    assert found == [] and said == []


# ------------------------------------------------------------------------------------------- F5
def test_the_stop_line_names_the_step_training_stops_at(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A NaN loss at step 1, a step that saves nothing, is judged at the save step 10, where training
    stops: the line names both steps."""
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(160, 4)).astype("float32")
    x[10:20] = np.nan  # (the second batch: step 1)
    y = np.zeros((160, 1), "float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, name="d")])
    model.compile(keras.optimizers.SGD(0.01), "mse")
    cb = TripwireCallback(out_dir=str(tmp_path / "r"), save_interval=10, rules=["exploding_tensor"],
                          actions=["log", "stop_training"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(x, y, batch_size=10, epochs=1, shuffle=False, verbose=0, callbacks=[cb])
    lines = [r.getMessage() for r in caplog.records if "stopping training" in r.getMessage()]
    assert cb.stopped_by is not None and cb.stopped_by.step == 1
    assert lines == ["tripwire: stopping training at train step 10: rule 'exploding_tensor' at step 1 (train)"], lines
    assert cb.steps["train"] == 11  # (the stop took effect after step 10)

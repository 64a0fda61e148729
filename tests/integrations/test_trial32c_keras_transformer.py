"""Trial 32c F1 (Keras): the default rule set stopped healthy Keras transformers.

Keras's ``Embedding`` is initialised uniform(-0.05, 0.05), so the attention logits start near 0 and the
gradients of the query and key projections (dL/dW_query scales with the keys, dL/dW_key with the
queries) are ~1e-5 while the model learns. ``vanishing_gradient`` took the first block's
``query/kernel`` as its "first layer" and stopped the keras.io "Text classification with Transformer"
model and a small functional encoder at step 20-30, at the class prior, telling a Keras user of
``norm_first=True in nn.TransformerEncoderLayer`` and of a loss "flat at the uniform prediction's" while
the loss fell. The query/key projections are no "first layer" of the rule now; both models run to
their end with the default set, and a real vanishing gradient (a deep sigmoid stack) still stops.

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

EPOCHS = 2
RNG = np.random.default_rng(0)
X = RNG.integers(1, 20, size=(1024, 12)).astype("int32")
Y = (X == 3).any(axis=1).astype("int32")  # ~46% positive: the model must find token 3


def _functional() -> keras.Model:
    """The trial's t2: Embedding -> MultiHeadAttention -> LayerNormalization -> Dense FFN ->
    LayerNormalization -> pooling -> sigmoid (post-LN)."""
    keras.utils.set_random_seed(0)
    inp = keras.Input((12,), dtype="int32", name="tokens")
    e = keras.layers.Embedding(20, 16, name="tok_emb")(inp)
    a = keras.layers.MultiHeadAttention(num_heads=2, key_dim=8, name="mha")(e, e)
    h = keras.layers.LayerNormalization(name="ln1")(e + a)
    f = keras.layers.Dense(32, activation="relu", name="ffn1")(h)
    f = keras.layers.Dense(16, name="ffn2")(f)
    h2 = keras.layers.LayerNormalization(name="ln2")(h + f)
    p = keras.layers.GlobalAveragePooling1D(name="pool")(h2)
    o = keras.layers.Dense(1, activation="sigmoid", name="out")(p)
    m = keras.Model(inp, o)
    m.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
    return m


class TransformerBlock(keras.layers.Layer):
    """keras.io's "Text classification with Transformer" block, verbatim but for its sizes."""

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, rate: float = 0.1) -> None:
        super().__init__()
        self.att = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential([keras.layers.Dense(ff_dim, activation="relu"), keras.layers.Dense(embed_dim)])
        self.layernorm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = keras.layers.Dropout(rate)
        self.dropout2 = keras.layers.Dropout(rate)

    def call(self, inputs):  # type: ignore[no-untyped-def]
        attn_output = self.dropout1(self.att(inputs, inputs))
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.dropout2(self.ffn(out1))
        return self.layernorm2(out1 + ffn_output)


class TokenAndPositionEmbedding(keras.layers.Layer):
    """keras.io's token and position embedding, verbatim."""

    def __init__(self, maxlen: int, vocab_size: int, embed_dim: int) -> None:
        super().__init__()
        self.token_emb = keras.layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = keras.layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):  # type: ignore[no-untyped-def]
        positions = keras.ops.arange(start=0, stop=keras.ops.shape(x)[-1], step=1)
        return self.token_emb(x) + self.pos_emb(positions)


#: keras.io's sizes and task: 40 tokens of a vocabulary of 200, positive where token 5 or 6 occurs (~33%).
VOCAB, MAXLEN = 200, 40
X_IO = RNG.integers(1, VOCAB, size=(1280, MAXLEN)).astype("int32")
Y_IO = (((X_IO == 5) | (X_IO == 6)).sum(1) >= 1).astype("int32")


def _kerasio() -> tuple[keras.Model, np.ndarray, np.ndarray]:
    """The trial's t15: keras.io's model at its sizes (embedding 32, 2 heads, feed-forward 32; softmax
    over 2 classes, Adam at its default 1e-3), on its data."""
    keras.utils.set_random_seed(0)
    inputs = keras.layers.Input(shape=(MAXLEN,))
    h = TokenAndPositionEmbedding(MAXLEN, VOCAB, 32)(inputs)
    h = TransformerBlock(32, 2, 32)(h)
    h = keras.layers.GlobalAveragePooling1D()(h)
    h = keras.layers.Dropout(0.1)(h)
    h = keras.layers.Dense(20, activation="relu")(h)
    h = keras.layers.Dropout(0.1)(h)
    outputs = keras.layers.Dense(2, activation="softmax")(h)
    m = keras.Model(inputs=inputs, outputs=outputs)
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return m, X_IO, Y_IO


def _small() -> tuple[keras.Model, np.ndarray, np.ndarray]:
    return _functional(), X, Y


@pytest.mark.parametrize("build", [_small, _kerasio], ids=["functional", "kerasio"])
def test_a_healthy_keras_transformer_runs_to_its_end_with_the_default_set(tmp_path: Path, build) -> None:
    model, x, y = build()
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"], actions=["log", "stop_training"])
    history = model.fit(x, y, batch_size=32, epochs=EPOCHS, verbose=0, callbacks=[cb])
    assert cb.stopped_by is None, cb.stopped_by
    assert len(history.history["loss"]) == EPOCHS
    assert [f.rule for f in cb.findings if f.rule == "vanishing_gradient"] == [], cb.findings
    # (the trial's premise holds: the query and key projections' gradients are ~1e-5 at the first save)
    run = tripwire.open_run(str(tmp_path / "run"))
    qk = [n for n in run.tensor_names(collection="gradients") if n.endswith(("/query/kernel", "/key/kernel"))]
    assert len(qk) == 2, run.tensor_names(collection="gradients")
    assert all(run.tensor(n).series("l2")[1][0] < 1e-4 for n in qk)


def test_a_deep_sigmoid_stack_still_stops_with_the_default_set(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    x = RNG.normal(size=(1024, 16)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int32")
    layers = [keras.Input((16,))]
    layers += [keras.layers.Dense(32, activation="sigmoid", name=f"s{i}") for i in range(12)]
    model = keras.Sequential([*layers, keras.layers.Dense(1, activation="sigmoid", name="out")])
    model.compile(keras.optimizers.SGD(0.01), "binary_crossentropy")
    cb = TripwireCallback(out_dir=str(tmp_path / "run"), rules=["default"], actions=["log", "stop_training"])
    model.fit(x, y, batch_size=32, epochs=EPOCHS, verbose=0, callbacks=[cb])
    assert cb.stopped_by is not None and cb.stopped_by.rule == "vanishing_gradient", cb.findings
    message = cb.stopped_by.message
    assert message.startswith("the gradient of the first layer gradients/s0/kernel has norm"), message
    assert "warm-up" not in message and "ReLU-family activations instead of sigmoid/tanh" in message, message

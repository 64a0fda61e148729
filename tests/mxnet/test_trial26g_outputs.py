"""Trial 26g, finding 3: a leaf block with several outputs was stored as ``<layer>/output_0``,
``output_1`` (undocumented), and nested outputs (an ``rnn.LSTM``'s states, a list inside the tuple it
returns) were dropped without a word. Nested outputs are flattened in order; docs/mxnet.md says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import tripwire
from tripwire.integrations.mxnet import TripwireHook

from mxnet_testlib import mx, nd

gluon = mx.gluon
DOCS = Path(__file__).resolve().parents[2] / "docs" / "mxnet.md"


class Split(gluon.HybridBlock):
    """A leaf with its own parameter and two outputs."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.w = self.params.get("w", shape=(6, 4))

    def hybrid_forward(self, F: Any, x: Any, w: Any) -> Any:
        h = F.dot(x, w)
        return F.relu(h), F.tanh(h)


class Net(gluon.Block):
    def __init__(self, states: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.states = states
        with self.name_scope():
            self.split = Split()
            self.lstm = gluon.rnn.LSTM(5, input_size=4, layout="NTC")
            self.gru = gluon.rnn.GRU(3, input_size=5, layout="NTC")
            self.out = gluon.nn.Dense(2, in_units=3)

    def forward(self, x: Any) -> Any:
        a, b = self.split(x)
        seq = nd.stack(a, b, axis=1)  # (N, 2, 4)
        if self.states:
            o, (h, c) = self.lstm(seq, self.lstm.begin_state(batch_size=x.shape[0]))
            g, (gh,) = self.gru(o, self.gru.begin_state(batch_size=x.shape[0]))
            self.seen = {"lstm/output_0": o, "lstm/output_1": h, "lstm/output_2": c,
                         "gru/output_0": g, "gru/output_1": gh}
        else:
            o = self.lstm(seq)
            g = self.gru(o)
            self.seen = {"lstm/output": o, "gru/output": g}
        self.seen.update({"split/output_0": a, "split/output_1": b})
        return self.out(g[:, -1])


def _run(tmp_path: Path, states: bool) -> tuple[Any, dict[int, dict[str, np.ndarray]]]:
    rng = np.random.RandomState(0)
    x = rng.randn(16, 6).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    mx.random.seed(0)
    net = Net(states)
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=[], save_interval=1,
                        collections={"activations": {"reductions": ["raw", "mean"]}})
    hook.register_block(net)
    mine = {}
    with hook:
        for step in range(2):
            xb, yb = nd.array(x[step * 8:(step + 1) * 8]), nd.array(y[step * 8:(step + 1) * 8])
            hook.begin_step("train")
            with mx.autograd.record():
                loss = loss_fn(net(xb), yb)
            loss.backward()
            mine[step] = {k: v.asnumpy().copy() for k, v in net.seen.items()}
            hook.end_step(loss=loss)
            trainer.step(8)
    return tripwire.open_run(tmp_path / "run"), mine


def _layer_outputs(run: Any) -> list[str]:
    return sorted(t for t in run.tensor_names() if "/output" in t and not t.startswith("gradients/"))


def test_an_rnn_layers_states_are_stored_after_its_output(tmp_path: Path) -> None:
    run, mine = _run(tmp_path, states=True)
    assert _layer_outputs(run) == ["gru/output_0", "gru/output_1", "lstm/output_0", "lstm/output_1",
                                   "lstm/output_2", "out/output", "split/output_0", "split/output_1"]
    for step, arrays in mine.items():
        for name, want in arrays.items():
            np.testing.assert_allclose(run.array(name, step), want, rtol=1e-6, atol=1e-7)
            assert np.isclose(run.value(name, "mean", step), want.astype(np.float64).mean(), rtol=1e-6, atol=1e-9)


def test_an_rnn_layer_called_without_states_keeps_output(tmp_path: Path) -> None:
    run, mine = _run(tmp_path, states=False)
    assert _layer_outputs(run) == ["gru/output", "lstm/output", "out/output", "split/output_0", "split/output_1"]
    for name, want in mine[1].items():
        np.testing.assert_allclose(run.array(name, 1), want, rtol=1e-6, atol=1e-7)


def test_the_docs_name_several_outputs_and_rnn_states() -> None:
    text = " ".join(DOCS.read_text().split())
    assert "`<layer>/output_0`, `output_1`" in text
    assert "`lstm/output_0` is its output, `output_1` and `output_2` its final `h` and `c`" in text
    assert "`F.relu`" in text  # a ReLU computed inside a block is no relu_outputs layer

"""Trial 28d: sequence models under the torch integrations.

- F3: the activation hooks kept a layer's output only where it was a tensor: an ``nn.LSTM``/``GRU``
  (``(output, (h, c))``, a ``PackedSequence`` output) and ``nn.MultiheadAttention`` (not a leaf, and its
  child ``out_proj`` is never called as a module) were dropped without a word. Their main output is
  now ``<layer>/output``: the output sequence (a PackedSequence's ``.data``) and ``attn_output``; a
  layer whose output is none of tripwire's is named once in a WARNING.
- F5: ``param_kind`` stored ``in_proj_bias`` and an RNN's ``bias_ih_l0``/``bias_hh_l0`` as weights.
- F7: a hand-written loop had no helper to capture activations: ``tripwire.integrations.torch.
  capture_activations(model, plan)``, a context manager around the forward pass of a step.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402

import tripwire  # noqa: E402
from tripwire import ConfigError  # noqa: E402
from tripwire.integrations._torch import ActivationCapture, main_output, param_kind  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")

V, D, H, T = 10, 8, 12, 6


class SeqNet(nn.Module):
    """Embedding -> LSTM on packed sequences -> self-attention over the padded output -> ReLU -> head."""

    def __init__(self, gru: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(V, D, padding_idx=0)
        self.rnn = (nn.GRU if gru else nn.LSTM)(D, H, batch_first=True)
        self.attn = nn.MultiheadAttention(H, 2, batch_first=True)
        self.act = nn.ReLU()
        self.fc = nn.Linear(H, 2)

    def forward(self, x: Any, lengths: Any) -> Any:
        packed = pack_padded_sequence(self.embed(x), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        a, _ = self.attn(padded, padded, padded, key_padding_mask=x == 0)
        return self.fc(self.act(a).mean(1))


def _batch(seed: int = 0) -> tuple[Any, Any, Any]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, T + 1, (5,), generator=g)
    x = torch.randint(1, V, (5, T), generator=g)
    for i, n in enumerate(lengths):
        x[i, n:] = 0
    return x, lengths, (x[:, 0] % 2).long()


def _expected(model: SeqNet, x: Any, lengths: Any) -> dict[str, Any]:
    """The layer outputs computed by hand, without hooks."""
    with torch.no_grad():
        packed = pack_padded_sequence(model.embed(x), lengths, batch_first=True, enforce_sorted=False)
        out, _ = model.rnn(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        attn = model.attn(padded, padded, padded, key_padding_mask=x == 0)[0]
    return {"embed/output": model.embed(x).detach(), "rnn/output": out.data, "attn/output": attn,
            "act/output": torch.relu(attn), "fc/output": model.fc(torch.relu(attn).mean(1)).detach()}


# ---------------------------------------------------------------------------------------------- F3
@pytest.mark.parametrize("gru", [False, True])
def test_the_lstm_gru_on_packed_sequences_and_the_attention_outputs_are_captured(gru: bool) -> None:
    model = SeqNet(gru=gru)
    x, lengths, _ = _batch()
    acts = ActivationCapture()
    acts.attach(model, outputs=True, inputs=False, relu=False)
    assert acts.hooked == {"embed", "rnn", "attn", "act", "fc"}  # (attn.out_proj: never called as a module)
    model(x, lengths)
    acts.detach()
    got = {name: t for name, t, _ in acts.take()}
    expected = _expected(model, x, lengths)
    assert sorted(got) == sorted(expected)
    assert got["rnn/output"].shape == (int(lengths.sum()), H)  # (the packed time steps, no padding)
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, msg=name)


def test_an_unpacked_lstm_an_lstm_cell_and_a_transformer_layer_give_their_main_output() -> None:
    torch.manual_seed(0)
    lstm, cell = nn.LSTM(D, H, batch_first=True, num_layers=2), nn.LSTMCell(D, H)
    layer = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True)
    model = nn.ModuleDict({"lstm": lstm, "cell": cell, "enc": layer})
    x = torch.randn(3, T, D)
    acts = ActivationCapture()
    acts.attach(model, outputs=True, inputs=False, relu=False)
    out, (h, c) = lstm(x)
    h1, _ = cell(x[:, 0])
    y = layer(x)
    acts.detach()
    got = {name: t for name, t, _ in acts.take()}
    torch.testing.assert_close(got["lstm/output"], out.detach())
    torch.testing.assert_close(got["cell/output"], h1.detach())
    assert "enc/output" not in got  # (not a leaf)
    torch.testing.assert_close(got["enc.norm2/output"], y.detach())  # (post-LN: its last layer)
    with torch.no_grad():
        sa = layer.self_attn(x, x, x, need_weights=False)[0]
    torch.testing.assert_close(got["enc.self_attn/output"], sa)
    assert "enc.self_attn.out_proj/output" not in got and "enc.linear1/output" in got


def test_main_output_guesses_no_other_modules_tuple() -> None:
    pair = (torch.ones(2), torch.zeros(2))
    assert main_output(nn.Identity(), pair) is None
    assert main_output(nn.LSTM(2, 2), pair) is pair[0]
    assert main_output(nn.Identity(), {"a": torch.ones(2)}) is None and main_output(nn.Identity(), None) is None


class _Pair(nn.Module):
    def forward(self, x: Any) -> Any:
        return {"mean": x.mean(-1), "max": x.amax(-1)}


def test_a_layer_whose_output_is_not_captured_is_named_once(caplog: pytest.LogCaptureFixture) -> None:
    model = nn.Sequential(nn.Linear(4, 4), _Pair())
    acts = ActivationCapture()
    with caplog.at_level(logging.INFO, logger="tripwire"):
        for _ in range(3):
            acts.attach(model, outputs=True, inputs=False, relu=False, key="k")
            model(torch.randn(2, 4))
            acts.detach()
            names = [n for n, _, _ in acts.take()]
            assert names == ["0/output"]
    said = [r for r in caplog.records if "not captured under activations" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert "the output of 1 layer(s) is not captured under activations: 1 (a dict)" in said[0].getMessage()
    assert "nn.MultiheadAttention's attn_output" in said[0].getMessage()


def test_a_lightning_fit_stores_the_lstm_and_attention_outputs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    L = pytest.importorskip("lightning")
    from torch.nn import functional as F
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = SeqNet()
            self.seen: dict[int, dict[str, Any]] = {}

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, lengths, y = batch
            self.seen[self.global_step] = _expected(self.net, x, lengths)  # (before this step's update)
            return F.cross_entropy(self.net(x, lengths), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    xs, ls, ys = zip(*(_batch(s) for s in range(4)))
    data = TensorDataset(torch.cat(xs), torch.cat(ls), torch.cat(ys))
    module = Module()
    cb = TripwireCallback(out_dir=tmp_path / "run", include_collections=["activations", "biases"], save_interval=2)
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, callbacks=[cb])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        trainer.fit(module, DataLoader(data, batch_size=5))
    run = tripwire.open_run(tmp_path / "run")
    acts = run.tensor_names("activations")
    assert {"net.rnn/output", "net.attn/output", "net.embed/output", "net.fc/output"} <= set(acts)
    assert "net.attn.out_proj/output" not in acts
    for name in ("rnn/output", "attn/output"):
        steps, means = run.series(f"net.{name}", "mean", "train")
        _, top = run.series(f"net.{name}", "abs_max", "train")
        assert list(steps) == [0, 2]
        for s, m, a in zip(steps, means, top):
            want = module.seen[int(s)][name]
            assert m == pytest.approx(float(want.double().mean()), rel=1e-5, abs=1e-7)
            assert a == pytest.approx(float(want.abs().max()), rel=1e-6)
    assert not [r for r in caplog.records if "not captured under activations" in r.getMessage()]
    # F5: the attention's and the LSTM's biases are biases
    biases = set(run.tensor_names("biases"))
    assert {"net.attn.in_proj_bias", "net.rnn.bias_ih_l0", "net.rnn.bias_hh_l0", "net.fc.bias"} <= biases
    assert not {n for n in run.tensor_names("weights") if "bias" in n}


# ---------------------------------------------------------------------------------------------- F5
@pytest.mark.parametrize(("name", "kind"), [
    ("fc.bias", "biases"), ("bias", "biases"), ("attn.in_proj_bias", "biases"), ("rnn.bias_ih_l0", "biases"),
    ("rnn.bias_hh_l1_reverse", "biases"), ("attn.bias_k", "biases"), ("block.position_bias", "biases"),
    ("fc.weight", "weights"), ("attn.in_proj_weight", "weights"), ("rnn.weight_hh_l0", "weights"),
    ("unbiased_scale", "weights"), ("biased.weight", "weights"), ("bias_net.0.weight", "weights"),
])
def test_param_kind_tells_the_biases_of_attention_and_rnn_layers(name: str, kind: str) -> None:
    assert param_kind(name) == kind


def test_every_bias_of_torchs_own_sequence_layers_is_a_bias() -> None:
    model = nn.ModuleDict({"mha": nn.MultiheadAttention(4, 2, add_bias_kv=True),
                           "lstm": nn.LSTM(4, 4, num_layers=2, bidirectional=True), "gru": nn.GRUCell(4, 4)})
    kinds = {n: param_kind(n) for n, _ in model.named_parameters()}
    assert {n for n, k in kinds.items() if k == "biases"} == {n for n in kinds if "bias" in n}
    assert "mha.bias_k" in kinds and "lstm.bias_hh_l1_reverse" in kinds


# ---------------------------------------------------------------------------------------------- F7
def test_capture_activations_in_a_hand_written_loop() -> None:
    from tripwire.integrations.torch import capture_activations

    model = SeqNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    session = tripwire.Session(write=False, include_collections=["activations", "relu_outputs", "activation_inputs"],
                               save_interval=2)
    seen: dict[int, dict[str, Any]] = {}
    for step in range(4):
        x, lengths, y = _batch(step)
        seen[step] = _expected(model, x, lengths)
        plan = session.begin_step("train", step)
        with capture_activations(model, plan):
            hooks = sum(len(m._forward_hooks) for m in model.modules())
            out = model(x, lengths)
        assert hooks == (5 if step % 2 == 0 else 0)  # (one a layer, the ReLU's input too; none off the save steps)
        loss = nn.functional.cross_entropy(out, y)
        plan.add("loss", loss.detach(), "losses")
        opt.zero_grad()
        loss.backward()
        session.end_step()
        opt.step()
        assert sum(len(m._forward_hooks) for m in model.modules()) == 0
    session.close()
    h = session.history
    assert set(h.tensor_names("activations")) == {"embed/output", "rnn/output", "attn/output", "act/output", "fc/output"}
    assert h.tensor_names("relu_outputs") == ["act/output"] and h.tensor_names("activation_inputs") == ["act/input"]
    for name in ("rnn/output", "attn/output", "act/output"):
        steps, means = h.series(name, "mean", "train")
        assert list(steps) == [0, 2]
        for s, m in zip(steps, means):
            assert m == pytest.approx(float(seen[int(s)][name].double().mean()), rel=1e-5, abs=1e-7), (name, s)
    _, zero = h.series("act/output", "zero_fraction", "train")
    assert list(zero) == pytest.approx([float((seen[s]["attn/output"] <= 0).double().mean()) for s in (0, 2)])


def test_capture_activations_offers_nothing_where_the_block_raises_or_nothing_is_due() -> None:
    from tripwire.integrations.torch import capture_activations

    model = SeqNet()
    session = tripwire.Session(write=False, include_collections=["activations"], save_interval=1)
    plan = session.begin_step("train", 0)
    with pytest.raises(RuntimeError, match="boom"), capture_activations(model, plan):
        model(*_batch()[:2])
        raise RuntimeError("boom")
    assert sum(len(m._forward_hooks) for m in model.modules()) == 0 and plan._pending == []
    session.end_step()
    with capture_activations(model, None):  # (no plan: nothing due)
        assert sum(len(m._forward_hooks) for m in model.modules()) == 0
    session.close()
    session = tripwire.Session(write=False, save_interval=1)  # (the default set captures no activation)
    plan = session.begin_step("train", 0)
    with capture_activations(model, plan):
        assert sum(len(m._forward_hooks) for m in model.modules()) == 0
    session.end_step()
    session.close()


def test_capture_activations_refuses_what_is_no_model_or_plan() -> None:
    from tripwire.integrations.torch import capture_activations

    session = tripwire.Session(write=False, include_collections=["activations"])
    with pytest.raises(ConfigError, match=r"capture_activations: model=.*\(dict\); accepted: a torch.nn.Module"):
        with capture_activations({"fc": nn.Linear(2, 2)}, session.begin_step("train", 0)):  # type: ignore[arg-type]
            pass
    session.end_step()
    with pytest.raises(ConfigError, match=r"capture_activations: plan=.*\(Session\); accepted: the StepPlan"):
        with capture_activations(nn.Linear(2, 2), session):
            pass
    session.close()


def test_the_public_module_lists_the_helper() -> None:
    import tripwire.integrations.torch as public

    assert public.__all__ == ["capture_activations", "capture_update_ratios", "offer_gradients"] and "capture_activations" in dir(public)
    assert np.all([callable(getattr(public, n)) for n in public.__all__])

"""Trial 22c: with ``torch.compile`` (a compiled submodule, or the whole LightningModule) the forward
hooks that exist only on save steps fired at the first save step only (TorchDynamo's default hook
guards), so activations were captured once and ``dead_relu`` never judged, without a word."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

import torch._dynamo  # noqa: E402
import torch._dynamo.config as dynamo_config  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    torch._dynamo.reset()  # (graphs of another test's modules: none here)
    assert dynamo_config.skip_nnmodule_hook_guards is True
    yield
    torch._dynamo.reset()
    assert dynamo_config.skip_nnmodule_hook_guards is True  # (restored at the stage's end)


def _loader(n: int = 64, batch: int = 8) -> Any:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=batch)


def _trainer(callbacks: list[Any], **kw: Any) -> Any:
    opts = dict(max_epochs=1, accelerator="cpu", devices=1, enable_progress_bar=False, logger=False,
                enable_checkpointing=False, enable_model_summary=False)
    opts.update(kw)
    return L.Trainer(callbacks=callbacks, **opts)


class MLP(L.LightningModule):
    """``compile``: the ``net`` submodule compiled (``aot_eager``: fast); ``kill_at``: from that
    step on the first Linear's bias is -100, and every ReLU unit is dead."""

    def __init__(self, compile: bool = False, kill_at: int | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        self.net = torch.compile(net, backend="aot_eager") if compile else net
        self.kill_at = kill_at

    def forward(self, x: Any) -> Any:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self(batch[0])

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self.kill_at is not None and self.global_step == self.kill_at:
            with torch.no_grad():
                getattr(self.net, "_orig_mod", self.net)[0].bias.fill_(-100.0)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "compiled" in r.getMessage()]


def test_a_compiled_submodule_has_its_activations_at_every_save_step(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # the trial's case: the compiled run went on to step 64, relu outputs at step 0 only
    cb = TripwireCallback(out_dir=str(tmp_path / "r"), save_interval=2,
                          rules=[{"name": "dead_relu", "actions": ["stop_training"]}])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        trainer = _trainer([cb], max_epochs=4, num_sanity_val_steps=2)
        trainer.fit(MLP(compile=True, kill_at=6), _loader(), _loader(n=16))
    assert cb.stopped_by is not None and (cb.stopped_by.rule, cb.stopped_by.step) == ("dead_relu", 14)
    run = tripwire.open_run(tmp_path / "r")
    assert run.tensor("net.1/output").steps() == list(range(0, 15, 2))
    assert run.tensor("net.1/output").steps(mode="eval") == [2, 4]  # (the sanity check compiled without hooks)
    assert _said(caplog) == []
    info = [r.getMessage() for r in caplog.records if "skip_nnmodule_hook_guards is set to False" in r.getMessage()]
    assert len(info) == 1 and "trainer.fit()" in info[0]


class Whole(MLP):
    pass


def test_a_whole_compiled_module_has_its_activations_at_every_save_step(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    cb = TripwireCallback(out_dir=str(tmp_path / "r"), save_interval=2, collections=["activations", "losses"],
                          rules=[])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb]).fit(torch.compile(Whole(), backend="aot_eager"), _loader())
    run = tripwire.open_run(tmp_path / "r")
    assert run.tensor("net.1/output").steps() == [0, 2, 4, 6]
    assert _said(caplog) == []


def test_activations_lost_to_a_graph_compiled_before_the_fit_are_said(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    model = MLP(compile=True)
    model(torch.randn(8, 8))  # compiled before the fit, with the default guards and no hooks
    cb = TripwireCallback(out_dir=str(tmp_path / "r"), save_interval=2,
                          rules=[{"name": "dead_relu", "actions": ["log"]}])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb], num_sanity_val_steps=0).fit(model, _loader())
    said = _said(caplog)
    assert len(said) == 3, said
    assert "rule 'dead_relu' had nothing to read" in said[2] and "compiled without the forward hooks" in said[2]
    assert said[0].startswith("tripwire: train step 0 saves ") and "relu_outputs" in said[0]
    assert "caught nothing" in said[0] and "(dead_relu)" in said[0]
    assert "torch._dynamo.config.skip_nnmodule_hook_guards = False" in said[0]
    assert 'docs/lightning.md, "torch.compile"' in said[0]
    assert said[1].startswith("tripwire: activations of the compiled model stopped being captured: "
                              "train: 4 save step(s) from step 0 on (relu_outputs)")
    assert "the rules reading them (dead_relu) did not judge them" in said[1]  # (trial 22e)
    # the advice holds: after torch._dynamo.reset() every save step has them
    caplog.clear()
    torch._dynamo.reset()
    cb = TripwireCallback(out_dir=str(tmp_path / "r2"), save_interval=2, collections=["activations"], rules=[])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb], num_sanity_val_steps=0).fit(model, _loader())
    assert tripwire.open_run(tmp_path / "r2").tensor("net.1/output").steps() == [0, 2, 4, 6]
    assert _said(caplog) == []


def test_no_word_where_nothing_is_compiled_or_no_activation_is_captured(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tripwire"):
        cb = TripwireCallback(out_dir=str(tmp_path / "eager"), save_interval=2,
                              rules=[{"name": "dead_relu", "actions": ["log"]}])
        _trainer([cb]).fit(MLP(), _loader(), _loader(n=16))
        assert tripwire.open_run(tmp_path / "eager").tensor("net.1/output").steps() == [0, 2, 4, 6]
        cb = TripwireCallback(out_dir=str(tmp_path / "plain"), save_interval=2, collections=["weights", "losses"],
                              rules=[{"name": "exploding_tensor"}])
        _trainer([cb]).fit(MLP(compile=True), _loader(), _loader(n=16))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not any("skip_nnmodule_hook_guards" in r.getMessage() for r in caplog.records)  # (left alone)

"""TripwireCallback: validation, hooks driven by hand against a fake trainer, tiny real fits
(capture of each kind and mode, accumulation, stopping, resume, frozen parameters, bf16,
torch.compile, the tuner contract). DDP runs in test_lightning_ddp.py."""

from __future__ import annotations

import logging

import math
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire import ConfigError, Finding, FunctionRule, Requirement  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*LeafSpec.*")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")

ALL = ["weights", "biases", "gradients", "losses", "metrics", "activations", "activation_inputs", "relu_outputs",
       "inputs", "labels", "optimizer", "predictions"]


# ------------------------------------------------------------------------------------ models
class Net(L.LightningModule):
    def __init__(self, lr: float = 0.1, nan_at: int | None = None, freeze_first: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
        self.lr = lr
        self.nan_at = nan_at
        self.batch_losses: list[float] = []
        if freeze_first:
            for p in self.net[0].parameters():
                p.requires_grad_(False)

    def forward(self, x: Any) -> Any:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        if self.nan_at is not None and self.global_step >= self.nan_at:
            x = x * float("nan")
        loss = nn.functional.cross_entropy(self(x), y)
        self.batch_losses.append(float(loss.detach()))
        self.log("train_loss", loss)
        self.log("acc", (self(x).argmax(1) == y).float().mean())
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", nn.functional.cross_entropy(self(x), y))

    def predict_step(self, batch: Any, batch_idx: int) -> Any:
        return self(batch[0]).softmax(-1)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD([p for p in self.parameters() if p.requires_grad], lr=self.lr)


def _data(n: int = 32, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def _trainer(callbacks: list[Any], **kw: Any) -> Any:
    opts = dict(max_epochs=1, accelerator="cpu", devices=1, enable_progress_bar=False, logger=False,
                enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0)
    opts.update(kw)
    return L.Trainer(callbacks=callbacks, **opts)


def _loaders(n: int = 32, batch: int = 8) -> tuple[Any, Any]:
    return DataLoader(_data(n), batch_size=batch), DataLoader(_data(16, seed=1), batch_size=8)


# -------------------------------------------------------------------------------- validation
def test_unknown_override_names_the_key() -> None:
    with pytest.raises(ConfigError, match="save_intervl.*save_interval"):
        TripwireCallback(save_intervl=3)


def test_unknown_rule_is_rejected_at_construction() -> None:
    with pytest.raises(ConfigError, match="unknown rule 'no_such_rule'"):
        TripwireCallback(rules=["no_such_rule"])


def test_bad_rule_parameter_is_rejected_at_construction() -> None:
    with pytest.raises(ConfigError, match=r"rules\[0\]\.bogus: unknown parameter of rule .exploding_tensor."):
        TripwireCallback(rules=[{"name": "exploding_tensor", "bogus": 1}])


def test_what_lightning_cannot_feed_and_bad_actions_are_rejected_at_construction() -> None:
    with pytest.raises(ConfigError, match=r"rules\[0\]: tree_depth needs 'trees', which the lightning integration"):
        TripwireCallback(rules=["tree_depth"])
    with pytest.raises(ConfigError, match=r"actions\[1\]: unknown action 'stop-training'; did you mean 'stop_training'"):
        TripwireCallback(actions=["log", "stop-training"])
    assert TripwireCallback(rules=["default", "class_imbalance", "input_not_normalized"]) is not None


def test_trial_needs_a_metric_and_a_report_method() -> None:
    with pytest.raises(ConfigError, match="trial_metric"):
        TripwireCallback(trial=SimpleNamespace(report=lambda step, value: False))
    with pytest.raises(ConfigError, match="report"):
        TripwireCallback(trial=object(), trial_metric="val_loss")
    with pytest.raises(ConfigError, match="trial_metric: got 'val_loss' without a trial"):
        TripwireCallback(trial_metric="val_loss")


def test_import_without_lightning_names_the_extra() -> None:
    code = ("import sys; sys.modules['lightning'] = None; sys.modules['lightning.pytorch'] = None\n"
            "try:\n import tripwire.integrations.lightning\nexcept ImportError as e:\n print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ERR" in out.stdout and "tripwire[lightning]" in out.stdout, out.stdout + out.stderr


# ------------------------------------------------------------------------- fakes, by hand
class FakeStrategy:
    def __init__(self, answer: bool | None = None) -> None:
        self.answer = answer
        self.calls: list[bool] = []

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        assert all is False
        self.calls.append(decision)
        if isinstance(self.answer, list):  # the other ranks' answers, one per collective
            return decision or self.answer.pop(0)
        return decision if self.answer is None else self.answer

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        return obj


class FakeTrainer:
    def __init__(self, world_size: int = 1, answer: bool | None = None, accumulate: int = 1) -> None:
        self.global_step = 0
        self.world_size = world_size
        self.global_rank = 0
        self.is_global_zero = True
        self.strategy = FakeStrategy(answer)
        self.should_stop = False
        self.sanity_checking = False
        self.accumulate_grad_batches = accumulate
        self.optimizers: list[Any] = []
        self.callback_metrics: dict[str, Any] = {}
        self.current_epoch = 0


class CountingBackendCallback(TripwireCallback):
    """Counts calls into the reduction backend (the only place tensors are reduced/copied)."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.reduce_calls = 0
        inner, inner_groups = self._backend.reduce, self._backend.reduce_groups

        def counted(tensors: Any, reductions: Any) -> Any:
            self.reduce_calls += 1
            return inner(tensors, reductions)

        def counted_groups(groups: Any) -> Any:  # the session's one call for all groups of a step
            self.reduce_calls += 1
            return inner_groups(groups)

        self._backend.reduce = counted  # type: ignore[method-assign]
        self._backend.reduce_groups = counted_groups  # type: ignore[method-assign]


def _drive_step(cb: TripwireCallback, trainer: FakeTrainer, module: Any, opt: Any, x: Any, y: Any, micro: int = 1) -> list[float]:
    """One optimizer step the way Lightning calls the hooks (``micro`` accumulation micro-batches)."""
    losses = []
    for i in range(micro):
        cb.on_train_batch_start(trainer, module, (x, y), i)
        if i == 0:
            opt.zero_grad()
        loss = nn.functional.cross_entropy(module(x), y)
        (loss / micro).backward()
        losses.append(float(loss))
        if i == micro - 1:
            cb.on_before_optimizer_step(trainer, module, opt)
            opt.step()
            trainer.global_step += 1
        cb.on_train_batch_end(trainer, module, {"loss": loss.detach() / micro}, (x, y), i)
    return losses


def _fake_setup(tmp_path: Path, cb: TripwireCallback, **trainer_kw: Any) -> tuple[FakeTrainer, Any, Any]:
    module = Net()
    opt = torch.optim.SGD(module.parameters(), lr=0.05)
    trainer = FakeTrainer(**trainer_kw)
    trainer.optimizers = [opt]
    cb.setup(trainer, module, "fit")
    cb.on_train_start(trainer, module)
    return trainer, module, opt


def test_fake_hooks_capture_only_on_save_steps(tmp_path: Path) -> None:
    cb = CountingBackendCallback(out_dir=tmp_path / "run", save_interval=3, collections=["gradients", "losses", "weights"])
    trainer, module, opt = _fake_setup(tmp_path, cb)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    calls = []
    for _ in range(7):
        _drive_step(cb, trainer, module, opt, x, y)
        calls.append(cb.reduce_calls)
    cb.teardown(trainer, module, "fit")
    # steps 0, 3 and 6 are saved; nothing is reduced (or copied to the host) on the others
    increments = np.diff([0] + calls)
    assert [i for i, d in enumerate(increments) if d] == [0, 3, 6]
    run = tripwire.open_run(tmp_path / "run")
    assert run.series("gradients/net.0.weight", "l2", "train")[0].tolist() == [0, 3, 6]
    assert run.series("loss", "raw", "train")[0].tolist() == list(range(7))  # every_step losses (default)
    assert trainer.strategy.calls == []  # single process: no collective


_HOST_SYNCS = ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__")


def test_fake_non_save_steps_keep_loss_tensors_without_host_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cb = CountingBackendCallback(out_dir=tmp_path / "run", save_interval=4, collections=["gradients", "losses"])
    trainer, module, opt = _fake_setup(tmp_path, cb, accumulate=2)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    _drive_step(cb, trainer, module, opt, x, y, micro=2)  # step 0: a save step
    syncs: list[str] = []
    for attr in _HOST_SYNCS:  # every way a tensor reaches the host, counted while the callback runs
        original = getattr(torch.Tensor, attr)

        def spy(self: Any, *a: Any, _name: str = attr, _orig: Any = original, **kw: Any) -> Any:
            syncs.append(_name)
            return _orig(self, *a, **kw)

        monkeypatch.setattr(torch.Tensor, attr, spy)
    float(torch.ones(())), torch.ones(()).cpu()
    assert syncs == ["__float__", "cpu"]  # the spies see conversions
    syncs.clear()
    calls = cb.reduce_calls
    expected = []
    for k in range(1, 4):  # steps 1-3 save nothing: the callback only keeps the loss tensor
        cb.on_train_batch_start(trainer, module, (x, y), 0)
        micro = []
        for i in range(2):
            if i:
                cb.on_train_batch_start(trainer, module, (x, y), i)
            loss = nn.functional.cross_entropy(module(x + k), y)
            micro.append(loss.detach())
            (loss / 2).backward()
            if i == 1:
                cb.on_before_optimizer_step(trainer, module, opt)
                opt.step()
                opt.zero_grad()
                trainer.global_step += 1
            cb.on_train_batch_end(trainer, module, {"loss": loss.detach() / 2}, (x, y), i)
        expected.append((micro[0] + micro[1]) / 2)
    kept = cb.session.kept
    assert [s for s, _, _ in kept] == [1, 2, 3] and all(isinstance(t, torch.Tensor) for _, _, t in kept)
    assert syncs == [] and cb.reduce_calls == calls  # no .item()/.cpu()/float(), no reduction, no host copy
    monkeypatch.undo()
    _drive_step(cb, trainer, module, opt, x, y, micro=2)  # step 4 saves: one reduction call takes all
    assert cb.reduce_calls == calls + 1 and cb.session.kept == []
    cb.teardown(trainer, module, "fit")
    run = tripwire.open_run(tmp_path / "run")
    steps, values = run.series("loss", "raw", "train")
    assert steps.tolist() == [0, 1, 2, 3, 4]  # one value per optimizer step, at its own step
    np.testing.assert_allclose(values[1:4], [float(e) for e in expected], rtol=1e-6)
    assert run.series("gradients/net.0.weight", "l2", "train")[0].tolist() == [0, 4]


def test_fit_records_one_loss_per_optimizer_step(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=10, collections=["losses", "gradients"])
    model = Net()
    train, _ = _loaders(n=96, batch=4)  # 24 batches, 2 per optimizer step: 12 steps a epoch
    _trainer([cb], max_epochs=2, accumulate_grad_batches=2, limit_val_batches=0).fit(model, train)
    run = tripwire.open_run(tmp_path / "run")
    steps, values = run.series("loss", "raw", "train")
    assert steps.tolist() == list(range(24))  # the last 3 kept values were written at the end
    np.testing.assert_allclose(values, np.asarray(model.batch_losses).reshape(-1, 2).mean(1), rtol=1e-5)
    assert run.series("gradients/net.0.weight", "l2", "train")[0].tolist() == [0, 10, 20]


def test_fake_gradient_accumulation_records_once_per_optimizer_step(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["gradients", "losses", "optimizer"])
    trainer, module, opt = _fake_setup(tmp_path, cb, accumulate=3)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    all_losses = [_drive_step(cb, trainer, module, opt, x + k, y, micro=3) for k in range(2)]
    cb.teardown(trainer, module, "fit")
    run = tripwire.open_run(tmp_path / "run")
    assert run.steps("train") == [0, 1]
    steps, values = run.series("loss", "raw", "train")
    np.testing.assert_allclose(values, [np.mean(v) for v in all_losses], rtol=1e-5)
    assert run.series("lr/0", "raw", "train")[1].tolist() == [0.05, 0.05]
    assert len(run.series("gradients/net.0.weight", "l2", "train")[0]) == 2


def test_fake_stop_is_combined_across_ranks_on_save_steps_only(tmp_path: Path) -> None:
    # another rank's rule fired: this rank's local decision is False, the combined one True
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=2, writer={"ranks": [0]})
    trainer, module, opt = _fake_setup(tmp_path, cb, world_size=2, answer=None)
    assert trainer.strategy.calls == [False]  # at the start: do the ranks' save settings differ? (no)
    trainer.strategy.calls.clear()
    trainer.world_size = 2
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    _drive_step(cb, trainer, module, opt, x, y)  # step 0: saved -> one collective
    # step 1: not saved, but right after a save step -> one collective (its reduction may have run in
    # the background: its findings arrive now on any rank, trial 28a F3)
    _drive_step(cb, trainer, module, opt, x, y)
    assert trainer.strategy.calls == [False, False]
    trainer.strategy.answer = True
    _drive_step(cb, trainer, module, opt, x, y)  # step 2: saved, another rank says stop
    # then, the stop agreed, two more: did a rule stop some rank, was it a broken run (not info)
    assert trainer.strategy.calls == [False, False, False, False, False]
    assert trainer.should_stop is True
    assert cb.stopped_by is not None and cb.stopped_by.rule == "distributed_stop"
    assert cb.stopped_by.severity == "warning"  # a broken run: a tuner's trial counts as rule-stopped
    # (as the run holds it: recorded as a check, trial 27w; stopped_by kept the unmarked one)
    assert cb.stopped_by.source == "check" and cb.stopped_by in cb.findings
    cb.teardown(trainer, module, "fit")
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


def test_fake_ranks_with_other_save_settings_are_refused_at_the_start(tmp_path: Path) -> None:
    # (the DDP test runs it for real; here rank 0's settings, as broadcast, differ from this rank's)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=3)
    module, trainer = Net(), FakeTrainer(world_size=2)
    trainer.global_rank = 1
    trainer.strategy.broadcast = lambda obj, src=0: (  # (setup broadcasts rank 0's out_dir first)
        {**obj, "save": {**obj["save"], "interval": 2}} if isinstance(obj, dict) else obj)
    cb.setup(trainer, module, "fit")
    with pytest.raises(ConfigError, match=r"under DDP every rank must save the same steps .* but rank 1's differ from "
                                          r"rank 0's: save: \{'interval': 3.* here, \{'interval': 2.* on rank 0"):
        cb.on_train_start(trainer, module)


@pytest.mark.parametrize("others, finding", [([True, False, False], None),       # the tuner stopped rank 0's fit
                                             ([True, True, False], "info"),       # overtraining's early stop
                                             ([True, True, True], "warning")])    # a fault on another rank
def test_fake_stop_from_another_rank_is_named_by_what_stopped_it(tmp_path: Path, others: list[bool],
                                                                 finding: str | None) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, writer={"ranks": [0]})
    trainer, module, opt = _fake_setup(tmp_path, cb, world_size=2, answer=None)
    trainer.world_size = 2
    trainer.strategy.answer = list(others)
    _drive_step(cb, trainer, module, opt, torch.randn(8, 4), torch.randint(0, 2, (8,)))
    assert trainer.should_stop is True and trainer.strategy.answer == []
    if finding is None:
        assert cb.stopped_by is None and cb.findings == []
    else:
        assert cb.stopped_by is not None and (cb.stopped_by.rule, cb.stopped_by.severity) == ("distributed_stop", finding)
    cb.teardown(trainer, module, "fit")


def test_fake_rule_stop_sets_should_stop(tmp_path: Path) -> None:
    def loss_too_high(history: Any, step: int, mode: str) -> Any:
        latest = history.latest("loss", "raw", mode, 0)
        return f"loss {latest[1]:.3f} > 0" if latest and latest[1] > 0 else None

    rule = FunctionRule(loss_too_high, name="loss_too_high", requirements=[Requirement("losses", ("raw",))],
                        actions=["stop_training"], start_step=2)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[rule])
    trainer, module, opt = _fake_setup(tmp_path, cb)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    for _ in range(4):
        _drive_step(cb, trainer, module, opt, x, y)
        if trainer.should_stop:
            break
    assert trainer.global_step == 3
    assert cb.stopped_by is not None and cb.stopped_by.rule == "loss_too_high" and cb.stopped_by.step == 2
    cb.teardown(trainer, module, "fit")


def test_fake_trial_reports_each_validation_end(tmp_path: Path) -> None:
    reports: list[tuple[int, float]] = []

    class Trial:
        def report(self, step: int, value: float) -> bool:
            reports.append((step, value))
            return step >= 2

    cb = TripwireCallback(out_dir=tmp_path / "run", trial=Trial(), trial_metric="val_loss")
    trainer, module, _ = _fake_setup(tmp_path, cb)
    for epoch, value in enumerate([0.9, 0.7, 0.5]):
        trainer.current_epoch = epoch
        trainer.callback_metrics = {"val_loss": torch.tensor(value)}
        cb.on_validation_start(trainer, module)
        cb.on_validation_end(trainer, module)
        if trainer.should_stop:
            break
    assert [s for s, _ in reports] == [1, 2]
    assert reports[1][1] == pytest.approx(0.7)
    assert cb.trial_stopped and trainer.should_stop
    trainer.callback_metrics = {"val_acc": 1.0, "val_loss_epoch": 0.5}
    trainer.current_epoch = 5
    with pytest.raises(ConfigError, match=r"'val_loss' was not logged by validation; did you mean 'val_loss_epoch'\?; "
                                          r"logged by validation: val_acc, val_loss_epoch \("):
        cb.on_validation_end(trainer, module)
    cb.teardown(trainer, module, "fit")


def test_state_dict_round_trip_restores_steps_and_rules(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=["exploding_tensor"])
    trainer, module, opt = _fake_setup(tmp_path, cb)
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    _drive_step(cb, trainer, module, opt, x, y)
    state = cb.state_dict()
    cb.teardown(trainer, module, "fit")
    assert state["out_dir"] == str(tmp_path / "run")
    other = TripwireCallback(save_interval=1, rules=["exploding_tensor"])
    other.load_state_dict(state)
    assert other.out_dir == tmp_path / "run"
    with pytest.raises(ConfigError, match="version"):
        other.load_state_dict({"version": 99})


# ------------------------------------------------------------------------------ real fits
def test_a_mode_with_no_save_step_is_named_at_the_end(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Predict over 2 batches with the default interval (10): predictions and labels, asked for,
    were never captured; the run's close says so and how to save them (not silently nothing)."""
    cb = TripwireCallback(out_dir=tmp_path / "run", include_collections=["predictions", "labels"])
    model = Net()
    train, val = _loaders()
    trainer = _trainer([cb])
    trainer.fit(model, train)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.predict(model, val)
    msgs = [r.getMessage() for r in caplog.records if "was a save step" in r.getMessage()]
    assert len(msgs) == 1 and "no predict step up to predict step 2" in msgs[0]
    assert "predictions, labels" in msgs[0] and "save: {modes: {predict: {interval: 1}}}" in msgs[0]
    # with a save step among them: no message
    caplog.clear()
    cb = TripwireCallback(out_dir=tmp_path / "run2", include_collections=["predictions", "labels"], save_interval=1)
    trainer = _trainer([cb])
    trainer.fit(model, train)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.predict(model, val)
    assert not [r for r in caplog.records if "was a save step" in r.getMessage()]
    assert tripwire.open_run(tmp_path / "run2").steps("predict") == [1, 2]


def test_no_mode_warning_for_modes_saved_earlier_or_for_training_only_kinds(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    """A fresh user's false alarms: predict after a fit whose validation did save predictions
    warned about eval (the predict session had run no eval batch); a fit whose 2 validation batches
    were no save step warned about weights and gradients, which validation never captures."""
    train, val = _loaders(n=64)
    model = Net()
    cfg = {"out_dir": str(tmp_path / "a"), "save": {"interval": 2},
           "collections": {"losses": None, "predictions": {"reductions": ["mean"], "save": {"interval": 1}}}}
    cb = TripwireCallback(cfg)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb]).fit(model, train, val)
        _trainer([cb]).predict(model, val)
    assert tripwire.open_run(tmp_path / "a").steps("eval")  # validation batches were saved
    assert not [r for r in caplog.records if "was a save step" in r.getMessage()]
    cb = TripwireCallback(out_dir=tmp_path / "b", include_collections=["weights", "gradients"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb]).fit(model, train, val)  # 2 validation batches, interval 10
    assert not [r for r in caplog.records if "was a save step" in r.getMessage()]


def test_epoch_metrics_of_several_validation_dataloaders_are_captured(tmp_path: Path) -> None:
    """With two validation dataloaders Lightning names the aggregates ``val_loss/dataloader_idx_0``
    and its connector's view of the finished loop leaves them out: a fresh user's run held no
    validation value at all, and every validation rule read nothing."""

    class TwoLoaders(Net):
        def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
            x, y = batch
            self.log("val_loss", nn.functional.cross_entropy(self(x), y))
            # named per loader by the user (no suffix): Lightning's view of the finished loop holds
            # the last loader's only, and a fresh user's val_acc_dl0 was lost (all of them with
            # one such name only)
            acc = (self(x).argmax(1) == y).float().mean()
            self.log(f"val_acc_dl{dataloader_idx}", acc, add_dataloader_idx=False)
            if dataloader_idx == 0:
                self.log("val_first", acc + 1, add_dataloader_idx=False)

    train, val = _loaders()
    cb = TripwireCallback(out_dir=tmp_path / "run")
    trainer = _trainer([cb], max_epochs=2)
    trainer.fit(TwoLoaders(), train, [val, DataLoader(_data(8, seed=2), batch_size=8)])
    run = tripwire.open_run(tmp_path / "run")
    names = {n for n in run.tensor_names() if run.series(n, "raw", mode="eval")[0].size} if run.steps("eval") else set()
    assert names == {"val_loss/dataloader_idx_0", "val_loss/dataloader_idx_1", "val_acc_dl0", "val_acc_dl1",
                     "val_first"}  # (no training metric among them)
    for name in names:
        steps, values = run.series(name, "raw", mode="eval")
        assert len(steps) == 2  # one aggregate per validation run
        assert values[-1] == pytest.approx(float(trainer.callback_metrics[name]))


def test_epoch_level_training_metrics_are_captured_once_per_epoch(tmp_path: Path) -> None:
    """``on_epoch=True`` training metrics (one logged with ``on_step=False``, the ``_epoch``
    aggregate of one logged per step too, one logged by the module's own ``on_train_epoch_end``,
    which runs after the callbacks' hook) go into a summary record at each epoch's last step."""

    class EpochLogs(Net):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            out = self(x)
            loss = nn.functional.cross_entropy(out, y)
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            self.log("train_acc", (out.argmax(1) == y).float().mean(), on_step=False, on_epoch=True)
            return loss

        def on_train_epoch_end(self) -> None:
            self.log("epoch_index", float(self.current_epoch))

    seen: dict[str, list[float]] = {}

    class Keep(L.Callback):  # what Lightning shows at each epoch's end, to compare with
        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            if trainer.current_epoch:
                for name in ("train_acc", "train_loss_epoch", "epoch_index"):
                    seen.setdefault(name, []).append(float(trainer.callback_metrics[name]))

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self.on_train_epoch_start(trainer, pl_module)

    train, val = _loaders()  # 4 steps per epoch
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=10)
    _trainer([cb, Keep()], max_epochs=3).fit(EpochLogs(), train, val)
    run = tripwire.open_run(tmp_path / "run")
    for name in ("train_acc", "train_loss_epoch", "epoch_index"):
        steps, values = run.series(name, "raw", "train")
        assert steps.tolist() == [3, 7, 11], name  # each epoch's last step
        np.testing.assert_allclose(values, seen[name], rtol=1e-6)
    assert run.series("epoch_index", "raw", "train")[1].tolist() == [0.0, 1.0, 2.0]
    # the step values keep their own name and steps (save steps 0 and 10); no epoch value among them
    assert run.series("train_loss", "raw", "train")[0].tolist() == [0, 10]
    assert "train_loss_step" not in run.tensor_names()  # (Lightning's fork of train_loss: the same values)
    assert run.tensor("train_acc").collections == ["metrics"]
    assert run.tensor("train_loss_epoch").collections == ["losses"]


def test_inputs_without_labels_capture_the_inputs_and_offer_no_labels(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    # the batch's labels were offered whenever inputs were wanted, and close() then warned that
    # 'labels' went to no collection: noise for a user who asked for inputs only
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=["inputs", "losses"])
    with caplog.at_level("WARNING", logger="tripwire"):
        _trainer([cb]).fit(Net(), _loaders()[0])
    run = tripwire.open_run(tmp_path / "run")
    assert run.tensor("inputs").steps() == list(range(4))
    assert "labels" not in run.collections()
    assert not [r for r in caplog.records if "labels" in r.getMessage()], caplog.text


@pytest.mark.parametrize("collections, absent", [(["weights"], "biases"), (["losses"], "metrics"),
                                                  (["biases", "metrics"], "weights")])
def test_only_the_kinds_asked_for_are_offered(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                              collections: list[str], absent: str) -> None:
    # weights and biases were offered together, losses and metrics too: close() warned that the
    # kind nobody asked for "went to no collection" (every run of a rule that adds only weights)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, collections=collections)
    with caplog.at_level("WARNING", logger="tripwire"):
        _trainer([cb]).fit(Net(), _loaders()[0])
    cols = tripwire.open_run(tmp_path / "run").collections()
    assert all(cols.get(c) for c in collections) and absent not in cols, cols
    assert not [r for r in caplog.records if "went to no collection" in r.getMessage()], caplog.text


class NanTail(L.LightningModule):
    """A loss that turns NaN from ``nan_from`` on (after the last save step of a short fit)."""

    def __init__(self, nan_from: int) -> None:
        super().__init__()
        self.net = nn.Linear(8, 2)
        self.nan_from = nan_from

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        return loss + float("nan") if self.global_step >= self.nan_from else loss

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.05)


@pytest.mark.parametrize("max_steps", [40, 41])
def test_a_nan_loss_after_the_last_save_step_stops_the_run(tmp_path: Path, max_steps: int) -> None:
    """Trial 17f: a NaN loss at steps 33-39 of a 40-step fit (last save step 30) gave no finding and
    the run ended complete: the epoch end flushed the kept losses unjudged, and close() had nothing
    left to judge. With max_steps 40 the NaN is found at the fit's end, after its last step: recorded,
    and no stop (trial 29j F2: the run ended complete, nothing was stopped); with 41, at step 40's
    save, which stops the fit."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 8, generator=g)
    loader = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=16)  # 40 steps an epoch
    cb = TripwireCallback(rules=["default"], actions=["log", "stop_training"], out_dir=tmp_path / "run")
    _trainer([cb], max_steps=max_steps, max_epochs=100).fit(NanTail(33), loader)
    assert [(f.rule, f.step) for f in cb.findings] == [("exploding_tensor", 33)]
    run = tripwire.open_run(tmp_path / "run")
    assert [(f.rule, f.step) for f in run.findings] == [("exploding_tensor", 33)]
    if max_steps == 40:
        assert cb.stopped_by is None and run.status == "complete"
    else:
        assert cb.stopped_by is not None and (cb.stopped_by.rule, cb.stopped_by.step) == ("exploding_tensor", 33)
        assert run.status == "stopped"


@pytest.mark.parametrize("collections", [None, ["weights", "gradients", "losses"]])
def test_test_and_predict_after_fit_warn_about_nothing_they_could_not_offer(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, collections: list[str] | None) -> None:
    # predict offered its outputs as 'predictions' that no collection asked for ("went to no
    # collection", with the README's own config); a test or predict session warned that weights and
    # gradients "captured nothing": no evaluation offers those
    kw = {} if collections is None else {"collections": collections}
    cb = TripwireCallback(rules=["default"], actions=["log", "stop_training"], out_dir=tmp_path / "run",
                          save={"modes": {"test": {"interval": 1}, "predict": {"interval": 1}}}, **kw)
    model = Net()
    train, val = _loaders()
    trainer = _trainer([cb])
    trainer.fit(model, train)
    with caplog.at_level("WARNING", logger="tripwire"):
        trainer.test(model, val)
        trainer.predict(model, val)
    said = [r.getMessage() for r in caplog.records if "captured nothing" in r.getMessage()
            or "went to no collection" in r.getMessage()]
    assert not said, said
    assert tripwire.open_run(tmp_path / "run").steps("test")


def test_fit_captures_every_kind_in_every_mode(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, collections=ALL,
                          save={"modes": {"eval": {"interval": 1}}})
    model = Net()
    train, val = _loaders()
    trainer = _trainer([cb], max_epochs=2)
    trainer.fit(model, train, val)
    trainer.test(model, val)
    trainer.predict(model, val)
    run = tripwire.open_run(out)
    assert run.status == "complete"
    cols = run.collections()
    for kind in ALL:
        assert cols.get(kind), kind
    assert "net.1/output" in cols["relu_outputs"] and "net.1/input" in cols["activation_inputs"]
    assert "net.3/input" in cols["activation_inputs"]  # tanh
    assert set(cols["weights"]) == {"net.0.weight", "net.2.weight", "net.4.weight"}
    assert set(cols["biases"]) == {"net.0.bias", "net.2.bias", "net.4.bias"}
    # train steps follow the global step; the train-step loss equals what training_step computed
    assert run.steps("train") == list(range(8))
    steps, loss = run.series("loss", "raw", "train")
    np.testing.assert_allclose(loss, model.batch_losses[:8], rtol=1e-6)
    np.testing.assert_allclose(run.series("train_loss", "raw", "train")[1], loss, rtol=1e-6)
    assert run.series("lr/0", "raw", "train")[1].tolist() == [0.1] * 8
    # validation: 2 batches per run, steps count batches from 1; epoch metrics on the last batch's record
    assert run.steps("eval") == [1, 2, 3, 4]
    assert run.series("val_loss", "raw", "eval")[0].tolist() == [2, 4]
    assert run.series("test_loss", "raw", "test")[0].tolist() == [2]
    assert run.steps("predict") == [1, 2]
    pred = run.tensor("predictions").value(1, mode="predict")
    assert pred.shape == (8, 2) and np.allclose(pred.sum(1), 1, atol=1e-5)
    # validation and test: the module's own forward output (logits) on each batch, beside its labels
    for mode, steps in (("eval", [1, 2, 3, 4]), ("test", [1, 2])):
        assert run.tensor("predictions").steps(mode=mode) == steps, mode
        assert run.tensor("predictions").value(steps[-1], mode=mode).shape == (8, 2)
        assert run.tensor("labels").value(steps[-1], mode=mode).shape == (8,)
    # activations at every save step of every mode (the eval hooks were once detached before their
    # values were taken: no activation outside training)
    for mode, steps in (("train", list(range(8))), ("eval", [1, 2, 3, 4]), ("test", [1, 2]), ("predict", [1, 2])):
        for name in ("net.0/output", "net.1/output", "net.1/input", "net.3/input"):
            assert run.tensor(name).steps(mode=mode) == steps, (name, mode)
    labels = run.tensor("labels").value(3, mode="train")
    assert labels.shape == (8,)
    # weights are the values after the step's optimizer update: the update ratio of step s is
    # ||w_s - w_{s-1}|| / ||w_{s-1}||, checked against raw weights saved by a second run below
    ratio = run.series("update_ratio/net.0.weight", "raw", "train")[1]
    assert np.all(ratio > 0) and np.all(np.isfinite(ratio))
    grad_l2 = run.series("gradients/net.0.weight", "l2", "train")[1]
    assert np.all(grad_l2 > 0)


def test_update_ratio_and_weights_match_raw_values(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, collections={
        "weights": {"reductions": ["l2", "raw"]}, "optimizer": None, "gradients": {"reductions": ["raw", "l2"]}})
    model = Net()
    _trainer([cb], max_steps=3).fit(model, _loaders()[0])
    run = tripwire.open_run(out)
    w = [run.tensor("net.2.weight").value(s) for s in range(3)]
    g = [run.tensor("gradients/net.2.weight").value(s) for s in range(3)]
    ratio = run.series("update_ratio/net.2.weight", "raw", "train")[1]
    for s in (1, 2):  # SGD: w_s = w_{s-1} - lr * g_s
        np.testing.assert_allclose(w[s], w[s - 1] - 0.1 * g[s], rtol=1e-5, atol=1e-7)
        assert ratio[s] == pytest.approx(np.linalg.norm(w[s] - w[s - 1]) / np.linalg.norm(w[s - 1]), rel=1e-4)
    assert run.value("net.2.weight", "l2", 2, "train") == pytest.approx(np.linalg.norm(w[2]), rel=1e-6)


def test_fit_with_gradient_accumulation(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, collections=["losses", "gradients"])
    model = Net()
    _trainer([cb], accumulate_grad_batches=2).fit(model, _loaders(n=48)[0])  # 6 batches -> 3 steps
    run = tripwire.open_run(out)
    assert run.steps("train") == [0, 1, 2]
    loss = run.series("loss", "raw", "train")[1]
    np.testing.assert_allclose(loss, np.asarray(model.batch_losses).reshape(3, 2).mean(1), rtol=1e-6)
    assert len(run.series("gradients/net.0.weight", "l2", "train")[1]) == 3


def test_rule_stops_the_fit_on_nan(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1,
                          rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    model = Net(nan_at=3)
    trainer = _trainer([cb], max_epochs=3)
    trainer.fit(model, _loaders()[0])
    assert cb.stopped_by is not None and cb.stopped_by.rule == "exploding_tensor"
    assert cb.stopped_by.step == 3 and trainer.global_step == 4
    assert [f.rule for f in cb.findings] == ["exploding_tensor"]
    run = tripwire.open_run(out)
    assert run.status == "stopped"
    assert [f.rule for f in run.findings] == ["exploding_tensor"]


def test_a_stop_held_back_by_min_epochs_is_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Lightning ignores should_stop before min_epochs, saying so at INFO level only: a fresh user's
    stopped fit ran 58 more steps with nothing said."""
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1,
                          rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    trainer = _trainer([cb], max_epochs=3, min_epochs=2)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.fit(Net(nan_at=1), _loaders()[0])
    assert cb.stopped_by is not None and cb.stopped_by.step == 1
    assert trainer.global_step == 8  # two epochs of 4 batches: Lightning's minimum
    assert [r.getMessage() for r in caplog.records if "does not stop before" in r.getMessage()] == [
        "tripwire: Lightning does not stop before min_epochs=2 (epoch 0 now): training goes on until then "
        "(the Trainer's own rule; lower it to stop at once)"]


def test_a_second_fit_through_the_callback_is_named_in_lightnings_terms(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A new Trainer starts at global step 0: the second fit's steps repeat the first's (appended to
    the same run); the warning says so for a Lightning user, who never calls begin_step."""
    cb = TripwireCallback(out_dir=tmp_path / "run")
    model = Net()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb], max_steps=4).fit(model, _loaders()[0])
        _trainer([cb], max_steps=2).fit(model, _loaders()[0])
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "begin_step" in m]
    assert [m for m in messages if "earlier fit" in m] == [
        f"tripwire: this fit starts at global step 0 and {tmp_path / 'run'} already holds train steps up to 3 (an "
        "earlier fit through this callback): its steps repeat those, several records each. To continue one "
        "training, resume it with trainer.fit(..., ckpt_path=...); to keep fits apart, give each its own out_dir "
        "(or its own callback)"]
    assert tripwire.open_run(tmp_path / "run").series("loss", "raw", "train")[0].tolist() == [0, 1, 2, 3, 0, 1]


def test_a_fit_after_a_stopped_fit_starts_afresh(tmp_path: Path) -> None:
    """Trial 17a: after a rule stopped a fit, a second fit through the same callback (a new Trainer,
    a fixed model) ended after one step with nothing said: the first fit's stop carried over. A new
    training (global step 0, no checkpoint) starts with fresh rules, so the same fault is caught again."""
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1,
                          rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    _trainer([cb], max_steps=4).fit(Net(nan_at=1), _loaders()[0])
    assert cb.stopped_by is not None and cb.stopped_by.step == 1
    healthy = _trainer([cb], max_steps=4)
    healthy.fit(Net(), _loaders()[0])
    assert healthy.global_step == 4 and cb.stopped_by is None
    again = _trainer([cb], max_steps=4)
    again.fit(Net(nan_at=2), _loaders()[0])
    assert cb.stopped_by is not None and cb.stopped_by.step == 2 and again.global_step == 3
    assert [(f.rule, f.step) for f in cb.findings] == [("exploding_tensor", 1), ("exploding_tensor", 2)]


def test_a_loss_rule_reading_nothing_is_named_after_the_first_epoch(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Manual optimization whose training_step returns nothing: no ``loss`` is captured and the loss
    rules read nothing all fit; a fresh user learned it only when a long fit ended."""

    class Manual(Net):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch: Any, batch_idx: int) -> None:
            opt = self.optimizers()
            x, y = batch
            loss = nn.functional.cross_entropy(self(x), y)
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()
            self.log("train_loss", loss)

    epochs: list[int] = []

    class Epochs(L.Callback):
        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            epochs.append(len([r for r in caplog.records if "matches no loss" in r.getMessage()]))

    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["loss_not_decreasing"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb, Epochs()], max_epochs=3).fit(Manual(), _loaders()[0])
    said = [r.getMessage() for r in caplog.records if "matches no loss" in r.getMessage()]
    assert epochs == [0, 1, 1] and len(said) == 1  # after the first epoch, and not again at the end
    assert said[0].startswith("tripwire: rule 'loss_not_decreasing': loss='loss' matches no loss or metric of this run; "
                              "did you mean 'train_loss'?")
    assert "named after the first epoch" in said[0]


def test_resume_from_checkpoint_continues_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default out_dir is relative: tripwire-runs/<timestamp>
    fired: list[int] = []

    def once(history: Any, step: int, mode: str) -> Any:
        if step >= 1:
            fired.append(step)
            return "seen"
        return None

    def rule() -> FunctionRule:
        return FunctionRule(once, name="once", requirements=[Requirement("losses", ("raw",))])

    cb = TripwireCallback(save_interval=1, rules=[rule()])
    model = Net()
    trainer = _trainer([cb], max_epochs=1)
    trainer.fit(model, _loaders()[0])
    ckpt = tmp_path / "last.ckpt"
    trainer.save_checkpoint(ckpt)
    first_dir = cb.out_dir
    assert fired == [1]

    cb2 = TripwireCallback(save_interval=1, rules=[rule()])
    _trainer([cb2], max_epochs=2).fit(Net(), _loaders()[0], ckpt_path=str(ckpt))
    assert cb2.out_dir == first_dir
    assert fired == [1]  # the rule's fired state came back with the checkpoint: no second finding
    run = tripwire.open_run(first_dir)
    assert run.steps("train") == list(range(8))
    assert run.status == "complete"
    assert len(list(Path(first_dir).parent.iterdir())) == 1


@pytest.mark.parametrize("second_out", [None, "elsewhere"])
def test_resume_finds_the_state_of_a_callback_given_out_dir_as_keyword(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       second_out: str | None) -> None:
    # the README's way: TripwireCallback(out_dir=...); the resumed fit's callback has no out_dir
    # (it continues the checkpoint's run) or another one (a new run, the rules' state carried)
    monkeypatch.chdir(tmp_path)
    fired: list[int] = []

    def rule() -> FunctionRule:
        return FunctionRule(lambda h, step, mode: fired.append(step) or "seen" if step >= 1 else None, name="once",
                            requirements=[Requirement("losses", ("raw",))])

    first = tmp_path / "first"
    trainer = _trainer([TripwireCallback(out_dir=first, save_interval=1, rules=[rule()])], max_epochs=1)
    trainer.fit(Net(), _loaders()[0])
    trainer.save_checkpoint(tmp_path / "last.ckpt")
    cb2 = TripwireCallback(out_dir=None if second_out is None else tmp_path / second_out, save_interval=1, rules=[rule()])
    _trainer([cb2], max_epochs=2).fit(Net(), _loaders()[0], ckpt_path=str(tmp_path / "last.ckpt"))
    assert fired == [1]  # the fired state came back: found under the callback's name
    if second_out is None:
        assert cb2.out_dir == Path(first) and tripwire.open_run(first).steps("train") == list(range(8))
    else:
        assert tripwire.open_run(tmp_path / second_out).steps("train") == list(range(4, 8))


def test_frozen_parameters(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, collections=["weights", "gradients", "optimizer"])
    _trainer([cb], max_steps=3).fit(Net(freeze_first=True), _loaders()[0])
    run = tripwire.open_run(out)
    assert "net.0.weight" in run.tensor_names("weights")
    grads = run.tensor_names("gradients")
    assert "gradients/net.0.weight" not in grads and "gradients/net.2.weight" in grads
    assert "update_ratio/net.0.weight" not in run.tensor_names("optimizer")


def test_bf16_autocast_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1,
                          collections={"activations": {"reductions": ["mean", "nonfinite_count", "histogram"]},
                                       "gradients": None, "losses": None})
    _trainer([cb], max_steps=2, precision="bf16-mixed").fit(Net(), _loaders()[0])
    run = tripwire.open_run(out)
    mean = run.value("net.0/output", "mean", 1, "train")
    assert mean is not None and math.isfinite(mean)
    counts, edges = run.histogram("net.0/output", 1, "train", 0)
    assert counts.sum() == 8 * 8 and len(edges) == 31


def test_torch_compiled_module(tmp_path: Path) -> None:
    class Compiled(Net):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.compile(self.net, backend="aot_eager")  # inductor needs ~45 s to compile here

    out = tmp_path / "run"
    cb = TripwireCallback(out_dir=out, save_interval=1, collections=["weights", "gradients", "losses", "activations"])
    _trainer([cb], max_steps=2).fit(Compiled(), _loaders()[0])
    run = tripwire.open_run(out)
    assert "net.0.weight" in run.tensor_names("weights")  # `_orig_mod.` is dropped from names
    assert "gradients/net.4.weight" in run.tensor_names("gradients")
    assert run.steps("train") == [0, 1]


def test_fit_with_a_real_trial(tmp_path: Path) -> None:
    seen: list[tuple[int, float]] = []

    class Trial:
        def report(self, step: int, value: float) -> bool:
            seen.append((step, value))
            return step >= 2

    cb = TripwireCallback(out_dir=tmp_path / "run", trial=Trial(), trial_metric="val_loss")
    train, val = _loaders()
    trainer = _trainer([cb], max_epochs=5)
    trainer.fit(Net(), train, val)
    assert [s for s, _ in seen] == [1, 2] and trainer.current_epoch == 2
    assert cb.trial_stopped
    assert tripwire.open_run(tmp_path / "run").status == "stopped"


@pytest.mark.parametrize("every, expected_global_steps", [
    ({"val_check_interval": 0.5}, [4, 8]),  # two validations an epoch: the epoch's last one counts
    ({"val_check_interval": 3, "check_val_every_n_epoch": None}, [3, 6]),  # validations that end no epoch
])
def test_a_trial_is_told_each_epochs_last_validation(tmp_path: Path, every: dict, expected_global_steps: list[int]) -> None:
    # trial 18c: with val_check_interval=0.5 the mid-epoch validation was reported as "epoch 1", the
    # epoch's own value dropped, and a stop at a rung (or at max_resource) ended the fit mid-epoch
    seen: list[tuple[int, float, int]] = []
    validations: list[tuple[int, float]] = []

    class Recorder(L.Callback):
        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            validations.append((trainer.global_step, float(trainer.callback_metrics["val_loss"])))

    class Trial:
        def report(self, step: int, value: float) -> bool:
            seen.append((step, value, len(validations)))
            return step >= 2

    cb = TripwireCallback(out_dir=tmp_path / "run", trial=Trial(), trial_metric="val_loss")
    train, val = _loaders(n=32, batch=8)  # 4 batches an epoch
    trainer = _trainer([Recorder(), cb], max_epochs=5, **every)
    trainer.fit(Net(), train, val)
    assert [s for s, _, _ in seen] == [1, 2] and trainer.global_step == 8  # two whole epochs
    by_step = dict(validations)
    assert [v for _, v, _ in seen] == [pytest.approx(by_step[g]) for g in expected_global_steps]


def test_every_validations_metrics_are_kept_when_a_collection_has_its_own_interval(tmp_path: Path) -> None:
    # trial 18a: weights saved every 8 steps made eval step 8 a save step with no losses or metrics
    # due: that validation's val_loss was never written (nor test_loss at such a test step)
    cb = TripwireCallback({"save": {"interval": 10}, "collections": {"losses": None, "metrics": None,
                                                                     "weights": {"save": {"interval": 8}}}},
                          out_dir=tmp_path / "run")
    train, _ = _loaders()
    val = DataLoader(_data(32, seed=1), batch_size=8)  # 4 batches: validations end at eval steps 4, 8, 12
    trainer = _trainer([cb], max_epochs=3)
    module = Net()
    trainer.fit(module, train, val)
    trainer.test(module, DataLoader(_data(64, seed=2), batch_size=8), verbose=False)  # test steps 1-8
    run = tripwire.open_run(tmp_path / "run")
    assert run.tensor("val_loss").series(mode="eval")[0].tolist() == [4, 8, 12]
    assert run.tensor("test_loss").series(mode="test")[0].tolist() == [8]


def test_validation_and_test_batches_keep_their_on_step_values(tmp_path: Path) -> None:
    # trial 18b: Lightning keeps on_step values of validation/test batches out of its callback
    # metrics: none was captured (an on_step-only metric was not in the run; trainer.test() left no step)
    seen: dict[str, list[float]] = {"val": [], "test": []}

    class StepLogged(Net):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            loss = nn.functional.cross_entropy(self(batch[0]), batch[1])
            seen["val"].append(float(loss))
            self.log("vl_step", loss, on_step=True, on_epoch=False)
            self.log("vl_both", loss, on_step=True, on_epoch=True)

        def test_step(self, batch: Any, batch_idx: int) -> None:
            loss = nn.functional.cross_entropy(self(batch[0]), batch[1])
            seen["test"].append(float(loss))
            self.log("tl_step", loss, on_step=True, on_epoch=False)

    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    train, val = _loaders(n=16)
    trainer = _trainer([cb])
    module = StepLogged()
    trainer.fit(module, train, DataLoader(_data(24, seed=1), batch_size=8))
    trainer.test(module, val, verbose=False)
    run = tripwire.open_run(tmp_path / "run")
    assert run.steps(mode="eval") == [1, 2, 3] and run.steps(mode="test") == [1, 2]
    for name in ("vl_step", "vl_both_step"):  # (Lightning's names of the batch values)
        steps, values = run.tensor(name).series(mode="eval")
        assert steps.tolist() == [1, 2, 3] and values == pytest.approx(seen["val"], rel=1e-6)
    # the plain name of a value logged on_step and on_epoch holds the epoch's, as before: rules that read
    # val_loss (overfit) see one value a validation, not its batches
    for name in ("vl_both", "vl_both_epoch"):
        steps, values = run.tensor(name).series(mode="eval")
        assert steps.tolist() == [3] and values == pytest.approx([np.mean(seen["val"])], rel=1e-6)
    assert run.tensor("tl_step").series(mode="test")[1] == pytest.approx(seen["test"], rel=1e-6)


def test_only_a_fits_validations_are_told_to_a_trial(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 18h: a baseline trainer.validate() before fit was reported as epoch 1 (the untrained
    # model's loss), one after a fit whose last epoch did not validate as epoch N + 1 (ReportError past
    # max_resource, every trial failed), and the epochs trained after the last validation went unsaid
    seen: list[tuple[int, float]] = []

    class Trial:
        def report(self, step: int, value: float) -> bool:
            seen.append((step, value))
            return False

    cb = TripwireCallback(out_dir=tmp_path / "run", trial=Trial(), trial_metric="val_loss")
    train, val = _loaders()
    module = Net()
    trainer = _trainer([cb], max_epochs=3, check_val_every_n_epoch=2)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.validate(module, val, verbose=False)
        trainer.fit(module, train, val)
        trainer.validate(module, val, verbose=False)
    assert [s for s, _ in seen] == [2]  # the fit's one validation (epoch 2); neither validate()
    said = [r.getMessage() for r in caplog.records]
    assert any("the last 1 epoch(s) of this fit had no validation: the trial was told 2 epochs" in m for m in said)
    assert not any("already holds records" in m for m in said)  # (the validate() before: the same run)
    assert tripwire.open_run(tmp_path / "run").steps(mode="eval") == [2, 4, 6]  # 3 validations of 2 batches: counted on


def test_a_test_after_a_stopped_fit_keeps_why_it_stopped(tmp_path: Path) -> None:
    # trial 18h: trainer.test() after a fit a rule stopped rewrote the end marker without stop_reason
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1,
                          rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    train, val = _loaders()
    module = Net(nan_at=2)
    trainer = _trainer([cb], max_epochs=3)
    trainer.fit(module, train, val)
    reason = tripwire.open_run(tmp_path / "run").end_markers[0]["stop_reason"]
    assert "exploding_tensor at step 2 (train)" in reason
    trainer.test(module, val, verbose=False)
    marker = tripwire.open_run(tmp_path / "run").end_markers[0]
    assert marker["status"] == "stopped" and marker["stop_reason"] == reason


def test_a_trial_a_rule_stopped_is_not_said_to_be_stopped_by_the_tuner(tmp_path: Path) -> None:
    # trial 18c: a rule stopped the fit mid-epoch; the epoch's (NaN) value went to the tuner, whose
    # stop overwrote the run's reason: "the tuner stopped the trial after epoch 1 (val_loss=nan)"
    class Trial:
        def report(self, step: int, value: float) -> bool:
            return True

    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, trial=Trial(), trial_metric="val_loss",
                          rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    train, val = _loaders()
    _trainer([cb], max_epochs=3).fit(Net(nan_at=2), train, val)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "exploding_tensor" and not cb.trial_stopped
    marker = tripwire.open_run(tmp_path / "run").end_markers[0]
    assert marker["status"] == "stopped"
    assert marker["stop_reason"] == str(cb.stopped_by) and "exploding_tensor at step 2 (train)" in marker["stop_reason"]


def test_a_trial_that_ran_its_max_resource_ends_the_run_complete(tmp_path: Path) -> None:
    trial = tripwire.tune.Trial(0, {}, min_resource=1, max_resource=2)  # no scheduler: stops at max_resource
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=trial, trial_metric="val_loss")
    train, val = _loaders()
    trainer = _trainer([cb], max_epochs=5)
    trainer.fit(Net(), train, val)
    assert trainer.current_epoch == 2 and cb.trial_stopped
    assert tripwire.open_run(tmp_path / "run").status == "complete"  # its whole budget, not a cut training


def test_findings_without_stop_and_the_raise_action(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1,
                          rules=[{"name": "exploding_tensor", "actions": ["raise"]}])
    with pytest.raises(tripwire.TrainingStopped):
        _trainer([cb], max_epochs=2).fit(Net(nan_at=2), _loaders()[0])
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "stopped" and [f.rule for f in run.findings] == ["exploding_tensor"]
    assert isinstance(cb.findings[0], Finding)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "exploding_tensor"  # as stop_training would


def test_epoch_level_validation_metrics_are_recorded_every_epoch(tmp_path) -> None:
    """With the default save interval (10), most validation runs end on a batch that is not a save
    step; their epoch-level val_loss must still be recorded (overfit & co. read it each epoch)."""
    import lightning as L
    import torch
    from torch import nn

    import tripwire
    from tripwire.integrations.lightning import TripwireCallback

    torch.manual_seed(0)

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

        def training_step(self, batch, _):
            x, y = batch
            loss = nn.functional.mse_loss(self.net(x), y)
            self.log("loss", loss)
            return loss

        def validation_step(self, batch, _):
            x, y = batch
            self.log("val_loss", nn.functional.mse_loss(self.net(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    x = torch.randn(64, 4)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16)
    cb = TripwireCallback(out_dir=tmp_path)
    L.Trainer(max_epochs=4, callbacks=[cb], logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, num_sanity_val_steps=0).fit(Tiny(), loader, loader)
    steps, values = tripwire.open_run(tmp_path).series("val_loss", "raw", "eval")
    assert steps.tolist() == [4, 8, 12, 16]  # the last validation batch of each epoch
    assert values[-1] < values[0]


class ImbalancedNet(L.LightningModule):
    """Validation predictions only in what validation_step returns (``self.net`` bypasses forward)."""

    def __init__(self, returns: str) -> None:
        super().__init__()
        self.net = nn.Linear(4, 2)
        self.returns = returns
        with torch.no_grad():  # always predicts class 0
            self.net.weight.zero_()
            self.net.bias.copy_(torch.tensor([5.0, -5.0]))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y) * 0.0  # keeps the planted predictions

    def validation_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y))
        return {"preds": logits} if self.returns == "dict" else logits if self.returns == "tensor" else None

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.0)


@pytest.mark.parametrize("returns", ["dict", "tensor", "nothing"])
def test_validation_predictions_feed_the_class_rules(tmp_path: Path, returns: str) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    data = TensorDataset(x, (torch.arange(64) % 10 == 0).long())  # 57:7 labels, only the majority predicted
    rule = {"name": "class_imbalance", "min_samples": 32, "rounds": 1, "actions": ["record"]}
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[rule], save_interval=1)
    _trainer([cb], max_epochs=2).fit(ImbalancedNet(returns), DataLoader(data, batch_size=16), DataLoader(data, batch_size=16))
    run = tripwire.open_run(tmp_path / "run")
    fired = [f for f in cb.findings if f.rule == "class_imbalance"]
    if returns == "nothing":  # nothing to read predictions from: the rule has no data, no finding
        assert "predictions" not in run.tensor_names() and fired == []
    else:
        assert run.tensor("predictions").value(1, mode="eval").shape == (16, 2)
        assert fired and fired[0].mode == "eval"


def test_fp16_amp_overflow_steps_skipped_by_the_grad_scaler_are_not_captured(tmp_path: Path) -> None:
    """fp16 mixed precision starts at a loss scale that overflows: the GradScaler skips those steps
    (inf gradients, never applied). Their gradients are not captured, so exploding_gradient does not
    stop a healthy run; the steps after them are captured as usual."""
    from lightning.pytorch.plugins import MixedPrecision

    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24)  # overflows for the first steps
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1,
                          rules=[{"name": "exploding_gradient", "actions": ["stop_training"]}])
    trainer = _trainer([cb], max_epochs=3, plugins=[MixedPrecision("16-mixed", "cpu", scaler=scaler)])
    trainer.fit(Net(), _loaders(n=64)[0])
    assert cb.stopped_by is None and trainer.global_step == 24 and scaler.get_scale() < 2.0 ** 24
    steps = tripwire.open_run(tmp_path / "run").tensor("gradients/net.0.weight").steps()
    assert steps and steps[0] > 0 and len(steps) >= 15  # none of the overflowed (skipped) steps
    values = tripwire.open_run(tmp_path / "run").series("gradients/net.0.weight", "l2")[1]
    assert np.isfinite(values).all()


def test_an_epoch_without_an_optimizer_step_is_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 17i: manual optimization with optimizer.step() forgotten: global_step stayed at 0, every
    # batch was step 0, no rule could judge and the run ended complete without a word
    class NoStep(Net):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            loss = nn.functional.cross_entropy(self(x), y)
            self.optimizers().zero_grad()
            self.manual_backward(loss)
            return loss

    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb], max_epochs=2).fit(NoStep(), _loaders()[0])
    said = [r.getMessage() for r in caplog.records if "no optimizer step was taken" in r.getMessage()]
    assert said == ["tripwire: epoch 0 ran 4 training batches and trainer.global_step stayed at 0: no optimizer step "
                    "was taken, so the model did not train (under manual optimization Lightning counts a step when "
                    "optimizer.step() runs: is it called? Under automatic optimization, a training_step that returns "
                    "None skips the step). tripwire numbers train steps by the global step: these batches are one "
                    "step, 0, in the run"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):  # a healthy fit: nothing said
        _trainer([TripwireCallback(out_dir=tmp_path / "ok")], max_epochs=2).fit(Net(), _loaders()[0])
    assert "no optimizer step" not in caplog.text


def test_an_optimizer_that_holds_none_of_the_modules_parameters_is_named(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # trial 17i: configure_optimizers built the optimizer from a copy of the network: the model never
    # moved, and weight_update_ratio read nothing without a word
    import copy

    class Stale(Net):
        def configure_optimizers(self) -> Any:
            self.copies = [copy.deepcopy(self.net)]  # (a list: not a registered submodule)
            return torch.optim.SGD(self.copies[0].parameters(), lr=0.1)

    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=["weight_update_ratio"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb], max_steps=3).fit(Stale(), _loaders()[0])
    said = [r.getMessage() for r in caplog.records if "none of them a parameter" in r.getMessage()]
    assert said == ["tripwire: the optimizer SGD holds 6 parameter(s), none of them a parameter of the LightningModule: "
                    "it does not train the model (was it built from a copy of the model, or from another module, in "
                    "configure_optimizers?), and the model's gradients and update ratios are not captured"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([TripwireCallback(out_dir=tmp_path / "ok", save_interval=1, rules=["weight_update_ratio"])],
                 max_steps=3).fit(Net(), _loaders()[0])
    assert "none of them a parameter" not in caplog.text


def test_a_sigmoid_layer_named_by_its_path_is_judged_as_a_sigmoid(tmp_path: Path) -> None:
    # trial 17i: nn.Sigmoid in an nn.Sequential is captured as "net.1/input", which says nothing of
    # the function: saturated_activation judged it with the tanh threshold (5, not 10)
    class Sig(Net):
        def __init__(self) -> None:
            super().__init__(lr=0.0)
            self.net = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.Linear(8, 2))
            with torch.no_grad():
                self.net[0].weight.fill_(2.0)  # inputs of |x| about 7: beyond tanh's 5, short of sigmoid's 10
                self.net[0].bias.zero_()

    torch.manual_seed(0)
    x = torch.randn(32, 4).abs() + 0.6  # (sum of 4 positives times 2: 7 to 14, mostly below 10)
    x = x / x.sum(dim=1, keepdim=True) * 3.6  # each row sums to 3.6: inputs of the sigmoid exactly 7.2
    data = DataLoader(TensorDataset(x, torch.zeros(32, dtype=torch.long)), batch_size=8)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[{"name": "saturated_activation",
                                                                            "patience": 1}])
    _trainer([cb], max_steps=3).fit(Sig(), data)
    assert cb.findings == []  # 7.2 is not saturation for a sigmoid
    tanh = TripwireCallback(out_dir=tmp_path / "tanh", save_interval=1, rules=[{"name": "saturated_activation",
                                                                               "patience": 1}])

    class Tanh(Sig):
        def __init__(self) -> None:
            super().__init__()
            self.net[1] = nn.Tanh()

    _trainer([tanh], max_steps=3).fit(Tanh(), data)
    assert [f.rule for f in tanh.findings] == ["saturated_activation"] and "tanh layer net.1/input" in tanh.findings[0].message


def test_a_stop_by_an_eval_rule_names_the_train_step_it_followed(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """Trial 22c: "stopping training: rule 'overfit' at step 6 (eval)" while the trainer was at step
    24: an eval step counts validation batches, so the log line names the train step too."""
    alarm = FunctionRule(lambda history, step, mode: "validation alarm" if step >= 4 else None, name="val_alarm",
                         requirements=[Requirement("losses", ("raw",), modes=("eval",))], modes=["eval"],
                         actions=["stop_training"])
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[alarm], save_interval=1)
    train, val = _loaders()  # 4 train batches, 2 validation batches an epoch
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _trainer([cb], max_epochs=5).fit(Net(), train, val)
    assert cb.stopped_by is not None and (cb.stopped_by.mode, cb.stopped_by.step) == ("eval", 4)
    assert "stopping training: rule 'val_alarm' at step 4 (eval, after train step 7)" in caplog.text
    run = tripwire.open_run(tmp_path / "run")
    assert run.steps("eval") == [2, 4] and run.train_steps("eval").tolist() == [3, 7]  # (val_loss: at each end)


def test_validate_and_test_with_ckpt_path_after_a_fit_go_on_with_the_run(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """Trial 22f: trainer.validate/test(ckpt_path="best") after a fit restored the callback's state as
    of that checkpoint: eval steps counted again from there, a rule that fired fired again, and a
    WARNING spoke of a resumed training."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    alarm = FunctionRule(lambda history, step, mode: "validation alarm" if step >= 4 else None, name="val_alarm",
                         requirements=[Requirement("losses", ("raw",), modes=("eval",))], modes=["eval"],
                         actions=["record"])
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=[alarm], save_interval=1)
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val_loss", mode="max")  # "best": an early epoch
    trainer = _trainer([cb, ckpt], max_epochs=3, enable_checkpointing=True)
    model = Net()
    train, val = _loaders()  # 4 train batches, 2 validation batches an epoch
    trainer.fit(model, train, val)
    assert tripwire.open_run(tmp_path / "run").steps("eval") == [2, 4, 6]
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        trainer.validate(model, val, ckpt_path="best")
        trainer.test(model, val, ckpt_path="best")
    run = tripwire.open_run(tmp_path / "run")
    assert run.steps("eval") == [2, 4, 6, 8] and run.steps("test") == [2]
    assert run.train_steps("eval").tolist() == [3, 7, 11, 11]
    assert "resumed" not in caplog.text and "written after this checkpoint" not in caplog.text
    assert [(f.rule, f.mode, f.step) for f in cb.findings] == [("val_alarm", "eval", 4)]  # once

"""Trial 38d: ``trainer.validate()`` through a new callback on a run a fit wrote, with an earlier
checkpoint (``ckpt_path=``) or none, numbered its eval steps from the checkpoint's count, or from 0:
they repeated the fit's, superseded its ``val_loss`` there with the other weights' value, and
``Run.train_steps`` placed the fit's validations before training. A stage that trains nothing now
counts its steps on after the run's (``Session.count_on``), and a checkpoint's state given to it
says nothing of a resumed training."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402
from tiny_lightning import TinyNet  # noqa: E402


class Net(TinyNet):
    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.validation_step(batch, batch_idx)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.5)


def _data(n: int) -> DataLoader:
    g = torch.Generator().manual_seed(n)
    x, y = torch.randn(n, 4, generator=g), torch.randint(0, 2, (n,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=8)


def _trainer(callbacks: list[Any], root: Path, **kw: Any) -> L.Trainer:
    return L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                     enable_checkpointing=any(isinstance(c, ModelCheckpoint) for c in callbacks),
                     default_root_dir=str(root), callbacks=callbacks, **kw)


def _fit(tmp_path: Path) -> tuple[str, str]:
    torch.manual_seed(0)
    out, ck = str(tmp_path / "run"), str(tmp_path / "ck")
    cb = TripwireCallback(out_dir=out, save_interval=4)
    mc = ModelCheckpoint(dirpath=ck, save_top_k=-1, every_n_epochs=1, filename="{epoch}")
    _trainer([cb, mc], tmp_path, max_epochs=2).fit(Net(), _data(64), _data(32))
    return out, ck


def test_validating_an_earlier_checkpoint_with_a_new_callback_supersedes_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out, ck = _fit(tmp_path)
    run = tripwire.open_run(out)
    steps, values = run.series("val_loss")
    fit_steps, fit_values = steps.tolist(), values.tolist()
    fit_after = run.train_steps("eval", steps).tolist()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for _ in range(2):
            _trainer([TripwireCallback(out_dir=out, save_interval=4)], tmp_path).validate(
                Net(), _data(32), ckpt_path=f"{ck}/epoch=0.ckpt", verbose=False)
    assert not [r for r in caplog.records if "resumed training" in r.getMessage()]
    run = tripwire.open_run(out)
    steps, values = run.series("val_loss")
    assert len(set(steps.tolist())) == len(steps) == len(fit_steps) + 2  # (no step repeated)
    assert steps.tolist()[:len(fit_steps)] == fit_steps and values.tolist()[:len(fit_steps)] == fit_values
    assert all(run.value("val_loss", "raw", s) == v for s, v in zip(fit_steps, fit_values))
    assert run.train_steps("eval", fit_steps).tolist() == fit_after
    assert values[-1] == values[-2] != fit_values[-1]  # (the epoch-0 weights', twice)
    assert not run.dataframe()["superseded"].any()


def test_a_new_callbacks_test_and_validate_without_a_checkpoint_count_on(tmp_path: Path) -> None:
    out, _ = _fit(tmp_path)
    before = tripwire.open_run(out).steps("eval")
    model = Net()
    _trainer([TripwireCallback(out_dir=out, save_interval=4)], tmp_path).validate(model, _data(32), verbose=False)
    _trainer([TripwireCallback(out_dir=out, save_interval=4)], tmp_path).test(model, _data(32), verbose=False)
    _trainer([TripwireCallback(out_dir=out, save_interval=4)], tmp_path).test(model, _data(32), verbose=False)
    run = tripwire.open_run(out)
    evals = run.steps("eval")
    assert evals[:len(before)] == before and len(evals) > len(before) and min(evals[len(before):]) > max(before)
    tests = run.steps("test")
    assert len(tests) == len(set(tests)) == 2 and not run.dataframe()["superseded"].any()
    # trial 38j: placed after the fit's last train step, as a callback that held the run places them (they
    # were at -1, "before training"), and no training of their own
    last_train = run.steps("train")[-1]
    assert run.train_steps("eval", evals[len(before):]).tolist() == [last_train] * (len(evals) - len(before))
    assert run.train_steps("test", tests).tolist() == [last_train, last_train]
    assert len(run.trainings.get(0, [])) <= 1


def test_a_resume_from_another_working_directory_continues_the_checkpoints_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 38d: a fit with a relative ``out_dir`` resumed from another working directory wrote a second
    run under it (``elsewhere/runs/x``), its rules' history empty: the checkpoint held the relative path."""
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    mc = ModelCheckpoint(dirpath=str(tmp_path / "ck"), save_top_k=-1, every_n_epochs=1, filename="{epoch}")
    _trainer([TripwireCallback(out_dir="runs/x", save_interval=4), mc], tmp_path, max_epochs=1).fit(
        Net(), _data(64), _data(32))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    resumed = TripwireCallback(save_interval=4)
    _trainer([resumed], tmp_path, max_epochs=2).fit(Net(), _data(64), _data(32),
                                                    ckpt_path=str(tmp_path / "ck" / "epoch=0.ckpt"))
    assert Path(resumed.out_dir) == tmp_path / "runs" / "x"
    assert not (tmp_path / "elsewhere" / "runs").exists()
    assert tripwire.open_run(tmp_path / "runs" / "x").steps("train") == list(range(16))


def test_the_repr_says_fitting_during_the_fits_sanity_validation(tmp_path: Path) -> None:
    """Trial 38d: inside ``trainer.fit``, during its sanity validation, the repr said ``not fitted``."""
    cb = TripwireCallback(out_dir=str(tmp_path / "run"))
    seen: list[str] = []

    class Peek(Net):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            seen.append(repr(cb))
            super().validation_step(batch, batch_idx)

    _trainer([cb], tmp_path, max_epochs=1, num_sanity_val_steps=1, limit_val_batches=1).fit(Peek(), _data(16), _data(8))
    assert "fitting, 0 train steps" in seen[0], seen[0]
    assert "run complete" in repr(cb)


def test_two_callbacks_of_one_trainer_with_one_out_dir_are_refused_before_the_run_is_touched(tmp_path: Path) -> None:
    """Trial 38k: the second callback's writer refused the directory at the first step, after the first
    had reopened the run: a complete run ended failed, with a training of its own, though nothing trained."""
    out = str(tmp_path / "run")
    cb = TripwireCallback(out_dir=out)
    _trainer([cb], tmp_path, max_epochs=1).fit(Net(), _data(16), _data(8))
    with pytest.raises(tripwire.ConfigError, match=r"out_dir: this Trainer holds two TripwireCallbacks writing .*run'"
                                                   r" \(name=None and name='probe'\)"):
        _trainer([cb, TripwireCallback(out_dir=out, name="probe")], tmp_path, max_epochs=1).fit(Net(), _data(16), _data(8))
    run = tripwire.open_run(out)
    assert run.status == "complete" and run.trainings == {} and not run.stop_reasons


class NaNAt5(Net):
    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.global_step >= 5 else loss


def test_an_evaluation_through_a_new_callback_keeps_a_stopped_runs_end(tmp_path: Path) -> None:
    """Trial 38p: a new callback's validate() or test() on the out_dir of a fit a rule stopped made the run
    complete and dropped every stop reason."""
    out = str(tmp_path / "run")
    cb = TripwireCallback(out_dir=out, save_interval=1, rules=[{"name": "exploding_tensor", "actions": ["stop_training"]}])
    _trainer([cb], tmp_path, max_epochs=3).fit(NaNAt5(), _data(64), _data(32))
    before = tripwire.open_run(out)
    assert before.status == "stopped" and before.stop_reasons[0].startswith("[critical] exploding_tensor")
    model = Net()
    _trainer([TripwireCallback(out_dir=out)], tmp_path).validate(model, _data(32), verbose=False)
    _trainer([TripwireCallback(out_dir=out)], tmp_path).test(model, _data(32), verbose=False)
    after = tripwire.open_run(out)
    assert after.status == "stopped" and after.stop_reasons == before.stop_reasons
    assert len(after.steps("test")) > 0

"""Trial 30f (a data scientist in notebooks), Lightning:

- F1: the same TripwireCallback given to a second Trainer while its first fit still runs in a
  background thread: the second fit failed with an internal ``quiet_step: ... not quiet`` error.
  Now it is refused at its setup with a ConfigError naming the thread, and the running fit is left
  as it is (its run complete, every step recorded).
- F3: a second fit through the same callback with a new Trainer (the notebook's fit cell run again)
  was not recorded in the run's ``trainings`` (``{}``), though the callback judged it alone as a new
  training: ``tripwire watch`` and ``inspect`` saw no boundary. Each such fit is now a training of
  its own there (fresh: judged alone), with the callback's one WARNING, not the session's too.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire import ConfigError  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


class Clf(L.LightningModule):
    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        return F.cross_entropy(self.net(batch[0]), batch[1])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", F.cross_entropy(self.net(batch[0]), batch[1]))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _loader() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 4, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)  # 5 batches


def _trainer(*callbacks: Any, epochs: int = 1) -> Any:
    return L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     num_sanity_val_steps=0, accelerator="cpu", devices=1, max_epochs=epochs, callbacks=list(callbacks))


class Hold(L.Callback):
    """Holds the fit at its second batch's end until released."""

    def __init__(self) -> None:
        self.started, self.release = threading.Event(), threading.Event()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if batch_idx == 1 and trainer.current_epoch == 0:
            self.started.set()
            self.release.wait(60)


@pytest.mark.parametrize("second", ["fit", "validate"])
def test_the_same_callback_in_a_second_trainer_while_its_fit_runs_in_a_thread_is_refused(
        tmp_path: Path, second: str) -> None:
    cb, hold, errors = TripwireCallback(out_dir=tmp_path, save_interval=1), Hold(), []

    def train() -> None:
        try:
            _trainer(cb, hold, epochs=2).fit(Clf(), _loader(), _loader())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=train, name="trainer")
    thread.start()
    try:
        assert hold.started.wait(60)
        other = _trainer(cb)
        with pytest.raises(ConfigError, match=rf"callbacks: this trainer.{second}\(\) was given a TripwireCallback "
                                              rf"\(out_dir '.*'\) that a trainer.fit\(\) running in thread 'trainer'"):
            if second == "fit":
                other.fit(Clf(1), _loader(), _loader())
            else:
                other.validate(Clf(1), _loader())
    finally:
        hold.release.set()
        thread.join(60)
    assert not errors
    run = tripwire.open_run(tmp_path)
    assert run.status == "complete"
    assert run.series("loss", mode="train")[0].tolist() == list(range(10))
    # once that fit has ended, the callback takes the next one as before (a new training)
    _trainer(cb).fit(Clf(2), _loader(), _loader())
    assert tripwire.open_run(tmp_path).status == "complete"


def test_each_fit_through_the_same_callback_with_a_new_trainer_is_a_training_of_its_own(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cb = TripwireCallback(out_dir=tmp_path, save_interval=1)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for seed in range(3):
            _trainer(cb).fit(Clf(seed), _loader(), _loader())
    run = tripwire.open_run(tmp_path)
    trainings = run.trainings[0]
    assert [t["steps"].get("train") for t in trainings] == [None, 0, 0]
    assert [bool(t.get("fresh")) for t in trainings] == [False, True, True]
    assert not any(t["continued"] for t in trainings)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 2 and all("an earlier fit through this callback" in m for m in said), said
    assert run.status == "complete" and run.series("loss", mode="train")[0].tolist() == list(range(5)) * 3


class Peek(L.Callback):
    """Keeps the TripwireCallback's repr at the third train batch's end."""

    def __init__(self, cb: TripwireCallback) -> None:
        self.cb, self.seen = cb, ""

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if batch_idx == 2:
            self.seen = repr(self.cb)


def test_the_callback_repr_says_out_dir_rules_and_state(tmp_path: Path) -> None:
    # trial 30f F6: a notebook cell showing the callback printed <...TripwireCallback object at 0x...>
    cb = TripwireCallback(out_dir=tmp_path, rules=["exploding_tensor"], actions=["log", "stop_training"],
                           save_interval=1)
    assert repr(cb) == f"TripwireCallback(out_dir={str(tmp_path)!r}, rules=['exploding_tensor'], not fitted, findings=0)"
    peek = Peek(cb)
    _trainer(cb, peek).fit(Clf(), _loader(), _loader())
    assert peek.seen == f"TripwireCallback(out_dir={str(tmp_path)!r}, rules=['exploding_tensor'], fitting, 3 train steps, findings=0)"
    assert repr(cb) == f"TripwireCallback(out_dir={str(tmp_path)!r}, rules=['exploding_tensor'], run complete, findings=0)"

    class NaN(Clf):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return super().training_step(batch, batch_idx) * float("nan")

    stopping = TripwireCallback(out_dir=tmp_path / "nan", rules=["exploding_tensor"], actions=["log", "stop_training"],
                           save_interval=1)
    _trainer(stopping).fit(NaN(), _loader(), _loader())
    assert repr(stopping) == (f"TripwireCallback(out_dir={str(tmp_path / 'nan')!r}, rules=['exploding_tensor'], run stopped, "
                              f"findings=1, stopped_by='exploding_tensor')")


def test_the_repr_names_rules_given_in_code(tmp_path: Path) -> None:
    # trial 37h: a FunctionRule, a function or a Rule class given in code read '<object>'
    def at6(history: Any, step: int, mode: str) -> None:
        return None

    def other(history: Any, step: int, mode: str) -> None:
        return None

    class Mine(tripwire.Rule):
        name = "mine"

        def check(self, history: Any, step: int, mode: str) -> None:
            return None

    cb = TripwireCallback(out_dir=tmp_path, rules=["default", tripwire.FunctionRule(at6, name="at6_rule"), other, Mine])
    assert "rules=['default', 'at6_rule', 'other', 'mine']" in repr(cb)

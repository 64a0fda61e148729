"""Trial 31g F4: a trial that Lightning's ``EarlyStopping`` ended was journaled only as
``completed`` (resource 6 of 9), though the callback knew why the fit ended. The callback given
``trial=`` now tells the trial (``Trial.note_early_end``), and the journaled reason reads
``completed: EarlyStopping(monitor='val_loss'): ...``; the status stays ``completed``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from lightning.pytorch.callbacks import EarlyStopping  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402
from tripwire.tune import Continuous, RandomSearch, Tuner  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


class Clf(L.LightningModule):
    def __init__(self, lr: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.lr = lr

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        return F.cross_entropy(self.net(batch[0]), batch[1])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", F.cross_entropy(self.net(batch[0]), batch[1]))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def train(params: dict[str, Any], trial: Any) -> None:
    """Up to ``trial.budget`` (6) epochs; with ``early`` in the params, an EarlyStopping that ends
    the fit after its 2nd epoch (min_delta=10: no epoch improves enough)."""
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    out = Path(os.environ["T31G_OUT"]) / f"trial-{trial.number}-{trial.attempt}"
    more = [EarlyStopping(monitor="val_loss", patience=1, min_delta=10.0, mode="min")] if params["early"] else []
    cb = TripwireCallback(out_dir=out, rules=["default"], trial=trial, trial_metric="val_loss")
    trainer = L.Trainer(max_epochs=trial.budget, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, callbacks=[cb, *more])
    trainer.fit(Clf(params["lr"]), DataLoader(data, batch_size=8), DataLoader(data, batch_size=16))


def test_a_trial_early_stopping_ended_says_so_in_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T31G_OUT", str(tmp_path))  # (the spawned workers inherit it)
    from tripwire.tune import Categorical
    result = Tuner(train, {"lr": Continuous(0.01, 0.02), "early": Categorical([True, False])}, objective="val_loss",
                   mode="min", strategy=RandomSearch(max_resource=6), max_jobs=4, seed=3,
                   journal=str(tmp_path / "j.db")).fit()
    assert all(t.status == "completed" for t in result.trials), [(t.status, t.error) for t in result.trials]
    early = [t for t in result.trials if t.params["early"]]
    full = [t for t in result.trials if not t.params["early"]]
    assert early and full, [t.params for t in result.trials]
    for t in early:
        assert t.resource == 2
        assert t.reason.startswith("completed: EarlyStopping(monitor='val_loss'): Monitored metric val_loss did not "
                                   "improve in the last 1 records."), t.reason
        assert len(t.reason) <= len("completed: ") + 200
        # the run says the same, with its train step (trial 28a F7)
        run = tripwire.open_run(tmp_path / f"trial-{t.number}-1")
        assert run.stop_reasons[0].endswith(t.reason[len("completed: "):].removesuffix("..."))
    for t in full:  # (a fit that ran its budget: unchanged)
        assert t.resource == 6 and t.reason == "reached max_resource=6"
    df = result.dataframe()
    assert list(df.loc[df["number"] == early[0].number, "reason"]) == [early[0].reason]

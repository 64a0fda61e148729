"""Trial 27d finding 1: ``run.train_steps()`` (and so ``tripwire plot``) placed a validation at the last
train step *recorded* before it, not the train step it came after: 25 train steps with the loss kept at
save steps only (interval 10), then a validation, gave train step 20 instead of 24; so did an
``end_step`` that stopped the train records early. The records' global steps count every step begun,
those that saved nothing too, and place it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import History


def _loss(step: int) -> dict[str, Any]:
    return {"loss": (1.0 / (step + 1), "losses")}


def _both(session: tripwire.Session, out: Path) -> list[Any]:
    history = session.history
    session.close()
    return [history, tripwire.open_run(out)]


def test_a_validation_after_unrecorded_train_steps_is_placed_after_the_last_train_step(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=out, rules=[], collections={"losses": {"every_step": False}})  # interval 10
    for step in range(25):  # train steps 0..24, records at 0, 10, 20
        s.step("train", step, _loss(step))
    s.step("eval", 0, {"val_loss": (0.5, "losses")}, summary=True)  # after train step 24
    for history in _both(s, out):
        assert history.steps("train") == [0, 10, 20]
        assert history.train_steps("eval", [0]).tolist() == [24]
        assert history.train_steps("eval").tolist() == [24]


def test_an_end_step_that_stops_the_train_records_does_not_hold_the_validation_back(tmp_path: Path) -> None:
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=out, rules=[], save_interval=1, end_step=20)
    for epoch in range(3):  # 10 train steps an epoch, then a validation of one summary step
        for step in range(10 * epoch, 10 * epoch + 10):
            s.step("train", step, _loss(step))
        s.step("eval", epoch, {"val_loss": (0.5, "losses")}, summary=True)
    for history in _both(s, out):
        assert history.steps("train")[-1] == 19  # (the train records stop at end_step)
        assert history.train_steps("eval").tolist() == [9, 19, 29]


def _validations(s: tripwire.Session, epochs: int, batches: int, per_epoch: int = 8) -> None:
    """Lightning's pattern: eval steps count the validation batches over the run (from 1), and the
    epoch-level val_loss goes in a summary record at the last batch's step."""
    eval_step = 1
    for epoch in range(epochs):
        for step in range(per_epoch * epoch, per_epoch * epoch + per_epoch):
            s.step("train", step, _loss(step))
        for _ in range(batches):
            plan = s.begin_step("eval", eval_step)
            if plan.keeps("metrics"):
                plan.add("val_acc_step", 0.5, "metrics")
            s.end_step()
            eval_step += 1
        s.step("eval", eval_step - 1, {"val_loss": (0.1 * epoch, "losses")}, summary=True)


@pytest.mark.parametrize("save", [
    {"interval": 3},                               # the every-step loss: every train step has a record
    {"interval": 3, "end_step": 10},               # the train records stop at step 9
    {"interval": 5, "modes": {"eval": {"interval": 2}}},
])
def test_validation_batches_and_their_summary_record_follow_their_train_step(tmp_path: Path, save: dict) -> None:
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=out, rules=[], save=save, collections=["losses", "metrics"])
    _validations(s, epochs=3, batches=3)
    for history in _both(s, out):
        steps, _ = history.series("val_loss", mode="eval")
        assert steps.tolist() == [3, 6, 9]
        assert history.train_steps("eval", steps).tolist() == [7, 15, 23]


def test_the_loss_kept_only_at_save_steps_and_validation_batches_saved_between(tmp_path: Path) -> None:
    # trial 27d's Lightning run: the loss at save steps only, eval batch records at an interval: the
    # unrecorded eval batches are the validation's, not train steps
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=out, rules=[], save={"interval": 10, "modes": {"eval": {"interval": 2}}},
                         collections={"losses": {"every_step": False}, "metrics": None})
    _validations(s, epochs=3, batches=4, per_epoch=16)
    for history in _both(s, out):
        assert history.train_steps("eval", [4, 8, 12]).tolist() == [15, 31, 47]


def test_tripwire_plot_draws_the_validation_at_the_train_step_it_came_after(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    out = tmp_path / "run"
    s = tripwire.Session(out_dir=out, rules=[], collections={"losses": {"every_step": False}})
    for step in range(25):
        s.step("train", step, _loss(step))
    s.step("eval", 0, {"val_loss": (0.5, "losses")}, summary=True)
    s.close()
    ax = tripwire.plot(out, ["loss", "val_loss"])
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert lines["val_loss (eval)"].get_xdata().tolist() == [24.0]


def test_records_without_global_steps_are_placed_by_wall_time() -> None:
    # (History.add_step's global_step left out, as a caller written before it did)
    h = History()
    one = [("loss", ("raw",))]
    for step, wall in ((0, 1.0), (10, 2.0)):
        h.add_step("train", step, 0, wall, one, np.array([0.5]))
    h.add_step("eval", 0, 0, 3.0, [("val_loss", ("raw",))], np.array([0.5]))
    assert h.train_steps("eval").tolist() == [10]

"""Trial 27h (one problem built five ways), the Keras callback:

- F8: the result API differed per integration. The Keras callback had ``findings``, ``stopped_by``,
  ``out_dir`` and ``close()`` but no ``stop_reason`` (XGBoost's callback and ``Session.why_stopped``
  say why training stopped), no ``history`` (``Session`` and the MXNet hook have it) and no
  ``trial_stopped`` although it takes ``trial=`` (the Lightning callback and the MXNet hook have it).
- F4: after a rule's stop Keras still ran the epoch's whole validation, on weights that may be NaN,
  and the callback stored it, where docs/keras.md said only that training ends after the current
  batch. Keras's fit loop validates every epoch it began: the docs now say it, and what is stored;
  these tests hold the callback to what they say.

Keras runs on the torch backend (the one CI uses), set before keras is imported."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

import math  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire import History, TrainingStopped  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(0)
X = RNG.normal(size=(80, 4)).astype("float32")  # 10 train batches of 8
Y = (X[:, 0] > 0).astype("int64")
VAL = (X[:24], Y[:24])  # 3 validation batches
STOP = {"rules": ["default"], "actions": ["log", "stop_training"], "save_interval": 1}


def _model(lr: float) -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])
    model.compile(keras.optimizers.SGD(lr), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class _Trial:
    """A tuner trial that stops the training at its first report."""

    def __init__(self) -> None:
        self.reports: list[tuple[int, float]] = []

    def report(self, step: int, value: float) -> bool:
        self.reports.append((step, value))
        return True


def test_results_before_a_fit_claim_nothing(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=_Trial(), trial_metric="val_loss", **STOP)
    assert cb.stop_reason is None and cb.history is None and cb.trial_stopped is False
    assert not (tmp_path / "run").exists()  # (reading them claimed no run)


def test_a_rule_stop_gives_its_reason_and_history_and_the_validation_after_it_is_recorded(tmp_path: Path) -> None:
    trial = _Trial()
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=trial, trial_metric="val_loss", **STOP)
    _model(1e4).fit(X, Y, batch_size=8, epochs=3, validation_data=VAL, callbacks=[cb], verbose=0)
    found = cb.stopped_by
    assert found is not None and found.mode == "train"
    run = tripwire.open_run(cb.out_dir)
    # stop_reason: the stopping finding as a string, as Session.why_stopped and the end marker say it
    assert cb.stop_reason == str(found)
    assert [m.get("stop_reason") for m in run.end_markers.values()] == [cb.stop_reason]
    # the tuner's report after a rule's stop does not make it the tuner's stop
    assert cb.trial_stopped is False
    # history: the one the rules read, up to the stop
    assert isinstance(cb.history, History)
    assert cb.history.steps("train") == run.steps("train") and max(run.steps("train")) == found.step
    # F4 (documented): the epoch's validation ran after the stop: its 3 batches (eval steps 0-2) and
    # the summary step 3 with val_loss, placed at the train step the stop came at; the trial was told it
    evals = run.steps("eval")
    assert evals == [0, 1, 2, 3], evals
    assert set(run.train_steps("eval", evals)) == {found.step}
    steps, values = run.series("val_loss", mode="eval")
    assert list(steps) == [3] and (math.isnan(values[0]) or values[0] > 1e6), values  # (the weights blew up)
    assert [s for s, _ in trial.reports] == [1]
    assert run.status == "stopped" and cb.stopped_by == found


def test_the_tuner_stop_gives_its_reason_and_trial_stopped(tmp_path: Path) -> None:
    trial = _Trial()
    cb = TripwireCallback(out_dir=tmp_path / "run", trial=trial, trial_metric="val_loss", rules=["default"])
    model = _model(0.01)
    model.fit(X, Y, batch_size=8, epochs=3, validation_data=VAL, callbacks=[cb], verbose=0)
    assert [s for s, _ in trial.reports] == [1]
    assert cb.trial_stopped is True and cb.stopped_by is None
    reason = cb.stop_reason
    assert reason is not None and reason.startswith("the tuner stopped the trial after epoch 1 (val_loss="), reason
    run = tripwire.open_run(cb.out_dir)
    assert run.status == "stopped" and [m.get("stop_reason") for m in run.end_markers.values()] == [cb.stop_reason]
    # a later fit is told afresh: a trial that does not stop it leaves trial_stopped False
    cb.trial = type("Keep", (), {"report": lambda self, step, value: False})()
    model.fit(X, Y, batch_size=8, epochs=1, validation_data=VAL, callbacks=[cb], verbose=0)
    assert cb.trial_stopped is False


def test_the_raise_action_ends_fit_without_the_validation(tmp_path: Path) -> None:
    cb = TripwireCallback(out_dir=tmp_path / "run", rules=["default"], actions=["log", "raise"], save_interval=1)
    with pytest.raises(TrainingStopped):
        _model(1e4).fit(X, Y, batch_size=8, epochs=3, validation_data=VAL, callbacks=[cb], verbose=0)
    run = tripwire.open_run(cb.out_dir)
    assert run.steps("eval") == [] and run.status == "stopped"
    assert cb.stop_reason == str(cb.stopped_by)


def test_the_docs_say_the_validation_after_a_stop_runs() -> None:
    text = " ".join((ROOT / "docs" / "keras.md").read_text(encoding="utf-8").split())
    assert "The epoch's validation still runs after the stop." in text
    for name in ("cb.stop_reason", "cb.history", "cb.trial_stopped"):
        assert name in text, name

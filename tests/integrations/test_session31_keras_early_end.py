"""Trial 31g F4, the Keras side: a trial that Keras's ``EarlyStopping`` ended was journaled only as
``completed``, though the callback knew why the fit ended (its run's stop reason says it). The
callback given ``trial=`` tells the trial (``Trial.note_early_end``), as the Lightning callback does:
the journaled reason reads ``completed: EarlyStopping(monitor='val_loss'): ...``; the status stays
``completed``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")

import tripwire  # noqa: E402
from tripwire.tune import Categorical, Continuous, RandomSearch, Tuner  # noqa: E402


def train(params: dict[str, Any], trial: Any) -> None:
    """Up to ``trial.budget`` (6) epochs; with ``early``, an EarlyStopping that ends the fit after
    its 2nd epoch (min_delta=10: no epoch improves enough)."""
    from tripwire.integrations.keras import TripwireCallback

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
    model.compile(keras.optimizers.SGD(params["lr"]),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    out = Path(os.environ["S31K_OUT"]) / f"trial-{trial.number}-{trial.attempt}"
    more = ([keras.callbacks.EarlyStopping(monitor="val_loss", patience=1, min_delta=10.0, mode="min")]
            if params["early"] else [])
    cb = TripwireCallback(out_dir=out, rules=["default"], trial=trial, trial_metric="val_loss")
    model.fit(x, y, batch_size=8, epochs=trial.budget, validation_data=(x, y), verbose=0, callbacks=[cb, *more])


def test_a_keras_trial_early_stopping_ended_says_so_in_its_reason(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("S31K_OUT", str(tmp_path))  # (the spawned workers inherit it)
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    result = Tuner(train, {"lr": Continuous(0.01, 0.02), "early": Categorical([True, False])}, objective="val_loss",
                   mode="min", strategy=RandomSearch(max_resource=6), max_jobs=4, seed=3,
                   journal=str(tmp_path / "j.db")).fit()
    assert all(t.status == "completed" for t in result.trials), [(t.status, t.error) for t in result.trials]
    early = [t for t in result.trials if t.params["early"]]
    full = [t for t in result.trials if not t.params["early"]]
    assert early and full, [t.params for t in result.trials]
    for t in early:
        assert t.resource == 2, (t.resource, t.reason)
        assert t.reason.startswith("completed: EarlyStopping(monitor='val_loss'): "), t.reason
        run = tripwire.open_run(tmp_path / f"trial-{t.number}-1")
        assert run.stop_reasons[0].endswith(t.reason[len("completed: "):].removesuffix("...")), (run.stop_reasons,
                                                                                                  t.reason)
    for t in full:
        assert t.resource == 6 and t.reason == "reached max_resource=6", t.reason

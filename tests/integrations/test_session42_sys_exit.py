"""Session-41 list (trial 41k F7): ``sys.exit(0)`` inside a Lightning or Keras fit (a callback that
ends a preempted job for its requeue) ended the run ``failed`` with the reason ``SystemExit: 0``,
where the hand loop's :meth:`Session.close` counts ``sys.exit()`` and ``sys.exit(0)`` as no failure.
It ends ``stopped`` now, its reason saying the program ended itself; another exit status still
fails the run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import tripwire

EXITED = "SystemExit: 0: the program ended itself (sys.exit) inside the framework's loop, before its end"


@pytest.mark.parametrize("code", [0, None, 3])
def test_lightning_fit_ended_by_sys_exit(tmp_path: Path, code: int | None) -> None:
    pytest.importorskip("lightning")
    import lightning as L
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_lightning import TinyNet
    from tripwire.integrations.lightning import TripwireCallback

    class Exits(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):  # type: ignore[no-untyped-def]
            if trainer.global_step == 4:
                sys.exit(code)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb, Exits()])
    with pytest.raises(SystemExit):
        trainer.fit(TinyNet(), torch.utils.data.DataLoader(data, batch_size=8))
    run = tripwire.open_run(tmp_path / "run")
    if code == 3:
        assert run.status == "failed" and run.stop_reasons == {0: "SystemExit: 3"}
    else:
        assert run.status == "stopped" and run.stop_reasons == {0: EXITED}
        assert cb.stop_reason == EXITED
    assert run.steps("train")[:4] == [0, 1, 2, 3]


@pytest.mark.parametrize("code", [0, 3])
def test_keras_fit_ended_by_sys_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")
    import numpy as np

    from tripwire.integrations.keras import TripwireCallback

    class Exits(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):  # type: ignore[no-untyped-def]
            if batch == 3:
                sys.exit(code)

    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    with pytest.raises(SystemExit):
        model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[cb, Exits()])
    run = tripwire.open_run(tmp_path / "run")
    if code == 3:
        assert run.status == "failed" and run.stop_reasons == {0: "SystemExit: 3"}
    else:
        assert run.status == "stopped" and run.stop_reasons == {0: EXITED}
    assert run.steps("train")[:4] == [0, 1, 2, 3]


@pytest.mark.parametrize("code", [0, 2])
@pytest.mark.parametrize("after_fit", [True, False])
def test_keras_evaluate_ended_by_sys_exit(tmp_path: Path, code: int, after_fit: bool) -> None:
    """Trial 42l F5: sys.exit in another callback's hook inside ``evaluate`` left the run open, to end
    ``failed`` at exit (a completed fit's run too); the evaluate's hooks are guarded as a fit's."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")
    import numpy as np

    from tripwire.integrations.keras import TripwireCallback

    class Exits(keras.callbacks.Callback):
        def on_test_batch_end(self, batch, logs=None):  # type: ignore[no-untyped-def]
            sys.exit(code)

    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = x.sum(1, keepdims=True)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    cb = TripwireCallback(out_dir=tmp_path / "run")
    if after_fit:
        model.fit(x, y, epochs=1, batch_size=8, verbose=0, callbacks=[cb])
    with pytest.raises(SystemExit):
        model.evaluate(x, y, verbose=0, callbacks=[cb, Exits()])
    run = tripwire.open_run(tmp_path / "run")
    if code:
        assert run.status == "failed" and run.stop_reasons == {0: "SystemExit: 2"}
    else:
        assert run.status == "stopped" and run.stop_reasons == {0: EXITED}


def test_keras_evaluate_a_later_callback_raising_in_on_test_begin(tmp_path: Path) -> None:
    """Trial 42m F1: the evaluate's callback list's on_test_begin is the call in progress when the
    guard is set: a callback after this one that raised there left the run open."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")
    import numpy as np

    from tripwire.integrations.keras import TripwireCallback

    class Raises(keras.callbacks.Callback):
        def on_test_begin(self, logs=None):  # type: ignore[no-untyped-def]
            raise RuntimeError("boom in on_test_begin")

    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    cb = TripwireCallback(out_dir=tmp_path / "run")
    model.fit(x, x[:, :1], epochs=1, batch_size=8, verbose=0, callbacks=[cb])
    with pytest.raises(RuntimeError, match="boom"):
        model.evaluate(x, x[:, :1], verbose=0, callbacks=[cb, Raises()])
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "failed" and run.stop_reasons == {0: "RuntimeError: boom in on_test_begin"}
    model.evaluate(x, x[:, :1], verbose=0, callbacks=[cb])  # (no wrapper left: an evaluate as any)

"""Session 43, the Keras callback:

- An ``evaluate`` (or ``predict``) given this callback inside the running fit, from another
  callback's ``on_epoch_end`` (a common way to score a held-out set each epoch), was taken for a
  fit that had ended where no hook saw it: the run was closed in the middle of the fit, whose next
  train batch raised ``StoreClosedError``. The fit now goes on; the nested evaluate's batches are
  the fit's ``eval`` steps.
- Trial 43d: a fit resumed at an epoch through a new callback began its global steps at 0 again:
  every record of the crashed fit read ``superseded`` (see the test).

Keras runs on the torch backend, set before keras is imported."""


from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "torch"

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    return x, (x.sum(axis=1, keepdims=True) > 0).astype("float32")


def _model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="binary_crossentropy")
    return model


@pytest.mark.parametrize("nested", ["evaluate", "predict", "both"])
def test_an_evaluate_inside_the_fit_leaves_the_fit_running(tmp_path: Path, nested: str) -> None:
    x, y = _data()
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    scores: list[float] = []

    class Scorer(keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if nested in ("predict", "both"):
                self.model.predict(x[:8], verbose=0, callbacks=[cb])
            if nested in ("evaluate", "both"):
                scores.append(self.model.evaluate(x[:32], y[:32], batch_size=16, verbose=0, callbacks=[cb]))

    model = _model()
    history = model.fit(x, y, batch_size=16, epochs=3, callbacks=[Scorer(), cb], verbose=0)
    assert len(history.history["loss"]) == 3
    assert cb.stopped_by is None
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    frame = run.dataframe()
    train_steps = sorted(set(frame[frame["mode"] == "train"]["step"]))
    assert train_steps == list(range(12))  # 3 epochs x 4 batches, every one saved
    eval_steps = sorted(set(frame[frame["mode"] == "eval"]["step"]))
    if nested == "predict":
        assert eval_steps == []
    else:
        assert len(scores) == 3
        assert len(eval_steps) >= 6 and eval_steps == list(range(len(eval_steps)))  # 2 batches an evaluate
    assert "test" not in set(frame["mode"])
    # an evaluate after the fit is the test pass it always was, on the same run
    model.evaluate(x, y, batch_size=16, verbose=0, callbacks=[cb])
    after = tripwire.open_run(tmp_path / "run")
    assert after.status == "complete"
    assert "test" in set(after.dataframe()["mode"])


class _Crash(keras.callbacks.Callback):
    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if epoch == 1:
            raise RuntimeError("preempted")


@pytest.mark.parametrize("restart_epoch", [2, 1])
def test_a_fresh_callback_resuming_at_an_epoch_supersedes_only_what_it_runs_again(tmp_path: Path,
                                                                                   restart_epoch: int) -> None:
    """Trial 43d: a fit resumed at an epoch through a new callback (``BackupAndRestore``,
    ``fit(initial_epoch=...)``) began its global steps at 0 again, so ``Run.dataframe`` marked every
    record of the crashed fit ``superseded`` and ``tripwire inspect`` said the resume went back over
    them. A resume where the crash stopped now goes back over none; one from an earlier epoch over
    the records from that epoch on."""
    x, y = _data()
    out = tmp_path / "run"
    model = _model()
    with pytest.raises(RuntimeError, match="preempted"):
        model.fit(x, y, batch_size=16, epochs=4, validation_data=(x[:32], y[:32]), verbose=0,
                  callbacks=[TripwireCallback(out_dir=out, save_interval=1), _Crash()])
    crashed = tripwire.open_run(out).dataframe()
    assert sorted(set(crashed[crashed["mode"] == "train"]["step"])) == list(range(8))
    model.fit(x, y, batch_size=16, epochs=4, initial_epoch=restart_epoch, validation_data=(x[:32], y[:32]),
              verbose=0, callbacks=[TripwireCallback(out_dir=out, save_interval=1)])
    frame = tripwire.open_run(out).dataframe()
    live = frame[~frame["superseded"]]
    assert sorted(set(live[live["mode"] == "train"]["step"])) == list(range(16))
    gone = frame[frame["superseded"]]
    if restart_epoch == 2:
        assert len(gone) == 0
    else:  # (epoch 1's batches, steps 4-7, and its validation were run again)
        assert sorted(set(gone[gone["mode"] == "train"]["step"])) == [4, 5, 6, 7]
        assert set(gone["mode"]) == {"train", "eval"}


def test_a_new_callback_whose_fit_trains_no_epoch_leaves_a_crashed_run_as_it_was(tmp_path: Path) -> None:
    """Trial 43d: a resume script run again once its checkpoint said the training was done
    (``fit(initial_epoch=4, epochs=4)``) through a new callback turned the crashed run from ``failed``
    into ``complete``, its reason gone."""
    x, y = _data()
    out = tmp_path / "run"
    model = _model()
    with pytest.raises(RuntimeError, match="preempted"):
        model.fit(x, y, batch_size=16, epochs=4, verbose=0, callbacks=[TripwireCallback(out_dir=out), _Crash()])
    before = tripwire.open_run(out)
    assert before.status == "failed"
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    cb = TripwireCallback(out_dir=out)
    model.fit(x, y, batch_size=16, epochs=4, initial_epoch=4, verbose=0, callbacks=[cb])
    after = tripwire.open_run(out)
    assert after.status == "failed" and after.stop_reasons == before.stop_reasons
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files
    assert cb.findings == [] and cb.stopped_by is None


def test_an_evaluate_inside_a_train_batch_end_keeps_that_train_steps_record(tmp_path: Path) -> None:
    """Trial 43f: an evaluate given this callback from another callback's ``on_train_batch_end``
    listed before it ran while the train step was still open: the evaluate's first step ended it, and
    the step's loss and weights were lost. The train step is now taken out for the evaluate's steps
    and put back."""
    x, y = _data()
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, include_collections=["weights"])

    class Mid(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if batch == 1:
                self.model.evaluate(x[:32], y[:32], batch_size=16, verbose=0, callbacks=[cb])

    model = _model()
    model.fit(x, y, batch_size=16, epochs=2, callbacks=[Mid(), cb], verbose=0)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    frame = run.dataframe()
    train = frame[frame["mode"] == "train"]
    kernel = next(n for n in run.tensor_names(collection="weights") if n.endswith("kernel"))
    for name in ("loss", kernel):
        assert sorted(set(train[train["tensor"] == name]["step"])) == list(range(8)), name
    assert not frame["superseded"].any()
    assert len(set(frame[frame["mode"] == "eval"]["step"])) >= 4


@pytest.mark.parametrize("restart_epoch", [2, 1])
def test_a_resume_after_evaluates_inside_the_fit_writes_no_eval_step_twice(tmp_path: Path,
                                                                          restart_epoch: int) -> None:
    """Trial 43f: with an evaluate inside the fit at each epoch's end, a fresh callback resuming at an
    epoch counted its eval steps from the validations alone and wrote over the nested evaluates'
    steps (two live values of one eval step and tensor). It now counts on from the eval steps written
    before the point it resumes at."""
    x, y = _data()
    out = tmp_path / "run"

    def scorer(cb: TripwireCallback) -> keras.callbacks.Callback:
        class Scorer(keras.callbacks.Callback):
            def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
                self.model.evaluate(x[:32], y[:32], batch_size=16, verbose=0, callbacks=[cb])
        return Scorer()

    model = _model()
    first = TripwireCallback(out_dir=out, save_interval=1)
    with pytest.raises(RuntimeError, match="preempted"):
        model.fit(x, y, batch_size=16, epochs=4, validation_data=(x[:16], y[:16]), verbose=0,
                  callbacks=[scorer(first), first, _Crash()])
    second = TripwireCallback(out_dir=out, save_interval=1)
    model.fit(x, y, batch_size=16, epochs=4, initial_epoch=restart_epoch, validation_data=(x[:16], y[:16]),
              verbose=0, callbacks=[scorer(second), second])
    frame = tripwire.open_run(out).dataframe()
    live = frame[~frame["superseded"] & (frame["mode"] == "eval")]
    assert not live.duplicated(["step", "tensor", "reduction"]).any(), live[live.duplicated(["step", "tensor"],
                                                                                          keep=False)]
    assert len(live[live["tensor"] == "val_loss"]) == 4  # (one validation an epoch)


def test_an_evaluate_that_raises_inside_a_train_batch_end_keeps_that_train_step(tmp_path: Path) -> None:
    """Trial 43k: the train step an evaluate inside the fit took out was put back only at that
    evaluate's ``on_test_end``, which Keras does not call when it raises: the step was lost, and its
    loss and weights written as eval step 0."""
    x, y = _data()
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, include_collections=["weights"])

    class Mid(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if batch == 1:
                with pytest.raises(ValueError):
                    self.model.evaluate(x[:32], y[:32, :0], batch_size=16, verbose=0, callbacks=[cb])

    _model().fit(x, y, batch_size=16, epochs=2, callbacks=[Mid(), cb], verbose=0)
    run = tripwire.open_run(tmp_path / "run")
    frame = run.dataframe()
    kernel = next(n for n in run.tensor_names(collection="weights") if n.endswith("kernel"))
    train = frame[frame["mode"] == "train"]
    for name in ("loss", kernel):
        assert sorted(set(train[train["tensor"] == name]["step"])) == list(range(8)), name
    assert frame[frame["mode"] == "eval"].empty or kernel not in set(frame[frame["mode"] == "eval"]["tensor"])


def test_an_evaluate_at_an_epochs_begin_before_the_callback_keeps_a_resume_one_training(tmp_path: Path) -> None:
    """Trial 43k: an evaluate given the callback from another callback's ``on_epoch_begin`` listed
    before it reached it before its own ``on_epoch_begin``, where a fit resumed at an epoch through a
    new callback is found: the resume was taken for a new training, every record of the crashed fit
    read superseded, and the steps were numbered wrong. (The evaluate also left its own params on the
    callback, whose steps a batch the fit then read.)"""
    x, y = _data()
    out = tmp_path / "run"

    def callbacks(cb: TripwireCallback, crash: bool) -> list:
        class Scorer(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
                self.model.evaluate(x[:32], y[:32], batch_size=16, verbose=0, callbacks=[cb])
        return [Scorer(), cb] + ([_Crash()] if crash else [])

    model = _model()
    with pytest.raises(RuntimeError, match="preempted"):
        model.fit(x, y, batch_size=16, epochs=4, verbose=0, callbacks=callbacks(TripwireCallback(out_dir=out,
                                                                                               save_interval=1), True))
    model.fit(x, y, batch_size=16, epochs=4, initial_epoch=2, verbose=0,
              callbacks=callbacks(TripwireCallback(out_dir=out, save_interval=1), False))
    frame = tripwire.open_run(out).dataframe()
    assert not frame["superseded"].any()
    assert sorted(set(frame[frame["mode"] == "train"]["step"])) == list(range(16))


def test_an_evaluate_in_another_callbacks_on_train_begin_is_left_alone(tmp_path: Path) -> None:
    """Trial 43n: an evaluate given this callback from another callback's ``on_train_begin`` listed
    before it (the fit not begun here yet) was taken for an evaluate of its own: it ended the run, and
    a resumed fit's first batch raised ``StoreClosedError``; on a plain fit its params were the
    callback's for the fit (a planned length of 2 steps for 8). It is not captured now, and the fit's
    params are the fit's."""
    x, y = _data()
    out = tmp_path / "run"

    def callbacks(cb: TripwireCallback) -> list:
        class Ev(keras.callbacks.Callback):
            def on_train_begin(self, logs: dict | None = None) -> None:
                self.model.evaluate(x[:32], y[:32], batch_size=16, verbose=0, callbacks=[cb])
        return [Ev(), cb]

    model = _model()
    first = TripwireCallback(out_dir=out, save_interval=1)
    model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=callbacks(first))
    assert first.params["epochs"] == 2 and first.params["steps"] == 4
    assert first.session.history.planned_steps == 8
    second = TripwireCallback(out_dir=out, save_interval=1)
    model.fit(x, y, batch_size=16, epochs=4, initial_epoch=2, verbose=0, callbacks=callbacks(second))
    run = tripwire.open_run(out)
    assert run.status == "complete"
    frame = run.dataframe()
    assert sorted(set(frame[frame["mode"] == "train"]["step"])) == list(range(16))
    assert "test" not in set(frame["mode"]) and not frame["superseded"].any()

"""Trials 27g, 27h, 27f, 27d, session side.

- 27g F6, 27h F3, 27f F2: a rule input read in a mode the run never recorded (``overfit``'s
  ``validation='val_loss'`` when a rule stopped training before the first evaluation) got "matches no
  loss or metric of this run; did you mean 'loss'?": followed, ``overfit`` compares the training loss
  with itself. It now says that no evaluation was recorded, without a rename; a "did you mean" names
  only a tensor captured in the mode the parameter reads.
- 27g F5: a training that raised left a ``failed`` run with no reason: the end marker's ``stop_reason``
  names the exception (``Run.stop_reasons``, ``tripwire inspect``).
- 27h F9: "tripwire: stopping training: ..." was logged by the Lightning and Keras callbacks only: the
  Session logs it for a hand-written loop (and MXNet, XGBoost), once per stop.
- 27d: the table of the modes an integration offers a kind in lives with what it provides.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import Session
from tripwire._cli import main

STOP_ON_NAN = {"name": "exploding_tensor", "actions": ["log", "stop_training"]}


def _warnings(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


def _train_until_stop(session: Session, nan_at: int, steps: int = 10) -> int:
    """A hand-written loop: a loss each train step, NaN at ``nan_at``; one validation after ``steps``
    train steps, never reached where a rule stops training first. Returns the last train step run."""
    step = 0
    for step in range(steps):
        loss = math.nan if step == nan_at else 1.0 / (step + 1)
        if session.step("train", step, {"loss": (loss, "losses")}).stop:
            return step
    session.step("eval", 0, {"val_loss": (1.0, "losses")}, summary=True)
    return step


# ---------------------------------------------------------------- finding 1: no evaluation recorded
def test_a_stop_before_the_first_evaluation_says_no_evaluation_ran_not_did_you_mean(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    session = Session(out_dir=str(out), save_interval=1, rules=[STOP_ON_NAN, "overfit"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        assert _train_until_stop(session, nan_at=3) == 3
        session.close()
    [said] = _warnings(caplog, "validation='val_loss'")
    assert said == ("tripwire: rule 'overfit': validation='val_loss' read nothing: no evaluation (mode eval) was "
                    "recorded in this run (it recorded mode train only), so the rule had nothing to read under any "
                    "name: the training stopped before its first evaluation, ran none, or saved none")
    assert "did you mean" not in said
    # tripwire watch over the run says the same, and no rename either
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        main(["watch", str(out), "--once"])
    assert ("tripwire watch: rule 'overfit': validation='val_loss' read nothing: no evaluation (mode eval) was "
            "recorded in this run") in err.getvalue()
    assert "did you mean 'loss'" not in err.getvalue()


def test_a_validation_name_is_never_pointed_at_a_name_of_another_mode(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # (27f: evals=[(dtrain, 'train'), (dtrain, 'validation')] records validation-logloss in mode train;
    # followed, "did you mean 'validation-logloss'?" makes overfit read the training data twice)
    session = Session(out_dir=str(tmp_path / "cross"), save_interval=1,
                      rules=[{"name": "overfit", "validation": "valid-logloss"}])
    for step in range(4):
        session.step("train", step, {"loss": (1.0 / (step + 1), "losses"),
                                     "validation-logloss": (1.0 / (step + 1), "metrics")})
    session.step("eval", 0, {"accuracy": (0.5, "metrics")}, summary=True)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session.close()
    [said] = _warnings(caplog, "validation='valid-logloss'")
    assert "matches no loss or metric of this run" in said and "did you mean" not in said, said

    # (the fallback to every captured name when none looked held-out: 'did you mean 'loss'?', the
    # training loss, for a validation name; in mode eval the run holds 'accuracy' only)
    session = Session(out_dir=str(tmp_path / "fallback"), save_interval=1, rules=["overfit"])
    for step in range(4):
        session.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    session.step("eval", 0, {"accuracy": (0.5, "metrics")}, summary=True)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session.close()
    [said] = _warnings(caplog, "validation='val_loss'")
    assert "matches no loss or metric of this run" in said and "did you mean 'loss'" not in said, said


def test_a_typo_still_gets_its_did_you_mean_among_the_names_of_its_mode(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    session = Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=[{"name": "overfit", "validation": "val_los"}])
    for step in range(4):
        session.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
        session.step("eval", step, {"val_loss": (1.0, "losses")}, summary=True)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        session.close()
    [said] = _warnings(caplog, "validation='val_los'")
    assert "matches no loss or metric of this run; did you mean 'val_loss'?" in said, said


def test_an_input_of_a_mode_not_recorded_yet_is_not_named_early_but_at_close(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """name_unread_inputs (an integration's call after the first epoch or round) does not say that no
    evaluation was recorded: one may come later. Close says it, once."""
    session = Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=["overfit"])
    for step in range(3):
        session.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        assert session.name_unread_inputs(session.rules) == []
        assert _warnings(caplog, "validation=") == []
        session.close()
    assert len(_warnings(caplog, "validation='val_loss' read nothing: no evaluation (mode eval)")) == 1
    # one said another way (skip) is taken as said: not again at close
    caplog.clear()
    other = Session(out_dir=str(tmp_path / "other"), save_interval=1, rules=["overfit"])
    for step in range(3):
        other.step("train", step, {"loss": (1.0 / (step + 1), "losses")})
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        other.name_unread_inputs(other.rules, skip=lambda m: m.startswith("rule 'overfit': validation="))
        other.close()
    assert _warnings(caplog, "validation=") == []


# ------------------------------------------------------------ finding 2: why a failed run failed
def test_a_training_that_raises_inside_with_session_leaves_its_reason_in_the_end_marker(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(IndexError, match="Target 10 is out of bounds"):
        with Session(out_dir=str(out), save_interval=1, rules=["exploding_tensor"]) as session:
            session.step("train", 0, {"loss": (2.3, "losses")})
            raise IndexError("Target 10 is out of bounds.\nmore detail on a second line")
    marker = json.loads((out / "workers" / "worker-00000.end.json").read_text())
    assert marker["status"] == "failed"
    assert marker["stop_reason"] == "IndexError: Target 10 is out of bounds. ..."
    run = tripwire.open_run(out)
    assert run.status == "failed" and run.stop_reasons == {0: "IndexError: Target 10 is out of bounds. ..."}
    assert session.stop_reason is None  # (the session's own stays the tuner's / integration's)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        main(["inspect", str(out)])
    assert "worker 0 failed: IndexError: Target 10 is out of bounds. ..." in printed.getvalue()


def test_close_failed_in_an_except_block_names_the_exception_being_handled(tmp_path: Path) -> None:
    class DataError(Exception):
        pass

    session = Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=["exploding_tensor"])
    session.step("train", 0, {"loss": (2.3, "losses")})
    try:
        raise DataError("shard 7 is missing")
    except DataError:
        session.close("failed")  # (as an integration's on_exception does)
    reason = tripwire.open_run(tmp_path / "run").stop_reasons[0]
    assert reason.endswith("DataError: shard 7 is missing") and reason.startswith(__name__ + ".")

    # a failed close with no exception at hand writes no reason; a complete run has none either
    quiet = Session(out_dir=str(tmp_path / "quiet"), save_interval=1, rules=["exploding_tensor"])
    quiet.step("train", 0, {"loss": (2.3, "losses")})
    quiet.close("failed")
    done = Session(out_dir=str(tmp_path / "done"), save_interval=1, rules=["exploding_tensor"])
    done.step("train", 0, {"loss": (2.3, "losses")})
    done.close()
    assert tripwire.open_run(tmp_path / "quiet").stop_reasons == {}
    assert tripwire.open_run(tmp_path / "done").stop_reasons == {}


def test_a_rule_stop_keeps_its_reason_and_a_failed_training_stays_failed_with_it_after_reopen(tmp_path: Path) -> None:
    out = tmp_path / "stopped"
    with Session(out_dir=str(out), save_interval=1, rules=[STOP_ON_NAN]) as session:
        _train_until_stop(session, nan_at=2)
    assert tripwire.open_run(out).stop_reasons[0].startswith("[critical] exploding_tensor at step 2 (train)")

    out = tmp_path / "failed"
    session = Session(out_dir=str(out), save_interval=1, rules=["exploding_tensor"])
    with pytest.raises(KeyError):
        with session:
            session.step("train", 0, {"loss": (2.3, "losses")})
            raise KeyError("labels")
    session.reopen()  # (an evaluation after the failed fit: the run stays failed, with its reason)
    session.step("eval", 0, {"val_loss": (1.0, "losses")}, summary=True)
    session.close()
    run = tripwire.open_run(out)
    assert run.status == "failed" and run.stop_reasons == {0: "KeyError: 'labels'"}


def test_a_run_left_open_by_an_uncaught_exception_names_it_when_closed_at_exit(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "run"
    code = ("import tripwire\n"
            f"s = tripwire.Session(out_dir={str(out)!r}, save_interval=1, rules=['exploding_tensor'])\n"
            "s.step('train', 0, {'loss': (2.3, 'losses')})\n"
            "raise MemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "MemoryError" in done.stderr
    assert tripwire.open_run(out).stop_reasons == {0: "MemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}


def test_a_lightning_fit_that_raises_names_the_exception(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    L = pytest.importorskip("lightning")
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            if self.global_step == 2:
                raise ValueError("labels out of range at batch 2")
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x).squeeze(-1), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    gen = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(32, 4, generator=gen), torch.randn(32, generator=gen)), batch_size=4)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1)
    trainer = L.Trainer(max_epochs=1, callbacks=[cb], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu", devices=1)
    with pytest.raises(ValueError, match="labels out of range"):
        trainer.fit(Net(), data)
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "failed" and run.stop_reasons == {0: "ValueError: labels out of range at batch 2"}


def test_an_exception_with_no_message_is_named_by_its_type(tmp_path: Path) -> None:
    from tripwire._session import exception_summary

    assert exception_summary(AssertionError()) == "AssertionError"
    assert exception_summary(ValueError("x" * 600)) == "ValueError: " + "x" * 500 + " ..."


# -------------------------------------------------------------- finding 3: the stop line, once
def _stop_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("tripwire: stopping training")]


def test_a_hand_written_loop_says_the_stop_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    session = Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=[STOP_ON_NAN])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        step = 0
        for step in range(8):  # (a loop that does not break at once: later decisions still say stop)
            loss = math.nan if step >= 3 else 1.0
            session.step("train", step, {"loss": (loss, "losses")})
        session.close()
    assert _stop_lines(caplog) == ["tripwire: stopping training: rule 'exploding_tensor' at step 3 (train)"]
    assert [r.levelno for r in caplog.records if r.getMessage().startswith("tripwire: stopping")] == [logging.WARNING]
    # (after the finding's own line, the log action's)
    messages = [r.getMessage() for r in caplog.records]
    first = next(i for i, m in enumerate(messages) if "exploding_tensor at step 3" in m)
    assert messages.index(_stop_lines(caplog)[0]) > first


def test_a_stop_per_training_and_none_for_record_or_raise(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    session = Session(out_dir=str(tmp_path / "run"), save_interval=1, rules=[STOP_ON_NAN])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        _train_until_stop(session, nan_at=1)
        session.new_training()
        for step in range(10, 13):
            session.step("train", step, {"loss": (math.nan if step == 12 else 1.0, "losses")})
        session.close()
    assert _stop_lines(caplog) == ["tripwire: stopping training: rule 'exploding_tensor' at step 1 (train)",
                                   "tripwire: stopping training: rule 'exploding_tensor' at step 12 (train)"]
    caplog.clear()
    recorded = Session(out_dir=str(tmp_path / "record"), save_interval=1,
                       rules=[{"name": "exploding_tensor", "actions": ["log", "record"]}])
    raising = Session(out_dir=str(tmp_path / "raise"), save_interval=1,
                      rules=[{"name": "exploding_tensor", "actions": ["raise"]}])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        _train_until_stop(recorded, nan_at=1)
        recorded.close()
        with pytest.raises(tripwire.TrainingStopped):
            with raising:
                _train_until_stop(raising, nan_at=1)
    assert _stop_lines(caplog) == []


def test_the_stop_line_is_said_by_the_session_unless_the_integration_says_it() -> None:
    from tripwire.integrations._hooks import SAYS_STOP

    assert SAYS_STOP == {"keras", "lightning"}


def test_lightning_still_says_the_stop_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    torch = pytest.importorskip("torch")
    L = pytest.importorskip("lightning")
    from torch.utils.data import DataLoader, TensorDataset

    from tripwire.integrations.lightning import TripwireCallback

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x).squeeze(-1), y)
            return loss * float("nan") if self.global_step >= 2 else loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    gen = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(32, 4, generator=gen), torch.randn(32, generator=gen)), batch_size=4)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[STOP_ON_NAN])
    trainer = L.Trainer(max_epochs=2, callbacks=[cb], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu", devices=1)
    with caplog.at_level(logging.INFO, logger="tripwire"):
        trainer.fit(Net(), data)
    assert cb.stopped_by is not None
    assert _stop_lines(caplog) == [f"tripwire: stopping training: rule 'exploding_tensor' at step "
                                   f"{cb.stopped_by.step} (train)"]


def test_keras_still_says_the_stop_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    keras = pytest.importorskip("keras")
    import numpy as np

    from tripwire.integrations.keras import TripwireCallback

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("float32")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=1e38), loss="mse")  # (overflows float32)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[STOP_ON_NAN])
    with caplog.at_level(logging.INFO, logger="tripwire"):
        model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[cb])
    assert cb.stopped_by is not None
    assert _stop_lines(caplog) == [f"tripwire: stopping training: rule 'exploding_tensor' at step "
                                   f"{cb.stopped_by.step} (train)"]


# --------------------------------------------- finding 4 (27d): the offered-in table's new home
def test_the_modes_an_integration_offers_a_kind_in_live_with_what_it_provides() -> None:
    import tripwire._session as session_module
    from tripwire.integrations._provides import OFFERED_IN, PROVIDES

    assert OFFERED_IN["lightning"]["predictions"] == {"eval", "test", "predict"}
    assert all(kind in PROVIDES[fw] for fw, kinds in OFFERED_IN.items() for kind in kinds)
    assert not hasattr(session_module, "_OFFERED_IN") and session_module.OFFERED_IN is OFFERED_IN

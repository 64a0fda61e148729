"""Trial 32a F1 and F7: a stored ``Run``'s direct reads.

F1: ``run.value`` / ``run.latest`` returned None for a misspelled tensor name, even in a complete
run, where ``series`` and ``tensor`` raise naming the tensor with a "did you mean". Rules keep their
None for a tensor not captured yet: in a session (a ``History``) and in ``tripwire watch`` (a view
over the Run, reading through ``History.latest`` / ``History.value``).

F7: the read-only ``Run`` inherited ``History.add_step`` / ``add_steps`` as public API; on a Run they
now refuse, naming why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import History, TensorNotFoundError, Watcher


def _train(s: tripwire.Session, steps: int = 6) -> None:
    for step in range(steps):
        s.step("train", step, {"loss": (np.array(1.0 / (step + 1)), "losses")})
    s.step("eval", 0, {"val_loss": (np.array(0.5), "losses")}, summary=True)


def _stored(tmp_path: Path, rules: list[Any] | None = None) -> Path:
    out = tmp_path / "run"
    with tripwire.Session(out_dir=str(out), rules=rules or [], save_interval=1) as s:
        _train(s)
    return out


# ------------------------------------------------------------------------------------- F1: reader
def test_value_and_latest_of_a_misspelled_tensor_raise_as_series_does(tmp_path: Path) -> None:
    run = tripwire.open_run(_stored(tmp_path))
    assert run.status == "complete"
    said = r"^tensor 'losss' not in this run; did you mean 'loss'\?; available: loss, val_loss"
    with pytest.raises(TensorNotFoundError, match=said):
        run.series("losss")
    with pytest.raises(TensorNotFoundError, match=said):
        run.value("losss", "raw", 3)
    with pytest.raises(TensorNotFoundError, match=said):
        run.latest("losss")
    with pytest.raises(TensorNotFoundError, match=said):
        run.latest("losss", "raw", "train", 0)  # (mode and worker given: the same)
    # a tensor the run holds reads as before: a value, None at a step without one
    assert run.value("loss", "raw", 3) == pytest.approx(0.25)
    assert run.value("loss", "raw", 99) is None
    assert run.latest("loss") == (5, pytest.approx(1 / 6))
    assert run.latest("val_loss") == (0, 0.5)  # (its own mode)
    assert run.latest("val_loss", "raw", "train") is None  # (a mode it has no value in: None, as before)


def test_a_running_run_says_the_tensor_may_come_and_how_to_see_it(tmp_path: Path) -> None:
    out = tmp_path / "live"
    s = tripwire.Session(out_dir=str(out), rules=[], save_interval=1)
    try:
        for step in range(3):
            s.step("train", step, {"loss": (np.array(1.0), "losses")})
        s.flush()
        run = tripwire.open_run(out)
        assert run.status == "running"
        with pytest.raises(TensorNotFoundError, match=r"^tensor 'val_loss' not in this run; .*the run is still being "
                                                      r"written \(status 'running'\).*run\.refresh\(\)"):
            run.latest("val_loss")
    finally:
        s.close()


def _reads_missing(seen: list[Any]) -> tripwire.FunctionRule:
    def reads(history: Any, step: int, mode: str) -> None:
        # a validation metric before its first validation, and a name the run never holds
        seen.append((history.latest("val_loss", "raw", "eval"), history.value("no_such", "raw", step, mode),
                     history.latest("no_such")))
        return None

    return tripwire.FunctionRule(reads, name="reads_missing",
                                 requirements=[tripwire.Requirement("losses", ("raw",))])


def test_rules_in_a_session_still_read_none_for_a_tensor_not_captured(tmp_path: Path) -> None:
    seen: list[Any] = []
    _stored(tmp_path, [_reads_missing(seen)])
    assert seen and all(got == (None, None, None) for got in seen)


def test_rules_in_tripwire_watch_still_read_none_for_a_tensor_not_captured(tmp_path: Path) -> None:
    out = _stored(tmp_path)
    seen: list[Any] = []
    found = Watcher(out, {"rules": [_reads_missing(seen)]}, echo=lambda f: None).watch(once=True)
    assert found == []
    assert seen and all(got[1:] == (None, None) for got in seen)


# ------------------------------------------------------------------------------------ F7: writers
@pytest.mark.parametrize("name", ["add_step", "add_steps"])
def test_a_run_refuses_the_history_writers(tmp_path: Path, name: str) -> None:
    run = tripwire.open_run(_stored(tmp_path))
    before = run.steps()
    args: tuple[Any, ...] = (("train", 99, 0, 0.0, [("loss", ("raw",))], np.ones(1)) if name == "add_step" else
                             ("train", [99], 0, [0.0], [("loss", ("raw",))], np.ones((1, 1))))
    with pytest.raises(TypeError, match=rf"^Run\.{name}: a Run is read-only \(a stored run, read from "
                                        rf"{str(run.path)!r}\); accepted: .*tripwire\.History"):
        getattr(run, name)(*args)
    assert run.steps() == before  # (nothing ingested)
    # the reader still reads what a refresh finds; a History still takes them
    assert run.refresh() == 0
    h = History()
    h.add_step(*args) if name == "add_step" else h.add_steps(*args)
    assert h.steps() == [99]


def test_a_run_reads_steps_written_out_of_order_through_its_private_ingest(tmp_path: Path) -> None:
    # add_steps falls back to one step at a time for steps that go back (a resume): on a Run that path
    # must not reach the refusing public add_step
    out = tmp_path / "resumed"
    with tripwire.Session(out_dir=str(out), rules=[], save_interval=1) as s:
        for step in (0, 1, 2, 3):
            s.step("train", step, {"loss": (np.array(float(step)), "losses")})
    with tripwire.Session(out_dir=str(out), rules=[], save_interval=1) as s:
        for step in (2, 3, 4):
            s.step("train", step, {"loss": (np.array(10.0 + step), "losses")})
    run = tripwire.open_run(out)
    assert run.steps() == [0, 1, 2, 3, 4]
    assert run.value("loss", "raw", 3) == 13.0

"""Trial 38k (left open until session 41): ``session.close()`` in the ``finally`` block of a hand loop
that Ctrl-C interrupted ended the run ``complete``. ``close()`` without a status, called while an
exception is handled or propagates, ends it ``failed`` with that exception as the reason; an
iterator's end, ``sys.exit(0)`` and the ``raise`` action's stop do not."""

from __future__ import annotations

from pathlib import Path

import pytest

import tripwire


def _loop(out: Path, error: BaseException | None, where: str) -> tripwire.Run:
    s = tripwire.Session(out_dir=out, rules=[])
    try:
        try:
            for step in range(6):
                s.step("train", step, {"loss": (1.0, "losses")})
                if step == 3 and error is not None:
                    raise error
        finally:
            if where == "finally":
                s.close()
    except BaseException:
        if where == "except":
            s.close()
    return tripwire.open_run(out)


@pytest.mark.parametrize("where", ["finally", "except"])
@pytest.mark.parametrize(("error", "reason"), [(KeyboardInterrupt(), "KeyboardInterrupt"),
                                               (RuntimeError("CUDA out of memory"), "RuntimeError: CUDA out of memory"),
                                               (SystemExit(2), "SystemExit: 2")])
def test_close_while_an_exception_is_at_hand_ends_failed(tmp_path: Path, error: BaseException, reason: str,
                                                          where: str) -> None:
    run = _loop(tmp_path / "run", error, where)
    assert run.status == "failed" and run.stop_reasons == {0: reason}
    assert run.steps("train") == [0, 1, 2, 3]


@pytest.mark.parametrize("error", [None, StopIteration(), SystemExit(0), SystemExit(None)])
def test_a_normal_end_stays_complete(tmp_path: Path, error: BaseException | None) -> None:
    run = _loop(tmp_path / "run", error, "finally")
    assert run.status == "complete" and run.stop_reasons == {}


def test_an_explicit_status_is_kept(tmp_path: Path) -> None:
    s = tripwire.Session(out_dir=tmp_path / "run", rules=[])
    s.step("train", 0, {"loss": (1.0, "losses")})
    try:
        raise ValueError("my own early exit")
    except ValueError:
        s.close("complete")
    assert tripwire.open_run(tmp_path / "run").status == "complete"

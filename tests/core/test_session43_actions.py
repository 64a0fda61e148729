"""Trial 43g: a logging handler of the user's that raises failed the ``log`` action, and the guard's
own report of that failure (``logger.exception``) went to the same handler and raised again, from
the guard: the ``stop_training`` action after ``log`` never ran, and the fit ended ``failed`` with
the handler's error. The report is now made so that its own failure is dropped, and the finding's
other actions are taken."""

from __future__ import annotations

import logging

import numpy as np

import tripwire


class _Broken(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        raise RuntimeError("handler broke")


def test_a_logging_handler_that_raises_does_not_keep_the_stop_from_being_taken() -> None:
    broken = _Broken()
    log = logging.getLogger("tripwire")
    log.addHandler(broken)
    try:
        session = tripwire.Session(write=False, save_interval=1, rules=["exploding_tensor"],
                                   actions=["log", "stop_training"], collections=["losses"])
        session.step("train", 0, {"loss": (np.float32(1.0), "losses")})
        decision = session.step("train", 1, {"loss": (np.float32(np.nan), "losses")})
    finally:
        log.removeHandler(broken)
    assert decision.stop
    assert session.stopped_by is not None and session.stopped_by.rule == "exploding_tensor"
    session.close()

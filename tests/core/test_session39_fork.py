"""Session 39 (trial 39a): a hand-written loop that goes on with its session in a forked child of
the process that opened it. The run is written by the parent's writer thread and its large steps
reduced by the parent's background thread, neither of which runs in the child: the child's steps
were lost without a word, and one the parent was reducing in the background never ended (the child
hung at its next step). The child's ``begin_step``/``end_step`` now refuse, naming both processes;
the parent's session goes on."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import tripwire
from tripwire import Session, StoreClosedError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")


def test_a_forked_child_is_told_to_make_its_own_session(tmp_path: Path) -> None:
    session = Session(out_dir=tmp_path / "run", save_interval=1, collections=["weights", "losses"])
    for step in range(3):
        plan = session.begin_step("train", step)
        plan.add("w", np.full(10, float(step)), "weights")
        session.end_step()
    plan = session.begin_step("train", 3)  # (forked with a step open: the child's end_step is refused too)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for call in (lambda: session.end_step(), lambda: session.begin_step("train", 4)):
                try:
                    call()
                except StoreClosedError as exc:
                    text = str(exc)
                    code = 0 if (f"opened by process {os.getppid()}" in text and f"({os.getpid()}) is a fork" in text
                                 and "make a new Session in this process" in text) else 2
                    if code:
                        break
                else:
                    code = 3
                    break
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    plan.add("w", np.full(10, 3.0), "weights")  # the parent goes on
    session.end_step()
    session.close()
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and run.steps() == [0, 1, 2, 3]
    assert isinstance(StoreClosedError("x"), RuntimeError)

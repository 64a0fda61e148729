"""Trial 26k, finding 3: after a kill -9 and a resume from an earlier checkpoint, the run held the same
finding twice (same rule, worker, mode, step and message), built-in and custom rules alike, and a
``notify`` sent it again, where ``tripwire watch`` refuses to make again a finding the run holds.
The resumed session does not write (nor log, nor send) a finding the run holds from the killed
attempt: it says once that it found it again, and still acts on ``stop_training``/``raise`` (the
killed attempt's stop never took effect)."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest

import tripwire
from tripwire import Finding, Requirement, Rule, Session, TrainingStopped


class Jump(Rule):
    """A custom stateful rule: fires where the loss is not finite or above 3x its running mean."""

    name = "jump"

    def __init__(self, **common: Any) -> None:
        super().__init__(**common)
        self.n, self.mean = 0, 0.0

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", reductions=("raw",))]

    def check(self, history: Any, step: int, mode: str) -> Finding | None:
        got = history.latest("loss", "raw", mode)
        if got is None or got[0] != step:
            return None
        value = got[1]
        out = None
        if self.n and (not math.isfinite(value) or value > 3 * self.mean):
            out = self.finding(step, mode, f"loss {value} > 3 x its running mean {self.mean:.3g}")
        if math.isfinite(value):
            self.n += 1
            self.mean += (value - self.mean) / self.n
        return out

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "n": self.n, "mean": self.mean}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.n, self.mean = int(state["n"]), float(state["mean"])


def _loss(step: int) -> float:
    return float("nan") if step == 7 else 1.0 / (1 + step)


def _config(actions: list[Any]) -> dict[str, Any]:
    return {"save": {"interval": 1}, "rules": ["exploding_tensor", Jump()], "actions": actions}


def _killed_after_the_nan(out: Path, actions: list[Any]) -> dict:
    """Steps 0..9 with a NaN loss at step 7 (both rules find it), a checkpoint at step 4, then killed."""
    s = Session(_config(actions), out_dir=str(out))
    state: dict = {}
    for step in range(10):
        s.step("train", step, {"loss": (_loss(step), "losses")})
        if step == 4:
            state = s.state_dict()
    s.flush()
    s.writer.abandon()  # (kill -9: no close, no end marker)
    assert sorted((f.rule, f.step) for f in s.findings) == [("exploding_tensor", 7), ("jump", 7)]
    return state


def test_a_resumed_session_does_not_write_again_a_finding_the_killed_attempt_wrote(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    sent: list[Finding] = []
    state = _killed_after_the_nan(out, ["log", "record", sent.append])
    assert len(sent) == 2
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tripwire"):
        resumed = Session(_config(["log", "record", sent.append]), out_dir=str(out))
        resumed.load_state_dict(state)
        for step in range(5, 12):
            resumed.step("train", step, {"loss": (_loss(step), "losses")})
        resumed.close()
    run = tripwire.open_run(out)
    assert sorted((f.rule, f.step) for f in run.findings) == [("exploding_tensor", 7), ("jump", 7)]  # once each
    assert len(sent) == 2  # (the action of the killed attempt is not fired again)
    assert sorted((f.rule, f.step) for f in resumed.findings) == [("exploding_tensor", 7), ("jump", 7)]
    again = [r.getMessage() for r in caplog.records if "found again" in r.getMessage()]
    assert len(again) == 2, again
    assert all(m.startswith("tripwire: found again after the resume: [") for m in again)
    assert all("the run holds this finding from the training that ran this step before the checkpoint was "
               "resumed: it is not recorded, logged or sent again" in m for m in again)
    logged = [r for r in caplog.records if r.getMessage().startswith("tripwire: [critical] exploding_tensor at step 7")]
    assert logged == []  # (the log action's line: said as found again instead)


def test_a_finding_found_again_still_stops_training(tmp_path: Path) -> None:
    out = tmp_path / "run"
    state = _killed_after_the_nan(out, ["log", "record", "stop_training"])
    resumed = Session(_config(["log", "record", "stop_training"]), out_dir=str(out))
    resumed.load_state_dict(state)
    stopped_at = None
    for step in range(5, 12):
        if resumed.step("train", step, {"loss": (_loss(step), "losses")}).stop:
            stopped_at = step
            break
    resumed.close()
    assert stopped_at == 7 and resumed.stopped_by is not None and resumed.stopped_by.step == 7
    run = tripwire.open_run(out)
    assert run.status == "stopped" and len(run.findings) == 2


def test_a_finding_found_again_still_raises(tmp_path: Path) -> None:
    out = tmp_path / "run"
    state = _killed_after_the_nan(out, ["record"])  # (killed before its raise took effect)
    resumed = Session(_config(["record", "raise"]), out_dir=str(out))
    resumed.load_state_dict(state)
    with pytest.raises(TrainingStopped, match="exploding_tensor|jump"):
        with resumed:
            for step in range(5, 12):
                resumed.step("train", step, {"loss": (_loss(step), "losses")})
    run = tripwire.open_run(out)
    assert run.status == "stopped" and len(run.findings) == 2


def test_a_notify_is_not_sent_again_for_a_finding_found_again(tmp_path: Path, sns_queue) -> None:
    url, topic, read = sns_queue
    notify = {"name": "notify", "topic_arn": topic, "endpoint_url": url, "timeout": 2}
    out = tmp_path / "run"
    state = _killed_after_the_nan(out, ["record", notify])
    assert len(read()) == 2
    resumed = Session(_config(["record", notify]), out_dir=str(out))
    resumed.load_state_dict(state)
    for step in range(5, 12):
        resumed.step("train", step, {"loss": (_loss(step), "losses")})
    resumed.close()
    assert read() == []


def test_a_new_finding_after_the_resume_is_written_as_always(tmp_path: Path) -> None:
    # the resumed training takes another path (no NaN at step 7 this time, one at step 9): written
    out = tmp_path / "run"
    state = _killed_after_the_nan(out, ["record"])
    resumed = Session(_config(["record"]), out_dir=str(out))
    resumed.load_state_dict(state)
    for step in range(5, 12):
        resumed.step("train", step, {"loss": (float("nan") if step == 9 else 1.0 / (1 + step), "losses")})
    resumed.close()
    found = sorted((f.rule, f.step) for f in tripwire.open_run(out).findings)
    assert found == [("exploding_tensor", 7), ("exploding_tensor", 9), ("jump", 7), ("jump", 9)]

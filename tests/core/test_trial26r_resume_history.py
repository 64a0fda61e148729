"""Trial 26i, finding 1: after a second crash and resume, the rules' history (read back from the run
up to the checkpoint's step) still held the first crash's superseded steps next to the re-run ones
(steps 0..234 then 200..299), so the rules judged steps twice and ``loss_not_decreasing`` bisected
unsorted steps (numpy "Mean of empty slice" RuntimeWarnings, in training and in ``tripwire watch``).
A step written by several attempts keeps the records of the last attempt that wrote it: the history
read back ascends, and watch's replay judges no superseded copy either."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import Requirement, Rule, Session
from tripwire._watch import Watcher

CONFIG: dict[str, Any] = {"save": {"interval": 10}, "rules": ["default"], "actions": ["record"]}


def _loss(step: int, attempt: int) -> float:
    """A noisy falling loss; each attempt's values differ (to tell whose a step holds)."""
    rng = np.random.default_rng(step)
    return float(2.0 / (1 + step / 50) + 0.05 * rng.random()) + attempt * 1e-6


def _run(out: Path, steps: range, attempt: int, state: dict | None, checkpoint: int | None,
         crash: bool) -> tuple[Session, dict | None]:
    s = Session(CONFIG, out_dir=str(out))
    s.set_planned_steps(600)
    if state is not None:
        s.load_state_dict(state)
    saved = None
    for step in steps:
        plan = s.begin_step("train", step)
        plan.add("loss", np.float32(_loss(step, attempt)), "losses")
        if plan.wants("gradients"):
            plan.add("gradients/w", np.full(4, 1.0 / (1 + step)), "gradients")
        s.end_step()
        if checkpoint is not None and step + 1 == checkpoint:
            saved = s.state_dict()
    if crash:
        s.flush()
        s.writer.abandon()  # (killed: no end marker; its shard lock is gone)
    return s, saved


def _crashed_twice(out: Path) -> dict:
    """Attempt 0 runs 0..234 (checkpoint at 200) and dies; attempt 1 resumes at 200, runs 200..345
    (checkpoint at 300) and dies. Returns the checkpoint of step 300."""
    _, at200 = _run(out, range(0, 235), 0, None, 200, crash=True)
    _, at300 = _run(out, range(200, 346), 1, at200, 300, crash=True)
    assert at300 is not None
    return at300


def test_live_records_keeps_for_each_step_the_attempt_that_wrote_it_last() -> None:
    from tripwire._history import live_records

    steps = np.array([0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 4, 5])
    assert live_records(steps).tolist() == [1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1]
    # a step written twice in a row (an epoch summary at the last batch's step) is no resume: both kept
    assert live_records(np.array([0, 1, 1, 2, 2, 3])).all()
    # attempts told apart (global steps going back): one that died right after its record at the
    # step the next one resumed at loses it to that one
    assert live_records(np.array([0, 1, 2, 2, 3]), np.array([0, 0, 0, 1, 1])).tolist() == [1, 1, 0, 1, 1]
    assert live_records(np.array([], dtype=np.int64)).tolist() == []


def test_the_history_read_back_after_a_second_resume_ascends_with_the_last_attempts_values(tmp_path: Path) -> None:
    out = tmp_path / "run"
    at300 = _crashed_twice(out)
    resumed = Session(CONFIG, out_dir=str(out))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (numpy's "Mean of empty slice" leaked to stderr)
        resumed.load_state_dict(at300)
        steps, values = resumed.history.series("loss")
        assert steps.tolist() == list(range(300))  # not 0..234 then 200..299
        assert values[150] == pytest.approx(_loss(150, 0)) and values[250] == pytest.approx(_loss(250, 1), abs=1e-7)
        gsteps = resumed.history.series("gradients/w", "l2")[0]
        assert gsteps.tolist() == list(range(0, 300, 10))
        assert resumed.history.steps_between("train", 190, 210) == list(range(191, 211))
        for step in range(300, 420):  # the rules judge the whole training, once a step
            resumed.step("train", step, {"loss": (np.float32(_loss(step, 2)), "losses")})
        resumed.close()
    assert resumed.history.series("loss")[0].tolist() == list(range(420))
    run = tripwire.open_run(out)  # the run keeps every record (a reader sees both of a step written twice)
    assert run.series("loss")[0].tolist() == [*range(235), *range(200, 346), *range(300, 420)]


class _Probe(Rule):
    """Remembers, at each evaluation, whether the loss series it reads ascends and what it holds."""

    name = "probe"

    def __init__(self, **common: Any) -> None:
        super().__init__(**common)
        self.seen: list[tuple[int, np.ndarray, np.ndarray]] = []

    def requirements(self) -> list[Requirement]:
        return [Requirement("losses", reductions=("raw",))]

    def check(self, history: Any, step: int, mode: str) -> None:
        steps, values = history.series("loss", "raw", mode)
        self.seen.append((step, np.array(steps), np.array(values)))
        return None


def test_watch_judges_no_superseded_copy_of_a_step(tmp_path: Path) -> None:
    out = tmp_path / "run"
    at300 = _crashed_twice(out)
    last, _ = _run(out, range(300, 420), 2, at300, None, crash=False)
    last.close()
    probe = _Probe()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        watcher = Watcher(out, {"rules": ["default", probe], "actions": ["record"]}, echo=lambda f: None)
        watcher.watch(once=True)
    assert probe.seen
    for step, steps, values in probe.seen:
        assert bool(np.all(np.diff(steps) > 0)), (step, steps[np.flatnonzero(np.diff(steps) <= 0)[:3]])
        assert steps[-1] == step  # (nothing of a later step: the run as of then)
    at = {}
    for step, steps, values in probe.seen:
        at.setdefault(step, []).append((steps, values))
    steps, values = at[230][0]  # attempt 0 at step 230 (before it died): its own steps, as it judged them
    assert steps.tolist() == list(range(231)) and values[220] == pytest.approx(_loss(220, 0), abs=1e-7)
    assert len(at[250]) == 1  # attempt 1 at step 250: attempt 0's 200..234 are gone, its own are there
    steps, values = at[250][0]
    assert steps.tolist() == list(range(251))
    assert values[220] == pytest.approx(_loss(220, 1), abs=1e-7) and values[199] == pytest.approx(_loss(199, 0))
    steps, values = at[320][-1]  # attempt 2 at step 320: attempt 1's 300..345 are gone
    assert steps.tolist() == list(range(321)) and values[310] == pytest.approx(_loss(310, 2), abs=1e-7)
    assert values[250] == pytest.approx(_loss(250, 1), abs=1e-7)

"""Trial 25b: a trial submitted to the Dask executor waits for a free thread; the journal has it
``pending`` until its task begins, then ``running`` from that moment (it showed ``running`` with
its submission as its start, and a stopped job's rerun counted an attempt that never ran); trial
25h: so does the ``fit(progress=)`` snapshot."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tripwire.tune import Continuous, RandomSearch, Tuner
from tripwire.tune._journal import Journal

distributed = pytest.importorskip("distributed")

FIRST_S = 2.0


def test_a_trial_submitted_with_no_start_is_pending_until_it_begins(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db", create=True) as j:
        j.start_trial(0, {"x": 1}, 0, None)
        assert [(t["status"], t["started"]) for t in j.trials()] == [("pending", None)]
        j.begin_trial(0, 123.0)
        assert [(t["status"], t["started"]) for t in j.trials()] == [("running", 123.0)]
        j.begin_trial(0, 456.0)  # (running already: unchanged)
        assert j.trials()[0]["started"] == 123.0
        # a trial that waited and never began is not counted as run by a dead tuner's requeue
        j.start_trial(1, {"x": 2}, 0, None)
        assert j.requeue_running() == [0]
        attempts = {t["number"]: (t["status"], t["attempt"] or 1) for t in j.trials()}
        assert attempts == {0: ("pending", 2), 1: ("pending", 1)}


@pytest.fixture()
def one_thread() -> Iterator[Any]:
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as c:
        yield c


def train_first_slow(params: dict[str, Any], trial: Any) -> float:
    if trial.number == 0:
        time.sleep(FIRST_S)
    trial.report(step=1, value=params["x"])
    return params["x"]


def test_a_dask_trial_waiting_for_a_thread_starts_when_its_task_begins(one_thread: Any, tmp_path: Path) -> None:
    # two trials at once on a cluster of one thread: trial 1 waits for trial 0's thread
    result = Tuner(train_first_slow, space={"x": Continuous(0.1, 1.0)}, objective="v", mode="max",
                   strategy=RandomSearch(1), max_jobs=2, max_parallel_jobs=2, seed=0,
                   journal=str(tmp_path / "w.db"), executor=one_thread).fit()
    first, second = sorted(result.trials, key=lambda t: t.number)
    assert first.status == second.status == "completed"
    assert first.elapsed is not None and first.elapsed >= FIRST_S
    # its start is when its task began (after trial 0's thread was free), not its submission
    assert second.started is not None and first.ended is not None
    assert second.started >= first.ended - 0.5, (second.started, first.started, first.ended)
    assert second.elapsed is not None and second.elapsed < FIRST_S / 2, second.elapsed


# trial 25h: the fit(progress=) snapshot (and the tripwire tune live view built from it) counted such a
# trial running for the whole job
def test_a_dask_trial_waiting_for_a_thread_is_pending_in_the_progress_snapshot(one_thread: Any,
                                                                              tmp_path: Path) -> None:
    # two trials at once on a cluster of one thread: trial 1 waits for trial 0's thread
    snaps: list[tuple[int, int, int]] = []

    def progress(s: dict[str, Any]) -> None:
        snaps.append((s["running"], s["pending"], s["completed"]))

    result = Tuner(train_first_slow, space={"x": Continuous(0.1, 1.0)}, objective="v", mode="max",
                   strategy=RandomSearch(1), max_jobs=2, max_parallel_jobs=2, seed=0,
                   journal=str(tmp_path / "p.db"), executor=one_thread).fit(progress=progress)
    assert sorted(t.status for t in result.trials) == ["completed", "completed"]
    # one thread: never two trials running at once
    assert max(r for r, _, _ in snaps) <= 1, snaps
    # while trial 0 ran, trial 1 waited for its thread: pending, not running
    assert (1, 1, 0) in snaps, snaps
    assert snaps[-1] == (0, 0, 2), snaps

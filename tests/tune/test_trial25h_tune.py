"""Trial 25h: a trial submitted to the Dask executor that waits for a free thread is ``pending`` in
the ``fit(progress=)`` snapshot (and the ``tripwire tune`` live view built from it) until its task
begins, as the journal has it; the snapshot counted it ``running`` for the whole job."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tripwire.tune import Continuous, RandomSearch, Tuner

distributed = pytest.importorskip("distributed")

FIRST_S = 2.0


@pytest.fixture()
def one_thread() -> Iterator[Any]:
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as c:
        yield c


def train_first_slow(params: dict[str, Any], trial: Any) -> float:
    if trial.number == 0:
        time.sleep(FIRST_S)
    trial.report(step=1, value=params["x"])
    return params["x"]


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

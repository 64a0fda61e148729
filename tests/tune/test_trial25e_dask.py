"""Trial 25e finding 4, the Dask executor: when a job on a cluster the user passed ends while a
timed-out trial still holds its thread, ``distributed`` logged ``Batched Comm Closed ...`` with a
``CommClosedError`` traceback, which looked like a crash: the executor cancelled the task, and the
scheduler's answer to the cancel (``cancelled-keys``) met the client the executor had just closed.
The client's close releases the task: no cancel is sent, and no traceback is logged; the documented
WARNING stays."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tripwire.tune import Categorical, RandomSearch, Tuner

distributed = pytest.importorskip("distributed")


@pytest.fixture()
def cluster() -> Iterator[Any]:
    # the repro's cluster: two worker processes of one thread each, passed by the user
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as c:
        yield c


def train_hang_or_ok(params: dict[str, Any], trial: Any) -> float:
    """A ``hang`` trial is stuck (a data loader, say) between its first and second report, past the
    trial's time limit; an ``ok`` trial reports 4 quick steps."""
    v = 0.0
    for epoch in range(1, trial.max_resource + 1):
        if params["kind"] == "hang" and epoch == 2:
            time.sleep(6)
        v = float(epoch)
        if trial.report(step=epoch, value=v):
            break
        time.sleep(0.05)
    return v


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_job_that_ends_with_a_timed_out_task_running_logs_no_comm_closed_traceback(
        cluster: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    seen = _Records()
    noisy = logging.getLogger("distributed")  # (distributed's loggers need not propagate to the root)
    old_level = noisy.level
    noisy.addHandler(seen)
    noisy.setLevel(logging.INFO)
    try:
        with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
            result = Tuner(train_hang_or_ok, space={"kind": Categorical(["hang", "ok"])}, objective="v",
                           mode="max", strategy=RandomSearch(max_resource=4), max_jobs=5, max_parallel_jobs=2,
                           seed=3, journal=str(tmp_path / "d.db"), executor=cluster, trial_timeout=2.0).fit()
        time.sleep(1.0)  # the scheduler's answer to a cancel came some milliseconds after fit() returned
    finally:
        noisy.removeHandler(seen)
        noisy.setLevel(old_level)
    timed_out = [t for t in result.trials if t.reason == "failed (timeout)"]
    assert timed_out and all(t.params["kind"] == "hang" for t in timed_out)
    warnings = [r.getMessage() for r in caplog.records if "ran past its time limit on Dask worker" in r.getMessage()]
    assert len(warnings) == len(timed_out)           # the documented WARNING stays
    noise = [f"{r.name}: {r.getMessage()}" for r in seen.records
             if r.exc_info or "CommClosedError" in r.getMessage() or "Comm Closed" in r.getMessage()]
    # the cause: a cancel sent just before the close (the scheduler logs each one it gets)
    cancels = [r.getMessage() for r in seen.records if "requests to cancel" in r.getMessage()]
    assert (noise, cancels) == ([], [])

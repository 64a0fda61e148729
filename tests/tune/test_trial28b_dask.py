"""Trial 28b, the Dask executor.

F1: when every thread of the tuner's own ``LocalCluster`` held a trial hung past ``trial_timeout``, the
job hung silently, and each WARNING said "the job goes on with the other threads". The tuner's own
cluster now has the timed-out trial's worker process killed and replaced, as the local executor does;
on a cluster of the user's, the WARNING says when no thread is left and that the job waits.

F4: a ``train`` result that does not pickle logged ``distributed``'s ``Failed to serialize`` ERROR
tracebacks, from tripwire's own probe of the result (which keeps such a value as its str).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tripwire.tune import Categorical, Continuous, RandomSearch, Tuner, TuningResult

distributed = pytest.importorskip("distributed")

from tripwire.tune import _dask  # noqa: E402  (needs distributed)
from tripwire.tune._executor import TrialSpec  # noqa: E402


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture()
def distributed_records() -> Iterator[_Records]:
    """Every record of ``distributed``'s loggers (they need not propagate to the root)."""
    seen = _Records()
    log = logging.getLogger("distributed")
    old = log.level
    log.addHandler(seen)
    log.setLevel(logging.DEBUG)
    try:
        yield seen
    finally:
        log.removeHandler(seen)
        log.setLevel(old)


# ---- F4 ---------------------------------------------------------------------------------------
def train_returns_a_generator(params: dict[str, Any], trial: Any) -> dict[str, Any]:
    """Returns its objective with a value that does not pickle (a data loader's generator)."""
    return {"v": float(params["x"]), "loader": (i for i in range(3))}


def _errors(records: _Records) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in records.records if r.levelno >= logging.ERROR or r.exc_info]


def test_the_probe_of_a_result_that_does_not_pickle_logs_no_error(distributed_records: _Records) -> None:
    spec = TrialSpec(0, {"x": 0.25}, 0, 1, 3, 1)
    out, _elapsed, _rule = _dask._run_trial(train_returns_a_generator, spec, "t28b")  # (outside a worker)
    assert out["v"] == 0.25 and out["loader"].startswith("<generator object")   # kept as its str
    assert _errors(distributed_records) == []
    # another thread's records on that logger are not dropped: only the probing thread's, while it probes
    logging.getLogger(_dask.PICKLE_LOGGER).error("another thread's error")
    assert [r.getMessage() for r in distributed_records.records] == ["another thread's error"]
    assert logging.getLogger(_dask.PICKLE_LOGGER).filters == []


def test_a_dask_trial_returning_a_generator_logs_no_distributed_error(tmp_path: Path,
                                                                        distributed_records: _Records) -> None:
    # the repro: 2 trials, 4 'distributed.protocol.pickle - ERROR - Failed to serialize' tracebacks
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as c:
        result = Tuner(train_returns_a_generator, space={"x": Continuous(0.0, 1.0)}, objective="v", mode="max",
                       strategy=RandomSearch(max_resource=3), max_jobs=2, max_parallel_jobs=2, seed=0,
                       journal=str(tmp_path / "dp.db"), executor=c).fit()
    assert [t.status for t in result.trials] == ["completed", "completed"]
    assert all(str(t.metrics["loader"]).startswith("<generator object") for t in result.trials)
    assert _errors(distributed_records) == []
    assert not [r for r in distributed_records.records if r.name == _dask.PICKLE_LOGGER]


def train_returns_a_lock(params: dict[str, Any], trial: Any) -> Any:
    return threading.Lock()


def test_a_dask_trial_returning_a_lock_fails_with_one_line_and_no_distributed_error(
        distributed_records: _Records) -> None:
    spec = TrialSpec(0, {"x": 0.5}, 0, 1, 3, 1)
    raised = _dask._run_trial(train_returns_a_lock, spec, "t28b")
    assert isinstance(raised, _dask._Raised)
    assert raised.error.startswith("train returned a _thread.lock") or "does not pickle" in raised.error, raised.error
    assert _errors(distributed_records) == []

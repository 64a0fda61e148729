"""Trial 30e, finding 6: with ``executor="dask"``, a job whose last trial ran past ``trial_timeout``
logged ``distributed.event - ERROR`` with a ``CancelledError`` traceback (and the worker a
``CancelledError`` WARNING): the tuner killed the trial's worker process, the scheduler reran its task
on another worker, and the job closed the cluster while that rerun waited for its answer (refused).
The tuner now answers that rerun before it closes the cluster."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator

import pytest
import trial30e_trainables as t30

from tripwire.tune import Continuous, RandomSearch, Tuner

distributed = pytest.importorskip("distributed")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture()
def distributed_records() -> Iterator[_Records]:
    """Every record of ``distributed``'s loggers in this process (the LocalCluster's scheduler runs here)."""
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


def test_a_job_ending_on_a_timed_out_trial_logs_no_distributed_error(
        tmp_path: Path, distributed_records: _Records, capfd: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        result = Tuner(t30.train_last_hangs, {"x": Continuous(0.1, 1.0)}, objective="v", mode="max",
                       strategy=RandomSearch(max_resource=3), max_jobs=t30.HANG_NUMBER + 1, max_parallel_jobs=2,
                       seed=0, trial_timeout=3, executor="dask", journal=str(tmp_path / "d.db")).fit()
    hung = result.trials[t30.HANG_NUMBER]
    assert (hung.status, hung.reason) == ("failed", "failed (timeout)"), hung.error
    assert "of the job's own LocalCluster was killed and replaced" in (hung.error or "")
    assert all(t.status == "completed" for t in result.trials if t.number != t30.HANG_NUMBER)
    assert any("ran past its time limit" in r.getMessage() for r in caplog.records)  # (the timeout happened)
    errors = [f"{r.name}: {r.getMessage()}" for r in distributed_records.records
              if r.levelno >= logging.ERROR or (r.exc_info and r.levelno >= logging.WARNING)]
    assert errors == []
    err = capfd.readouterr().err
    assert "CancelledError" not in err and "distributed.event - ERROR" not in err, err[-3000:]

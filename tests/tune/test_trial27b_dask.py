"""Trial 27b, finding 5: at the end of a job on the LocalCluster the tuner made (``executor="dask"``),
``distributed.nanny`` logged ``Worker process still alive after 4.0 seconds, killing`` for each
worker that took over 4 s to exit (one that imported torch and Lightning, on a loaded host), after a
4 s wait: its nannies now let each worker process exit when it is done. A cluster the user passed
is left as it was (its workers stay up)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
import trial27b_trainables as t27

from tripwire.tune import Continuous, RandomSearch, Tuner

distributed = pytest.importorskip("distributed")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_the_tuners_own_cluster_lets_its_slow_workers_exit_without_a_kill(tmp_path: Path) -> None:
    seen = _Records()
    noisy = logging.getLogger("distributed")  # (distributed's loggers need not propagate to the root)
    noisy.addHandler(seen)
    try:
        t0 = time.monotonic()
        result = Tuner(t27.train_slow_exit, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(1), max_jobs=2,
                       max_parallel_jobs=2, seed=0, journal=str(tmp_path / "j.db"), executor="dask").fit()
        took = time.monotonic() - t0
    finally:
        noisy.removeHandler(seen)
    assert [t.status for t in result.trials] == ["completed", "completed"]
    said = [r.getMessage() for r in seen.records if r.levelno >= logging.WARNING]
    assert not [m for m in said if "still alive" in m], said
    assert took >= t27.SLOW_EXIT_S          # (each worker took its time to exit: it was not killed)


def test_a_cluster_the_user_passed_keeps_its_workers(tmp_path: Path) -> None:
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        Tuner(t27.train_linger, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(1), max_jobs=1, seed=0,
              journal=str(tmp_path / "j.db"), executor=cluster).fit()
        assert len(cluster.workers) == 1
        with distributed.Client(cluster, set_as_default=False) as client:
            assert client.submit(sum, [1, 2]).result(timeout=30) == 3

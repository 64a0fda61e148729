"""Trial 25b, the Dask executor: a trial that hangs past ``trial_timeout`` keeps its Dask thread (a
thread cannot be interrupted), and the job finishes on the other threads: the timed-out task's future
is held, not cancelled, so the scheduler places no trial behind it."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tripwire.tune import Continuous, RandomSearch, Tuner, TuningResult

distributed = pytest.importorskip("distributed")

HANG_S = 20.0  # longer than the rest of the job; the worker process is killed when the cluster closes


@pytest.fixture()
def cluster() -> Iterator[Any]:
    # two worker processes, one thread each (as executor="dask" starts them)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as c:
        yield c


def train_one_hangs(params: dict[str, Any], trial: Any) -> float:
    """Trial 1 reports once, then hangs (without reporting) past the trial timeout; the others report
    3 steps, 0.75 s in all: when trial 1 times out (2 s), the other worker is busy."""
    if trial.number == 1:
        trial.report(step=1, value=0.0)
        time.sleep(HANG_S)
        return 0.0
    v = 0.0
    for step in range(1, 4):
        time.sleep(0.25)
        v = params["x"] * step
        if trial.report(step=step, value=v):
            break
    return v


def test_a_hung_dask_trial_does_not_stall_the_job(cluster: Any, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    # trial 25b: the timed-out task's future was cancelled, so the scheduler took its thread for free
    # and gave the next trial to that worker, where it never began and never timed out: fit() never
    # returned although the other worker was idle
    out: dict[str, Any] = {}

    def fit() -> None:
        try:
            out["result"] = Tuner(train_one_hangs, space={"x": Continuous(0.1, 1.0)}, objective="v", mode="max",
                                  strategy=RandomSearch(3), max_jobs=6, max_parallel_jobs=2, seed=0,
                                  journal=str(tmp_path / "h.db"), executor=cluster, trial_timeout=2.0).fit()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            out["error"] = exc

    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        t = threading.Thread(target=fit, daemon=True)
        t0 = time.monotonic()
        t.start()
        t.join(timeout=HANG_S - 2)
        took = time.monotonic() - t0
    assert not t.is_alive(), f"fit() has not returned after {took:.0f} s (a trial waits behind the hung one)"
    assert "error" not in out, out["error"]
    result: TuningResult = out["result"]
    by_number = {tr.number: tr for tr in result.trials}
    assert sorted(by_number) == list(range(6))
    hung = by_number[1]
    assert (hung.status, hung.reason) == ("failed", "failed (timeout)"), hung.error
    assert "ran past trial_timeout=2 s" in hung.error and "keeps its thread on tcp://" in hung.error
    others = [tr for n, tr in by_number.items() if n != 1]
    assert all(tr.status in ("completed", "stopped") for tr in others), [(tr.number, tr.status, tr.error)
                                                                         for tr in others]
    warning = [r.getMessage() for r in caplog.records if "ran past its time limit on Dask worker" in r.getMessage()]
    assert len(warning) == 1 and warning[0].startswith("tripwire.tune: trial 1 ran past its time limit on Dask "
                                                       "worker tcp://"), warning
    assert "no trial is placed behind it" in warning[0]

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
    out, _elapsed, _rule, _early = _dask._run_trial(train_returns_a_generator, spec, "t28b")  # (outside a worker)
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


# ---- F1 ---------------------------------------------------------------------------------------
HANG_ENV = "TRIPWIRE_TEST28B_HANG_S"


def train_first_two_hang(params: dict[str, Any], trial: Any) -> float:
    """Trials 0 and 1 hang without reporting (``$TRIPWIRE_TEST28B_HANG_S`` seconds, 600 by default: for
    good, as far as the job goes); the others report 3 quick steps."""
    import os

    if trial.number < 2:
        time.sleep(float(os.environ.get(HANG_ENV, "600")))
    v = 0.0
    for step in range(1, trial.max_resource + 1):
        v = float(params["x"]) * step
        if trial.report(step=step, value=v):
            break
    return v


def _fit_in_thread(limit_s: float, **kw: Any) -> tuple[TuningResult | None, BaseException | None, float]:
    out: dict[str, Any] = {}

    def fit() -> None:
        try:
            out["result"] = Tuner(train_first_two_hang, space={"x": Continuous(0.1, 1.0)}, objective="v", mode="max",
                                  strategy=RandomSearch(max_resource=3), max_jobs=6, max_parallel_jobs=2, seed=0,
                                  trial_timeout=1.5, **kw).fit()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            out["error"] = exc

    t = threading.Thread(target=fit, daemon=True)
    t0 = time.monotonic()
    t.start()
    t.join(timeout=limit_s)
    took = time.monotonic() - t0
    assert not t.is_alive(), f"fit() has not returned after {took:.0f} s: the job waits for its hung trials"
    return out.get("result"), out.get("error"), took


def test_hung_trials_holding_every_thread_of_the_tuners_own_cluster_are_killed_and_the_job_completes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, distributed_records: _Records) -> None:
    # the repro: both threads of executor="dask"'s LocalCluster held a hung trial; no trial started again,
    # and the job hung until killed (the local executor kills and replaces a timed-out worker)
    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        result, error, _took = _fit_in_thread(60, journal=str(tmp_path / "hd.db"), executor="dask")
    assert error is None, error
    assert result is not None
    by_number = {t.number: t for t in result.trials}
    assert sorted(by_number) == list(range(6))
    for n in (0, 1):
        hung = by_number[n]
        assert (hung.status, hung.reason) == ("failed", "failed (timeout)"), hung.error
        assert f"trial {n} ran past trial_timeout=1.5 s; its Dask worker tcp://" in hung.error
        assert "of the job's own LocalCluster was killed and replaced" in hung.error
    assert all(by_number[n].status == "completed" for n in range(2, 6)), [(t.number, t.status, t.error)
                                                                          for t in result.trials]
    said = [r.getMessage() for r in caplog.records if "ran past its time limit" in r.getMessage()]
    assert len(said) == 2 and all("LocalCluster was killed (its nanny starts a new one)" in m for m in said), said
    assert not any("goes on with the other" in m for m in said)
    # the scheduler (in this process) logs no error: a cancel of the killed worker's task met its closed client
    # (a worker killed on purpose leaves INFO lines with their traceback, "Batched Comm Closed": not errors)
    assert [f"{r.name}: {r.getMessage()}" for r in distributed_records.records if r.levelno >= logging.ERROR] == []


def test_on_a_users_cluster_the_warning_says_when_no_thread_is_left_and_no_worker_is_killed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HANG_ENV, "6")  # (the worker processes inherit it: they start after this)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as c:
        with distributed.Client(c, set_as_default=False) as client:
            pids = sorted(client.run(lambda: __import__("os").getpid()).values())
            with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
                result, error, took = _fit_in_thread(50, journal=str(tmp_path / "hu.db"), executor=c)
            assert sorted(client.run(lambda: __import__("os").getpid()).values()) == pids  # not tripwire's to kill
    assert error is None, error
    assert result is not None and [t.status for t in result.trials][:2] == ["failed", "failed"]
    assert all(t.status == "completed" for t in result.trials[2:])
    assert took >= 6  # the job waited for a hung trial to return
    said = [r.getMessage() for r in caplog.records if "ran past its time limit" in r.getMessage()]
    assert len(said) == 2, said
    first, second = sorted(said, key=lambda m: "No thread" in m)
    assert "the job goes on with the other 1 thread(s)" in first
    assert "No thread of the Dask cluster at 'tcp://" in second
    assert "is left: trial(s) 0, 1 ran past their time limit and hold every thread, so no trial starts and " \
           "the job waits until one of them returns" in second
    assert "goes on" not in second

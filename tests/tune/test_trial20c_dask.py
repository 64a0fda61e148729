"""Trial 20c, the Dask executor: a trial whose worker dies fails once and the job goes on (its code is
not run again by the scheduler's retries), a stale or duplicate report never crashes the tuner, a
cancelled trial knows it was cancelled, tracebacks are formatted where the trial raised, and a
cluster that cannot import the job's module is said in one line."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tripwire.tune import Categorical, GridSearch, RandomSearch, Tuner
from tripwire.tune._errors import TuneError
from tripwire.tune._journal import Journal
from tripwire.tune._trial import Trial, tuner_stop_reason

distributed = pytest.importorskip("distributed")
from tripwire.tune import _dask  # noqa: E402  (needs distributed)

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    # worker processes (a trial's os._exit kills one; its nanny starts another), one thread each
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as c:
        yield c


def _log(line: str, path: str | None = None) -> None:
    with open(path or os.environ["TRIPWIRE_TEST_LOG"], "a") as fh:
        fh.write(line + "\n")


def train_dies(params: dict[str, Any], trial: Any) -> float:
    """``kind``: ``ok``; ``after2`` (its worker dies after 2 reports); ``at_once`` (dies before its
    first report). Each execution writes a line to ``params["log"]`` (a worker its nanny restarts
    has the environment of the cluster's start)."""
    _log(f"start {trial.number} {params['kind']} {os.getpid()}", params["log"])
    if params["kind"] == "at_once":
        time.sleep(0.2)
        os._exit(3)
    for step in range(1, 4):
        trial.report(step=step, value=float(step))
        if params["kind"] == "after2" and step == 2:
            os._exit(3)  # as the OOM killer would
    return 3.0


def test_a_dead_worker_fails_its_trial_once_and_the_job_goes_on(cluster: Any, tmp_path: Path) -> None:
    # trial 20c: the scheduler reran the dead worker's task on the other worker; the rerun reported
    # step 1 again and the tuner died on sqlite3.IntegrityError; a trial dying before its first report
    # was run up to 4 times, each one killing a worker
    log = tmp_path / "runs.log"
    result = Tuner(train_dies, space={"kind": Categorical(["after2", "at_once", "ok"]), "log": Categorical([str(log)])},
                   objective="v", mode="max", strategy=GridSearch(max_resource=3), max_parallel_jobs=2, seed=0,
                   journal=str(tmp_path / "d.db"), executor=cluster, fail_fast=False).fit()
    by_kind = {t.params["kind"]: t for t in result.trials}
    assert by_kind["ok"].status == "completed" and by_kind["ok"].value == 3.0, by_kind["ok"].error
    for kind in ("after2", "at_once"):
        t = by_kind[kind]
        assert (t.status, t.reason) == ("failed", "failed (worker_died)"), t.error
        assert f"died while running trial {t.number}" in t.error and "which tripwire refused" in t.error
    starts = [ln.split()[2] for ln in log.read_text().splitlines() if ln.startswith("start")]
    assert sorted(starts) == ["after2", "at_once", "ok"], starts  # every trial's code ran once
    with Journal(tmp_path / "d.db") as j:
        assert [r[1] for r in j.reports(by_kind["after2"].number)] == [1, 2]
        assert j.reports(by_kind["at_once"].number) == []


def test_a_duplicate_report_is_dropped_by_the_journal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with Journal(tmp_path / "j.db", create=True) as j:
        j.init_job({"objective": "v"})
        j.start_trial(0, {"x": 1}, 0, time.time())
        assert j.add_report(0, 1, 0.5, False, "", [(0, 0, 0.5)], 0) is True
        assert j.add_report(0, 2, 0.6, False, "", [], 0) is True
        with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
            assert j.add_report(0, 1, 0.9, False, "", [(0, 0, 0.9)], 0) is False
            assert j.add_report(0, 2, 0.9, False, "", [], 0) is False
        assert [(r[1], r[2]) for r in j.reports(0)] == [(1, 0.5), (2, 0.6)]
        assert j.rung_records() == [(0, 0, 0, 0.5)]
    assert "dropped a report of trial 0 at step=1 (value 0.9): the trial has a report at step=2 already" in caplog.text


def test_a_stale_executions_report_never_reaches_the_tuner(caplog: pytest.LogCaptureFixture) -> None:
    ex = _dask.DaskExecutor("tcp://127.0.0.1:1")
    answers: list[tuple[Any, ...]] = []
    ex._answer = lambda *a: answers.append(a)  # type: ignore[method-assign]
    ex._futures = {0: object()}
    ex._execs = {0: _dask._Execution("first", "tcp://w:1", 11, last_step=2, last_decision=(False, "passed"))}
    events: list[Any] = []
    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        ex._on_report(0, 1, 1.0, "other", events)  # an execution the tuner did not let run
        ex._on_report(0, 2, 2.0, "first", events)  # a step it has
    assert events == []
    assert answers == [(0, "other", True, "trial 0 is no longer running", _dask.CANCELLED),
                       (0, "first", False, "passed")]
    ex._on_report(0, 3, 3.0, "first", events)
    assert [(e.number, e.step) for e in events] == [(0, 3)]
    assert "dropped a report of trial 0 (step=1)" in caplog.text


def train_sleeps_then_reports(params: dict[str, Any], trial: Any) -> float:
    time.sleep(1.5)
    stop = trial.report(step=1, value=1.0)
    _log(f"{stop} {trial.cancelled} {trial.stop_reason}")
    return 1.0


def test_a_timed_out_dask_trial_knows_it_was_cancelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # trial 20c: its run said "the tuner stopped the trial after 1 round" (no scheduler decision)
    log = tmp_path / "t.log"
    monkeypatch.setenv("TRIPWIRE_TEST_LOG", str(log))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        result = Tuner(train_sleeps_then_reports, space={"k": Categorical(["a"])}, objective="v", mode="max",
                       strategy=GridSearch(max_resource=3), journal=str(tmp_path / "t.db"), executor=c,
                       trial_timeout=0.5).fit()
        deadline = time.monotonic() + 10
        while not log.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert result.trials[0].reason == "failed (timeout)"
    assert log.read_text().strip() == "True True trial 0 ran past trial_timeout=0.5 s"
    t = Trial(0, {}, 1, 9)
    t._stop, t._cancelled, t.stop_reason = True, True, "trial 0 ran past trial_timeout=2 s"
    assert tuner_stop_reason(t, "1 round", "auc=1") == "the trial was cancelled after 1 round: trial 0 ran past " \
                                                       "trial_timeout=2 s"
    t._cancelled = False
    assert tuner_stop_reason(t, "epoch 3", "val_loss=0.412") == "the tuner stopped the trial after epoch 3 " \
                                                                "(val_loss=0.412)"


def train_raises(params: dict[str, Any], trial: Any) -> float:
    values = {"a": 1}
    return float(values["b"])


def test_a_dask_trials_traceback_is_pythons_own(cluster: Any, tmp_path: Path) -> None:
    # trial 20c: carets 17 wide from column 4 under `out = train(...)`, and a caret line under a
    # `raise` where Python prints none: the traceback was rebuilt from the task's exception
    result = Tuner(train_raises, space={"k": Categorical(["a"])}, objective="v", mode="max",
                   strategy=GridSearch(max_resource=3), journal=str(tmp_path / "r.db"), executor=cluster).fit()
    error = result.trials[0].error
    lines = error.splitlines()
    at = next(i for i, ln in enumerate(lines) if "out = train(dict(spec.params), trial)" in ln)
    carets = lines[at + 1]
    assert carets.strip() == "^" * len("train(dict(spec.params), trial)"), error
    assert carets.index("^") == lines[at].index("train("), error
    assert f'File "{__file__}"' in error and 'return float(values["b"])' in error
    assert lines[-1] == "KeyError: 'b'"


def test_a_train_in_the_main_script_keeps_its_file_and_lines(cluster: Any, tmp_path: Path) -> None:
    # trial 20c: `File "<dynamic-code>", line 8, in train` and no source line
    script = tmp_path / "main_train.py"
    script.write_text(textwrap.dedent(f"""
        from tripwire.tune import Categorical, GridSearch, Tuner

        def train(params, trial):
            values = {{"a": 1}}
            return float(values["b"])

        if __name__ == "__main__":
            r = Tuner(train, space={{"k": Categorical(["a"])}}, objective="v", mode="max",
                      strategy=GridSearch(max_resource=3), journal={str(tmp_path / "m.db")!r},
                      executor={cluster.scheduler_address!r}).fit()
            print(r.trials[0].error)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert f'File "{script}", line 6, in train' in out.stdout, out.stdout + out.stderr
    assert 'return float(values["b"])' in out.stdout and "<dynamic-code>" not in out.stdout


def test_a_setup_the_cluster_cannot_import_is_said_in_one_line(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # trial 20c: `tripwire tune` on such a cluster printed 67 lines of distributed's internals ending in
    # `Exception: ModuleNotFoundError("No module named 'xtrain'")`
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as c:
        (tmp_path / "only_here_20c.py").write_text("def setup():\n    return 1\n\n"
                                                   "def train(params, trial):\n    return 1.0\n")
        monkeypatch.syspath_prepend(str(tmp_path))  # this process imports it; the workers started without it
        import only_here_20c

        tuner = Tuner(only_here_20c.train, space={"k": Categorical(["a"])}, objective="v", mode="max",
                      strategy=RandomSearch(max_resource=3), max_jobs=1, journal=str(tmp_path / "s.db"),
                      executor=c, setup=only_here_20c.setup)
        with pytest.raises(TuneError, match=r"cannot import module 'only_here_20c', which "
                                            r"setup=only_here_20c.setup needs \(it is in .*\): start the Dask "
                                            r"scheduler and workers where it imports .*PYTHONPATH=") as info:
            tuner.fit()
    assert "\n" not in str(info.value)

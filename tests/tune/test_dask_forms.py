"""``Tuner(executor=...)`` with a Dask Client, cluster, address or dict on a real LocalCluster, its
errors, and a Dask job whose scheduler logs no ERROR (no timed-out ``queue_get`` between reports)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import tune_trainables as tt
import yaml

import tripwire.tune
from tripwire.tune import Continuous, Hyperband, RandomSearch, Tuner, TuningResult
from tripwire.tune._cli import build_tuner, load_job_config, register
from tripwire.tune._errors import ConfigError
from tripwire.tune._tuner import executor_from_spec

distributed = pytest.importorskip("distributed")
from tripwire.tune import DaskExecutor  # noqa: E402  (needs distributed)

HERE = Path(tt.__file__).parent
SPACE = {"x": Continuous(0.0, 1.0)}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    # in-process workers over real TCP comms: the scheduler's and the workers' log records reach this
    # process; three threads leave one for a cancelled trial that keeps running in its thread
    with distributed.LocalCluster(n_workers=1, threads_per_worker=3, processes=False, protocol="tcp",
                                  dashboard_address=None) as c:
        yield c


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def distributed_errors() -> Iterator[list[logging.LogRecord]]:
    """The ERROR records of ``distributed``'s loggers (and tornado's) while the block runs.
    distributed's logging config gives some loggers (``distributed``, ``distributed.client``...)
    their own handler and ``propagate=False``, so the root logger (and caplog) would not see them:
    the handler goes on each of them."""
    handler = _Collect()
    names = {"distributed", "tornado"} | {n for n in logging.root.manager.loggerDict
                                         if n.startswith(("distributed.", "tornado."))}
    loggers = [logging.getLogger(n) for n in sorted(names)]
    loggers = [lg for lg in loggers if lg.name in ("distributed", "tornado") or not lg.propagate]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield handler.records
    finally:
        for lg in loggers:
            lg.removeHandler(handler)


def _text(records: list[logging.LogRecord]) -> str:
    return "\n".join(f"{r.name}: {r.getMessage()}" for r in records)


def train_where(params: dict[str, Any], trial: Any) -> dict[str, Any]:
    """A learning curve that also returns the address of the Dask worker it ran on."""
    value = tt.train_curve(params, trial)
    return {"objective": value, "worker": distributed.get_worker().address}


LATE: dict[int, tuple[bool, str | None]] = {}
LATE_DONE = threading.Event()


def train_first_hangs(params: dict[str, Any], trial: Any) -> float:
    """Trial 0 sleeps past the trial timeout, then reports once: what its report returned goes into
    ``LATE`` (the worker threads are in this process)."""
    if trial.number == 0:
        time.sleep(2.5)
        LATE[0] = (trial.report(step=1, value=0.0), trial.stop_reason)
        LATE_DONE.set()
        return 0.0
    return tt.train_curve(params, trial)


def _client(cluster: Any) -> Any:
    # not the default client: an in-process worker takes the default client up as its own and keeps
    # it once closed (distributed's Worker._get_client), which would break the next tests' trials
    return distributed.Client(cluster, set_as_default=False)


def _workers(cluster: Any) -> set[str]:
    with _client(cluster) as client:
        return set(client.scheduler_info()["workers"])


# ---- the scheduler logs no ERROR --------------------------------------------------------------
def test_dask_jobs_log_no_error(cluster: Any, tmp_path: Path) -> None:
    with distributed_errors() as records:
        # the capture sees the scheduler's records: a timed-out Queue.get (the old polling) is
        # logged as an ERROR by the scheduler's handler
        with _client(cluster) as client:
            with pytest.raises(TimeoutError):
                distributed.Queue("tripwire-test-probe", client=client).get(timeout=0.05)
        deadline = time.monotonic() + 5
        while not records and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any("queue_get" in r.getMessage() for r in records), _text(records)
        records.clear()

        ordinary = Tuner(tt.train_curve, SPACE, strategy=Hyperband(1, 9, 3), max_jobs=6, max_parallel_jobs=2,
                         seed=0, journal=str(tmp_path / "o.db"), executor=cluster).fit()
        LATE.clear()
        LATE_DONE.clear()
        timed = Tuner(train_first_hangs, SPACE, strategy=RandomSearch(3), max_jobs=6, max_parallel_jobs=2,
                      seed=0, journal=str(tmp_path / "t.db"), executor=cluster, trial_timeout=1.0).fit()
        assert LATE_DONE.wait(10)  # the cancelled trial's late report got an answer
        time.sleep(0.3)  # anything the scheduler would log after the jobs
    assert records == [], _text(records)
    assert len(ordinary.trials) == 6 and ordinary.counts()["failed"] == 0
    assert ordinary.counts()["stopped"] > 0 and ordinary.best is not None
    statuses = [t.status for t in timed.trials]
    assert statuses == ["failed"] + ["completed"] * 5, statuses
    assert "ran past trial_timeout=1 s" in timed.trials[0].error
    assert LATE[0] == (True, "trial 0 ran past trial_timeout=1 s")  # stop decision sent at cancel
    # where the task was when it timed out, most recent call first (session 20: the local executor's
    # error had it, the Dask one's not); summaries still quote the message line
    message, _, stack = timed.trials[0].error.partition("\nwhere its threads were when it was stopped (most recent "
                                                         "call first):\n")
    assert message.startswith("trial 0 ran past trial_timeout=1 s") and "\n" not in message
    first = stack.splitlines()
    assert "in train_first_hangs" in first[0] and "time.sleep(2.5)" in first[1], stack


def test_interrupted_job_resumes_on_the_same_executor(cluster: Any, tmp_path: Path) -> None:
    journal = str(tmp_path / "i.db")
    ex = DaskExecutor(cluster)
    calls: list[int] = []

    def interrupt(snapshot: dict[str, Any]) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with distributed_errors() as records:
        with pytest.raises(KeyboardInterrupt):
            Tuner(tt.train_slow, SPACE, strategy=RandomSearch(40), max_jobs=4, max_parallel_jobs=2, seed=0,
                  journal=journal, executor=ex).fit(progress=interrupt)
        assert TuningResult.from_journal(journal).counts()["pending"] == 2  # both were running
        # the cancelled tasks got their stop decision and end; the rerun trials keep their numbers
        result = Tuner.resume(journal, executor=ex).fit()
    assert records == [], _text(records)
    assert [(t.status, t.resource) for t in result.trials] == [("completed", 40)] * 4
    for t in result.trials:  # each ran its 40 steps, every report reaching the scheduler
        assert t.reason == "reached max_resource=40" and t.value == pytest.approx(tt.curve(t.params, 40))


# ---- executor forms ---------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["client", "cluster", "address", "dict"])
def test_executor_forms_run_on_the_cluster(cluster: Any, tmp_path: Path, form: str) -> None:
    client = _client(cluster) if form == "client" else None
    try:
        spec = {"client": client, "cluster": cluster, "address": cluster.scheduler_address,
                "dict": {"type": "dask", "address": cluster.scheduler_address}}[form]
        tuner = Tuner(train_where, SPACE, strategy=RandomSearch(3), max_jobs=3, max_parallel_jobs=2, seed=1,
                      journal=str(tmp_path / f"{form}.db"), executor=spec)
        assert isinstance(tuner.executor, DaskExecutor)
        with distributed_errors() as records:
            result = tuner.fit()
        assert records == [], _text(records)
        assert result.counts()["completed"] == 3, [t.error for t in result.trials]
        assert {t.metrics["worker"] for t in result.trials} <= _workers(cluster)  # ran on this cluster
        if client is not None:
            assert client.status == "running"  # the user's client is left open
            assert client.submit(sum, [1, 2]).result() == 3
        assert cluster.status.name == "running"  # and so is the user's cluster
        if form in ("address", "dict"):
            assert result.job["executor"] == {"type": "dask", "address": cluster.scheduler_address}
        else:  # an object: journaled by its type's name, which Tuner.resume refuses to guess from
            assert result.job["executor"] == {"type": "dask", "address": None,
                                              "cluster": type(spec).__name__}
    finally:
        if client is not None:
            client.close()


def test_resume_takes_the_same_forms(cluster: Any, tmp_path: Path) -> None:
    journal = str(tmp_path / "r.db")
    Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=2, max_parallel_jobs=2, seed=2,
          journal=journal, executor=cluster.scheduler_address).fit()
    again = Tuner.resume(journal, max_jobs=3)  # the journaled address is rebuilt
    assert isinstance(again.executor, DaskExecutor) and again.executor.cluster == cluster.scheduler_address
    assert len(again.fit().trials) == 3
    with _client(cluster) as client:
        resumed = Tuner.resume(journal, executor=client, max_jobs=4)
        assert isinstance(resumed.executor, DaskExecutor) and resumed.executor.cluster is client
        result = resumed.fit()
    assert len(result.trials) == 4 and result.counts()["completed"] == 4
    with pytest.raises(ConfigError, match=r"executor='ray' is not one of .*DaskExecutor\(cluster\)"):
        Tuner.resume(journal, executor="ray")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tripwire")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_yaml_address_and_dict(cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    cfg = {"train": "tune_trainables:train_dict", "objective": "validation:auc",
           "space": {"x": {"type": "continuous", "low": 0.0, "high": 1.0}},
           "strategy": {"type": "random", "max_resource": 3}, "max_jobs": 3, "max_parallel_jobs": 2, "seed": 0,
           "journal": str(tmp_path / "y.db"), "executor": cluster.scheduler_address}
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(cfg))
    tuner = build_tuner(load_job_config(path), resume=False)
    assert isinstance(tuner.executor, DaskExecutor) and tuner.executor.cluster == cluster.scheduler_address
    cfg["executor"] = {"type": "dask", "address": cluster.scheduler_address}
    path.write_text(yaml.safe_dump(cfg))
    args = _parser().parse_args(["tune", str(path), "--no-progress"])
    assert args.func(args) == 0
    assert TuningResult.from_journal(tmp_path / "y.db").counts()["completed"] == 3


@pytest.mark.parametrize("address", ["tcp://10.0.0.1:8786", "TLS://host:8786", "inproc://10.0.0.1/1234/1",
                                     "ucx://10.0.0.1:13337", "ws://host:8786", "wss://host:8786"])
def test_addresses_by_scheme(address: str) -> None:
    ex = executor_from_spec(address)  # nothing connects before fit()
    assert isinstance(ex, DaskExecutor) and ex.cluster == address
    assert ex.to_dict() == {"type": "dask", "address": address}


def test_duck_typed_cluster_and_local_dict() -> None:
    class OtherCluster:  # dask-jobqueue's, dask-kubernetes'... clusters: only a scheduler_address
        scheduler_address = "tcp://10.0.0.1:8786"

    other = OtherCluster()
    ex = executor_from_spec(other)
    assert isinstance(ex, DaskExecutor) and ex.cluster is other
    local = executor_from_spec({"type": "local", "start_method": "spawn", "reuse_workers": False})
    assert local.to_dict() == {"type": "local", "start_method": "spawn", "reuse_workers": False}
    assert executor_from_spec("local").to_dict()["type"] == "local"
    assert executor_from_spec(None).to_dict()["type"] == "local"
    assert executor_from_spec(ex) is ex


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("ray", r"executor='ray' is not one of 'local', 'dask', a Dask scheduler address"),
        ("localhost:8786", r"executor='localhost:8786' is not one of .*DaskExecutor\(cluster\).*"
                           r"needs its scheme: 'tcp://localhost:8786'"),
        ("http://127.0.0.1:8787", r"executor='http://127.0.0.1:8787' is not one of .*DaskExecutor\(cluster\).*"
                                  r"dashboard"),
        ("tcp://", r"executor='tcp://' is not one of .*DaskExecutor\(cluster\)"),
        (3, r"executor=3 is not one of .*a distributed\.Client, a Dask cluster .*DaskExecutor\(cluster\)"),
        (object(), r"executor=<object object at .*> is not one of .*DaskExecutor\(cluster\)"),
        ({"type": "ray"}, r"executor=\{'type': 'ray'\} is not one of .*\{type: dask, address: \.\.\.\}.*"
                          r"DaskExecutor\(cluster\)"),
        ({"type": "dask", "adress": "tcp://h:1"},
         r"unknown key\(s\) \['adress'\] for type 'dask'; accepted: \['address'\]"),
        ({"type": "dask", "address": 8786}, r"cluster=8786 is not a scheduler address \('tcp://host:8786'\)"),
        ({"type": "local", "workers": 2}, r"unknown key\(s\) \['workers'\] for type 'local'"),
    ],
)
def test_bad_executor_values(tmp_path: Path, spec: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Tuner(tt.train_curve, SPACE, max_jobs=1, journal=str(tmp_path / "bad.db"), executor=spec)


def test_dir_lists_the_lazy_dask_executor() -> None:
    names = dir(tripwire.tune)
    assert "DaskExecutor" in names and names == sorted(tripwire.tune.__all__)


def test_core_without_distributed(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import sys
        from tripwire.tune import Continuous, Tuner
        from tripwire.tune._errors import ConfigError

        def train(params, trial):
            return 0.0

        def tuner(executor):
            return Tuner(train, {"x": Continuous(0.0, 1.0)}, max_jobs=1, journal=sys.argv[1], executor=executor)

        tuner("local")
        try:
            tuner(object())
        except ConfigError as exc:
            print("config:", exc)
        print("imported:", "distributed" in sys.modules)
        sys.modules["distributed"] = None  # as if the extra were not installed
        print("dir:", "DaskExecutor" in dir(__import__("tripwire.tune").tune))
        for spec in ("tcp://127.0.0.1:8786", "dask", {"type": "dask", "address": None}):
            try:
                tuner(spec)
            except ImportError as exc:
                print("import:", exc)
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "j.db")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("config: executor=<object object at ") and "DaskExecutor(cluster)" in lines[0]
    assert lines[1:3] == ["imported: False", "dir: True"]
    assert lines[3:] == ["import: 'distributed' is not installed; install it with: pip install 'tripwire[dask]' "
                         "(in a clone of tripwire: pip install -e '.[dask]')"] * 3


def train_first_sleeps(params: dict[str, Any], trial: Any) -> float:
    """Trial 0 holds its Dask thread past the trial timeout (a Dask thread cannot be interrupted)."""
    if trial.number == 0:
        time.sleep(2.5)
    return tt.train_curve(params, trial)


def test_dask_trial_timeout_counts_from_the_trials_start_not_its_submission(tmp_path: Path) -> None:
    # one Dask thread: trial 0 times out but keeps the thread until 2.5 s; trial 1 waits for it. Its
    # limit counted from its submission, so it "ran past trial_timeout" with no report before it began
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as c:
        result = Tuner(train_first_sleeps, space=SPACE, strategy=RandomSearch(3), max_jobs=3, max_parallel_jobs=1,
                       seed=0, journal=str(tmp_path / "t.db"), executor=c, trial_timeout=1.0).fit()
    statuses = [(t.status, t.resource) for t in result.trials]
    assert statuses == [("failed", 0), ("completed", 3), ("completed", 3)], [t.error for t in result.trials]
    assert "ran past trial_timeout=1 s" in result.trials[0].error


def train_reports_until_stopped(params: dict[str, Any], trial: Any) -> float:
    """Reports every 50 ms until told to stop; writes ``$TRIPWIRE_TEST_MARKER`` after its first
    report (the worker threads are in the test's process)."""
    import os

    step = 0
    while True:
        step += 1
        stop = trial.report(step=step, value=float(step))
        if step == 1:
            Path(os.environ["TRIPWIRE_TEST_MARKER"]).write_text("reported")
        if stop:
            return float(step)
        time.sleep(0.05)


def test_a_killed_tuners_trial_frees_its_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # trial 16a: after `kill -9` of a tuner on a long-lived cluster (a scheduler address), its running
    # trials waited an hour inside trial.report() for a decision, holding every worker thread: the
    # resumed job (and any new one) hung without a word
    from tripwire.tune import _dask

    monkeypatch.setattr(_dask, "DECISION_POLL_S", 0.2, raising=False)
    marker = tmp_path / "marker"
    monkeypatch.setenv("TRIPWIRE_TEST_MARKER", str(marker))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=None) as cluster:
        script = tmp_path / "tuner.py"
        script.write_text(textwrap.dedent(f"""
            import sys
            sys.path[:0] = [{str(HERE)!r}]
            from test_dask_forms import train_reports_until_stopped
            from tripwire.tune import Continuous, RandomSearch, Tuner
            if __name__ == "__main__":
                Tuner(train_reports_until_stopped, {{"x": Continuous(0.0, 1.0)}}, strategy=RandomSearch(max_resource=10**6),
                      max_jobs=1, max_parallel_jobs=1, seed=0, journal={str(tmp_path / "k.db")!r},
                      executor={cluster.scheduler_address!r}).fit()
        """))
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert marker.exists(), "the trial never reported"
        finally:
            proc.kill()
            proc.wait()
        with _client(cluster) as client:  # the one worker thread is free again: a task runs
            assert client.submit(lambda: 42, pure=False).result(timeout=30) == 42


def test_a_finished_job_on_a_cluster_object_resumes_to_its_result(tmp_path: Path, cluster: Any) -> None:
    # trial 17b: Tuner.resume(journal) of a finished job that ran on a LocalCluster object raised
    # (its executor cannot be rebuilt), though a finished job needs no worker to return its result
    path = str(tmp_path / "d.db")
    done = Tuner(tt.train_curve, space=SPACE, strategy=RandomSearch(3), max_jobs=2, seed=0, journal=path,
                 executor=cluster).fit()
    again = Tuner.resume(path).fit()
    assert [(t.number, t.value) for t in again.trials] == [(t.number, t.value) for t in done.trials]
    assert TuningResult.from_journal(path).job["executor"]["cluster"] == "LocalCluster"  # the journal unchanged
    with pytest.raises(ConfigError, match=r"ran on a Dask LocalCluster object, which cannot be rebuilt from the "
                                          r"journal; pass Tuner.resume\(journal, executor=\.\.\.\)"):
        Tuner.resume(path, max_jobs=3).fit()  # a trial to run: it needs the cluster
    more = Tuner.resume(path, max_jobs=3, executor=cluster).fit()
    assert len(more.trials) == 3


def test_a_trial_on_tripwires_own_dask_cluster_may_start_processes(tmp_path: Path) -> None:
    # trial 17f: "daemonic processes are not allowed to have children" (a DataLoader with num_workers,
    # a process pool) with executor="dask", though docs/tune.md says a trial may start processes
    result = Tuner(tt.train_starts_a_process, space=SPACE, strategy=RandomSearch(), max_jobs=1, seed=0,
                   executor="dask").fit()
    assert [(t.status, t.value) for t in result.trials] == [("completed", 1.0)], [t.error for t in result.trials]


def test_a_daemonic_worker_is_named_in_a_failed_trials_error() -> None:
    from tripwire.tune._errors import error_summary

    text = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    p.start()\n"
            "AssertionError: daemonic processes are not allowed to have children\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\n  File \"y.py\", line 2, in g\n    teardown()\n"
            "RuntimeError: Please call iter(combined_loader) first.\n")
    said = error_summary(text)
    assert said.startswith("RuntimeError: Please call iter(combined_loader) first. (while handling: AssertionError: "
                           "daemonic processes are not allowed to have children) [a Dask worker process is daemonic")
    assert "dask.config.set({'distributed.worker.daemon': False})" in said


def test_a_timed_out_trials_frames_of_the_main_script_name_it(tmp_path: Path) -> None:
    # trial 21d: a train defined in the main script is sent by value, its frames named <dynamic-code>
    # with no source line in the timed-out trial's stack; they get the script and its line back
    from tripwire.tune._dask import _main_frame

    script = tmp_path / "tune_main.py"
    script.write_text("import time\n\n\ndef train(params, trial):\n    time.sleep(9)\n")
    frame = '  File "<dynamic-code>", line 5, in train\n\t'
    assert _main_frame(frame, str(script)) == f'  File "{script}", line 5, in train\n\ttime.sleep(9)'
    assert _main_frame(frame, None) == frame
    other = '  File "/x/y.py", line 3, in f\n\treturn 1'
    assert _main_frame(other, str(script)) == other

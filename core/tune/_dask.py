"""Run trials on a Dask ``distributed`` cluster with distributed's own primitives.

Each trial is a task (``client.submit``). ``trial.report`` puts ``(number, step, value)`` on a
``distributed.Queue`` that the tuning process drains, and waits for the decision on the trial's
own ``distributed.Queue``; so, as with the local executor, every decision sees every trial. The
per-worker ``setup()`` runs once per Dask worker through a ``WorkerPlugin`` (workers that join
later run it too); its result is ``trial.context``. A cancelled trial (per-trial time limit)
cannot be interrupted inside a Dask thread: its next report returns ``True`` and the trial is
marked failed at once. Its stop decision is sent when it is cancelled (as for the trials an
interrupted job cancels), so that holds even once the tuning process has gone. A Dask worker that
dies fails its trial (``KilledWorker``).

The tuning process never asks the scheduler for a report with a timeout: a ``Queue.get`` that times
out raises ``TimeoutError`` in the scheduler's handler, which logs it as an ERROR with a traceback
(``distributed.core - ERROR - Exception while handling op queue_get``, dask/distributed#2855), once
per idle poll. Instead a thread (``tripwire-dask-reports``) blocks on the report queue with no
timeout and hands each report to a local ``queue.Queue``; a done callback on each trial's future
puts a wake-up there, so :meth:`DaskExecutor.poll` waits on the local queue only. At shutdown a
``None`` on the report queue ends the thread's wait. distributed's logging is not touched.

A trial waits for its decision on a ``distributed.Event`` that the tuning process sets once the
decision is on the queue (an Event's wait times out quietly), a few seconds at a time: between
waits it asks its Dask worker whether its task was cancelled, which the scheduler does as soon as
the tuning process's client is gone (a ``kill -9``). Such a trial is told to stop (its next report
returns True), so its worker thread is free for the trials of a resumed or a new job on a
long-lived cluster (it held the thread for an hour). Nothing else is abandoned that way: a tuning
process that is alive but slow only makes the trial wait (up to one hour in all).
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
import uuid
from typing import Any, Callable

from tripwire._errors import missing_extra

from ._errors import ConfigError, TuneError
from ._executor import Event, Executor, Failed, Finished, Report, Started, TrialSpec
from ._trial import Trial, take_rule_stop

try:
    import dask
    import distributed
except ImportError as _exc:  # pragma: no cover - exercised without the extra only
    raise missing_extra("distributed", "dask", _exc) from None

__all__ = ["DaskExecutor"]

DECISION_TIMEOUT_S = 3600.0
DECISION_POLL_S = 2.0
"""How long a trial waits for its decision before it checks that its task is still wanted."""
GONE = "the tuning process is gone (its Dask client disconnected and the scheduler cancelled this task)"


def _named(token: str, what: str) -> str:
    """The scheduler-wide name of a job's queue or event: ``reports``, ``decision-<N>`` (a trial's
    decision), ``decided-<N>`` (the event that says it is there)."""
    return f"tripwire-{token}-{what}"


def _put_report(token: str, item: tuple[Any, ...]) -> None:
    """``item`` on the job's report queue, through a handle closed at once (the tuning process holds
    the queue; a handle per report left open would pile up on the scheduler)."""
    reports = distributed.Queue(_named(token, "reports"))
    try:
        reports.put(item)
    finally:
        reports.close()


def _task_cancelled() -> bool:
    """Whether the Dask task running this code was cancelled (its client went away, or the tuning
    process cancelled it); False outside a Dask worker."""
    try:
        worker = distributed.get_worker()
        key = worker.get_current_task()
    except (ValueError, AttributeError, KeyError):
        return False
    state = getattr(worker.state.tasks.get(key), "state", None)
    return state is None or state in ("cancelled", "released", "forgotten")


class _DaskChannel:
    picklable = True

    def __init__(self, token: str) -> None:
        self.token = token

    def report(self, number: int, step: int, value: float) -> tuple[bool, str]:
        # the decision queue exists before the report goes out (the reply lands in it); the event
        # says the reply is there
        decision = distributed.Queue(_named(self.token, f"decision-{number}"))
        ready = distributed.Event(_named(self.token, f"decided-{number}"))
        try:
            _put_report(self.token, (number, step, value))
            waited = 0.0
            while not ready.wait(timeout=DECISION_POLL_S):
                if _task_cancelled():
                    return True, GONE
                waited += DECISION_POLL_S
                if waited >= DECISION_TIMEOUT_S:
                    raise TuneError(f"trial {number}: no decision from the tuning process within "
                                    f"{DECISION_TIMEOUT_S:.0f} s (is it still running?)")
            ready.clear()
            stop, reason = decision.get(timeout=60)  # (put before the event was set: there)
        finally:
            decision.close()
        return bool(stop), str(reason)


class _SetupPlugin(distributed.WorkerPlugin):
    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.context: Any = None
        self.error: str | None = None

    def setup(self, worker: Any) -> None:
        try:
            self.context = self.fn()
        except BaseException:
            self.error = traceback.format_exc()


def _run_trial(train: Callable[..., Any], spec: TrialSpec, token: str) -> tuple[Any, float, Any]:
    context = None
    try:
        worker = distributed.get_worker()
    except ValueError:  # not in a Dask worker (a direct call)
        worker = None
    plugin = worker.plugins.get(f"tripwire-setup-{token}") if worker is not None else None
    if plugin is not None:
        if plugin.error is not None:
            raise TuneError(f"setup() failed on this Dask worker:\n{plugin.error}")
        context = plugin.context
    trial = Trial(spec.number, spec.params, spec.min_resource, spec.max_resource, spec.bracket,
                  channel=_DaskChannel(token), context=context, attempt=spec.attempt)
    # the task waited for a free thread until now: its time limit counts from here (a thread still
    # held by a cancelled task that cannot be interrupted keeps the next one waiting)
    if worker is not None:
        _put_report(token, (spec.number,))
    take_rule_stop(spec.number)
    t0 = time.perf_counter()
    try:
        out = train(dict(spec.params), trial)
    finally:
        rule_stop = take_rule_stop(spec.number) or trial.stopped_by_rule
    return out, time.perf_counter() - t0, rule_stop


class DaskExecutor(Executor):
    """Trials on a Dask cluster.

    A submitted trial waits for a free Dask thread; it says when it begins (:class:`Started`), and
    ``trial_timeout`` counts from then.

    ``cluster``: a scheduler address (``"tcp://host:8786"``), a ``distributed.Client``, a cluster
    object (``LocalCluster``...), or ``None`` to start a ``LocalCluster`` with one single-threaded
    worker process per parallel trial (closed at the end).
    """

    reports_start = True

    def __init__(self, cluster: Any = None) -> None:
        if cluster is not None and not isinstance(cluster, (str, distributed.Client)) \
                and not hasattr(cluster, "scheduler_address"):
            raise ConfigError(f"cluster={cluster!r} is not a scheduler address ('tcp://host:8786'), a "
                              "distributed.Client, a cluster object (LocalCluster, ...) or None")
        self.cluster = cluster
        self._client: Any = None
        self._own: list[Any] = []
        self._token = ""
        self._train: Callable[..., Any] | None = None
        self._futures: dict[int, Any] = {}
        self._cancelled: dict[int, str] = {}
        self._reports: Any = None
        self._decisions: dict[int, Any] = {}  # this process's handle on each running trial's decision queue
        self._inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._reader: threading.Thread | None = None
        self._slots = 1

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "dask", "address": ...}``: an address, or ``None`` for a new local cluster (both
        rebuilt by ``Tuner.resume``); a Client or cluster object adds ``"cluster"`` (its type's
        name): it cannot be rebuilt from the journal."""
        if self.cluster is None or isinstance(self.cluster, str):
            return {"type": "dask", "address": self.cluster}
        return {"type": "dask", "address": None, "cluster": type(self.cluster).__name__}

    def start(self, train: Callable[..., Any], setup: Callable[[], Any] | None, n_workers: int) -> None:
        c = self.cluster
        if isinstance(c, distributed.Client):
            self._client = c
        else:
            if c is None:
                # worker processes that are not daemonic: a trial may start processes of its own (a
                # DataLoader with num_workers, a process pool), as with the local executor (trial 17f)
                with dask.config.set({"distributed.worker.daemon": False}):
                    c = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=None)
                self._own.append(c)
            # not the process's default client: a worker thread in this process (processes=False)
            # would take it up as its own, and keep it once this one is closed
            try:
                self._client = distributed.Client(c, set_as_default=False)
            except (OSError, TimeoutError) as exc:
                where = c if isinstance(c, str) else getattr(c, "scheduler_address", repr(c))
                raise TuneError(f"executor: cannot connect to the Dask scheduler at {where!r} ({type(exc).__name__}: "
                                f"{exc}); start the scheduler, or check the address (executor: dask without an "
                                f"address starts a LocalCluster of its own)") from None
            self._own.insert(0, self._client)
        self._token = uuid.uuid4().hex[:12]
        # a rerun trial (resume) keeps its number: start afresh (handles of an earlier run's client dropped)
        self._futures, self._cancelled, self._decisions = {}, {}, {}
        self._train, self._slots = train, n_workers
        self._reports = distributed.Queue(_named(self._token, "reports"), client=self._client)
        self._inbox = queue.Queue()
        self._reader = threading.Thread(target=self._read_reports, args=(self._reports, self._inbox),
                                        name="tripwire-dask-reports", daemon=True)
        self._reader.start()
        if setup is not None:
            self._client.register_plugin(_SetupPlugin(setup), name=f"tripwire-setup-{self._token}")

    @staticmethod
    def _read_reports(reports: Any, inbox: "queue.Queue[tuple[str, Any]]") -> None:
        """The reader thread: a blocking ``get`` with no timeout returns when a report (or the
        shutdown's ``None``) arrives, so the scheduler never times a request out and logs nothing."""
        while True:
            try:
                item = reports.get()
            except BaseException as exc:  # the scheduler or the client went away
                inbox.put(("lost", exc))
                return
            if item is None:
                return
            inbox.put(("report", item))

    def free_slots(self) -> int:
        return self._slots - len(self._futures)

    def submit(self, spec: TrialSpec) -> None:
        fut = self._client.submit(_run_trial, self._train, spec, self._token, pure=False,
                                  key=f"tripwire-trial-{self._token}-{spec.number}")
        self._futures[spec.number] = fut
        inbox = self._inbox
        fut.add_done_callback(lambda _f: inbox.put(("done", None)))  # wakes poll(); no scheduler call

    def reply(self, number: int, stop: bool, reason: str) -> None:
        decisions = self._decisions.get(number)
        if decisions is None:  # (one handle a trial, closed when it ends: the scheduler then drops the queue)
            decisions = self._decisions[number] = distributed.Queue(
                _named(self._token, f"decision-{number}"), client=self._client)
        decisions.put((stop, reason))
        distributed.Event(_named(self._token, f"decided-{number}"), client=self._client).set()

    def _release(self, number: int) -> None:
        handle = self._decisions.pop(number, None)
        if handle is not None:
            try:
                handle.close()
            except Exception:  # the scheduler is gone: nothing to release
                pass

    def cancel(self, number: int, reason: str) -> Failed | None:
        fut = self._futures.pop(number, None)
        if fut is None:
            return None
        fut.cancel()
        self._cancelled[number] = reason
        # its decision now: the task's next report returns True even once this process has gone
        self.reply(number, True, reason)
        return Failed(number, f"{reason}; the Dask task was cancelled and stops at its next report", "timeout")

    def poll(self, timeout: float) -> list[Event]:
        items: list[tuple[str, Any]] = []
        try:
            if timeout > 0 and not self._has_done():
                items.append(self._inbox.get(timeout=timeout))
            while True:
                items.append(self._inbox.get_nowait())
        except queue.Empty:
            pass
        events: list[Event] = []
        for kind, item in items:
            if kind == "lost":
                raise TuneError(f"lost the Dask scheduler while waiting for reports: {item!r}") from item
            if kind != "report":
                continue
            if len(item) == 1:  # a trial began
                if item[0] in self._futures:
                    events.append(Started(item[0]))
                continue
            number, step, value = item
            if number in self._cancelled:
                self.reply(number, True, self._cancelled[number])
            else:
                events.append(Report(number, step, value))
        for number, fut in list(self._futures.items()):
            if not fut.done():
                continue
            del self._futures[number]
            self._release(number)
            if fut.status == "finished":
                out, elapsed, rule_stop = fut.result()
                events.append(Finished(number, out, elapsed, rule_stop))
            else:
                exc = fut.exception()
                tb = "".join(traceback.format_exception(type(exc), exc, fut.traceback())) if exc else fut.status
                kind = "worker_died" if type(exc).__name__ == "KilledWorker" else "error"
                events.append(Failed(number, tb, kind))
        return events

    def _has_done(self) -> bool:
        return any(f.done() for f in self._futures.values())

    def shutdown(self) -> None:
        try:
            for number in list(self._futures):  # interrupted: the trials still running stop at their next report
                self.cancel(number, "the tuning job ended")
            if self._reader is not None and self._reader.is_alive():
                self._reports.put(None)  # ends the reader's wait
                self._reader.join(timeout=30)
            while True:  # reports the tuner did not take: answer them, so no task waits for a decision
                kind, item = self._inbox.get_nowait()
                if kind == "report" and len(item) == 3:
                    self.reply(item[0], True, self._cancelled.get(item[0], "the tuning job ended"))
        except queue.Empty:
            pass
        except Exception:  # the scheduler is gone: nothing to answer
            pass
        finally:
            self._futures.clear()
            for number in list(self._decisions):
                if number not in self._cancelled:  # (a cancelled trial's late report still reads its stop)
                    self._release(number)
            if self._reports is not None:
                try:
                    self._reports.close()
                except Exception:  # the scheduler is gone
                    pass
                self._reports = None
            self._reader = None
            for obj in self._own:
                try:
                    obj.close()
                except Exception:  # closing a cluster twice, or one already gone
                    pass
            self._own.clear()

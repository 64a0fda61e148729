"""Run trials on a Dask ``distributed`` cluster with distributed's own primitives.

Each trial is a task (``client.submit``). ``trial.report`` puts ``(number, step, value)`` on a
``distributed.Queue`` that the tuning process drains, and waits for the decision on the trial's
own ``distributed.Queue``; so, as with the local executor, every decision sees every trial. The
per-worker ``setup()`` runs once per Dask worker through a ``WorkerPlugin`` (workers that join
later run it too); its result is ``trial.context``. A cancelled trial (per-trial time limit)
cannot be interrupted inside a Dask thread: its next report returns ``True`` and the trial is
marked failed at once. Its stop decision is sent when it is cancelled (as for the trials an
interrupted job cancels), so that holds even once the tuning process has gone. Its future is held,
not cancelled, until the task returns (trial 25b): a cancelled future freed the thread in the
scheduler's eyes, which gave the next trial to that worker, where it waited for good. On the tuner's
own ``LocalCluster`` (``executor="dask"``) the timed-out trial's worker process is killed instead, as
the local executor kills a timed-out worker, and its nanny starts a new one (trial 28b: with every
thread held by a hung trial the job waited for good); on a cluster of the user's no worker is killed,
and the WARNING says when no thread is left, naming the trials the job waits for.

A Dask worker that dies fails its trial, and the trial's code runs once (trial 20c): the scheduler
reruns a task whose worker died on another worker (its ``allowed-failures``, 3 by default), which
would train the same attempt again from scratch, report its steps again (the journal held them
already: ``sqlite3.IntegrityError``) and take down one worker after another for a configuration that
runs out of memory. So each execution of a task draws a token and asks the tuning process before it
calls ``train`` (``("start", number, token, worker, pid)``, answered on that execution's own
decision queue): the first execution of a trial is let through; a second one means the first one's
worker died, and it is refused (it returns at once) while the trial is marked ``failed``
(``worker_died``), naming the worker that died. Every report carries its execution's token, and
the tuning process answers it on that execution's queue: a report from an execution that is not
the trial's current one (a worker the scheduler gave up on that still runs), or a step that is not
past the trial's last, is logged and dropped, never passed to the tuner. A ``KilledWorker`` (the
scheduler's retries spent before a rerun began) fails the trial too.

A trial that raises is caught in the task, and its traceback formatted there, as the local
executor does: the stored ``error`` has Python's own caret lines and, for a ``train`` defined in
the main script, its file and source lines (a traceback rebuilt from the task's exception named
``<dynamic-code>`` and put carets of the wrong width under the wrong text).

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

import linecache
import logging
import os
import queue
import re
import signal
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from tripwire._errors import missing_extra

from ._errors import STACK_MARKER, ConfigError, TuneError, import_hint
from ._executor import Event, Executor, Failed, Finished, Report, Started, TrialSpec, main_is_importable
from ._trial import Trial, number_like_result, picklable_result, take_early_end, take_rule_stop

try:
    import dask
    import distributed
    from distributed.protocol import pickle as dask_pickle
except ImportError as _exc:  # pragma: no cover - exercised without the extra only
    raise missing_extra("distributed", "dask", _exc) from None

__all__ = ["DaskExecutor"]

logger = logging.getLogger("tripwire.tune")

DECISION_TIMEOUT_S = 3600.0
DECISION_POLL_S = 2.0
"""How long a trial waits for its decision before it checks that its task is still wanted."""
STACK_TIMEOUT_S = 5.0
"""How long a timed-out trial's cancel waits for its task's stack (:meth:`DaskExecutor._task_stack`)."""
CLOSE_WORKERS_S = 20.0
"""How long the worker processes of the tuner's own ``LocalCluster`` may take to exit at the end of a
job whose trials all returned (:func:`_close_workers`), before their nannies kill them."""
RERUN_WAIT_S = 10.0
"""At the end of a job, how long the tuner waits for the scheduler's rerun of a trial whose worker of
the tuner's own ``LocalCluster`` it killed (a timed-out trial) to ask to start, and answers it (refused):
closing the cluster under that rerun's wait logged a ``distributed.event - ERROR`` ``CancelledError``
traceback (trial 30e). :meth:`DaskExecutor.shutdown` waits only while such a rerun is to come."""
GONE = "the tuning process is gone (its Dask client disconnected and the scheduler cancelled this task)"
# the kinds of stop a decision may carry besides the scheduler's own (Trial.cancelled, trial 20c)
CANCELLED = "cancelled"


def _unrunnable_main() -> str | None:
    """Why a ``LocalCluster``'s worker processes cannot start from this process, or None: its
    ``__main__`` names a file that is not there (``'<stdin>'`` of ``python - < main.py``), which
    ``spawn`` (Dask's default ``multiprocessing-method``) runs in each new process (trial 26b: the
    local executor's workers died so, with an error that blamed the train function's module)."""
    if dask.config.get("distributed.worker.multiprocessing-method", "spawn") == "fork":
        return None
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if getattr(getattr(main, "__spec__", None), "name", None) or not isinstance(path, str) or os.path.isfile(path):
        return None
    where = "standard input (python - < script.py)" if path == "<stdin>" else f"{path!r}, which is not a file"
    return (f"executor='dask': the main script is {where}; the worker processes of Dask's LocalCluster start "
            "with 'spawn', which re-runs the main script in each of them, and cannot run it: save the script to a "
            "file and run that (python script.py), or use executor='local' (its workers do not re-run it)")


def _close_workers(cluster: Any, timeout: float = CLOSE_WORKERS_S) -> None:
    """Close the worker processes of ``cluster`` (a ``LocalCluster`` the tuner made) through their
    nannies, each allowed ``0.8 * timeout`` seconds to exit. ``LocalCluster.close()`` closes them with
    the nanny's default, 5 s, so a worker process gets 4 s: one that imported torch and Lightning
    takes 1 to 4 s to exit (its interpreter's teardown), more on a loaded host, and was killed with
    ``distributed.nanny - WARNING - Worker process still alive after 4.0 seconds, killing``, after a
    4 s wait (trial 27b). Here each one exits when it is done, and the cluster's close finds them
    closed. Only for a job whose trials all returned: a task still running in a thread (an interrupted
    or timed-out trial) would hold its process up to the timeout, and is left to the cluster's close."""
    import asyncio

    nannies = list(getattr(cluster, "workers", {}).values())
    if not nannies:
        return

    async def close_all() -> None:
        await asyncio.gather(*(n.close(timeout=timeout) for n in nannies), return_exceptions=True)

    cluster.sync(close_all)


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
    """A trial's channel to the tuning process from one execution of its task (``execution``: the
    token that execution drew): reports and the start go on the job's report queue with the token,
    and the answer comes back on that execution's own decision queue."""

    picklable = True

    def __init__(self, token: str, execution: str = "") -> None:
        self.token = token
        self.execution = execution

    def _ask(self, number: int, item: tuple[Any, ...]) -> tuple[bool, str, bool]:
        """Put ``item`` on the report queue and wait for the answer: ``(stop, reason, cancelled)``."""
        # the decision queue exists before the item goes out (the reply lands in it); the event
        # says the reply is there
        where = f"{number}-{self.execution}"
        decision = distributed.Queue(_named(self.token, f"decision-{where}"))
        ready = distributed.Event(_named(self.token, f"decided-{where}"))
        try:
            _put_report(self.token, item)
            waited = 0.0
            while not ready.wait(timeout=DECISION_POLL_S):
                if _task_cancelled():
                    return True, GONE, True
                waited += DECISION_POLL_S
                if waited >= DECISION_TIMEOUT_S:
                    raise TuneError(f"trial {number}: no decision from the tuning process within "
                                    f"{DECISION_TIMEOUT_S:.0f} s (is it still running?)")
            ready.clear()
            answer = decision.get(timeout=60)  # (put before the event was set: there)
        finally:
            decision.close()
        stop, reason, *kind = answer
        return bool(stop), str(reason), bool(kind) and kind[0] == CANCELLED

    def start(self, number: int, worker: str, pid: int) -> tuple[bool, str]:
        """Ask whether this execution may run the trial: ``(refused, why)``."""
        refused, why, _ = self._ask(number, ("start", number, self.execution, worker, pid))
        return refused, why

    def report(self, number: int, step: int, value: float) -> tuple[bool, str, bool]:
        return self._ask(number, ("report", number, step, value, self.execution))

    def note(self, number: int, call: str, value: Any) -> None:
        """Tell the tuning process what :meth:`Trial.rule_stopped` or :meth:`Trial.note_early_end`
        (``call``) recorded, and wait until it has it: a trial's training may run in another worker
        process than its task (``xgboost.dask`` picks rank 0's), where the task's end does not see it."""
        self._ask(number, ("note", number, call, value, self.execution))


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


@dataclass(frozen=True)
class _Refused:
    """What a task returns when the tuning process refused its execution (a rerun after its first
    execution's worker died; the tuning process gone): ``train`` did not run."""

    why: str


@dataclass(frozen=True)
class _Raised:
    """What a task returns when ``train`` raised: the traceback, formatted in the task (trial 20c:
    one rebuilt from the task's exception in the tuning process had wrong caret lines, and
    ``<dynamic-code>`` without source for a ``train`` defined in the main script)."""

    error: str


#: The file name cloudpickle gives the code of a function of the main script sent by value.
_DYNAMIC_CODE = "<dynamic-code>"


def _format_raised(main_file: str | None) -> str:
    """The traceback of the exception being handled, as Python prints it. cloudpickle sends a
    function of the main script by value with its file named ``<dynamic-code>`` (its lines kept):
    such frames get ``main_file`` back, and their source lines with it (trial 20c)."""
    te = traceback.TracebackException(*sys.exc_info())
    if main_file:
        todo, seen = [te], set()
        while todo:
            t = todo.pop()
            if id(t) in seen:
                continue
            seen.add(id(t))
            for i, fs in enumerate(t.stack):
                if fs.filename == _DYNAMIC_CODE:
                    t.stack[i] = traceback.FrameSummary(main_file, fs.lineno, fs.name, end_lineno=fs.end_lineno,
                                                        colno=fs.colno, end_colno=fs.end_colno)
            todo += [x for x in (t.__cause__, t.__context__) if x is not None]
            todo += list(getattr(t, "exceptions", None) or [])
    return "".join(te.format())


_DYNAMIC_FRAME = re.compile(r'^(\s*File )"' + re.escape(_DYNAMIC_CODE) + r'"(, line (\d+), in .*)$', re.MULTILINE)


def _main_frame(frame: str, main_file: str | None) -> str:
    """One frame of a task's stack (``  File "...", line N, in f\n\t<source>``): a frame of the main
    script, sent by value and named ``<dynamic-code>``, gets ``main_file`` back and its source line
    (trial 21d: a timed-out trial's own frames showed neither), as :func:`_format_raised` does."""
    m = _DYNAMIC_FRAME.search(frame)
    if m is None or not main_file:
        return frame
    source = linecache.getline(main_file, int(m.group(3))).strip()
    return f'{m.group(1)}"{main_file}"{m.group(2)}\n\t{source}'


#: The logger on which ``distributed.protocol.pickle.dumps`` logs ``Failed to serialize ...`` (ERROR,
#: with the traceback) before it raises.
PICKLE_LOGGER = "distributed.protocol.pickle"


class _ThisThreadOnly(logging.Filter):
    """Drops the records that the thread which made it logs (other threads' records pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread


def _quiet_dumps(value: Any) -> bytes:
    """``distributed.protocol.pickle.dumps(value)`` (pickle, else cloudpickle: as Dask sends a task's
    result), without the ERROR record and traceback it logs before it raises for a value that does not
    pickle. It is tripwire's own probe of a trial's result, which keeps such a value as its ``str`` or
    fails the trial with one line of its own (trial 28b: a dict holding a generator logged 4 ERROR
    tracebacks of 3 chained exceptions each for a 2-trial job). Only this thread's records are dropped,
    while it probes: the logger's other records, and other threads', are as ``distributed`` logs them."""
    quiet = _ThisThreadOnly()
    log = logging.getLogger(PICKLE_LOGGER)
    log.addFilter(quiet)
    try:
        return dask_pickle.dumps(value)  # type: ignore[no-any-return]
    finally:
        log.removeFilter(quiet)


def _run_trial(train: Callable[..., Any], spec: TrialSpec, token: str, main_file: str | None = None) -> Any:
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
    channel = _DaskChannel(token, uuid.uuid4().hex[:12])
    trial = Trial(spec.number, spec.params, spec.min_resource, spec.max_resource, spec.bracket,
                  channel=channel, context=context, attempt=spec.attempt)
    # the task waited for a free thread until now: its time limit counts from here (a thread still
    # held by a cancelled task that cannot be interrupted keeps the next one waiting). A second
    # execution of the same task (its first one's worker died) is refused: the trial's code runs
    # once (trial 20c)
    if worker is not None:
        refused, why = channel.start(spec.number, str(worker.address), os.getpid())
        if refused:
            return _Refused(why)
    take_rule_stop(spec.number)
    take_early_end(spec.number)
    t0 = time.perf_counter()
    try:
        out = train(dict(spec.params), trial)
        out = number_like_result(out)  # (trial 22b: `return val_loss` works)
    except BaseException:
        if worker is None:
            raise
        return _Raised(_format_raised(main_file))
    finally:
        rule_stop = take_rule_stop(spec.number) or trial.stopped_by_rule
        early_end = take_early_end(spec.number) or trial.early_end_reason
    elapsed = time.perf_counter() - t0
    try:
        _quiet_dumps(out)  # (as Dask sends the task's result: pickle, else cloudpickle)
    except Exception:
        # trial 22b: a dict keeps the values that do not pickle as their str; anything else fails
        # the trial, saying what did not pickle and why
        out, error = picklable_result(out, _quiet_dumps)
        if error is not None:
            return _Raised(error)
    return out, elapsed, rule_stop, early_end


@dataclass
class _Execution:
    """The execution of a trial's task that the tuning process let run (its start)."""

    token: str
    worker: str
    pid: int
    last_step: int = 0
    last_decision: tuple[bool, str] = (False, "")


_NO_MODULE = re.compile(r"No module named '([^']+)'")


class DaskExecutor(Executor):
    """Trials on a Dask cluster.

    A submitted trial waits for a free Dask thread; it says when it begins (:class:`Started`), and
    ``trial_timeout`` counts from then. A trial's code runs once: a rerun of its task by the
    scheduler (its worker died) is refused and the trial fails (``worker_died``).

    ``cluster``: a scheduler address (``"tcp://host:8786"``), a ``distributed.Client``, a cluster
    object (``LocalCluster``...), or ``None`` to start a ``LocalCluster`` with one single-threaded
    worker process per parallel trial (closed at the end, each worker process given the time it takes
    to exit: :func:`_close_workers`; a worker process whose trial ran past ``trial_timeout`` is killed
    and replaced, as the local executor's is). A timed-out trial on a cluster of the user's keeps its
    thread until it returns: no worker of the user's is killed.
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
        self._plugin: str | None = None  # the name of the job's setup() plugin on the cluster, while registered
        self._token = ""
        self._train: Callable[..., Any] | None = None
        self._futures: dict[int, Any] = {}
        self._cancelled: dict[int, str] = {}
        self._execs: dict[int, _Execution] = {}  # the execution of each started trial that may run
        self._notes: dict[int, dict[str, Any]] = {}  # a running trial's rule stop and early end (see _on_note)
        # trial 25b: the future of each timed-out trial whose task still holds its Dask thread (not
        # cancelled, so that the scheduler places no task behind it), and its worker
        self._held: dict[int, tuple[Any, str]] = {}
        # the timed-out trials whose worker process (of the tuner's own cluster) was killed: the scheduler
        # reruns each one's task, and that execution asks to start (refused) before the task returns
        self._killed: set[int] = set()
        self._reports: Any = None
        # this process's handle on each execution's decision queue, by (trial, execution token)
        self._decisions: dict[tuple[int, str], Any] = {}
        self._inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._reader: threading.Thread | None = None
        self._slots = 1
        self._main_file: str | None = None  # the main script (a train of it names its file in tracebacks)

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "dask", "address": ...}``: an address, or ``None`` for a new local cluster (both
        rebuilt by ``Tuner.resume``); a Client or cluster object adds ``"cluster"`` (its type's
        name): it cannot be rebuilt from the journal."""
        if self.cluster is None or isinstance(self.cluster, str):
            return {"type": "dask", "address": self.cluster}
        return {"type": "dask", "address": None, "cluster": type(self.cluster).__name__}

    def _where(self) -> str:
        c = self.cluster
        if c is None:
            return "the local Dask cluster"
        address = c if isinstance(c, str) else getattr(c, "scheduler_address", None) or getattr(
            getattr(c, "scheduler", None), "address", None)
        return f"the Dask cluster at {address!r}" if address else "the Dask cluster"

    def start(self, train: Callable[..., Any], setup: Callable[[], Any] | None, n_workers: int) -> None:
        try:
            self._start(train, setup, n_workers)
        except BaseException:
            # (the tuner shuts an executor down only once it started: what this one opened is closed here)
            self.shutdown()
            raise

    def _start(self, train: Callable[..., Any], setup: Callable[[], Any] | None, n_workers: int) -> None:
        c = self.cluster
        if isinstance(c, distributed.Client):
            self._client = c
        else:
            if c is None:
                unrunnable = _unrunnable_main()
                if unrunnable is not None:
                    raise ConfigError(unrunnable)
                # worker processes that are not daemonic: a trial may start processes of its own (a
                # DataLoader with num_workers, a process pool), as with the local executor (trial 17f)
                try:
                    with dask.config.set({"distributed.worker.daemon": False}):
                        c = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                                     dashboard_address=None)
                except Exception as exc:
                    # trial 22b: "Nanny failed to start" alone
                    raise TuneError(f"executor: Dask's LocalCluster did not start ({type(exc).__name__}: {exc}); its "
                                    "worker processes' own errors, if any, are on stderr above. They re-run the "
                                    "main script as '__mp_main__': it must run in a fresh process, with the code "
                                    "that runs the job under `if __name__ == \"__main__\":`") from exc
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
        self._futures, self._cancelled, self._decisions, self._execs, self._held = {}, {}, {}, {}, {}
        self._notes = {}
        self._killed = set()
        self._train, self._slots = train, n_workers
        main = sys.modules.get("__main__")
        path = getattr(main, "__file__", None)
        self._main_file = os.path.abspath(path) if isinstance(path, str) and os.path.isfile(path) else None
        self._reports = distributed.Queue(_named(self._token, "reports"), client=self._client)
        self._inbox = queue.Queue()
        self._reader = threading.Thread(target=self._read_reports, args=(self._reports, self._inbox),
                                        name="tripwire-dask-reports", daemon=True)
        self._reader.start()
        if setup is not None:
            name = f"tripwire-setup-{self._token}"
            try:
                self._client.register_plugin(_SetupPlugin(setup), name=name)
            except Exception as exc:  # noqa: BLE001 - said in one line below
                self._drop_plugin(name)  # (the scheduler keeps a plugin that some worker refused)
                raise TuneError(self._unloadable("setup", setup, exc)) from None
            self._plugin = name

    def _drop_plugin(self, name: str) -> None:
        """Unregister the job's ``setup()`` plugin from the cluster: the scheduler keeps a worker plugin
        and runs it in every worker that starts later, a nanny's restart too (trial 43b: after three
        jobs on a cluster of the user's, a worker killed by a trial restarted into every earlier job's
        ``setup``, one of them a job refused for a module its workers could not import: the restart
        failed, and the cluster lost that worker for good)."""
        try:
            self._client.unregister_worker_plugin(name)
        except Exception as exc:  # noqa: BLE001 - (a worker that never ran it; the scheduler gone)
            logger.debug("tripwire: unregistering the setup plugin %s: %r", name, exc)

    def _unloadable(self, what: str, fn: Callable[..., Any], exc: BaseException) -> str:
        """One line for a function the cluster's processes cannot load (trial 20c: the plugin's
        registration raised 67 lines of distributed's internals, ending in ``Exception:
        ModuleNotFoundError("No module named 'xtrain'")``)."""
        text = str(exc)
        missing = _NO_MODULE.search(text)
        ref = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
        if missing is None:
            return (f"executor: {self._where()} cannot load {what}={ref} ({type(exc).__name__}: "
                    f"{' '.join(text.split())[:300]})")
        module = missing.group(1)
        top = sys.modules.get(module.split(".")[0])
        origin = getattr(top, "__file__", None)
        folder = os.path.dirname(os.path.dirname(origin) if origin and os.path.basename(origin) == "__init__.py"
                                 else origin) if origin else None
        where = f" (it is in {folder})" if folder else ""
        return (f"executor: the processes of {self._where()} cannot import module {module!r}, which {what}={ref} "
                f"needs{where}: start the Dask scheduler and workers where it imports (from "
                f"{'that folder' if folder else 'its folder'}, or with PYTHONPATH={folder or '<its folder>'}), or "
                f"install it; the folder of a tune YAML is put on the tuning process's sys.path only")

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

    def needs_main_guard(self) -> bool:
        """A ``LocalCluster`` of its own (``executor="dask"``) starts worker processes that re-run the
        main script as ``__mp_main__`` (``spawn``, Dask's default ``multiprocessing-method``): an
        unguarded ``Tuner.fit()`` there started the job again in each of them (trial 22b: a
        JournalLockedError naming the user's own process, then "Nanny failed to start")."""
        if self.cluster is not None:
            return False
        method = dask.config.get("distributed.worker.multiprocessing-method", "spawn")
        return method != "fork" and main_is_importable()

    def free_slots(self) -> int:
        free = self._slots - len(self._futures)
        if self._held and free > 0:
            # a timed-out task that still runs holds its thread (trial 25b): a trial is submitted only
            # where the cluster has a thread for it, or it would wait behind that task
            try:
                threads = sum(self._client.nthreads().values())
            except Exception:  # (the scheduler is gone: poll says so)
                return free
            free = min(free, threads - len(self._futures) - len(self._held))
        return max(0, free)

    def _drop_held(self) -> None:
        """Forget the timed-out tasks that returned (their thread is free again)."""
        for number, (fut, _worker) in list(self._held.items()):
            if fut.done():
                del self._held[number]
                self._release(number)

    def submit(self, spec: TrialSpec) -> None:
        fut = self._client.submit(_run_trial, self._train, spec, self._token, self._main_file, pure=False,
                                  key=f"tripwire-trial-{self._token}-{spec.number}")
        self._futures[spec.number] = fut
        inbox = self._inbox
        fut.add_done_callback(lambda _f: inbox.put(("done", None)))  # wakes poll(); no scheduler call

    def _answer(self, number: int, execution: str, stop: bool, reason: str, kind: str = "") -> None:
        """``(stop, reason, kind)`` on the decision queue of one execution of trial ``number``."""
        key = (number, execution)
        decisions = self._decisions.get(key)
        if decisions is None:  # (one handle an execution, closed when it ends: the scheduler then drops the queue)
            decisions = self._decisions[key] = distributed.Queue(
                _named(self._token, f"decision-{number}-{execution}"), client=self._client)
        decisions.put((stop, reason, kind))
        distributed.Event(_named(self._token, f"decided-{number}-{execution}"), client=self._client).set()

    def reply(self, number: int, stop: bool, reason: str) -> None:
        ex = self._execs.get(number)
        if ex is None:  # (no execution of it began: nothing waits for this answer)
            return
        ex.last_decision = (bool(stop), reason)
        self._answer(number, ex.token, stop, reason)

    def _release(self, number: int) -> None:
        for key in [k for k in self._decisions if k[0] == number]:
            handle = self._decisions.pop(key)
            try:
                handle.close()
            except Exception:  # the scheduler is gone: nothing to release
                pass

    def cancel(self, number: int, reason: str) -> Failed | None:
        """Fail trial ``number`` (its time limit): it stops at its next report. A task that began
        keeps its future (trial 25b): the future of a task that cannot be interrupted was cancelled,
        so the scheduler took its thread for free and placed the next trial behind it, where it never
        began (and never timed out) while another worker sat idle, and ``fit()`` never returned. Held,
        the scheduler places no task on that thread until the task returns, and :meth:`free_slots`
        counts the thread as taken. On the tuner's own ``LocalCluster`` the task's worker process is
        killed (:meth:`_kill_own_worker`) and its nanny starts a new one: the scheduler reruns the task,
        that execution is refused at its start, and the held future returns (trial 28b: a trial hung
        for good held its thread for good, and with every thread so held the job hung). On a cluster
        of the user's the WARNING says when no thread is left: the job then waits for those trials."""
        fut = self._futures.pop(number, None)
        if fut is None:
            return None
        stack = self._task_stack(fut)
        self._cancelled[number] = reason
        ex = self._execs.get(number)
        if ex is None:  # (still waiting for a thread: nothing to hold)
            fut.cancel()
            return Failed(number, f"{reason}; the Dask task was cancelled before it began", "timeout")
        if self._worker_gone(ex.worker):
            # trial 43b: a trial that killed its own worker, whose task the scheduler had not rerun yet (the
            # nanny's new worker still in a slow setup()), ran into its time limit: it read "failed (timeout)",
            # its task said to hold a thread of a worker that was gone
            why = (f"Dask worker {ex.worker} (pid {ex.pid}) died while running trial {number} (found gone at its "
                   f"time limit); a trial's code runs once, so it is not run again")
            self._cancelled[number] = why
            self._answer(number, ex.token, True, why, CANCELLED)
            try:
                fut.cancel()
            except Exception as exc:  # noqa: BLE001 - (the scheduler gone: nothing to cancel)
                logger.debug("tripwire: cancelling the task of trial %d: %r", number, exc)
            return Failed(number, why, "worker_died")
        # its decision now: the task's next report returns True even once this process has gone; the
        # trial learns that it was cancelled, not stopped by the scheduler (Trial.cancelled, trial 20c)
        self._answer(number, ex.token, True, reason, CANCELLED)
        self._held[number] = (fut, ex.worker)
        where = f"\n{STACK_MARKER} (most recent call first):\n{stack}" if stack else ""
        if self._kill_own_worker(ex):
            self._killed.add(number)
            # trial 28b: the tuner's own cluster, whose every thread held a hung trial, hung the job for
            # good. Its worker process is killed, as the local executor kills a timed-out worker; its
            # nanny starts a new one. The scheduler reruns the task elsewhere, and that execution is
            # refused at its start (a trial's code runs once): then the held future returns. (Not
            # cancelled: the scheduler's answer to that cancel met the killed worker's closed client,
            # and it logged a CRITICAL CommClosedError traceback)
            logger.warning("tripwire.tune: trial %d ran past its time limit on Dask worker %s (pid %d), whose thread "
                           "cannot be interrupted: the trial is failed, and that worker process of the job's own "
                           "LocalCluster was killed (its nanny starts a new one), as the local executor kills a "
                           "timed-out worker; the job goes on", number, ex.worker, ex.pid)
            return Failed(number, f"{reason}; its Dask worker {ex.worker} (pid {ex.pid}) of the job's own LocalCluster "
                                  f"was killed and replaced{import_hint(stack)}{where}", "timeout")
        left = self._threads_left()
        if left is not None and left <= 0:
            # trial 28b: every thread of the cluster is held by a timed-out task: said, with the trials
            # the job waits for (each WARNING said "the job goes on with the other threads")
            hung = sorted(self._held)
            logger.warning("tripwire.tune: trial %d ran past its time limit on Dask worker %s (pid %d), whose thread "
                           "cannot be interrupted: the trial is failed, and its task keeps that thread until it "
                           "returns (it stops at its next report). No thread of %s is left: trial(s) %s ran past "
                           "their time limit and hold every thread, so no trial starts and the job waits until one "
                           "of them returns (one that never reports or returns again holds its thread for good: "
                           "restart those workers, or stop the job and resume it on another cluster; tripwire "
                           "restarts no worker of a cluster it did not start)", number, ex.worker, ex.pid,
                           self._where(), ", ".join(map(str, hung)))
        else:
            others = "" if left is None else f" {left}"
            logger.warning("tripwire.tune: trial %d ran past its time limit on Dask worker %s (pid %d), whose thread "
                           "cannot be interrupted: the trial is failed, and its task keeps that thread until it "
                           "returns (it stops at its next report); no trial is placed behind it, the job goes on with "
                           "the other%s thread(s)", number, ex.worker, ex.pid, others)
        return Failed(number, f"{reason}; the Dask task keeps its thread on {ex.worker} until it returns (it stops at "
                              f"its next report){import_hint(stack)}{where}", "timeout")

    def _worker_gone(self, worker: str) -> bool:
        """Whether the scheduler no longer has the worker ``worker`` (its process died; a nanny's new
        one has another address). False where the scheduler does not answer."""
        try:
            workers = self._client.scheduler_info(n_workers=-1).get("workers", {})
        except TypeError:  # (a distributed without n_workers)
            workers = self._client.scheduler_info().get("workers", {})
        except Exception:  # noqa: BLE001 - (the scheduler gone: poll says so)
            return False
        return worker not in workers

    def _threads_left(self) -> int | None:
        """The cluster's threads that no timed-out task holds (None: the scheduler does not answer)."""
        try:
            threads = sum(self._client.nthreads().values())
        except Exception:  # (the scheduler is gone: poll says so)
            return None
        return threads - len(self._held)

    def _own_cluster(self) -> Any:
        """The ``LocalCluster`` this executor started (``executor="dask"``), or None (a cluster, Client or
        address of the user's)."""
        if self.cluster is not None:
            return None
        return next((obj for obj in self._own if obj is not self._client), None)

    def _kill_own_worker(self, ex: _Execution) -> bool:
        """Kill the worker process that runs ``ex`` when it is one of the tuner's own ``LocalCluster``
        (its nanny starts a new one, as a dead worker's does); False for a cluster of the user's, whose
        workers are not tripwire's to kill, or where no nanny of its own has that process now."""
        cluster = self._own_cluster()
        if cluster is None:
            return False
        for nanny in list(getattr(cluster, "workers", {}).values()):
            process = getattr(getattr(nanny, "process", None), "process", None)
            if getattr(process, "pid", None) != ex.pid or getattr(nanny, "worker_address", None) != ex.worker:
                continue
            try:
                os.kill(ex.pid, signal.SIGKILL)
            except ProcessLookupError:
                return True  # (gone already: its nanny replaces it)
            except OSError as exc:
                logger.debug("tripwire: cannot kill Dask worker %s (pid %d): %r", ex.worker, ex.pid, exc)
                return False
            return True
        return False

    def _end(self, number: int, reason: str) -> None:
        """Cancel trial ``number``'s task at the end of the job: it stops at its next report."""
        fut = self._futures.pop(number, None)
        if fut is None:
            return
        self._drop_task(fut)
        self._cancelled[number] = reason
        ex = self._execs.get(number)
        if ex is not None:
            self._answer(number, ex.token, True, reason, CANCELLED)

    def _drop_task(self, fut: Any) -> None:
        """Let the scheduler drop a task at the end of the job (its thread runs it on until it returns).
        The client this executor opened releases it by closing, moments later: a cancel then sent
        (``cancel-keys``) is answered by the scheduler (``cancelled-keys``) on a stream the close has
        just shut, and ``distributed`` logged a ``CommClosedError`` traceback that looked like a crash
        (trial 25e: a timed-out task still running when the job on a cluster of the user's ended). A
        ``Client`` of the user's stays open: its task is cancelled."""
        if self._client is not None and any(obj is self._client for obj in self._own):
            return
        try:
            fut.cancel()
        except Exception:  # the scheduler is gone: nothing to cancel
            pass

    def _task_stack(self, fut: Any) -> str | None:
        """Where the trial's task was (its thread's stack on its Dask worker, most recent call
        first), asked of the scheduler before it is cancelled; None where the worker does not answer
        within :data:`STACK_TIMEOUT_S` (a task holding the GIL stalls the worker's event loop), or
        the task is not running (session 20: a timed-out Dask trial's error had no stack, where
        the local executor's had)."""
        try:
            stacks = self._client.sync(self._client.scheduler.call_stack, keys=[fut.key],
                                       callback_timeout=STACK_TIMEOUT_S)
        except Exception as exc:  # (a worker gone, a timeout: the trial is cancelled without its stack)
            logger.debug("tripwire: no stack of the Dask task %s: %s", fut.key, exc)
            return None
        for frames in (stacks or {}).values():
            lines = (frames or {}).get(fut.key)
            if lines:
                shown = [_main_frame(str(line), self._main_file) for line in reversed(lines)]
                return "".join(line if line.endswith("\n") else line + "\n" for line in shown).rstrip()
        return None

    def _on_start(self, number: int, execution: str, worker: str, pid: int, events: list[Event]) -> None:
        first = self._execs.get(number)
        if number not in self._futures or number in self._cancelled:
            self._answer(number, execution, True, f"trial {number} is no longer running", CANCELLED)
        elif first is None:
            self._execs[number] = _Execution(execution, worker, pid)
            self._answer(number, execution, False, "start")
            events.append(Started(number))
        else:
            # the scheduler reran the trial's task: the worker of its first execution died (trial 20c).
            # This one returns at once, and the trial fails: its code runs once
            why = (f"Dask worker {first.worker} (pid {first.pid}) died while running trial {number}; the "
                   f"scheduler started its task again on {worker} (pid {pid}), which tripwire refused: a trial's code "
                   f"runs once (a configuration that kills its worker, running out of memory say, would take down "
                   f"one worker after another)")
            self._answer(number, execution, True, why, CANCELLED)
            del self._futures[number]
            self._release(number)
            self._cancelled[number] = why  # (a late report of the first execution is answered: stop)
            events.append(Failed(number, why, "worker_died"))

    def _on_report(self, number: int, step: int, value: float, execution: str, events: list[Event]) -> None:
        ex = self._execs.get(number)
        if number in self._cancelled:
            self._answer(number, execution, True, self._cancelled[number], CANCELLED)
        elif ex is None or ex.token != execution or number not in self._futures:
            # an execution the tuning process did not let run (defence in depth: none reports)
            logger.warning("tripwire.tune: dropped a report of trial %d (step=%d) from an execution of its task "
                           "that is not the trial's current one", number, step)
            self._answer(number, execution, True, f"trial {number} is no longer running", CANCELLED)
        elif step <= ex.last_step:
            # (a copy of the trial, in the same process, that reports a step again: the journal has it)
            logger.warning("tripwire.tune: dropped a report of trial %d at step=%d: its last report was at step=%d",
                           number, step, ex.last_step)
            self._answer(number, execution, *ex.last_decision)
        else:
            ex.last_step = step
            events.append(Report(number, step, value))

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
            if kind == "report":
                self._take(item, events)
        self._drop_held()
        for number, fut in list(self._futures.items()):
            if not fut.done():
                continue
            del self._futures[number]
            self._release(number)
            notes = self._notes.pop(number, {})
            if fut.status == "finished":
                out = fut.result()
                if isinstance(out, _Raised):
                    events.append(Failed(number, out.error, "error"))
                elif isinstance(out, _Refused):  # (refused without a first execution: the tuner had ended it)
                    events.append(Failed(number, out.why, "error"))
                else:
                    result, elapsed, rule_stop, early_end = out
                    if rule_stop is None and "rule_stopped" in notes:  # (told by another worker: see _on_note)
                        rule_stop = tuple(notes["rule_stopped"])
                    if early_end is None and "note_early_end" in notes:
                        early_end = notes["note_early_end"]
                    events.append(Finished(number, result, elapsed, rule_stop, early_end))
            else:
                exc = fut.exception()
                tb = "".join(traceback.format_exception(type(exc), exc, fut.traceback())) if exc else fut.status
                kind = "worker_died" if type(exc).__name__ == "KilledWorker" else "error"
                ex = self._execs.get(number)
                if kind == "worker_died" and ex is not None:
                    tb = f"Dask worker {ex.worker} (pid {ex.pid}) died while running trial {number}:\n{tb}"
                events.append(Failed(number, tb, kind))
        return events

    def _has_done(self) -> bool:
        return any(f.done() for f in self._futures.values()) or any(f.done() for f, _ in self._held.values())

    def _take(self, item: tuple[Any, ...], events: list[Event]) -> None:
        """Take one message of the trials' report queue: an execution asking to start, or a report
        (what it answers is its :meth:`_on_start`'s and :meth:`_on_report`'s; their events go to ``events``)."""
        if item[0] == "start":
            self._on_start(*item[1:], events)
        elif item[0] == "report":
            self._on_report(*item[1:], events)
        elif item[0] == "note":
            self._on_note(*item[1:])

    def _on_note(self, number: int, call: str, value: Any, execution: str) -> None:
        """A rule stop or an early end the trial recorded (:meth:`_DaskChannel.note`), kept for its end
        (the first of each counts), and answered."""
        ex = self._execs.get(number)
        if ex is not None and ex.token == execution and number in self._futures:
            self._notes.setdefault(number, {}).setdefault(call, value)
        self._answer(number, execution, False, "noted")

    def _await_refused_reruns(self) -> None:
        """At the end of a job whose trials all returned but for timed-out ones whose worker process
        was killed (:attr:`_killed`): wait (up to :data:`RERUN_WAIT_S`) for the scheduler's rerun of each
        one's task to ask to start, and answer it (refused: a trial's code runs once), so that the task
        returns before the cluster closes. Closed under that execution's wait for its answer (a
        ``distributed.Event``), the scheduler logged ``distributed.event - ERROR`` with a
        ``CancelledError`` traceback, and the worker a ``CancelledError`` WARNING, at every such job's
        end (trial 30e). Its task returning is what ``distributed`` expects of a task."""
        waiting = [n for n in self._killed if n in self._held]
        if not waiting or self._futures or self._reader is None or not self._reader.is_alive():
            return
        deadline = time.monotonic() + RERUN_WAIT_S
        while any(not self._held[n][0].done() for n in waiting if n in self._held) and time.monotonic() < deadline:
            try:
                kind, item = self._inbox.get(timeout=0.05)
            except queue.Empty:
                continue
            if kind == "lost":
                return
            if kind == "report":
                self._take(item, [])  # (a cancelled trial's start: refused; its report: told to stop)
        self._drop_held()

    def shutdown(self) -> None:
        try:
            self._await_refused_reruns()
        except Exception as exc:  # (the scheduler is gone: nothing waits for an answer)
            logger.debug("tripwire: waiting for the reruns of killed workers' trials: %r", exc)
        # every trial returned: the worker processes of a cluster of its own may take their time to exit
        quiet = not self._futures and not self._held
        try:
            for number in list(self._futures):  # interrupted: the trials still running stop at their next report
                self._end(number, "the tuning job ended")
            for fut, _worker in self._held.values():  # (the timed-out tasks: the scheduler may drop them now)
                self._drop_task(fut)
            if self._reader is not None and self._reader.is_alive():
                self._reports.put(None)  # ends the reader's wait
                self._reader.join(timeout=30)
            while True:  # starts and reports the tuner did not take: answer them, so no task waits
                kind, item = self._inbox.get_nowait()
                if kind == "report" and item[0] in ("start", "report"):
                    number, execution = item[1], item[2] if item[0] == "start" else item[4]
                    self._answer(number, execution, True, self._cancelled.get(number, "the tuning job ended"),
                                 CANCELLED)
        except queue.Empty:
            pass
        except Exception:  # the scheduler is gone: nothing to answer
            pass
        finally:
            self._futures.clear()
            self._held.clear()
            for number in {k[0] for k in self._decisions}:
                if number not in self._cancelled:  # (a cancelled trial's late report still reads its stop)
                    self._release(number)
            if self._plugin is not None:
                self._drop_plugin(self._plugin)
                self._plugin = None
            if self._reports is not None:
                try:
                    self._reports.close()
                except Exception:  # the scheduler is gone
                    pass
                self._reports = None
            self._reader = None
            for obj in self._own:
                if quiet and obj is not self._client:  # (the LocalCluster it made: trial 27b)
                    try:
                        _close_workers(obj)
                    except Exception as exc:  # (its close below kills what is left)
                        logger.debug("tripwire: closing the LocalCluster's workers: %r", exc)
                try:
                    obj.close()
                except Exception:  # closing a cluster twice, or one already gone
                    pass
            self._own.clear()

"""Run trials on a Dask ``distributed`` cluster with distributed's own primitives.

Each trial is a task (``client.submit``). ``trial.report`` puts ``(number, step, value)`` on a
``distributed.Queue`` that the tuning process drains, and waits for the decision on the trial's
own ``distributed.Queue``; so, as with the local executor, every decision sees every trial. The
per-worker ``setup()`` runs once per Dask worker through a ``WorkerPlugin`` (workers that join
later run it too); its result is ``trial.context``. A cancelled trial (per-trial time limit)
cannot be interrupted inside a Dask thread: its next report returns ``True`` and the trial is
marked failed at once. A Dask worker that dies fails its trial (``KilledWorker``).
"""

from __future__ import annotations

import time
import traceback
import uuid
from typing import Any, Callable

from tripwire._errors import missing_extra

from ._errors import ConfigError, TuneError
from ._executor import Event, Executor, Failed, Finished, Report, TrialSpec
from ._trial import Trial, take_rule_stop

try:
    import distributed
except ImportError as _exc:  # pragma: no cover - exercised without the extra only
    raise missing_extra("distributed", "dask", _exc) from None

__all__ = ["DaskExecutor"]

DECISION_TIMEOUT_S = 3600.0


class _DaskChannel:
    picklable = True

    def __init__(self, token: str) -> None:
        self.token = token

    def report(self, number: int, step: int, value: float) -> tuple[bool, str]:
        distributed.Queue(f"tripwire-{self.token}-reports").put((number, step, value))
        try:
            stop, reason = distributed.Queue(f"tripwire-{self.token}-decision-{number}").get(
                timeout=DECISION_TIMEOUT_S)
        except TimeoutError:
            raise TuneError(f"trial {number}: no decision from the tuning process within "
                            f"{DECISION_TIMEOUT_S:.0f} s (is it still running?)") from None
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
        plugin = distributed.get_worker().plugins.get(f"tripwire-setup-{token}")
    except ValueError:
        plugin = None
    if plugin is not None:
        if plugin.error is not None:
            raise TuneError(f"setup() failed on this Dask worker:\n{plugin.error}")
        context = plugin.context
    trial = Trial(spec.number, spec.params, spec.min_resource, spec.max_resource, spec.bracket,
                  channel=_DaskChannel(token), context=context)
    take_rule_stop(spec.number)
    t0 = time.perf_counter()
    try:
        out = train(dict(spec.params), trial)
    finally:
        rule_stop = take_rule_stop(spec.number) or trial.stopped_by_rule
    return out, time.perf_counter() - t0, rule_stop


class DaskExecutor(Executor):
    """Trials on a Dask cluster.

    ``cluster``: a scheduler address (``"tcp://host:8786"``), a ``distributed.Client``, a cluster
    object (``LocalCluster``...), or ``None`` to start a ``LocalCluster`` with one single-threaded
    worker process per parallel trial (closed at the end).
    """

    def __init__(self, cluster: Any = None) -> None:
        if cluster is not None and not isinstance(cluster, (str, distributed.Client)) \
                and not hasattr(cluster, "scheduler_address"):
            raise ConfigError(f"cluster={cluster!r} is not a scheduler address, a distributed.Client or a cluster")
        self.cluster = cluster
        self._client: Any = None
        self._own: list[Any] = []
        self._token = ""
        self._train: Callable[..., Any] | None = None
        self._futures: dict[int, Any] = {}
        self._cancelled: dict[int, str] = {}
        self._reports: Any = None
        self._slots = 1

    def to_dict(self) -> dict[str, Any]:
        return {"type": "dask", "address": self.cluster if isinstance(self.cluster, str) else None}

    def start(self, train: Callable[..., Any], setup: Callable[[], Any] | None, n_workers: int) -> None:
        c = self.cluster
        if isinstance(c, distributed.Client):
            self._client = c
        else:
            if c is None:
                c = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=None)
                self._own.append(c)
            self._client = distributed.Client(c)
            self._own.insert(0, self._client)
        self._token = uuid.uuid4().hex[:12]
        self._train, self._slots = train, n_workers
        self._reports = distributed.Queue(f"tripwire-{self._token}-reports", client=self._client)
        if setup is not None:
            self._client.register_plugin(_SetupPlugin(setup), name=f"tripwire-setup-{self._token}")

    def free_slots(self) -> int:
        return self._slots - len(self._futures)

    def submit(self, spec: TrialSpec) -> None:
        self._futures[spec.number] = self._client.submit(
            _run_trial, self._train, spec, self._token, pure=False,
            key=f"tripwire-trial-{self._token}-{spec.number}")

    def reply(self, number: int, stop: bool, reason: str) -> None:
        distributed.Queue(f"tripwire-{self._token}-decision-{number}", client=self._client).put((stop, reason))

    def cancel(self, number: int, reason: str) -> Failed | None:
        fut = self._futures.pop(number, None)
        if fut is None:
            return None
        fut.cancel()
        self._cancelled[number] = reason
        return Failed(number, f"{reason}; the Dask task was cancelled and stops at its next report", "timeout")

    def poll(self, timeout: float) -> list[Event]:
        events: list[Event] = []
        try:
            first = self._reports.get(timeout=timeout) if not self._has_done() else None
        except TimeoutError:
            first = None
        items = [first] if first is not None else []
        if self._reports.qsize():
            items.extend(self._reports.get(batch=True))
        for number, step, value in items:
            if number in self._cancelled:
                self.reply(number, True, self._cancelled[number])
            else:
                events.append(Report(number, step, value))
        for number, fut in list(self._futures.items()):
            if not fut.done():
                continue
            del self._futures[number]
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
        for fut in self._futures.values():
            fut.cancel()
        self._futures.clear()
        for obj in self._own:
            try:
                obj.close()
            except Exception:  # closing a cluster twice, or one already gone
                pass
        self._own.clear()

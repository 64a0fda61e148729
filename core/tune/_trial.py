"""The worker-side trial handle passed to the training function.

Contract (what a framework callback may rely on):

- ``trial.report(step, value) -> bool``: ``step`` is the resource consumed so far (a positive int:
  epochs or boosting rounds, counted from 1), strictly larger than the previous step (duplicates
  and decreasing steps raise :class:`ReportError`); ``value`` the objective metric at that step
  (a real number: a Python or numpy number, or a 0-d or 1-element numpy array or torch tensor,
  read detached; NaN counts as the worst value). Returns ``True`` when the scheduler stops the
  trial: the caller must stop training (set the framework's stop flag) and the training function
  should return. It always returns ``True`` once ``step >= max_resource``; a step larger than
  ``max_resource`` raises :class:`ReportError` (the trial trained past its budget without being
  told to stop). A report after the trial was stopped (``should_stop`` is ``True``) is checked for
  duplicate and decreasing steps, then ignored: it returns ``True`` at once and reaches no
  scheduler, so the journal keeps the resource and the reason of the stop (a framework that runs
  more epochs after its stop flag was set, Lightning up to ``min_epochs``, loses nothing).
- ``trial.should_stop``: the last decision (sticky ``True`` once stopped). ``trial.cancelled``:
  the stop was no scheduler decision but a cancel (time limit, the job ended, the tuning process
  gone; ``stop_reason`` says which): a framework callback says so, not "the tuner stopped the trial"
  (:func:`tuner_stop_reason`).
- ``trial.rule_stopped(rule, message)``: a framework callback calls it when a tripwire rule (not
  the scheduler) stopped the training. The trial then ends ``stopped`` with the reason
  ``"rule <rule>: <message>"`` and is kept out of ``TuningResult.best`` (a broken run is not a
  candidate). The first call counts; ``trial.stopped_by_rule`` holds ``(rule, message)``.
- ``trial.note_early_end(reason)``: a framework callback calls it when the training ended on its
  own before its budget, told to stop by neither the tuner nor a tripwire rule (Lightning's
  ``EarlyStopping``, its ``Timer``: what ``trainer.should_stop`` was set by). The trial's status
  does not change (``completed`` once ``train`` returns); its journaled reason reads
  ``"completed: <reason>"`` instead of ``"completed"`` (trial 31g). The first call counts;
  ``trial.early_end_reason`` holds it. A trial that reached ``max_resource`` keeps ``"reached
  max_resource=M"``.
- ``trial.params``, ``trial.number``, ``trial.bracket``, ``trial.min_resource``,
  ``trial.max_resource``, ``trial.context`` (the return value of the per-worker ``setup()``),
  ``trial.stop_reason``, ``trial.last_step``. ``max_resource`` is ``None`` only under a strategy
  without one (``RandomSearch()``/``GridSearch()`` without ``max_resource=``); Hyperband always gives
  one. ``trial.budget`` is ``max_resource`` as an ``int`` for a training loop
  (``range(1, trial.budget + 1)``, which type checkers accept), a :class:`ConfigError` where there is none.
- ``trial.attempt`` (read-only): 1 for a trial's first run, 2 and up when :meth:`Tuner.resume`
  reruns a trial that was interrupted (same number, same params). A trial that writes files should
  name them by both, ``out_dir=f"runs/trial-{trial.number}-{trial.attempt}"``, so that a rerun does
  not append to the interrupted attempt's files.
- A trial pickles. A copy made in the process that runs the trial function (``copy.deepcopy``, a
  callback that pickles its arguments) reports through the same channel; a copy in another process
  (a spawned DDP rank, a Dask worker that ``xgboost.dask`` sent the callback to) is detached and its
  ``report`` raises :class:`TrialDetachedError`: report from the process that runs the trial
  function only (rank 0), then broadcast the decision. A trial of the Dask executor
  (``Tuner(executor="dask")``) reports from any worker of its Dask cluster: ``xgboost.dask`` inside
  such a trial takes its client from ``distributed.worker_client()``.
"""

from __future__ import annotations

import numbers
import os
import sys
import threading
import weakref
from collections.abc import Mapping
from typing import Any, Callable, Protocol

import numpy as np

from .._finding import _plain as json_safe
from ._errors import ConfigError, ReportError, TrialDetachedError

__all__ = ["Trial"]


class Channel(Protocol):
    def report(self, number: int, step: int, value: float) -> tuple[Any, ...]:
        """``(stop, reason)``, or ``(stop, reason, cancelled)``."""


class TrialLike(Protocol):
    """What the framework callbacks' ``trial=`` takes (the type of that parameter): a tuner
    :class:`Trial`, or any object with ``report(step, value) -> bool`` (``True``: stop training)."""

    def report(self, step: int, value: float) -> bool:
        """Report the objective ``value`` after ``step`` resource units; ``True`` means stop."""
        ...


_LOCAL_CHANNELS: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
_DETACHED = "detached"
# rule stops of the trials this process runs, by trial number: a copy of a trial made in the same
# process (deepcopy, a callback that pickles its arguments) records into the same place
_RULE_STOPS: dict[int, tuple[str, str]] = {}
_RULE_STOPS_LOCK = threading.Lock()
# early ends (note_early_end) of the trials this process runs, by trial number, as _RULE_STOPS
_EARLY_ENDS: dict[int, str] = {}
MESSAGE_CHARS = 200


#: What ``report(value=...)`` and a returned objective accept (trial 22b).
NUMBER_FORMS = ("a real number: a Python or numpy number, or a 0-d or 1-element numpy array or torch tensor "
                "(read detached)")


def number_like(value: Any) -> Any:
    """``value`` as the Python number it holds when it is a numpy number or a 0-d or 1-element array
    or tensor (numpy, torch: read detached, so a tensor still attached to the autograd graph, which
    does not pickle, is its number; anything with ``.item()`` and a shape of one element); else
    ``value`` itself (trial 22b: ``return val_loss`` killed its worker, and a dict of tensors was
    kept as ``'tensor(0.6370)'``)."""
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    item, shape = getattr(value, "item", None), getattr(value, "shape", None)
    if not callable(item) or shape is None:
        return value
    try:
        size = 1
        for n in tuple(shape):
            size *= int(n)
        if size != 1:
            return value
        detach = getattr(value, "detach", None)
        out = (detach() if callable(detach) else value).item()
    except Exception:  # (not an array after all: left as it is)
        return value
    return out if isinstance(out, (bool, numbers.Number)) else value


def number_like_result(out: Any) -> Any:
    """``train``'s return value with :func:`number_like` applied to it, or to each value of a
    returned dict (made a plain dict): done in the worker, before the value is sent."""
    if isinstance(out, Mapping):
        return {k: number_like(v) for k, v in out.items()}
    return number_like(out)


def _described(value: Any) -> str:
    """``value`` for an error message: its type, and its shape where it has one."""
    shape = getattr(value, "shape", None)
    kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
    return f"a {kind}" + (f" of shape {tuple(shape)}" if shape is not None else "")


def _safe_str(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return object.__repr__(value)


def picklable_result(out: Any, dumps: Callable[[Any], Any]) -> tuple[Any, str | None]:
    """For a return value of ``train`` that ``dumps`` (the executor's pickler) refused: ``(value,
    None)`` for a dict, whose values that do not pickle are kept as their ``str`` (as the metrics
    keep them: the objective is not lost, trial 22b); ``(None, error)`` for anything else, or for a
    dict one of whose values still does not pickle (the error names the key). The error says what
    did not pickle and why, whatever the pickler raised (torch raises a RuntimeError for a tensor
    attached to the autograd graph)."""
    if isinstance(out, Mapping):
        kept: dict[Any, Any] = {}
        for key, value in out.items():
            if not isinstance(key, (str, int, float, bool, type(None))):
                key = _safe_str(key)
            try:
                dumps(value)
            except Exception:
                value = _safe_str(value)
            kept[key] = value
        try:
            dumps(kept)
        except Exception as exc:
            bad = next((k for k, v in kept.items() if not _pickles(v, dumps)), None)
            where = f" under the key {bad!r}" if bad is not None else ""
            return None, (f"train returned a dict whose value{where} does not pickle "
                          f"({type(exc).__name__}: {_one_line(exc)}), so it cannot be sent to the tuning process; "
                          "return numbers, str, bool or None as its values")
        return kept, None
    try:
        dumps(out)
    except Exception as exc:
        return None, (f"train returned {_described(out)}, which does not pickle ({type(exc).__name__}: "
                      f"{_one_line(exc)}), so it cannot be sent to the tuning process; return the objective as "
                      f"{NUMBER_FORMS}, or a dict that holds it")
    return out, None


def _pickles(value: Any, dumps: Callable[[Any], Any]) -> bool:
    try:
        dumps(value)
    except Exception:
        return False
    return True


def _one_line(exc: BaseException) -> str:
    text = " ".join(_safe_str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def take_rule_stop(number: int) -> tuple[str, str] | None:
    """The ``(rule, message)`` recorded for trial ``number`` in this process (removed), or None."""
    with _RULE_STOPS_LOCK:
        return _RULE_STOPS.pop(int(number), None)


def take_early_end(number: int) -> str | None:
    """The reason recorded by :meth:`Trial.note_early_end` for trial ``number`` in this process
    (removed), or None."""
    with _RULE_STOPS_LOCK:
        return _EARLY_ENDS.pop(int(number), None)


def _short(message: str) -> str:
    """``message`` on one line, at most :data:`MESSAGE_CHARS` characters."""
    msg = " ".join(message.split())
    return msg if len(msg) <= MESSAGE_CHARS else msg[: MESSAGE_CHARS - 3].rstrip() + "..."


class Trial:
    """Handle of one trial inside the training function (see the module docstring)."""

    def __init__(self, number: int, params: dict[str, Any], min_resource: int | None = None,
                 max_resource: int | None = None, bracket: int = 0, channel: Any = None,
                 context: Any = None, attempt: int = 1) -> None:
        self.number = int(number)
        self._attempt = int(attempt)
        self.params = dict(params)
        self.min_resource = min_resource
        self.max_resource = max_resource
        self.bracket = bracket
        self.context = context
        self.last_step: int | None = None
        self.stop_reason: str | None = None
        self.stopped_by_rule: tuple[str, str] | None = None
        self.early_end_reason: str | None = None
        self._stop = False
        self._cancelled = False
        self._channel = channel
        self._lock = threading.Lock()

    @property
    def budget(self) -> int:
        """``max_resource`` as an ``int``: the most resource units (epochs, boosting rounds) this trial
        may train, for a loop such as ``for epoch in range(1, trial.budget + 1)`` (``max_resource`` is
        ``int | None``, which a type checker refuses in ``trial.max_resource + 1``). A
        :class:`ConfigError` under a strategy without a ``max_resource`` (``RandomSearch()`` or
        ``GridSearch()`` without ``max_resource=``), which says to give one."""
        if self.max_resource is None:
            raise ConfigError(f"trial {self.number}: trial.budget: this strategy has no max_resource (trial."
                              "max_resource is None); accepted: a strategy with one: Hyperband, or "
                              "RandomSearch(max_resource=N) or GridSearch(max_resource=N)")
        return self.max_resource

    @property
    def attempt(self) -> int:
        """1 for the trial's first run; ``n`` for its ``n``-th run (a rerun after an interruption,
        under the same number)."""
        return self._attempt

    @property
    def should_stop(self) -> bool:
        """``True`` once the scheduler has stopped this trial."""
        return self._stop

    @property
    def cancelled(self) -> bool:
        """``True`` when the stop was no decision of the scheduler: the tuner cancelled the trial (it
        ran past ``trial_timeout``, the job ended, the tuning process is gone; ``stop_reason`` says
        which) and its result is discarded. A Dask trial learns it at its next report; a local one
        has its worker killed instead (trial 20c: a timed-out Dask trial's run said "the tuner
        stopped the trial after 1 round")."""
        return self._cancelled

    def report(self, step: int, value: float) -> bool:
        """Report the objective ``value`` after ``step`` resource units; ``True`` means stop."""
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise ReportError(f"trial {self.number}: step={step!r} must be a positive int (resource units "
                              "consumed so far: epochs, boosting rounds; counted from 1)")
        step = int(step)
        if step < 1:
            raise ReportError(f"trial {self.number}: step={step} must be >= 1 (count resource from 1)")
        if self.max_resource is not None and step > self.max_resource and not self._stop:
            raise ReportError(f"trial {self.number}: step={step} is larger than max_resource={self.max_resource} "
                              "(the trial's budget: stop training once report returns True, at the latest at "
                              "step=max_resource)")
        if isinstance(value, (bool, str, bytes)):
            raise ReportError(f"trial {self.number}: value={value!r} must be {NUMBER_FORMS}")
        try:
            # a 1-element numpy array as a 1-element tensor; a tensor read detached (trial 22b)
            fvalue = float(number_like(value))
        except (TypeError, ValueError):
            raise ReportError(f"trial {self.number}: value={value!r} ({_described(value)}) must be "
                              f"{NUMBER_FORMS}") from None
        with self._lock:
            if self.last_step is not None and step <= self.last_step:
                kind = "duplicate" if step == self.last_step else "decreasing"
                raise ReportError(f"trial {self.number}: {kind} step={step} after step={self.last_step}; "
                                  "steps must increase strictly")
            if self._channel == _DETACHED:
                raise TrialDetachedError(
                    f"trial {self.number} was copied into process {os.getpid()}, which does not run the trial "
                    f"function; report from the process that runs it only, and broadcast the decision "
                    f"({_detached_advice()})")
            self.last_step = step
            if self._stop:  # told to stop already: nothing more reaches the scheduler or the journal
                return True
            cancelled: list[Any] = []
            if self._channel is None:
                stop = self.max_resource is not None and step >= self.max_resource
                reason = f"reached max_resource={self.max_resource}" if stop else "no scheduler attached"
            else:
                # (stop, reason), or (stop, reason, cancelled) from a channel that tells a cancel apart
                stop, reason, *cancelled = self._channel.report(self.number, step, fvalue)
            if stop and not self._stop:
                self._stop, self.stop_reason = True, reason
                self._cancelled = bool(cancelled and cancelled[0])
            return self._stop

    def rule_stopped(self, rule: str, message: str) -> None:
        """Record that the tripwire rule ``rule`` stopped the training (``message``: its finding's
        message). The trial ends ``stopped`` with the reason ``"rule <rule>: <message>"`` and is kept
        out of ``TuningResult.best``. The first call counts. Call it from the process that runs the
        trial function (rank 0), as :meth:`report`."""
        if not isinstance(rule, str) or not rule:
            raise ReportError(f"trial {self.number}: rule={rule!r} must be a non-empty rule name")
        if not isinstance(message, str):
            raise ReportError(f"trial {self.number}: message={message!r} must be a str")
        self._keep_first("rule_stopped", "stopped_by_rule", (rule, _short(message)), _RULE_STOPS)

    def note_early_end(self, reason: str) -> None:
        """Record why the training ended on its own before its budget, told to stop by neither the
        tuner nor a tripwire rule (``reason``: a framework's early stopping, ``"EarlyStopping(monitor=
        'val_acc'): Monitored metric val_acc did not improve ..."``; one line of at most 200
        characters is kept). The trial's status does not change: it ends ``completed`` (or as the
        tuner decides), and its reason reads ``"completed: <reason>"`` instead of ``"completed"``
        (trial 31g). The first call counts; ``trial.early_end_reason`` holds it. Call it from the
        process that runs the trial function (rank 0), as :meth:`report`."""
        if not isinstance(reason, str) or not reason.strip():
            raise ReportError(f"trial {self.number}: reason={reason!r} must be a non-empty str")
        self._keep_first("note_early_end", "early_end_reason", _short(reason), _EARLY_ENDS)

    def _keep_first(self, call: str, attr: str, value: Any, shared: dict[int, Any]) -> None:
        """:meth:`rule_stopped`'s and :meth:`note_early_end`'s bookkeeping: ``value`` becomes the
        trial's ``attr`` where it has none yet (the first call counts), and, for a trial that reports
        through a channel (the tuner's worker), ``shared``'s entry for this trial, which travels to the
        tuner with the trial's end. A trial copied into a process that does not run the trial function
        refuses it (``TrialDetachedError`` naming ``call``)."""
        if self._channel == _DETACHED:
            raise TrialDetachedError(
                f"trial {self.number} was copied into process {os.getpid()}, which does not run the trial "
                f"function; call {call} from that process only (rank 0; {_detached_advice()})")
        with self._lock:
            if getattr(self, attr) is None:
                setattr(self, attr, value)
        if self._channel is not None:
            with _RULE_STOPS_LOCK:
                shared.setdefault(self.number, value)
            note = getattr(self._channel, "note", None)
            if note is not None:
                # (trial 40f F1: xgboost.dask runs the callback of rank 0 on whichever Dask worker it picks,
                # another process than the trial's task, whose end never saw this process's entry: the
                # trial was journaled completed and ranked best; the channel tells the tuning process)
                note(self.number, call, value)

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_channel")}
        ch = self._channel
        if ch is None or ch == _DETACHED or getattr(ch, "picklable", False):
            state["_channel"] = ch
        else:
            _LOCAL_CHANNELS[id(ch)] = ch
            state["_channel_ref"] = (os.getpid(), id(ch))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        ref = state.pop("_channel_ref", None)
        self.__dict__.update(state)
        self._lock = threading.Lock()
        if ref is not None:
            pid, key = ref
            ch = _LOCAL_CHANNELS.get(key) if pid == os.getpid() else None
            self._channel = ch if ch is not None else _DETACHED

    def __repr__(self) -> str:
        return (f"Trial(number={self.number}, attempt={self._attempt}, params={self.params!r}, bracket={self.bracket}, "
                f"min_resource={self.min_resource}, max_resource={self.max_resource}, "
                f"should_stop={self._stop})")


_DASK_ADVICE = (
    "xgboost.dask trains on the Dask workers, and a TripwireCallback(trial=...) given to dxgb.train is copied to "
    "each of them: a trial of the tuner's local executor reports from the process that runs train only. Run the "
    "tuner on Dask, Tuner(..., executor=\"dask\"), and in train take a client of that cluster with "
    "distributed.worker_client(): `with worker_client() as client: dxgb.train(client, params, dtrain, "
    "trial.max_resource, evals=..., callbacks=[TripwireCallback(trial=trial, ...)])`; that trial reports from any "
    "worker of the cluster (docs/xgboost.md, Tuning with Dask training)")
"""What a detached trial's error says for xgboost.dask (trial 31d F5: it gave Lightning's advice only)."""


def _in_dask_worker() -> bool:
    """Whether this process is a Dask worker (``distributed.get_worker()`` finds one): a trial copied
    there came with a task, as ``xgboost.dask`` sends its callbacks."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return False
    try:
        distributed.get_worker()
    except Exception:  # noqa: BLE001 - not inside a Dask worker (ValueError), or a distributed that cannot say
        return False
    return True


def _detached_advice() -> str:
    """How to report from a trial that runs in other processes, for :class:`TrialDetachedError`: the
    xgboost.dask way in a Dask worker, else Lightning's and xgboost.dask's both."""
    if _in_dask_worker():
        return f"this process is a Dask worker: {_DASK_ADVICE}"
    return ("Lightning's ddp_spawn runs rank 0 in another process: a trial trains in one process, devices=1; "
            "xgboost.dask trains on Dask workers: run the tuner with executor=\"dask\" and take the client in "
            "train from distributed.worker_client(), docs/xgboost.md")


def trial_facts(trial: Any, metric: str | None) -> dict[str, Any] | None:
    """What a run records of the tuning trial it trains (its worker meta's ``trial``, shown by
    ``tripwire inspect``): ``number``, ``attempt`` and ``params`` where the trial has them, and
    the ``metric`` reported; None without a trial."""
    if trial is None:
        return None
    facts: dict[str, Any] = {"metric": metric}
    for key in ("number", "attempt"):
        value = getattr(trial, key, None)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            facts[key] = int(value)
    params = getattr(trial, "params", None)
    if isinstance(params, Mapping):
        facts["params"] = json_safe(params)
    return facts


def tuner_stop_reason(trial: Any, after: str, detail: str = "") -> str:
    """The run's stop reason for a training that ``trial.report`` told to stop ``after`` (``"epoch
    3"``, ``"3 rounds"``; ``detail``: ``"val_loss=0.412"``): ``"the tuner stopped the trial after
    epoch 3 (val_loss=0.412)"`` for the scheduler's decision; for a cancelled trial
    (:attr:`Trial.cancelled`: it ran past ``trial_timeout``, the job ended or the tuning process is
    gone) what happened instead, ``"the trial was cancelled after epoch 3: trial 0 ran past
    trial_timeout=2 s"`` (trial 20c: such a run claimed the scheduler's stop)."""
    if getattr(trial, "cancelled", False):
        why = getattr(trial, "stop_reason", None)
        return f"the trial was cancelled after {after}" + (f": {why}" if why else "")
    return f"the tuner stopped the trial after {after}" + (f" ({detail})" if detail else "")



def note_tuner_stop(session: Any, trial: Any, step: int, after: str, detail: str = "") -> None:
    """A framework callback's run says why the tuner's stop at ``step`` ended the training
    (:func:`tuner_stop_reason`), unless a rule of the run stopped it already (that is why it ends:
    trial 18c) or the trial ran its whole budget (its training completed)."""
    if session is not None and session.stopped_by is None and not reached_max_resource(trial, step):
        session.stop_reason = tuner_stop_reason(trial, after, detail)


def note_early_end(trial: Any, reason: str) -> None:
    """Tell a tuning ``trial`` that the training ended on its own before its budget (a framework
    callback calls this where the framework's own early stopping ended the fit:
    :meth:`Trial.note_early_end`); nothing for a trial-like object without that method."""
    if trial is not None and hasattr(trial, "note_early_end"):
        trial.note_early_end(reason)


def reached_max_resource(trial: Any, step: int) -> bool:
    """Has a trial stopped at ``step`` run its whole budget (``step >= trial.max_resource``)? Its
    training then completed; a stop before it cut the training short."""
    top = getattr(trial, "max_resource", None)
    return top is not None and step >= int(top)


def note_outside_stop(trial: Any, stop_reason: str) -> None:
    """:func:`note_early_end` with a framework callback's stop reason for a stop it did not ask
    (``"trainer.should_stop was set outside tripwire (train step 5): EarlyStopping(...): ..."``, the
    Lightning, Keras and MXNet callbacks' own; XGBoost's ``"boosting was stopped outside tripwire at
    round 13 (...): ..."``): told without its head, as who stopped and why (``"EarlyStopping(...):
    ..."``, or ``"trainer.should_stop set by another callback ..."``, ``"boosting stopped by another
    callback ..."``)."""
    head, _, cause = stop_reason.partition(": ")
    what = head.split(" outside tripwire", 1)[0].replace(" was ", " ", 1)
    note_early_end(trial, f"{what} {cause}" if cause.startswith("by ") else cause)


def note_rule_stop(trial: Any, finding: Any) -> None:
    """Tell a tuning ``trial`` that a tripwire rule's ``finding`` stopped its training (a framework
    callback calls this where it sets its stop flag for a rule). A finding of severity ``info``
    (``overtraining`` used as early stopping: a healthy run) does not count; neither does a
    trial-like object without :meth:`Trial.rule_stopped`."""
    if trial is not None and finding is not None and finding.severity != "info" and hasattr(trial, "rule_stopped"):
        trial.rule_stopped(finding.rule, finding.message)

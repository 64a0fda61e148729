"""Out-of-process watching: ``tripwire watch RUN --config rules.yaml``.

A :class:`Watcher` follows a run while it is written (``Run.refresh()``), evaluates the rules at the
new records of every worker and mode in write order, as of that record (a rule sees only what was
written up to then, so a backlog is replayed exactly as in-process), at the records the training's
own session judged (trial 25d): a save step's record, not the every-step losses kept between save
steps, which that session writes with the next save step and judges once, there (see
:meth:`Watcher._kept_between`); such losses are judged by themselves only where the session judged
them (a value that is not finite before another mode's record, the last ones at the run's end, a
full buffer). It appends its findings to
``findings/watch-00000.jsonl`` (the writer's JSON-lines format) and, for a rule whose actions include
``stop_training`` (or ``raise``), or for every finding with ``--stop``, asks the training to stop through
:func:`tripwire.request_stop` (the in-process session honours it at its next step; none is written
where every worker of the run has ended: a request applies only to the trainings running when it
was made, and a session started later ignores it). It also raises
``stalled_training`` when no new data arrives. It ends when every worker left its end marker, or
after one pass with ``--once``.

A finding the run already holds (by the training or an earlier watch) is never made again nor acted
on again: it makes its rule "held" for its worker (see :meth:`Watcher._sync_findings`), so replaying
a run with its own rules re-sends no notification. Those of the watched rules are printed (recorded
before / recorded by the training) and count in the CLI's exit status; for one the training records
while watch runs, only a stop is requested (``--stop``, or the rule's ``stop_training``).

A finding the run holds that no rule made (:meth:`Watcher.is_check_finding`: an integration's own
check, as Keras's ``loss_output_mismatch``, XGBoost's ``eval_is_train`` or Lightning's
``distributed_stop``, recorded with ``Session.record_finding``, which marks it ``source: check``
since trial 27c2; in a run written before, told by its name; a stop request's finding naming no
rule) cannot be judged again by any rule: it is read from the run's findings and kept in
:attr:`Watcher.checks`, printed (``tripwire watch --json``: a line of ``type`` ``check``) and, at
severity warning or above, counted in the CLI's exit status as a rule's finding is (trial 27e: a
run whose only finding was ``loss_output_mismatch`` passed a CI gate, exit 0). It is never acted
on: the training's integration chose no action for it.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import heapq
import inspect
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ._actions import Action, bind_run, resolve_action, watched_run_context
from ._config import MODES, Config, ModeSaveConfig, load_config
from ._errors import ActionError, ConfigError, TripwireError
from ._finding import SEVERITIES, Finding
from ._format import FINDINGS_DIR, RUN_FILE
from ._history import History, holds_reduction
from ._run import (ANY_RULE, CHECK_SOURCE, REQUEST_STOP_SOURCE, Run, append_finding_line, check_run_path, open_run,
                   request_stop, unknown_writer_text)
from ._session import (BUFFER_LIMIT, _feedable, _found_key, look_back_tails, scaler_skipped_note,
                       unregistered_rule_notes_muted)
from ._validate import check_float
from tripwire.integrations._provides import XGBOOST_HELD_OUT_FIX as _HELD_OUT_FIX
from .rules._base import MisdatedFindingError, Rule, RuleReturnError, reads_any_of, rule_failure, unjudged_reason
from .rules._classes import ClassRoundRule
from .rules._common import BuiltinRule, names_in, unfed_message, unfed_rules, unmatched_inputs
from .rules._registry import RULE_SETS, _init_parameters, available_rules, build_rules, config_path
from .rules.stalled_training import StalledTraining

logger = logging.getLogger("tripwire")

WATCH_SOURCE = "watch"
WATCH_FINDINGS = f"{WATCH_SOURCE}-00000.jsonl"

#: The severities at which a check the training recorded (:attr:`Watcher.checks`) fails the watch
#: (``tripwire watch`` exits 1), as a rule's finding does; an ``info`` one is printed only (a rank
#: told to stop because another rank stopped, ``distributed_stop`` at ``info``, is no fault of its own).
FAILING_CHECK_SEVERITIES: tuple[str, ...] = SEVERITIES[SEVERITIES.index("warning"):]

# XGBoost's evaluation metrics (the name before any ``@``) by what they tell of the objective
# (trial 26d: watch told a regression run to capture labels for class_imbalance; see
# :meth:`Watcher.not_applicable`): computed for a classifier; computed only for objectives without
# classes (regression, ranking, count, survival); and ``rmse``/``mae``, a regression's defaults that a
# binary classifier (``reg:logistic``) may report too, never above 1 there (its labels and
# probabilities lie in [0, 1]).
_CLASS_METRICS = frozenset({"error", "logloss", "auc", "aucpr", "merror", "mlogloss"})
_NO_CLASS_METRICS = frozenset({"rmsle", "mape", "mphe", "quantile", "poisson-nloglik", "gamma-nloglik",
                               "gamma-deviance", "tweedie-nloglik", "cox-nloglik", "aft-nloglik",
                               "interval-regression-accuracy", "ndcg", "map", "pre"})
_UNIT_BOUNDED_METRICS = frozenset({"rmse", "mae"})
_KNOWN_METRICS = sorted(_CLASS_METRICS | _NO_CLASS_METRICS | _UNIT_BOUNDED_METRICS, key=len, reverse=True)
_NO_CLASSES = "regression, ranking, count or survival"


def _xgboost_set(name: str) -> str:
    """The evaluation set of a run's ``<evalset>-<metric>`` tensor (``train-logloss`` -> ``train``;
    a metric XGBoost does not name, a ``custom_metric``: the name up to its last ``-``)."""
    metric = _xgboost_metric(name)
    base = name.split("@", 1)[0]
    if metric is not None:
        return base[: -len(metric) - 1]
    return base.rpartition("-")[0] or base


def _xgboost_metric(name: str) -> str | None:
    """The XGBoost metric a run's ``<evalset>-<metric>`` tensor holds (``validation-ndcg@5`` ->
    ``ndcg``), None for one XGBoost does not name so (a ``custom_metric``)."""
    base = name.split("@", 1)[0]
    return next((m for m in _KNOWN_METRICS if base.endswith(f"-{m}")), None)


@dataclass
class _KeptLosses:
    """Per worker: the every-step values kept between save steps that the training's session had
    not judged yet, as the replay reaches them (trial 25d)."""

    records: list[tuple[int, float]] = field(default_factory=list)  # (step, wall time) of each kept record
    values: int = 0  # the values they hold (the session judges them all when it holds BUFFER_LIMIT)
    unjudged: tuple[int, float] | None = None  # the last of them, written before another mode's record


def _worker_readers() -> dict[str, inspect.Signature]:
    """The History readers with a ``worker=None`` parameter that :class:`HistoryAsOf` forwards as
    they are (not time-dependent), with their signatures (see :func:`_read_as_worker`)."""
    out = {}
    for name, f in vars(History).items():
        if name.startswith("__") or not inspect.isfunction(f) or name in vars(HistoryAsOf):
            continue
        sig = inspect.signature(f)
        param = sig.parameters.get("worker")
        if param is not None and param.default is None:
            out[name] = sig
    return out


def _read_as_worker(method: Callable[..., Any], sig: inspect.Signature, worker: int, *args: Any, **kwargs: Any) -> Any:
    """``method(*args, **kwargs)`` with ``worker`` where the call leaves ``worker`` None."""
    bound = sig.bind(None, *args, **kwargs)
    if bound.arguments.get("worker") is None:
        bound.arguments["worker"] = worker
    return method(*bound.args[1:], **bound.kwargs)


class HistoryAsOf:
    """A read-only view of a History limited to the records written up to a wall time.

    Rules evaluated by the watcher at an old record must not see later records (a rule checking
    "is the latest value at this step" would otherwise skip a backlog)."""

    def __init__(self, history: History) -> None:
        self._h = history
        self.limit: float | None = None
        self.worker: int | None = None  # the worker whose rules judge now (see judging)
        self._max_step: dict[tuple[str, int], int] = {}
        # per (mode, worker): the number of records it was made for, whether they are in wall-time
        # order, the running maximum of the steps (a replay asks at every record: no pass over them
        # all; the history's arrays are views that grow, so told apart by their length)
        self._order: dict[tuple[str, int], tuple[int, bool, np.ndarray]] = {}
        self._sorted_series: dict[tuple[str, str, str, int, bool], tuple[int, bool]] = {}
        #: the planned length of the training being replayed (the run's ``trainings``: each fit's
        #: own, as its session knew it; trial 25e), else None: the run's ``planned_steps``
        self.planned: int | None = None
        # records written over (trial 26i: a resume from a checkpoint older than the run's last
        # records, a second training appended): per (mode, worker), the records looked at, the
        # index of the record that wrote over each (its "death"; the count of all records while
        # none did), the records not written over yet (of earlier attempts, a heap by step; of the
        # attempt read last; see _death) and the first record that went back (None: none did); per
        # series, the places of its values among the records of its mode and worker; per key id,
        # which scalar layouts hold it
        self._deaths: dict[tuple[str, int], tuple[int, np.ndarray, tuple[list[tuple[int, int]], list[int]],
                                                   int | None]] = {}
        # per (mode, worker), as of the limit: (records read, records by then, standing ranges): _standing
        self._at_limit: dict[tuple[str, int], tuple[int, int, list[tuple[int, int]] | None]] = {}
        self._places: dict[tuple[int, int, int], tuple[int, _Places]] = {}
        self._layouts_of: dict[int, np.ndarray] = {}
        # the series read as of the limit, by (tensor, reduction, mode, worker, finite): the rules of
        # one record ask for the same series again and again (trial 27c: 84 reads of 52 series a
        # record on a run of 21 tensors); only while a limit is set, emptied when it changes (the
        # watcher reads the run's new records before a replay, never during one)
        self._read: dict[tuple[str, str, str, int, bool], tuple[np.ndarray, np.ndarray]] = {}
        # the reductions of each tensor, by the number of (tensor, reduction) keys they were read at
        self._reductions: dict[str, tuple[int, list[str]]] = {}
        # each whole series read, with the number of records of its mode and worker then: _whole
        self._series_read: dict[tuple[str, str, str, int, bool], tuple[int, np.ndarray, np.ndarray]] = {}

    @property
    def planned_steps(self) -> int | None:
        return self.planned if self.planned is not None else self._h.planned_steps

    @property
    def held(self) -> History:
        """The history this view reads, with every record read so far (its series not cut to the
        limit, nor without the records written over): a value that it holds at no step of a range is
        in this view at none of them either, so a rule may rule out a range of steps there without
        cutting each series at every record (``exploding_tensor``'s replay; trial 29b)."""
        return self._h

    def set_limit(self, limit: float | None) -> None:
        self.limit = limit
        self._max_step = {}
        self._at_limit = {}
        self._read = {}

    def reductions(self, tensor: str) -> list[str]:
        """The history's :meth:`~tripwire._history.History.reductions`, kept until a key is added
        (a replay asks for them at every record; the history finds them in a pass over its keys)."""
        keys = len(self._h._keys)
        got = self._reductions.get(tensor)
        if got is None or got[0] != keys:
            got = self._reductions[tensor] = (keys, self._h.reductions(tensor))
        return list(got[1])

    def _records(self, mode: str, worker: int) -> int:
        """The number of records of ``mode`` by ``worker`` read so far (``len(wall_times(...)[0])``
        without making the views)."""
        cols = self._h._wall.get((mode, worker))
        return cols[0].n if cols is not None else 0

    def __getattr__(self, name: str) -> Any:  # everything not time-dependent
        got = getattr(self._h, name)
        if self.worker is not None and name in _WORKER_READERS:
            return functools.partial(_read_as_worker, got, _WORKER_READERS[name], self.worker)
        return got

    def _resolve_worker(self, worker: int | None) -> int:
        """``worker`` as this view's readers read it: None is the worker whose rules judge now
        (:meth:`judging`), else the history's default (rank 0, or its lowest worker)."""
        if worker is None and self.worker is not None:
            return self.worker
        return self._h._resolve_worker(worker)

    @property
    def workers(self) -> list[int]:
        """The history's workers; while a worker's rules judge (:meth:`judging`), that worker alone."""
        return [self.worker] if self.worker is not None else self._h.workers

    @contextlib.contextmanager
    def judging(self, worker: int) -> Iterator[None]:
        """The view as ``worker``'s own session shows its history to its rules: every reader's
        ``worker=None`` reads ``worker``, and :attr:`workers` is ``[worker]`` (trial 38c: a rule of the
        user's own, which reads with ``worker=None``, judged every worker of a two-worker run with
        rank 0's values, where each worker's training had judged its own)."""
        before, self.worker = self.worker, worker
        try:
            yield
        finally:
            self.worker = before

    def _allowed(self, mode: str, worker: int) -> tuple[int, int]:
        """(number of records, largest step) of ``mode`` written up to the limit. The step is an int:
        a float searched in the int64 steps made numpy convert the whole array at every search
        (trial 24i: a replay's cost per record grew with the run)."""
        steps, walls = self._h.wall_times(mode, worker)
        if not len(steps):
            return 0, -1
        order = self._order.get((mode, worker))
        if order is None or order[0] != len(walls):
            order = self._order[(mode, worker)] = (len(walls), bool(np.all(walls[1:] >= walls[:-1])),
                                                   np.maximum.accumulate(steps))
        if self.limit is None:
            return len(steps), int(order[2][-1])
        if order[1]:  # records in wall-time order (one writer's): a binary search
            n = int(np.searchsorted(walls, self.limit, side="right"))
        else:
            n = int(np.count_nonzero(walls <= self.limit))
            return n, int(steps[:n].max()) if n else -1
        return n, int(order[2][n - 1]) if n else -1

    # ------------------------------------------------------ records written over (trial 26i)
    def _death(self, mode: str, worker: int) -> tuple[np.ndarray, int | None]:
        """``(death, first)`` of the records of ``mode`` by ``worker``, every record read so far: for
        each record the index of the later record that wrote over it, or at least the number of
        records where none did; ``first``: the first record whose step went back, or that wrote over one
        at its own step (None: none did, and nothing was written over). Kept up as records come (each looked at once).

        A record is written over by the first later record, at its step or before it, of a later
        writing session (an *attempt*: a resume from an earlier checkpoint, a second training appended
        into the run), whose records' global steps go back (as
        :func:`~tripwire._history.live_records` with attempts). Steps that go back within one
        session are no such thing: that session's rules kept every record as it came (a hand loop
        that restarts its step number every epoch, which the session warns about once; trial 27s1:
        the replay read each epoch as written over by the next, so its rules saw the last epoch's
        training values only, and found overfitting where the in-process rules found none). Where a
        record's global step is not known (a shard written before they were), every step going back
        begins an attempt, as before."""
        steps = self._h.wall_times(mode, worker)[0]
        total = len(steps)
        key = (mode, worker)
        done, death, state, first = self._deaths.get(key, (0, np.zeros(0, dtype=np.int64), ([], []), None))
        if total > done:
            if first is None and self._ascending(mode, worker, steps, max(done - 1, 0), total):
                # (ascending: nothing written over; the attempts are told if a step ever goes back)
                state = ([], [])
                death = np.zeros(0, dtype=np.int64)
            else:
                # (pool: a max-heap by step, (-step, index), of the standing records of earlier attempts;
                # current: the records of the attempt being read, which none of its own writes over)
                pool, current = state
                if first is None:  # (the first going back: the records before it all stand, one attempt so far)
                    pool, current = [], list(range(done))
                    death = np.full(done, np.iinfo(np.int64).max, dtype=np.int64)
                grown = np.full(total, np.iinfo(np.int64).max, dtype=np.int64)
                grown[:len(death)] = death
                death = grown
                values = steps.tolist()
                column = self._h._gsteps.get((mode, worker))
                gsteps = column.view().tolist() if column is not None and column.n == total else [-1] * total
                for j in range(done, total):
                    s = values[j]
                    if j:
                        back = s < values[j - 1]
                        if back and first is None:
                            first = j
                        g, before = gsteps[j], gsteps[j - 1]
                        if (g <= before) if g >= 0 and before >= 0 else back:  # (a later writing session)
                            for i in current:
                                heapq.heappush(pool, (-values[i], i))
                            current = []
                    while pool and -pool[0][0] >= s:
                        death[heapq.heappop(pool)[1]] = j
                        if first is None:  # (a later session's record at the step written last: trial 38i)
                            first = j
                    current.append(j)
                state = (pool, current)
            self._deaths[key] = (total, death, state, first)
        return death, first

    def _ascending(self, mode: str, worker: int, steps: np.ndarray, start: int, total: int) -> bool:
        """Whether the records ``start:total`` of ``mode`` by ``worker`` write over none before them: their
        steps never go back, and none is at the step of the record before it from a later writing
        session (its global step not above that record's: a resume whose first step is the one the
        attempt that died wrote last; trial 38i: the replay read both records of that step, where the
        resumed training's rules read its own alone)."""
        st = steps[start:total]
        if not bool(np.all(st[1:] >= st[:-1])):
            return False
        column = self._h._gsteps.get((mode, worker))
        if column is None or column.n != len(steps):
            return True
        g = column.view()[start:total]
        again = (st[1:] == st[:-1]) & (g[1:] <= g[:-1]) & (g[1:] >= 0) & (g[:-1] >= 0)
        return not bool(np.any(again))

    def _standing(self, mode: str, worker: int) -> tuple[int, list[tuple[int, int]] | None]:
        """``(n, ranges)`` as of the limit: ``n`` the records of ``mode`` by ``worker`` written by then
        and ``ranges`` the ``[a, b)`` index ranges of those that stand (not written over by a record up
        to the ``n``-th), in order; ``ranges`` None where no record of that mode and worker ever went
        back (then a series' values up to the limit are those of its steps up to the highest step
        written by then: the records after them are of higher steps). Kept per limit (a replay asks
        for every series it judges)."""
        key = (mode, worker)
        total = self._records(mode, worker)
        got = self._at_limit.get(key)
        if got is not None and got[0] == total:
            return got[1], got[2]
        n = self._allowed(mode, worker)[0]
        death, first = self._death(mode, worker)
        ranges: list[tuple[int, int]] | None = None
        if first is not None:
            alive = death[:n] >= n
            if alive.all():
                ranges = [(0, n)]
            else:
                bounds = np.concatenate(([0], np.flatnonzero(alive[1:] != alive[:-1]) + 1, [n]))
                ranges = [(int(a), int(b)) for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()) if alive[a]]
        self._at_limit[key] = (total, n, ranges)
        return n, ranges

    def _places_of(self, tensor: str, reduction: str, mode: str, worker: int, length: int) -> np.ndarray | None:
        """The places of a series' values among the records of its mode and worker (the index
        :meth:`wall_times` gives), or None where they cannot be told (a series of another length)."""
        h = self._h
        kid = h._key_id(tensor, reduction)
        mode_id = h._mode_index.get(mode)
        if kid is None or mode_id is None:
            return None
        rec = h._rec
        total = rec["step"].n
        key = (kid, mode_id, worker)
        seen, places = self._places.get(key, (0, _Places()))
        if total > seen:
            layouts = self._layouts_of.get(kid)
            if layouts is None or len(layouts) < len(h._layouts):
                layouts = self._layouts_of[kid] = np.asarray([bool(np.any(ids == kid)) for ids in h._layouts], dtype=bool)
            part = slice(seen, total)
            mine = ((rec["mode"].view()[part] == mode_id) & (rec["worker"].view()[part] == worker)
                    & layouts[rec["layout"].view()[part]])
            places.extend(rec["pos"].view()[part][mine])
            self._places[key] = (total, places)
        out = places.view()
        return out if len(out) == length else None

    def wall_times(self, mode: str = "train", worker: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        worker = self._resolve_worker(worker)
        steps, walls = self._h.wall_times(mode, worker)
        n, ranges = self._standing(mode, worker)
        if ranges is not None and ranges != [(0, n)]:  # (records written over by then: not the training's any more)
            keep = np.concatenate([np.arange(a, b) for a, b in ranges]) if ranges else np.zeros(0, dtype=np.int64)
            return steps[keep], walls[keep]
        return steps[:n], walls[:n]

    def steps(self, mode: str = "train", worker: int | None = None) -> list[int]:
        workers = self.workers if worker is None else [worker]
        out: set[int] = set()
        for w in workers:
            out.update(self.wall_times(mode, w)[0].tolist())
        return sorted(out)

    def modes(self) -> list[str]:
        return [m for m in MODES if any(len(self.wall_times(m, w)[0]) for w in self.workers)]

    def series(self, tensor: str, reduction: str = "raw", mode: str | None = None,
               worker: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        return self._limited(tensor, reduction, mode, self._resolve_worker(worker), False)

    def finite_series(self, tensor: str, reduction: str = "raw", mode: str | None = None,
                      worker: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        return self._limited(tensor, reduction, mode, self._resolve_worker(worker), True)

    def _limited(self, tensor: str, reduction: str, mode: str | None, worker: int,
                 finite: bool) -> tuple[np.ndarray, np.ndarray]:
        """The history's series (``finite``: without non-finite values) up to the limit, without the
        values of records written over by then (trial 26i: after a resume from an earlier checkpoint
        the replay judged the dead attempt's steps beside the resumed ones, unsorted). Kept while the
        limit stays (see :attr:`_read`). ``mode=None``: the series' own (see :meth:`History.series`)."""
        if mode is None:
            mode = self._h._own_mode(tensor, reduction, worker)
        if self.limit is None:
            return self._cut(tensor, reduction, mode, worker, finite)
        key = (tensor, reduction, mode, worker, finite)
        got = self._read.get(key)
        if got is None:
            got = self._read[key] = self._cut(tensor, reduction, mode, worker, finite)
        return got

    def _whole(self, tensor: str, reduction: str, mode: str, worker: int, finite: bool) -> tuple[np.ndarray, np.ndarray]:
        """The history's whole series (``finite``: :meth:`~tripwire._history.History.finite_series`),
        read again only once records of ``mode`` by ``worker`` were added (a replay cuts the same
        series at every record; trial 27c: reading it again was a fifth of a watch's time)."""
        key = (tensor, reduction, mode, worker, finite)
        count = self._records(mode, worker)
        got = self._series_read.get(key)
        if got is None or got[0] != count:
            read = self._h.finite_series if finite else self._h.series
            got = self._series_read[key] = (count, *read(tensor, reduction, mode, worker))
        return got[1], got[2]

    def _cut(self, tensor: str, reduction: str, mode: str, worker: int, finite: bool) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_limited`'s series, read and cut to the limit."""
        n, ranges = self._standing(mode, worker)
        if ranges is not None:
            steps, values = self._whole(tensor, reduction, mode, worker, False)
            places = self._places_of(tensor, reduction, mode, worker, len(steps))
            if places is not None:  # (the values of the standing records: slices of the series, places ascend)
                cuts = np.searchsorted(places, np.asarray(ranges, dtype=np.int64).reshape(-1)).tolist()
                if len(cuts) == 2:
                    steps, values = steps[cuts[0]:cuts[1]], values[cuts[0]:cuts[1]]
                else:
                    keep = np.concatenate([np.arange(a, b) for a, b in zip(cuts[::2], cuts[1::2])]) if cuts else \
                        np.zeros(0, dtype=np.int64)
                    steps, values = steps[keep], values[keep]
                if finite:
                    ok = np.isfinite(values)
                    if not ok.all():
                        steps, values = steps[ok], values[ok]
                return steps, values
        steps, values = self._whole(tensor, reduction, mode, worker, finite)
        if self.limit is None or not len(steps):
            return steps, values
        key = (mode, worker)
        top = self._max_step.get(key)
        if top is None:
            top = self._max_step[key] = self._allowed(mode, worker)[1]
        if steps[-1] <= top:
            return steps, values
        skey = (tensor, reduction, mode, worker, finite)
        known = self._sorted_series.get(skey)
        if known is None or known[0] != len(steps):
            known = self._sorted_series[skey] = (len(steps), bool(np.all(steps[1:] >= steps[:-1])))
        if known[1]:  # steps in order (no resumed steps written twice): a binary search, views
            n = int(steps.searchsorted(top, side="right"))
            return steps[:n], values[:n]
        keep = steps <= top
        return steps[keep], values[keep]

    # defined through ``series``: History's own methods, reading this view's limited series
    latest = History.latest
    value = History.value

    def values_at(self, tensors: Sequence[str], reduction: str, step: int, mode: str,
                  worker: int | None = None) -> list[float | None]:
        """:meth:`value` of each of ``tensors``, as this view shows them (the history's own
        ``values_at`` reads its series' last values, which may lie past the limit)."""
        return [self.value(t, reduction, step, mode, worker) for t in tensors]

    def array_steps(self, tensor: str, kind: str = "raw", mode: str = "train", worker: int | None = None) -> list[int]:
        worker = self._resolve_worker(worker)
        n, top = self._allowed(mode, worker)
        ranges = self._standing(mode, worker)[1] if n else None
        if ranges is not None and ranges != [(0, n)]:  # (the last record stands, the highest standing)
            top = int(self._h.wall_times(mode, worker)[0][n - 1])
        return [s for s in self._h.array_steps(tensor, kind, mode, worker) if s <= top]


_WORKER_READERS = _worker_readers()


class _Places:
    """A growing int64 column (the places of a series' values among its records)."""

    __slots__ = ("data", "n")

    def __init__(self) -> None:
        self.data = np.zeros(8, dtype=np.int64)
        self.n = 0

    def extend(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.data):
            grown = np.zeros(max(need, 2 * len(self.data)), dtype=np.int64)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        self.data[self.n : need] = values
        self.n = need

    def view(self) -> np.ndarray:
        return self.data[: self.n]


def checked_config(config: str | os.PathLike[str] | Mapping[str, Any] | Config) -> Config:
    """``config`` loaded, with everything checked that does not need the run: the YAML, the rules
    built (names, parameters, ``module:attribute`` imports) and every action (top-level and per
    rule) resolved; a :class:`ConfigError` otherwise, as ``tripwire validate`` refuses the file.

    Trial 26c: a watch started before the training took a config naming an unknown rule, waited
    for the run, and refused the config only once the training had started writing (the training
    then ran unwatched); with ``--timeout`` and no run the error was a WARNING line and exit 3. What
    needs the run (a rule its framework cannot feed) is checked when the run appears. The save
    config is not checked: the watch reads what the training saved."""
    with unregistered_rule_notes_muted():  # (build_rules below refuses the name, or takes it: said once)
        loaded = load_config(config)
    rules = build_rules(loaded.rules)
    for i, a in enumerate(loaded.actions):
        resolve_action(a, f"actions[{i}]")
    for rule in rules:
        for i, a in enumerate(rule.actions or ()):
            resolve_action(a, f"{config_path(rule)}.actions[{i}]")
    return loaded


class FindingNotRecordedError(TripwireError, OSError):
    """A finding (or rule error) a watch made could not be written into the run's findings (a
    read-only run or file system, a full disk, a findings file that is a folder): ``errno`` is the
    system's, ``path`` the file; the message names both, and the way to judge a run without writing
    into it (``tripwire watch --no-record``, ``Watcher(record=False)``). The finding was echoed
    (printed) before."""

    path: str = ""


class Watcher:
    """Evaluate rules over a stored run while it is written.

    ``config``: a YAML path, mapping or :class:`Config` whose ``rules`` and ``actions`` are used (None:
    the rules stored with the run, else the ``default`` set). ``stop``: the first finding of a watched
    rule made while the watch runs requests a stop: one this watch makes, or one the training records
    meanwhile (the watch never makes a finding the run holds: without it, a training recording the
    watched rules itself would never be stopped), whichever was made first, at the place of its
    record among those a poll judges (trial 31c #1); not one recorded before the watch, nor a check.
    ``echo``: called with each finding this watch makes (default: print it;
    the default also prints :attr:`earlier` and :attr:`recorded` ones, marked). A ``config`` is
    checked as it is given (see :func:`checked_config`): a :class:`ConfigError` then, not when the
    run appears.

    ``record``: each finding (and rule error) this watch makes is appended to the run's
    ``findings/watch-00000.jsonl``, after ``echo`` has it; where that write fails (a read-only run,
    a full disk) :class:`FindingNotRecordedError` ends the watch, naming the system's reason.
    ``record=False`` (``tripwire watch --no-record``) writes nothing into the run: no findings file,
    no stop request (a stop that ``stop`` or a rule's ``stop_training``/``raise`` wants is not
    asked for; :attr:`stop_skipped` holds its finding, and it is said once), to judge a read-only
    copy of a run. The actions still fire with ``record=False`` (``log``, ``notify``, a
    ``module:attribute`` action: they write nothing into the run); give a config whose actions
    are ``[log]`` to judge a copy without notifying anyone.

    An action that fails (raises) is logged with its error and listed in :attr:`failed_actions`;
    the watch goes on (``tripwire watch`` then exits 2, and its summary counts them).
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        config: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None,
        *,
        stop: bool = False,
        echo: Callable[[Finding], None] | None = None,
        json_lines: bool = False,
        record: bool = True,
    ) -> None:
        check_run_path(run_dir)  # (a URL would be waited for, for ever)
        if not isinstance(record, bool):
            raise ConfigError(f"record: got {record!r}; accepted: True (findings are written into the run) or False "
                              f"(nothing is written into the run)")
        self.run_dir = Path(run_dir)
        #: whether this watch writes its findings (and stop requests) into the run (see ``record``)
        self.record = record
        self._config_source = config
        self.stop = stop
        #: the default echo prints each finding as one JSON object a line (``tripwire watch --json``:
        #: :func:`finding_line`) instead of its text
        self.json_lines = json_lines
        self.echo = echo if echo is not None else (lambda f: self._show(f, "new"))
        self._echo_prints = echo is None  # the default echo prints each finding: the log action would repeat it
        #: The workers whose training ended without closing the run (killed ...): the watch ended
        #: when every unfinished worker was one (see :meth:`Run.abandoned_workers`).
        self.abandoned: list[int] = []
        #: The workers without an end marker whose writer this machine cannot see (a copy of a run
        #: still written, a run of another machine: :meth:`Run.unknown_workers`, their entries), where
        #: no unfinished worker is known to write: set by ``once`` (judged what was written), and by
        #: a watch that gave up at its ``timeout`` (a live watch waits for their end markers).
        self.unknown: dict[int, dict[str, Any]] = {}
        #: True when the watch gave up at its ``timeout`` before the run ended.
        self.timed_out = False
        #: Whether, at a live watch's first look at the run, every worker without an end marker had
        #: already ended without closing it (a crashed run, which a resume may reopen: see
        #: :meth:`watch`'s ``wait_resume``); None until a live watch read the run.
        self.gone_at_start: bool | None = None
        self.config: Config | None = None
        self.run: Run | None = None
        self.view: HistoryAsOf | None = None
        self.findings: list[Finding] = []  # made by this watch
        #: the actions that failed (raised) for a finding of this watch, in order: ``{"action", "rule",
        #: "worker", "step", "mode", "error"}`` (``error``: the exception's type and message); trial
        #: 29j F11: a webhook that failed changed neither the exit status nor the summary
        self.failed_actions: list[dict[str, Any]] = []
        #: findings of the watched rules that the run held when this watch first read it (by the
        #: training or an earlier watch): printed, counted in the exit status, never acted on again
        self.earlier: list[Finding] = []
        #: findings of the watched rules that another writer (the training) recorded while this
        #: watch ran: printed, counted, and only a stop is requested for them (``--stop`` or the
        #: rule's ``stop_training``/``raise``): the training fired the rule's other actions itself
        self.recorded: list[Finding] = []
        #: findings the run holds that no rule made (:meth:`is_check`: an integration's own check,
        #: ``loss_output_mismatch``, ``eval_is_train``, ``distributed_stop``; a stop request's finding
        #: naming no rule), in the order read: no rule can judge them again, so they are read from
        #: the run's findings; printed, counted in the CLI's exit status at a severity in
        #: :data:`FAILING_CHECK_SEVERITIES`, never acted on (no stop, not with ``--stop`` either)
        self.checks: list[Finding] = []
        #: findings the run holds of rules this watch does not run (neither printed nor counted, but
        #: the one that stopped a worker: :meth:`unwatched_stops`)
        self.unwatched: list[Finding] = []
        self._rule_names: set[str] | None = None  # the names of the run's own configured rules
        #: the finding this watch asked the training to stop for (:func:`tripwire.request_stop`)
        self.stop_requested: Finding | None = None
        #: the finding a stop was wanted for when no worker of the run trained any more: no request
        #: was written (it would stop the next training in the run's ``out_dir``)
        self.stop_skipped: Finding | None = None
        self._rules: dict[int, list[Rule]] = {}
        self._actions: dict[int, list[list[Action]]] = {}
        self._fired: set[tuple[int, int]] = set()
        # (training index, rule, worker, mode, step, its place among its evaluation's findings) of each
        # finding made: a resumed attempt's record of a step the dead attempt judged too makes it once
        # (see _evaluate)
        self._made: set[tuple[int, str, int, str, int, int]] = set()
        self._disabled: set[tuple[int, int]] = set()
        self._done: dict[tuple[str, int], int] = {}
        self._held: set[tuple[str, int]] = set()  # (rule, worker) the run holds a finding of
        self._held_step: dict[tuple[str, int, str], int] = {}  # (rule, worker, mode) -> its largest step
        # (rule, worker, mode) -> (step, wall time, made by the training, not a watch) of each: what a
        # training of its own in the out_dir holds is what was made since it began (its steps started
        # again; trial 26i), and the first of several trainings what its own made before the next began
        self._held_at: dict[tuple[str, int, str], list[tuple[int, float, bool]]] = {}
        # an earlier watch's error records: the same error again is shown, not written again (trial 23d)
        self._held_errors: set[tuple[str, int, str, int, str]] = set()
        self._seen: set[tuple[Any, ...]] = set()  # the run's findings read so far
        # the findings another writer (the training) recorded while this watch ran, read at this poll
        # and not yet printed nor acted on: each is, at its place among the poll's records by wall time
        # (trial 31c #1: the training's warning at step 2520, read first, took the stop, and was printed
        # before the watch's own critical finding at step 2500): (finding, origin's prefix, is a check)
        self._during: list[tuple[Finding, str, bool]] = []
        self._mine: set[tuple[Any, ...]] = set()  # those this watch wrote
        self._synced = False
        # which train records hold only every-step values kept between save steps (trial 25d):
        # per worker, the steps of such records (-> the values each holds) and of the other train
        # records; the scalar records of the run read so far; per layout, its values when it holds
        # only tensors of every-step collections (else None); the every-step collections' train
        # save configs (None: not read yet); per worker, the kept records not judged yet
        self._kept_steps: dict[int, dict[int, int]] = {}
        self._saved_steps: dict[int, set[int]] = {}
        self._records_seen = 0
        self._layout_kept: dict[int, int | None] = {}
        self._kept_keys: set[tuple[str, str]] = set()
        self._every_saves: list[ModeSaveConfig] | None = None
        self._kept: dict[int, _KeptLosses] = {}
        # per worker: the index of the training the replay is in (Run.trainings; trial 25e)
        self._training: dict[int, int] = {}
        if config is not None:
            self.config = checked_config(config)  # checked before the run exists (trial 26c)

    # --------------------------------------------------------------------------------- setup
    def _open(self) -> bool:
        if self.run is not None:
            return True
        if not (self.run_dir / RUN_FILE).is_file():
            if self.run_dir.exists() and not self.run_dir.is_dir():
                open_run(self.run_dir)  # a file never becomes a run: RunNotFoundError, as open_run says it
            return False
        self.run = open_run(self.run_dir)
        self.view = HistoryAsOf(self.run)
        if self.config is None:
            stored = self.run.config.get("rules") or ["default"]
            try:
                self.config = load_config({"rules": stored, "actions": self.run.config.get("actions", ["log", "record"])})
            except ConfigError:
                self.config = load_config({"rules": ["default"]})
        return True

    def _rules_for(self, worker: int) -> list[Rule]:
        rules = self._rules.get(worker)
        if rules is None:
            assert self.config is not None
            assert self.run is not None
            # as the training's session judged: a rule set's members that its integration cannot
            # feed (vanishing_gradient on XGBoost) are left out, a rule named alone is refused
            info = self.run.info
            rules = _feedable(self.config, build_rules(self.config.rules), str(info.get("framework", "python")),
                              info.get("provides"))
            _bind_as_in_training(rules, self.run.rule_inputs)
            default = [resolve_action(a, f"actions[{i}]") for i, a in enumerate(self.config.actions)]
            actions = []
            for i, rule in enumerate(rules):
                if isinstance(rule, BuiltinRule):
                    rule.worker = worker
                actions.append(
                    [resolve_action(a, f"{config_path(rule)}.actions[{k}]") for k, a in enumerate(rule.actions)]
                    if rule.actions is not None else default
                )
            # (the actions that use where findings are made get the watched run's: trial 29j F8)
            bound = [*default, *(a for acts in actions for a in acts)]
            if any(a.wants_run for a in bound):
                bind_run(bound, watched_run_context(self.run, worker))
            self._rules[worker] = rules
            self._actions[worker] = actions
        return rules

    # ------------------------------------------------------------------------------ one pass
    def poll(self, now: float | None = None) -> list[Finding]:
        """Read what is new, evaluate it, act; return the new findings."""
        if not self._open():
            return []
        assert self.run is not None and self.view is not None
        self.run.refresh()
        self._sync_findings()
        try:
            return self._poll_records(now)
        finally:  # (what is left: recorded after the poll's last record; printed, not acted on after an error)
            self._release_during(None, act=sys.exc_info()[0] is None)

    def _poll_records(self, now: float | None) -> list[Finding]:
        """:meth:`poll`'s part after the run was read: judge the new records in write order (the
        findings the training recorded meanwhile released at their place: :meth:`_release_during`)."""
        assert self.run is not None and self.view is not None
        new: list[Finding] = []
        pending: list[tuple[float, int, str, int, int]] = []  # wall, worker, mode, step, order
        for worker in self.run.workers:
            for mode in MODES:
                steps, walls = self.run.wall_times(mode, worker)
                start = self._done.get((mode, worker), 0)
                for k in range(start, len(steps)):
                    pending.append((float(walls[k]), worker, mode, int(steps[k]), k))
                self._done[(mode, worker)] = len(steps)
        pending.sort()
        between = self._kept_between()
        for wall, worker, mode, step, k in pending:
            self._release_during(wall)
            if worker in self.run.trainings:  # a later training through the session begins at this record
                new += self._enter_training(worker, wall, mode, step)
            if between:
                kept = self._kept.setdefault(worker, _KeptLosses())
                if mode == "train" and self._is_kept(worker, step):
                    # written with the next save step's record and judged once, there (trial 25d: a
                    # custom gradient rule with patience 2 read one gradient save twice and fired at a
                    # loss-only step; loss_not_decreasing with patience 3 fired 18 steps early)
                    kept.records.append((step, wall))
                    kept.values += self._kept_steps[worker][step]
                    if kept.values >= BUFFER_LIMIT:  # (the session judges a full buffer at once)
                        new += self._judge_kept(worker, kept, wall)
                    continue
                if mode != "train" and kept.records:
                    # written before another mode's record: judged there when a value is not finite,
                    # else at the run's end unless a train step is judged before
                    last = kept.records[-1]
                    if self._kept_nonfinite(worker, kept):
                        new += self._judge_kept(worker, kept, last[1])
                    else:
                        kept.records, kept.values, kept.unjudged = [], 0, last
                elif mode == "train":
                    kept.records, kept.values, kept.unjudged = [], 0, None
            self.view.set_limit(wall)
            new += self._evaluate(worker, step, mode, train_step=self._train_step_before(worker, mode, step, k))
        self.view.set_limit(None)
        if between:
            new += self._judge_at_end()
        for worker in self._ended_workers():  # (as its session did when it closed the run: trial 32e F2)
            new += self._judge_tails(worker, None)
        self._release_during(None)  # (recorded after the last record read: before an idle finding, made now)
        if not pending and not self.run.is_complete:
            new += self._idle(time.time() if now is None else now)
        return new

    # ------------------------------------------- the trainings through one session (trial 25e)
    def _enter_training(self, worker: int, wall: float, mode: str, step: int) -> list[Finding]:
        """Before the record of ``worker`` at ``step`` (``mode``) written at ``wall``: where it is
        the first of a later training through the training's session (``Run.trainings``: a second
        Keras ``fit``, MXNet ``est.fit``), do what the session did there: judge the every-step
        values it had kept at the last fit's end (its close), then arm the worker's rules again
        (``Session.new_training``: a built-in rule of a new training judges its steps alone, one
        of a continued fit keeps its view of the earlier fits; a rule that fired may fire again).
        Trial 25e: the replay judged the two fits as one training (a false alarm where the
        session's rules had judged a new model alone; a finding of a continued fit missed)."""
        trainings = self.run.trainings[worker] if self.run is not None else []
        k = self._training.get(worker, 0)
        out: list[Finding] = []
        while k + 1 < len(trainings):
            nxt = trainings[k + 1]
            began = nxt["began"]
            if not (wall >= began if began is not None else step >= nxt["steps"].get(mode, 0)):
                break
            kept = self._kept.get(worker)  # (what the session judged when the fit before it closed)
            until = None if began is None else float(np.nextafter(began, -np.inf))
            if kept is not None:
                out += self._judge_kept(worker, kept, until)
            out += self._judge_tails(worker, until)  # (then the look-back rules' last steps, as it did)
            k += 1
            self._training[worker] = k
            for i, rule in enumerate(self._rules_for(worker)):
                if isinstance(rule, BuiltinRule):
                    rule.rearm(nxt["steps"], continued=nxt["continued"])
                self._fired.discard((worker, i))
        return out

    def _holds(self, rule: str, worker: int) -> bool:
        """Whether the run holds a finding of ``rule`` for ``worker`` in the training the replay is
        in (one of an earlier training through the session does not keep the rule, armed again
        there, from firing: trial 25e)."""
        if (rule, worker) not in self._held:
            return False
        k = self._training.get(worker, 0)
        if not k and self._first_training_ends(worker) is not None:
            return any(self._held_upto(rule, worker, m) >= 0 for m in MODES)
        if not k or self.run is None:
            return True
        start = self.run.trainings[worker][k]["steps"]
        return any(self._held_upto(rule, worker, m) >= start.get(m, 0) for m in MODES)

    def _first_training_ends(self, worker: int) -> float | None:
        """When the second training of ``worker`` in the run began (its wall time), where the run
        holds several; else None."""
        trainings = self.run.trainings.get(worker) if self.run is not None else None
        if not trainings or len(trainings) < 2:
            return None
        began = trainings[1].get("began")
        return float(began) if isinstance(began, (int, float)) and not isinstance(began, bool) else None

    def _held_upto(self, rule: str, worker: int, mode: str) -> int:
        """The largest step of a finding of ``rule`` the run holds for ``worker`` in ``mode`` (-1:
        none); in a training of its own in the out_dir (``fresh``: its steps started again; trial
        26i), of one made since it began, not one of an earlier training at the same steps."""
        k = self._training.get(worker, 0)
        ends = self._first_training_ends(worker) if not k else None
        if ends is not None:
            # (the first of several trainings: the training's own findings made before the next one began,
            # and a watch's, which holds no wall time of the training; trial 41j: a later training's
            # finding of the rule kept the first training's from being made)
            return max((step for step, wall, own in self._held_at.get((rule, worker, mode), ())
                        if not own or wall < ends), default=-1)
        training = self.run.trainings[worker][k] if k and self.run is not None else None
        if training is None or not training.get("fresh") or training.get("began") is None:
            return self._held_step.get((rule, worker, mode), -1)
        began = training["began"]
        return max((step for step, wall, _ in self._held_at.get((rule, worker, mode), ()) if wall >= began), default=-1)

    # --------------------------------------------------- the steps the training's session judged
    def _kept_between(self) -> bool:
        """Whether the run keeps values at every step between its save steps (an ``every_step``
        collection saved less often than every step), and if so, take in the records read since the
        last call: which train records hold only such kept values (see :meth:`_is_kept`).

        The training's session writes the values kept between two save steps, one record per step,
        with the next save step's record, and judges the rules once, there; a stored run does not
        mark them, so they are told by what they hold: only tensors of every-step collections, at a
        step that saves none of those collections (their train save config: the run's config, with
        the interval the session used, ``Run.every_step``)."""
        assert self.run is not None
        run = self.run
        if not any(v > 1 for v in run.every_step.values()):
            return False
        if self._every_saves is None:
            self._every_saves = self._every_step_saves()
        rec = run._rec  # every scalar record in write order: its step, mode, worker and layout
        n = rec["step"].n
        if n > self._records_seen:
            start, self._records_seen = self._records_seen, n
            train = MODES.index("train")
            steps = rec["step"].view()[start:n].tolist()
            modes = rec["mode"].view()[start:n].tolist()
            workers = rec["worker"].view()[start:n].tolist()
            layouts = rec["layout"].view()[start:n].tolist()
            for step, mode, worker, layout in zip(steps, modes, workers, layouts):
                if mode != train:
                    continue
                values = self._layout_kept.get(layout, -1)
                if values == -1:
                    values = self._layout_kept[layout] = self._kept_values(layout)
                if values is None:
                    self._saved_steps.setdefault(worker, set()).add(step)
                else:
                    self._kept_steps.setdefault(worker, {})[step] = values
        return True

    def _kept_values(self, layout: int) -> int | None:
        """The values a record of ``layout`` holds when every tensor of it is one of an every-step
        collection (a record of kept values may be one), else None."""
        assert self.run is not None
        every = set(self.run.every_step)
        keys = [self.run._keys[i] for i in self.run._layouts[layout].tolist()]
        tensors = {t for t, _ in keys}
        if not tensors or not all(every.intersection(self.run.tensor_collections(t)) for t in tensors):
            return None
        self._kept_keys.update(keys)
        return len(tensors)

    def _every_step_saves(self) -> list[ModeSaveConfig]:
        """The train save configs of the run's every-step collections (from its config, at the
        interval ``Run.every_step`` gives: the one the session used, which a rule may have set)."""
        assert self.run is not None
        try:
            config: Config | None = load_config({k: v for k, v in self.run.config.items()
                                                 if k not in ("rules", "actions")})
        except (TripwireError, TypeError, ValueError):  # (a run.json written by another version)
            config = None
        out = []
        for name, interval in self.run.every_step.items():
            mode_save = None
            if config is not None:
                c = config.collections.get(name)
                mode_save = ((c.save if c is not None else None) or config.save).for_mode("train")
            if mode_save is None:
                mode_save = ModeSaveConfig(interval=interval)
            elif mode_save.interval != interval:
                mode_save = replace(mode_save, interval=interval)
            out.append(mode_save)
        return out

    def _is_kept(self, worker: int, step: int) -> bool:
        """Whether the train record of ``worker`` at ``step`` holds only values kept between save
        steps: the training's session did not judge the rules there (see :meth:`_kept_between`)."""
        return (step in self._kept_steps.get(worker, {}) and step not in self._saved_steps.get(worker, ())
                and not any(m.should_save(step) for m in self._every_saves or ()))

    def _kept_nonfinite(self, worker: int, kept: _KeptLosses) -> bool:
        """Whether a value of the kept records ``kept`` is not finite."""
        assert self.run is not None
        steps = np.fromiter((s for s, _ in kept.records), dtype=np.int64)
        for tensor, reduction in sorted(self._kept_keys):
            st, values = self.run.series(tensor, reduction, "train", worker)
            at = values[np.isin(st, steps)]
            if len(at) and not np.isfinite(at).all():
                return True
        return False

    def _judge_kept(self, worker: int, kept: _KeptLosses, until: float | None) -> list[Finding]:
        """Judge the rules at the last of the kept records ``kept`` not judged yet (else at the one
        left before another mode's record), as of wall time ``until`` (None: everything read), as the
        training's session judged kept values by themselves: a full buffer, or a value that is not
        finite before another mode's record (as of that record's writing), the run's end, the end of
        a fit before a later training (as of just before it began). Nothing when none waits."""
        last = kept.records[-1] if kept.records else kept.unjudged
        if last is None:
            return []
        kept.records, kept.values, kept.unjudged = [], 0, None
        assert self.view is not None
        self.view.set_limit(until)
        try:  # (only the rules that read what they hold, as the session judged them: trial 29j)
            return self._evaluate(worker, last[0], "train", kept=self._kept_collections())
        finally:
            self.view.set_limit(None)

    def _kept_collections(self) -> frozenset[str]:
        """The every-step collections of the values kept between save steps (the tensors of the kept
        records read so far): the session judged only the rules that read one of them there."""
        assert self.run is not None
        every = set(self.run.every_step)
        return frozenset(c for tensor in {t for t, _ in self._kept_keys}
                         for c in self.run.tensor_collections(tensor) if c in every)

    def _train_step_before(self, worker: int, mode: str, step: int, k: int) -> int:
        """The train step the ``k``-th record of ``mode`` by ``worker`` (at ``step``) came after, as
        the training's session gave it to that record's findings (``details["train_step"]``, "after
        train step N"; :meth:`History.train_steps`); -1 for a train record, or one before any train
        step (trial 29j F9: watch's eval findings had neither)."""
        if mode == "train" or self.run is None:
            return -1
        after = self.run._after_train(worker).get(mode)
        if after is not None and k < len(after):
            return int(after[k])
        return int(self.run.train_steps(mode, [step], worker)[0])

    def _judge_at_end(self) -> list[Finding]:
        """Judge the last kept records of each worker that ended (its end marker, every record it
        counts read), as its session did when it closed the run: at the last of them."""
        assert self.run is not None
        waiting = [w for w, k in self._kept.items() if k.records or k.unjudged is not None]
        if not waiting:
            return []
        out: list[Finding] = []
        for worker in self._ended_workers(waiting):
            out += self._judge_kept(worker, self._kept[worker], None)
        return out

    def _ended_workers(self, workers: Iterable[int] | None = None) -> list[int]:
        """Of ``workers`` (default: the run's), those whose training ended: an end marker, and every
        record it counts read (where fewer are read, the last ones are on their way, or lost: the
        worker is taken for ended when they are read)."""
        assert self.run is not None
        markers = self.run.end_markers
        out = []
        for worker in self.run.workers if workers is None else workers:
            marker = markers.get(worker)
            if marker is None:
                continue
            expected = marker.get("records")
            if isinstance(expected, int) and not isinstance(expected, bool) \
                    and self.run._records_read.get(worker, 0) < expected:
                continue
            out.append(worker)
        return out

    def _judge_tails(self, worker: int, until: float | None) -> list[Finding]:
        """At the end of ``worker``'s training (its end marker read, or a later training through its
        session beginning), as of wall time ``until`` (None: everything read): the rules that look
        back over the steps since their last evaluation, evaluated once more at each mode's last step
        where their ``every`` left steps after it, as the training's session did when the training
        ended (:func:`~tripwire._session.look_back_tails`; trial 32e F2: a NaN loss after
        ``exploding_tensor``'s last evaluation with ``every: 20`` passed the watch, exit status 0)."""
        assert self.run is not None and self.view is not None
        rules = self._rules_for(worker)
        if not any(r.looks_back for r in rules):
            return []
        out: list[Finding] = []
        self.view.set_limit(until)
        try:
            for mode, step, indices in look_back_tails(rules, self.view, worker):
                walls = self.run.wall_times(mode, worker)[1]
                k = (len(walls) if until is None else int(np.searchsorted(walls, until, side="right"))) - 1
                train_step = self._train_step_before(worker, mode, step, k) if k >= 0 else -1
                out += self._evaluate(worker, step, mode, train_step=train_step, final=indices)
        finally:
            self.view.set_limit(None)
        return out

    def unwatched_stops(self) -> list[Finding]:
        """The findings of rules this watch does not run that stopped a worker's training (its end
        marker ``stopped``, its stop reason that finding's line), one per worker: a run stopped by a
        finding is broken whichever rules this watch runs (trial 42f: a run that an earlier ``watch
        --stop --config ...`` had stopped on a NaN passed a later ``watch --once``, exit 0)."""
        if self.run is None or not self.unwatched:
            return []
        out = []
        for worker, marker in sorted(self.run._read_markers().items()):
            reason = marker.get("stop_reason")
            if marker.get("status") != "stopped" or not isinstance(reason, str):
                continue
            found = next((f for f in self.unwatched if f.worker == worker and f.severity in FAILING_CHECK_SEVERITIES
                          and reason.startswith(f"[{f.severity}] {f.rule} at step {f.step} ({f.mode}")), None)
            if found is not None:
                out.append(found)
        return out

    @staticmethod
    def _key(f: Finding) -> tuple[Any, ...]:
        return (f.source, f.rule, f.worker, f.mode, f.step, f.kind, f.wall_time)

    def _sync_findings(self) -> None:
        """Take in the findings the run holds that this watch has not read yet (just refreshed).

        Each makes its rule "held" for its worker (a rule that does not repeat is not evaluated again
        there; a repeating one makes no finding again at or before that step in that mode): watch
        never makes again, nor acts again on, a finding the run already holds. Those of the watched
        rules are kept in :attr:`earlier` (the first read) or :attr:`recorded` (later reads, by
        another writer) and printed by the default echo. A check (:meth:`is_check_finding`: no rule
        made it) holds no rule, whatever its name: it is kept in :attr:`checks`."""
        assert self.run is not None
        first, self._synced = not self._synced, True
        watched: set[str] | None = None
        for f in self.run.findings:
            key = self._key(f)
            if key in self._seen:
                continue
            self._seen.add(key)
            if f.kind == "error" and f.source == WATCH_SOURCE:
                self._held_errors.add((f.rule, f.worker, f.mode, f.step, f.message))
            marked = f.source == CHECK_SOURCE  # (recorded with Session.record_finding: no rule's; trial 27c2)
            if f.kind == "finding" and not marked:
                # (an error an earlier watch recorded holds nothing: the rule may be fixed now)
                self._held.add((f.rule, f.worker))
                where = (f.rule, f.worker, f.mode)
                self._held_step[where] = max(self._held_step.get(where, f.step), f.step)
                self._held_at.setdefault(where, []).append((f.step, float(f.wall_time), f.source != WATCH_SOURCE))
            if key in self._mine or f.kind != "finding":
                continue
            if watched is None:
                watched = {r.name for r in self._first_worker_rules()}
            by = "the training" if f.source in ("in-process", CHECK_SOURCE) else (
                "an earlier watch" if f.source == WATCH_SOURCE and first else
                "another watch" if f.source == WATCH_SOURCE else
                "the training, for a stop request (tripwire.request_stop)" if f.source == REQUEST_STOP_SOURCE
                else f.source)
            if marked or f.rule not in watched:
                if self.is_check_finding(f):  # (trial 27e: no rule can find it again; it was not reported)
                    self.checks.append(f)
                    if first:
                        if self._echo_prints:
                            self._show(f, "recorded_before", f"recorded before, by {by} (a check, not a rule): ",
                                       check=True)
                    else:
                        self._during.append((f, f"recorded by {by} (a check, not a rule): ", True))
                elif f.kind == "finding":  # (trial 42l: not a check's, which no rule makes, counted above)
                    self.unwatched.append(f)
                continue  # (else a finding of a rule not watched: not this watch's)
            if first:
                self.earlier.append(f)
                if self._echo_prints:
                    self._show(f, "recorded_before", f"recorded before, by {by}: ")
                continue
            self.recorded.append(f)
            self._during.append((f, f"recorded by {by}: ", False))
        self._during.sort(key=lambda d: float(d[0].wall_time))

    def _release_during(self, until: float | None, *, act: bool = True) -> None:
        """Print, and act on, the findings another writer (the training) recorded while this watch
        ran (read at this poll: :attr:`_during`) that it made before wall time ``until`` (None:
        every one left), so that they take their place among the records this poll judges, in the
        order they were made: a stop goes to the first finding made, the watch's own or the
        training's (trial 31c #1). For a rule's finding, a stop is requested with ``--stop`` or the
        watched rule's ``stop_training``/``raise`` (the training fired its other actions itself); a
        check is never acted on. ``act=False``: printed only (the watch is ending on an error)."""
        while self._during and (until is None or float(self._during[0][0].wall_time) < until):
            f, prefix, check = self._during.pop(0)
            if self._echo_prints:
                self._show(f, "recorded_during", prefix, check=check)
            if check or not act:
                continue
            rules = self._rules_for(f.worker)
            stops = any(a.stops or a.raises for i, r in enumerate(rules) if r.name == f.rule
                        for a in self._actions[f.worker][i])
            if self.stop or stops:
                self._request_stop(f)

    def is_check_finding(self, finding: Finding) -> bool:
        """Whether ``finding`` (of the run) was made by no rule: it is marked so, ``source``
        ``check`` (``Session.record_finding`` writes it since trial 27c2: Keras's
        ``loss_output_mismatch``, XGBoost's ``eval_is_train``, Lightning's ``distributed_stop``), or,
        for a run written before the mark, its name tells it (:meth:`is_check`). A watch's finding is a
        rule's (trial 35e: an earlier watch's rule, of a module this watch does not watch, read as a
        check the training recorded, and the later watch exited 1)."""
        return finding.kind == "finding" and (finding.source == CHECK_SOURCE or (
            finding.source != WATCH_SOURCE and self.is_check(finding.rule)))

    def is_check(self, rule: str) -> bool:
        """Whether a finding of the run named ``rule`` was made by no rule, by its name alone (a run
        written before trial 27c2 marks no check; :meth:`is_check_finding` reads the mark): ``rule``
        is none of the rules watched, none of the rules registered in this process (the built-in
        ones), and none of the rules the run's config lists (its rule sets' members, its ``module:attribute`` rules by
        the name they run under, where they import; else by their ``rule_name`` or the attribute's
        name). Such a finding is an integration's own check (Keras's ``loss_output_mismatch``,
        XGBoost's ``eval_is_train``, Lightning's ``distributed_stop``, recorded with
        ``Session.record_finding``) or a stop request's naming no rule; a rule's finding, of a rule
        the watch does not watch (``--config`` names others), is not one."""
        if self.run is None:
            return False
        if rule in {r.name for r in self._first_worker_rules()} or rule in available_rules():
            return False
        return rule not in self._run_rule_names()

    def _run_rule_names(self) -> set[str]:
        """The names the rules of the run's config run under (see :meth:`is_check`), read once."""
        if self._rule_names is None:
            assert self.run is not None
            names: set[str] = set()
            entries = self.run.config.get("rules") or []
            for entry in entries if isinstance(entries, list) else []:
                try:
                    with unregistered_rule_notes_muted():
                        names.update(r.name for r in build_rules([entry]))
                except Exception:  # (a module that does not import here, a run.json of another version)
                    names.update(_spec_names(entry))
            self._rule_names = names
        return self._rule_names

    def _show(self, finding: Finding, origin: str, prefix: str = "", *, check: bool = False) -> None:
        """The default echo's line for ``finding`` on stdout: ``prefix`` and its text, or with
        :attr:`json_lines` its JSON object (:func:`finding_line`, ``origin`` in it; ``check``: a
        finding no rule made, :attr:`checks`, of ``type`` ``check``)."""
        if self.json_lines:
            from ._cli import print_json

            print_json(finding_line(finding, origin, check=check))
        else:
            # (in a run of several workers the rank is named, rank 0 too, as the training's lines name it; trial 38i)
            many = self.run is not None and (len(self.run.workers) > 1 or int(self.run.info.get("world_size") or 1) > 1)
            print(f"{prefix}{finding._line(rank_always=many)}", flush=True)

    def _evaluate(self, worker: int, step: int, mode: str, train_step: int = -1,
                  kept: frozenset[str] | None = None, final: Iterable[int] | None = None) -> list[Finding]:
        """The watched rules' findings for ``worker`` at ``step`` of ``mode``, as the training's
        session made them (``Session._evaluate``): a finding of another mode holds the train step it
        came after (``train_step`` >= 0: ``details["train_step"]``); at a record of the values kept
        between save steps (``kept``: their collections) only the rules that read one of them;
        ``final``: only the rules of these indices, whatever their ``every`` (:meth:`_judge_tails`)."""
        out = []
        rules = self._rules_for(worker)
        off = (self.run.switched_off if self.run is not None else None) or {}  # (not judged, as in training)
        if self.view is not None:  # (the planned length of the training replayed: its session's; trial 25e)
            trainings = self.run.trainings.get(worker) if self.run is not None else None
            self.view.planned = trainings[self._training.get(worker, 0)]["planned_steps"] if trainings else None
        only = None if final is None else set(final)
        for i, rule in enumerate(rules):
            if (worker, i) in self._disabled or rule.name in off or (
                    not rule.repeat and ((worker, i) in self._fired or self._holds(rule.name, worker))):
                continue
            if kept is not None and not reads_any_of(rule, kept):
                continue
            if only is not None:
                if i not in only:
                    continue
                rule._last_eval.pop(mode, None)  # (due whatever its every: the training's last evaluation)
            try:
                with self.view.judging(worker) if self.view is not None else contextlib.nullcontext():
                    found = rule.evaluate(self.view, step, mode)  # type: ignore[arg-type]
                if type(rule).evaluate is not Rule.evaluate:  # (the dates, as the session checks them: trial 31f F3/F4)
                    found, wrong = rule._dated(found, step, mode)
                    if wrong is not None:
                        raise MisdatedFindingError(wrong, found)
            except Exception as exc:
                self._disabled.add((worker, i))
                err = Finding(
                    rule=rule.name, step=step, mode=mode, kind="error", severity="error", worker=worker,
                    message=f"{rule_failure(exc)}; it is disabled for the rest of the watch",
                    details={"traceback": traceback.format_exc()}, source=WATCH_SOURCE,
                )
                self._emit(err, [], record=(err.rule, worker, mode, step, err.message) not in self._held_errors)
                out.append(err)
                found = exc.findings if isinstance(exc, RuleReturnError) else []
            for k, f in enumerate(found):
                changes: dict[str, Any] = {"worker": worker, "rule": f.rule or rule.name, "source": WATCH_SOURCE}
                if mode != "train" and train_step >= 0 and "train_step" not in f.details:
                    changes["details"] = {**f.details, "train_step": train_step}
                f = Finding(**{**f.__dict__, **changes})
                if f.step <= self._held_upto(f.rule, worker, f.mode):
                    continue  # the run holds it (a repeating rule's finding at or before one recorded)
                made = (self._training.get(worker, 0), *_found_key(f), k)  # (k: the evaluation's k-th finding)
                if made in self._made:
                    # (made already in this training: a resume ran its step again, and the resumed session
                    # found it again without recording or acting on it; trial 38i: made, recorded and acted twice)
                    continue
                self._made.add(made)
                self._fired.add((worker, i))
                self._emit(f, self._actions[worker][i])
                out.append(f)
                # (every finding of the evaluation, as the session records them; a rule that does not repeat
                # is not evaluated again: trial 41i, the second of two findings at one step was dropped)
        return out

    def _idle(self, now: float) -> list[Finding]:
        out = []
        for worker in self.run.workers if self.run is not None else []:
            for i, rule in enumerate(self._rules_for(worker)):
                if (not isinstance(rule, StalledTraining) or (worker, i) in self._fired or (worker, i) in self._disabled
                        or (rule.name, worker) in self._held):
                    continue
                with self.view.judging(worker) if self.view is not None else contextlib.nullcontext():
                    f = rule.check_idle(self.view, now)  # type: ignore[arg-type]
                if f is not None:
                    f = Finding(**{**f.__dict__, "worker": worker, "source": WATCH_SOURCE})
                    self._fired.add((worker, i))
                    self._emit(f, self._actions[worker][i])
                    out.append(f)
        return out

    def _emit(self, finding: Finding, actions: Iterable[Action], record: bool = True) -> None:
        self.findings.append(finding)
        self._mine.add(self._key(finding))
        # echoed first: a finding that cannot be recorded is still said (trial 28f: a read-only run's
        # watch exited 2 without printing the finding it made)
        self.echo(finding)
        if record and self.record:  # (record False: the run holds it already, from an earlier watch)
            self._record(finding)
        wants_stop = self.stop and finding.kind == "finding"
        for action in actions:
            if action.stops or action.raises:
                wants_stop = True
                continue
            if action.name == "log" and self._echo_prints:
                continue
            try:
                action.fire(finding)
            except ActionError as exc:  # says what went wrong: no traceback
                logger.error("tripwire watch: action %r failed for %s: %s", action.name, finding, exc)
                self._failed(action, finding, exc)
            except Exception as exc:
                logger.exception("tripwire watch: action %r failed for %s", action.name, finding)
                self._failed(action, finding, exc)
        if wants_stop:
            self._request_stop(finding)

    def _failed(self, action: Action, finding: Finding, exc: BaseException) -> None:
        """Note an action that failed for ``finding`` (:attr:`failed_actions`)."""
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self.failed_actions.append({"action": action.name, "rule": finding.rule, "worker": finding.worker,
                                    "step": finding.step, "mode": finding.mode, "error": error})

    def _record(self, finding: Finding) -> None:
        """Append ``finding`` to the run's watch findings file; :class:`FindingNotRecordedError`
        naming the file, the system's reason and ``--no-record`` where that fails."""
        path = self.run_dir / FINDINGS_DIR / WATCH_FINDINGS
        try:
            append_finding(self.run_dir, finding)
        except OSError as exc:
            what = "rule error" if finding.kind == "error" else "finding"
            code = errno.errorcode.get(exc.errno) if exc.errno is not None else None
            reason = (exc.strerror or str(exc) or type(exc).__name__) + (f" ({code})" if code else "")
            failed = exc.filename if exc.filename is not None else str(path)
            told = "printed above" if self._echo_prints else "passed to echo"
            err = FindingNotRecordedError(
                f"could not record the {what} of {finding.rule!r} at step {finding.step} ({finding.mode}) in "
                f"{str(failed)!r}: {reason}; it was {told}, and is not in the run; to judge a run without writing "
                f"into it (a read-only copy): tripwire watch --no-record (record=False in Python)")
            err.errno = exc.errno
            err.path = str(failed)
            raise err from exc

    def _skip_stop(self, finding: Finding, said: str) -> None:
        """No stop request for ``finding``: ``said`` why, on stderr (the CLI's echo) or at INFO (a
        custom echo: the Python API)."""
        self.stop_skipped = finding
        if self._echo_prints:
            print(said, file=sys.stderr, flush=True)
        else:
            logger.info("%s", said)

    def _request_stop(self, finding: Finding) -> None:
        """Ask the training to stop for ``finding`` (once a watch): not where no worker of the run
        trains any more (every one left its end marker, or ended without one): the request would
        stay in the run and stop the next training in its ``out_dir`` (said once on stderr instead)."""
        if self.stop_requested is not None or self.stop_skipped is not None:
            return
        if not self.record:
            self._skip_stop(finding, f"tripwire watch: --no-record (record=False): no stop request was written into "
                                     f"{str(self.run_dir)!r} for {finding.rule!r} at step {finding.step} ({finding.mode})")
            return
        if not self._training_runs():
            self._skip_stop(finding, f"tripwire watch: no training is running in {str(self.run_dir)!r} (every worker "
                                     f"has ended): nothing to stop for {finding.rule!r} at step {finding.step} "
                                     f"({finding.mode})")
            return
        self.stop_requested = finding
        # the finding is in the run already (this watch's file, or the training's): the session that
        # honours the request must not write it again (trial 20a)
        request_stop(self.run_dir, finding, recorded=True)

    def _ended_or_unknown(self) -> None:
        """Where no unfinished worker of the run (records, no end marker) is known to write any more,
        set :attr:`abandoned` (those known to have ended without closing it) and :attr:`unknown`
        (those whose writer this machine cannot see, :meth:`Run.unknown_workers`); where one is
        still written (a process here holds its shard), neither."""
        if self.run is None:
            return
        unfinished = self._unfinished()
        if not unfinished:
            return
        states = self.run._writer_states()
        gone = {w for w, (state, _) in states.items() if state == "ended"}
        unknown = {w: info for w, (state, info) in states.items() if state == "unknown" and w in unfinished}
        if unfinished <= gone:
            self.abandoned = sorted(unfinished)
        elif unknown and unfinished <= gone | set(unknown):
            self.abandoned = sorted(unfinished & gone)
            self.unknown = dict(sorted(unknown.items()))

    def _unfinished(self) -> set[int]:
        """The workers of the run without an end marker: those with records and those with a shard
        (trial 41d: a training killed before its first record has a shard and no record, and a live
        watch of it, counting the workers with records only, waited for ever)."""
        assert self.run is not None
        return (set(self.run.workers) | self.run._shard_workers()) - set(self.run.end_markers)

    def _training_runs(self) -> bool:
        """Whether a worker of the run may still be training: a shard without an end marker that a
        process holds (see :meth:`Run.abandoned_workers`)."""
        assert self.run is not None
        unfinished = self.run._shard_workers() - set(self.run.end_markers)
        return bool(unfinished) and not unfinished <= set(self.run.abandoned_workers())

    def unfed(self) -> dict[str, list[str]]:
        """Rules this run cannot feed: ``{rule: [collections it needs that the run has none of]}``
        (a rule needs what the training captured; ``tripwire watch`` names them at the end). The
        rules that do not apply to the run (:meth:`not_applicable`) are not among them, nor are
        those with a finding in the run, made by this watch or recorded before or while it watched:
        such a rule read something, whatever collection it asked for (``exploding_tensor`` reads
        every collection the run holds; trial 32a F2: "rule 'exploding_tensor' had nothing to read"
        came right after its finding on a custom collection's tensor), as the training's session
        reads it too."""
        if not self._open():
            return {}
        assert self.run is not None
        out = unfed_rules(self._first_worker_rules(), self.run.collections())
        for name in self.not_applicable():
            out.pop(name, None)
        for f in [*self.findings, *self.earlier, *self.recorded]:
            if f.kind == "finding":
                out.pop(f.rule, None)
        return out

    def scaler_skipped(self) -> str | None:
        """Where the run's ``loss_scale`` shows fp16 AMP's GradScaler skipping steps all run long
        (each train save step's scale below the one before, the first worker's), why the run holds
        no gradient (:func:`tripwire._session.scaler_skipped_note`); ``None`` otherwise."""
        if not self._open():
            return None
        assert self.run is not None
        return scaler_skipped_note(self.run, framework=str(self.run.info.get("framework", "python")))

    def not_applicable(self) -> dict[str, str]:
        """The watched rules that cannot apply to this run, ``{rule: why}``: those the training's
        integration switched off, as the run records them (``Run.switched_off``, the worker meta
        files' ``switched_off``: XGBoost's class rules for an objective without classes), each
        ``"the training switched it off: <why>"``; the watch does not judge them either (trial 26h).

        A run written before trial 26h records none (``Run.switched_off`` is None); there, on an
        XGBoost run that holds no labels and no predictions, the class rules (``class_imbalance``,
        ``confusion``) where the run shows an objective without classes (regression, ranking, count,
        survival; the XGBoost integration then leaves those rules out, and captures no labels for
        them, as its WARNING says). Such a run does not store the objective; it shows it when

        - the training's config lists a class rule and the training evaluated a validation set, yet
          it captured no labels or predictions (a classifier's would be captured for that rule), or
        - its evaluation metrics are only computed without classes (``ndcg``, ``poisson-nloglik``,
          ``rmsle`` ...), or are ``rmse``/``mae`` above 1 (a binary classifier's, ``reg:logistic``'s
          default ``rmse``, never exceed 1), and none is a classifier's (``logloss``, ``error``,
          ``auc`` ...) and no stored ``hyperparameters/num_class`` is above 0.

        Else ``{}``: such a rule is :meth:`unfed` (capturing them may be the fix). ``tripwire watch``
        says these rules were not judged, and why, and does not count them as unjudged (trial 26d:
        it told a regression run to capture labels and predictions for class_imbalance, which the
        training had switched off, and exited 3)."""
        if not self._open():
            return {}
        assert self.run is not None
        run = self.run
        untrained = self._untrained()
        recorded = run.switched_off
        if recorded is not None:  # (written since trial 26h: what the training switched off, and why)
            return {**untrained, **{r.name: f"the training switched it off: {recorded[r.name]}"
                                    for r in self._first_worker_rules() if r.name in recorded}}
        if untrained:
            return untrained
        if run.info.get("framework") != "xgboost" or {"labels", "predictions"} & set(run.collections()):
            return {}
        rules = [r.name for r in self._first_worker_rules() if isinstance(r, ClassRoundRule)]
        if not rules:
            return {}
        why = self._trained_class_rules_unfed() or self._metrics_without_classes()
        return {name: why for name in rules} if why else {}

    def _untrained(self) -> dict[str, str]:
        """The rules whose ``modes`` the run holds no record of, where the run has ended and holds
        records of other modes and none of training: an evaluation alone (``trainer.validate``, Keras's
        ``evaluate``; trial 41h: the gradient rules said "capture it in the training's config", and the
        loss rules, which read nothing either, passed as judged; trial 41j: a run of test steps alone,
        which no default rule judges)."""
        assert self.run is not None
        run = self.run
        if run.status == "running" or self._trained():
            return {}
        held = [m for m in MODES if m != "train" and run.steps(m)]
        if not held:
            return {}
        # (trial 41j: a run of test steps alone, Keras's evaluate, was judged by no rule, exploding_tensor
        # judging train and eval steps, and the watch exited 0)
        return {r.name: (f"the run holds no training step, only {', '.join(held)} steps (an evaluation alone: "
                         f"trainer.validate or trainer.test, model.evaluate), and the rule judges "
                         f"{', '.join(r.modes or ())} steps")
                for r in self._first_worker_rules() if not set(r.modes or ()) & set(held)}

    def _trained_class_rules_unfed(self) -> str | None:
        """Why the run's objective has no classes, where the training's config lists a class rule and
        the training evaluated a validation set but captured no labels or predictions; else None."""
        assert self.run is not None
        classes = {n for n, c in available_rules().items() if issubclass(c, ClassRoundRule)}
        listed: list[str] = []
        for entry in self.run.config.get("rules") or []:
            name = entry if isinstance(entry, str) else entry.get("name") if isinstance(entry, Mapping) else None
            if not isinstance(name, str):
                continue
            for member in RULE_SETS.get(name, (name,)):
                member = member if isinstance(member, str) else str(member.get("name"))
                if member in classes and member not in listed:
                    listed.append(member)
        if not listed or not self.run.steps("eval"):
            return None
        return (f"the training's config lists {', '.join(map(repr, listed))} and the training evaluated a validation set, "
                f"yet it captured no labels or predictions: the XGBoost integration leaves the class rules out for an "
                f"objective without classes ({_NO_CLASSES}; its WARNING said so), so there are no classes to judge")

    def _metrics_without_classes(self) -> str | None:
        """Why the run's objective has no classes, by its XGBoost evaluation metrics (see
        :meth:`not_applicable`); else None."""
        assert self.run is not None
        run = self.run
        names = names_in(run, "metrics")
        metrics = {n: _xgboost_metric(n) for n in names}
        if any(m in _CLASS_METRICS for m in metrics.values()):
            return None
        for name in names_in(run, "hyperparameters", include=r"(^|/|\.)num_class$"):
            if any(len(v) and float(np.max(v)) > 0 for v in self._values(name)):
                return None  # (a multi-class model)
        proof = [n for n, m in metrics.items() if m in _NO_CLASS_METRICS]
        if proof:
            return (f"its evaluation metrics ({', '.join(proof)}) are those of an XGBoost objective without classes "
                    f"({_NO_CLASSES}), for which the XGBoost integration leaves the class rules out")
        above = [n for n, m in metrics.items() if m in _UNIT_BOUNDED_METRICS
                 and any(len(v) and float(np.max(v)) > 1 for v in self._values(n))]
        if above:
            return (f"its evaluation metrics ({', '.join(above)}) exceed 1, which no classifier's (labels and "
                    f"probabilities in [0, 1]) does: an XGBoost objective without classes ({_NO_CLASSES}), for which "
                    f"the XGBoost integration leaves the class rules out")
        return None

    def _values(self, tensor: str) -> list[np.ndarray]:
        """The finite raw values of ``tensor``, one array per worker and mode that holds it."""
        assert self.run is not None
        out = []
        for worker in self.run.workers:
            for mode in MODES:
                try:
                    out.append(self.run.finite_series(tensor, "raw", mode, worker)[1])
                except TripwireError:  # (not stored raw)
                    return out
        return out

    def unstored(self) -> list[str]:
        """One message per rule that needs a reduction (or array) of a collection this run holds
        but did not store for any tensor of it (``tensor_variance`` reads ``variance``; a run that
        stored ``l2, std`` gives it nothing): the rule read nothing there all run, or only part of
        what it needs. Collections the run lacks altogether are :meth:`unfed`'s."""
        return [message for _, message, _ in self._unstored()]

    def _unstored(self) -> list[tuple[str, str, bool]]:
        """(rule, :meth:`unstored`'s message, whether the rule had nothing to read there)."""
        if not self._open():
            return []
        assert self.run is not None
        out = []
        for rule in self._first_worker_rules():
            for req in rule.requirements():
                names = names_in(self.run, req.collection)
                if not names:
                    continue
                stored = sorted({r for n in names for r in self.run.reductions(n)})
                arrays = {k for n in names for k in self.run.array_kinds(n)}
                # (abs_l2 is l2 under its own name, abs_l1 l1, a threshold one however written: the reader
                # gives one for the other, so a requirement of one is met by the other stored; trial 25e
                # finding 3, trial 37a: exit 3 on a healthy run)
                missing = [r for r in req.reductions if not holds_reduction(stored, r)]
                if req.histogram and "histogram" not in arrays:
                    missing.append("histogram")
                if req.raw_arrays and "raw" not in arrays:
                    missing.append("raw arrays")
                if missing:
                    what = ", ".join(map(repr, missing))
                    have = ", ".join(stored + sorted(f"{a} arrays" for a in arrays)) or "none"
                    wanted = len(req.reductions) + req.histogram + req.raw_arrays
                    said = "had nothing to read" if len(missing) == wanted else "read only part of what it needs"
                    out.append((rule.name, f"rule {rule.name!r} {said} in {req.collection!r}: this run stored no "
                                f"{what} of it (it stored: {have}); add {'it' if len(missing) == 1 else 'them'} to "
                                f"collections.{req.collection}.reductions in the training's config",
                                len(missing) == wanted))
        return out

    def unmatched(self) -> list[str]:
        """Rule parameters naming a loss or metric that this run does not have (see
        :func:`tripwire.rules._common.unmatched_inputs`; ``tripwire watch`` prints them at the end).
        A rule whose ``train``/``validation`` no evaluation set of an XGBoost run could feed (none held
        out) gets one message instead, as the training's callback says it (:meth:`_no_held_out`)."""
        if not self._open():
            return []
        assert self.run is not None
        held_out = self._no_held_out()
        out: list[str] = []
        trained = self._trained()
        for rule in self._first_worker_rules():
            said = held_out.get(rule.name)
            if said is None:
                out += unmatched_inputs([rule], self.run, trained)
                continue
            message, params = said
            out.append(message)
            out += [m for m in unmatched_inputs([rule], self.run, trained)
                    if not any(m.startswith(f"rule {rule.name!r}: {param}=") for param in params)]
        return out

    def xgboost_sets_without_held_out(self) -> str | None:
        """On an XGBoost run that evaluated no held-out set (no record of mode eval: the callback
        records a set that is the training data in mode train), its evaluation sets, as the callback
        names them in its WARNING (``evaluation sets: train, all of them the training data``, ``no
        evaluation sets``); else None (held-out data was evaluated, or another framework's run)."""
        if not self._open():
            return None
        assert self.run is not None
        run = self.run
        if run.info.get("framework") != "xgboost" or "eval" in run.modes():
            return None
        sets = list(dict.fromkeys(_xgboost_set(n) for n in names_in(run, "metrics")))
        return f"evaluation sets: {', '.join(sets)}, all of them the training data" if sets else "no evaluation sets"

    def _held_out_fix(self) -> str:
        """What to do about an XGBoost run without held-out data: the training's ``eval_is_train``
        check says it, where the run holds one (a set meant as held-out data was the training data),
        else how to evaluate held-out data."""
        assert self.run is not None
        leaked = any(f.rule == "eval_is_train" and f.kind == "finding" for f in self.run.findings)
        return ("the training's eval_is_train check (above) names the evaluation set that is the training data, and the "
                "fix" if leaked else _HELD_OUT_FIX)

    def _no_held_out(self) -> dict[str, tuple[str, list[str]]]:
        """``{rule: (message, [parameter, ...])}``: on an XGBoost run that evaluated no held-out set
        (no record of mode eval: every evaluation set was the training data, or there was none), the
        rules comparing a training and a validation metric (``overfit``, ``overtraining``) whose
        ``validation`` is left at its default: the callback pointed no default at XGBoost's metrics
        (there is no validation metric to point ``validation`` at, nor a training one to pair it with)
        and said so in one WARNING, or in its ``eval_is_train`` finding where a set meant as held-out
        data was the training data. The message says what the callback says, for the parameters
        listed (those left at their defaults), instead of the unmatched ``train='loss'`` and the
        ``validation='val_loss'`` recorded in no evaluation (trial 27f: "train='loss' matches no
        loss or metric of this run" beside the callback's one WARNING)."""
        held = self.xgboost_sets_without_held_out()
        if held is None:
            return {}
        out: dict[str, tuple[str, list[str]]] = {}
        fix = self._held_out_fix()
        for rule in self._first_worker_rules():
            inputs = rule.named_inputs()
            if not {"train", "validation"} <= set(inputs) or tuple(
                    getattr(rule, "input_collections", ("losses", "metrics"))) != ("losses", "metrics"):
                continue
            params = _init_parameters(type(rule))
            defaults = [k for k in ("train", "validation") if params.get(k) is not None
                        and inputs[k] == params[k].default]
            if "validation" not in defaults:
                continue
            named = ", ".join(f"{k}={inputs[k]!r}" for k in defaults)
            out[rule.name] = (f"rule {rule.name!r} reads nothing: no evaluation set is held out ({held}), so XGBoost "
                              f"logged no validation metric for its defaults ({named}); {fix}", defaults)
        return out

    def _trained(self) -> bool:
        """Whether the run trained: train records, or an XGBoost run (every round trains; its config
        may capture nothing in mode train, a metrics include of the validation set only)."""
        assert self.run is not None
        return bool(self.run.steps("train")) or self.run.info.get("framework") == "xgboost"

    def failed_before_first_record(self) -> bool:
        """Whether the training failed before it wrote its first step record: the run's status is
        ``failed``, or every worker without an end marker ended without closing the run (killed:
        :attr:`abandoned`), and no worker wrote a step record (none read, none lost from a damaged
        shard: its end markers count none). Then no rule had anything to judge, whatever the training's
        config captures: ``tripwire watch`` says so once, with the exception the end markers hold
        (``Run.stop_reasons``), instead of each rule's "had nothing to read ... capture it" (trial
        27g F5: torch raised at step 0 inside ``with session:``)."""
        if self.run is None or self.run.damaged:
            return False
        # (trial 41d: or ended without closing the run, killed before its first record: every rule
        # said "had nothing to read ... capture it in the training's config")
        # (trial 41h: or closed before it: a complete run of no record got "capture it" five times)
        if self.run.status == "running" and not (self.abandoned and set(self.abandoned) >= self._unfinished()):
            return False
        return not any(self._done.values()) and not any(
            m.get("records") for m in self.run.end_markers.values())

    def write_errors(self) -> dict[int, tuple[str, int | None]]:
        """``{worker: (its write error, the step records it wrote)}`` for each worker whose end
        marker holds a ``write_error`` (the disk filled, or the run's directory failed, while its
        training went on: the writer dropped what came after, and the marker's ``records`` counts
        only what reached the disk; ``None`` where it counts none). What it could not write is not
        judged: ``tripwire watch`` exits 3 for it where there is no finding (trial 32b F1: a run that
        lost 161 of its 200 steps to a full disk exited 0, "no finding"). Read now; ``{}`` before
        the run is read."""
        if self.run is None:
            return {}
        out: dict[int, tuple[str, int | None]] = {}
        for worker, marker in self.run.end_markers.items():
            error = marker.get("write_error")
            if error:
                records = marker.get("records")
                out[worker] = (str(error), records if isinstance(records, int) and not isinstance(records, bool)
                               else None)
        return out

    def unjudged(self) -> list[str]:
        """The watched rules that judged nothing, or nothing under a name one of their parameters
        gives: a collection the run lacks (:meth:`unfed`), a reduction it stored for none of the
        collection's tensors (:meth:`unstored`: "had nothing to read"), a loss or metric it does not
        have (:meth:`unmatched`). ``tripwire watch`` exits 3 for them where there is no finding."""
        if not self._open():
            return []
        assert self.run is not None
        names = (set(self.unfed()) | {rule for rule, _, nothing in self._unstored() if nothing}
                 | set(self.rules_unjudged()))
        trained = self._trained()  # (once: it reads the run's train steps)
        names |= {rule.name for rule in self._first_worker_rules() if unmatched_inputs([rule], self.run, trained)}
        return sorted(names - set(self.not_applicable()))

    def rules_unjudged(self) -> dict[str, str]:
        """``{rule: why}`` for the watched rules that say they could not judge what the run gave them
        (:meth:`Rule.unjudged`: ``class_imbalance``'s minority class of too few samples; trial 41g: the
        watch exited 0) and made no finding, any worker's; counted by :meth:`unjudged` (exit 3)."""
        out: dict[str, str] = {}
        found = {f.rule for f in [*self.findings, *self.earlier, *self.recorded] if f.kind == "finding"}
        for worker in sorted(self._actions):
            for rule in self._rules_for(worker):
                why = None if rule.name in found or rule.name in out else unjudged_reason(rule)
                if why:
                    out[rule.name] = why
        return out

    def _first_worker_rules(self) -> list[Rule]:
        """The rules of the run's first worker (every worker's rules are configured alike)."""
        assert self.run is not None
        return self._rules_for(self.run.workers[0] if self.run.workers else 0)

    # ---------------------------------------------------------------------------------- loop
    @property
    def complete(self) -> bool:
        return self.run is not None and self.run.is_complete

    def watch(self, interval: float = 5.0, once: bool = False, timeout: float | None = None,
              wait_resume: float = 0.0) -> list[Finding]:
        """Poll every ``interval`` seconds until the run is complete (or once); return all findings.

        ``timeout``: give up (:attr:`timed_out`) once that many seconds have passed since the call:
        a wait between polls never goes past that deadline (it is cut to the time left, and the run
        is read once more there), so the watch ends within one poll's time of it whatever the
        ``interval`` (trial 27c: ``--timeout 2 --interval 30`` slept the whole 30 s).

        A live watch ends (:attr:`abandoned`) once every worker without an end marker is known to have
        ended without closing the run (killed, a crash), seen at two polls in a row. ``wait_resume``
        (seconds, >= 0; ``tripwire watch --wait-resume``): wait that long first, from when the watch
        first saw it so, for a training to reopen the run (a resume from a checkpoint, a job that a
        restart policy starts again beside this watch): where one does, the watch goes on following
        it. Trial 31c #4: a watch started in the same job script as the resumed training read the
        crashed run before the resumed writer (seconds to import torch) reopened it, and exited 3 at
        once. :attr:`gone_at_start` tells that the run read so at the watch's first look. Not with
        ``once`` (it judges what is there now): a ConfigError where ``wait_resume`` is above 0."""
        check_float(wait_resume, "wait_resume", minimum=0.0)
        if once and wait_resume > 0:
            raise ConfigError(f"wait_resume: got {wait_resume!r} with once=True (--wait-resume with --once): --once "
                              f"judges what is there now and waits for nothing; accepted: one of them")
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        if once:
            if not self._open():
                open_run(self.run_dir)  # RunNotFoundError saying why, as tripwire inspect and open_run do
                self._open()  # (run.json appeared just now)
            self.poll()
            self._ended_or_unknown()
            return self.findings
        said_waiting = False
        gone_before: set[int] = set()
        unknown_before: set[int] = set()
        said_unknown: set[int] = set()
        gone_since: float | None = None  # (monotonic) when every unfinished worker was first seen ended
        said_resume = False
        while True:
            self.poll()
            if self.complete:
                self.poll()  # records written just before the end markers
                return self.findings
            if self.run is None and not said_waiting and self._echo_prints:
                said_waiting = True
                print(f"tripwire watch: no run at {str(self.run_dir)!r} yet: waiting for it to appear "
                      f"(--timeout gives up)", file=sys.stderr, flush=True)
            if self.run is not None:
                unfinished = self._unfinished()
                states = self.run._writer_states() if unfinished else {}
                gone = {w for w, (state, _) in states.items() if state == "ended"}
                unknown = {w: info for w, (state, info) in states.items() if state == "unknown"}
                all_gone = bool(unfinished) and unfinished <= gone
                if self.gone_at_start is None:
                    self.gone_at_start = all_gone
                if not all_gone:
                    gone_since, said_resume = None, False  # (a training reopened the run: followed)
                elif gone_since is None:
                    gone_since = time.monotonic()
                # (seen at two polls in a row: a shard just created is locked a moment after)
                if all_gone and unfinished <= gone_before:
                    assert gone_since is not None
                    if time.monotonic() - gone_since >= wait_resume:
                        self.poll()  # (what it wrote last)
                        self.abandoned = sorted(gone)
                        return self.findings
                    if not said_resume:
                        said_resume = True
                        said = (f"tripwire watch: worker{'s' if len(gone) > 1 else ''} "
                                f"{', '.join(map(str, sorted(gone)))} ended without closing the run (killed, out of "
                                f"memory, a crash): waiting up to {wait_resume:g} s (--wait-resume) for a training "
                                f"to reopen it (a resume)")
                        if self._echo_prints:
                            print(said, file=sys.stderr, flush=True)
                        else:
                            logger.info("%s", said)
                # a worker whose writer cannot be seen from here (a copy, another machine) is waited
                # for: its end marker may come (a synced copy); said once (trial 28f: read as a crash)
                for w in sorted((set(unknown) & unknown_before & unfinished) - said_unknown):
                    said_unknown.add(w)
                    said = (f"tripwire watch: {unknown_writer_text(w, unknown[w])}: waiting for its end marker "
                            f"(--timeout gives up; --once judges what is there now)")
                    if self._echo_prints:
                        print(said, file=sys.stderr, flush=True)
                    else:
                        logger.info("%s", said)
                gone_before, unknown_before = gone, set(unknown)
            wait = interval
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.timed_out = True
                    self._ended_or_unknown()
                    return self.findings
                wait = min(interval, left)  # (never past the deadline: read once more there, then give up)
            time.sleep(wait)


#: ``origin`` of a ``tripwire watch --json`` finding line: made by this watch, held by the run when
#: the watch first read it, or recorded by another writer (the training) while the watch ran.
ORIGINS = ("new", "recorded_before", "recorded_during")


def finding_line(finding: Finding, origin: str, *, check: bool = False) -> dict[str, Any]:
    """``tripwire watch --json``'s object for one finding: ``{"type": "finding", "origin": ...}`` and
    the keys of :meth:`Finding.to_dict` (the findings files' keys; docs/cli.md); ``check``: one no
    rule made (:attr:`Watcher.checks`), ``"type": "check"`` (its ``origin`` is never ``new``)."""
    if origin not in ORIGINS or (check and origin == "new"):
        accepted = ORIGINS[1:] if check else ORIGINS
        raise ValueError(f"origin: got {origin!r}; accepted: {', '.join(accepted)}")
    return {"type": "check" if check else "finding", "origin": origin, **finding.to_dict()}


def _spec_names(entry: Any) -> set[str]:
    """The names a run config's rules entry runs under, read without building it (its module does
    not import here): a rule set's members, a rule's name, a ``module:attribute`` entry's
    ``rule_name`` else the attribute's own name (a function rule's name)."""
    name = entry if isinstance(entry, str) else entry.get("name") if isinstance(entry, Mapping) else None
    if not isinstance(name, str):
        return set()
    if name in RULE_SETS:
        return {m if isinstance(m, str) else str(m.get("name")) for m in RULE_SETS[name]}
    if ":" in name:
        given = entry.get("rule_name") if isinstance(entry, Mapping) else None
        return {given if isinstance(given, str) else name.rsplit(":", 1)[1].rsplit(".", 1)[-1]}
    return {name}


def append_finding(run_dir: str | os.PathLike[str], finding: Finding) -> None:
    """Append one finding as a JSON line to the run's watch findings file (one write, flushed, fsynced)."""
    append_finding_line(Path(run_dir) / FINDINGS_DIR / WATCH_FINDINGS, finding)


def watch(
    run_dir: str | os.PathLike[str],
    config: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None,
    *,
    interval: float = 5.0,
    once: bool = False,
    stop: bool = False,
    timeout: float | None = None,
    echo: Callable[[Finding], None] | None = None,
    record: bool = True,
    wait_resume: float = 0.0,
) -> list[Finding]:
    """Watch a run (see :class:`Watcher`; ``record=False``: nothing is written into the run;
    ``wait_resume``: see :meth:`Watcher.watch`); return the findings made."""
    check_float(interval, "interval", minimum=0.0, min_inclusive=False)
    check_float(timeout, "timeout", minimum=0.0, allow_none=True)
    check_float(wait_resume, "wait_resume", minimum=0.0)
    return Watcher(run_dir, config, stop=stop, echo=echo, record=record).watch(interval, once, timeout, wait_resume)


# -------------------------------------------------------------------------------------- CLI
def _bind_as_in_training(rules: list[Rule], bound: dict[str, dict[str, str]]) -> None:
    """Point rule parameters left at their defaults where the training's integration pointed them
    (``Run.rule_inputs``: XGBoost's loss rules read ``train-logloss``, not ``loss``): a rule of the
    training as it was, any other rule (one only the watch's config has) by the names the
    integration chose for each default (:data:`ANY_RULE`)."""
    anyrule = bound.get(ANY_RULE, {})
    for rule in rules:
        params = _init_parameters(type(rule))
        named = rule.named_inputs()
        chosen = {k: v for k, v in anyrule.items() if k in named}
        for param, name in {**chosen, **bound.get(rule.name, {})}.items():
            p = params.get(param)
            if p is not None and hasattr(rule, param) and getattr(rule, param) == p.default:
                setattr(rule, param, name)


_ACCEPTED_INTERVAL = "a number of seconds > 0 (finite)"
# (trial 22k: "got inf; accepted: a number of seconds >= 0", which inf is)
_ACCEPTED_TIMEOUT = "a number of seconds >= 0 (finite; leave --timeout out to wait for the end of the run)"
_ACCEPTED_WAIT_RESUME = ("a number of seconds >= 0 (finite; default 0: a crashed run ends the watch as soon as it is "
                         "seen so)")
#: ``tripwire watch``'s exit status when it is ended by SIGTERM (128 + 15, as a shell reports a
#: process that SIGTERM ended): its summary line is printed first (trial 31c #3)
EXIT_SIGTERM = 143
_ACCEPTED_WATCH_CONFIG = ("a YAML config whose rules: lists the rules to watch (rule names, a rule set such as "
                          "[default], module:attribute), or no --config (the run's own rules, else the default set)")


def _handle(args: argparse.Namespace) -> int:
    """``tripwire watch``: the exit status (docs/cli.md); with ``--json``, one JSON object a line on
    stdout, one per finding and a last one summing up (:func:`_summary`), whatever the status but
    130 (interrupted). SIGTERM ends it with its summary and exit status :data:`EXIT_SIGTERM`. What it
    says on stderr is the same either way."""
    previous = _catch_sigterm()
    try:
        try:
            return _watch_verb(args)
        except _Terminated as ended:  # (after the summary line: its print is not cut by another SIGTERM)
            return ended.rc
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class _Terminated(BaseException):
    """SIGTERM, raised in the watch's main thread (as Ctrl-C raises KeyboardInterrupt; never caught as
    an ``Exception`` by a rule's or an action's error handling). ``rc``: the exit status, once the
    summary is printed."""

    rc = EXIT_SIGTERM


def _catch_sigterm() -> Any:
    """Make SIGTERM raise :class:`_Terminated` in this (main) thread: the watch then says so, prints
    its summary and exits :data:`EXIT_SIGTERM`, instead of dying in silence (trial 31c #3: ``timeout
    6 tripwire watch ...`` printed nothing, no summary, no ``--json`` line). A second SIGTERM while
    it ends is ignored. Returns the handler before (None: not the main thread, nothing changed)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: Any) -> None:
    """:func:`_catch_sigterm`'s handler."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # (ending now: its summary is not cut short)
    raise _Terminated()


def _watch_verb(args: argparse.Namespace) -> int:
    """:func:`_handle`'s body, SIGTERM raising :class:`_Terminated` in it."""
    from ._cli import error_text, os_error_text, print_json

    json_out = bool(getattr(args, "json", False))
    notes: list[str] = []
    watcher: Watcher | None = None
    findings: list[Finding] = []

    def say(message: str) -> None:
        notes.append(message)
        print(f"tripwire watch: {message}", file=sys.stderr)

    def finish(rc: int, error: str | None = None) -> int:
        # (the text line reads none of what the rules could not judge: stderr said it)
        summary = _summary(args.run, watcher, rc, error, notes, brief=not json_out)
        if json_out:
            print_json(summary)
        elif error is None:  # (trial 27c: a healthy run printed nothing; exit 2 is its one stderr line)
            print(summary_line(summary), flush=True)
        return rc

    try:
        if not 0 < args.interval < float("inf"):
            raise ConfigError(f"--interval: got {args.interval!r}; accepted: {_ACCEPTED_INTERVAL}")
        if args.timeout is not None and not 0 <= args.timeout < float("inf"):
            raise ConfigError(f"--timeout: got {args.timeout!r}; accepted: {_ACCEPTED_TIMEOUT}")
        wait_resume = float(getattr(args, "wait_resume", 0.0) or 0.0)
        if not 0 <= wait_resume < float("inf"):
            raise ConfigError(f"--wait-resume: got {wait_resume!r}; accepted: {_ACCEPTED_WAIT_RESUME}")
        if wait_resume > 0 and args.once:
            raise ConfigError(f"--wait-resume with --once: --once judges what is there now and waits for nothing, "
                              f"--wait-resume waits for a crashed run to be reopened; accepted: one of them")
        no_record = bool(getattr(args, "no_record", False))
        if no_record and args.stop:
            raise ConfigError("--stop with --no-record: --stop writes a stop request into RUN (control/stop.json), "
                              "--no-record writes nothing there; accepted: one of them")
        watcher = Watcher(args.run, args.config, stop=args.stop, json_lines=json_out, record=not no_record)
        if args.config is not None and watcher.config is not None and not watcher.config.rules:
            # trial 22k: an empty config watched no rule and exited 0 in silence: a CI gate passed a
            # run that nothing judged (without --config the run's own rules, else the default set, are watched)
            raise ConfigError(f"--config: {args.config!r} lists no rules, so nothing would be watched; accepted: "
                              f"{_ACCEPTED_WATCH_CONFIG}")
        findings = watcher.watch(args.interval, args.once, args.timeout, wait_resume)
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            # (the run is judged: a SIGTERM now lets the watch sum up, a moment, with its own exit status)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        have = watcher.run.collections() if watcher.run is not None else []
        # trial 20a: a shard cut short after the run ended (truncated, a torn tail: run.damaged) exited 0,
        # although the rules never saw the records that are gone
        damaged = watcher.run.damaged if watcher.run is not None else {}
        # (trial 20d: an emptied shard's collections are gone from the run: the training captured them)
        fix = ("; the training may have captured it: records are missing from a damaged shard (below)" if damaged
               else "; capture it in the training's config")
        xgboost = watcher.run is not None and watcher.run.info.get("framework") == "xgboost"
        classes = {r.name for r in watcher._first_worker_rules() if isinstance(r, ClassRoundRule)} if xgboost else set()
        # trial 27g F5: a training that raised before its first record (torch at step 0) got "had nothing to
        # read: this run has no 'losses' collection ...; capture it in the training's config" for every rule,
        # where its config captured losses: said as what it is, once, with the exception its end marker holds
        before_first = watcher.failed_before_first_record()
        if before_first and watcher.run.status == "failed":
            say(f"the training failed before its first record ({_stop_reasons_text(watcher.run)}): no rule had "
                "anything to judge")
        elif before_first and watcher.run.status == "running":
            say("the training ended before its first record, without closing the run: no rule had anything to judge")
        elif before_first:
            say(f"the training ended ({watcher.run.status}) before its first record: no rule had anything to judge")
        elif (watcher.run is not None and watcher.run.status == "running" and not damaged
              and not any(watcher._done.values())):
            # (trial 41j: --once of a live training before its first record told each rule to "capture it")
            before_first = True
            say("the training has written no step record yet: no rule had anything to judge")
        no_held_out = watcher.xgboost_sets_without_held_out() if classes and not damaged else None
        scaler_skipped = functools.cache(watcher.scaler_skipped)  # (the run's, the same for every such rule: read once)
        for rule, missing in ({} if before_first else watcher.unfed()).items():
            if rule in classes and no_held_out is not None:
                # (trial 27f: "capture it in the training's config" where the callback captures labels and
                # predictions of held-out data only, and the run evaluated none)
                say(f"{unfed_message(rule, missing, have)}: the XGBoost integration captures labels and predictions "
                    f"of a held-out evaluation set only, and no evaluation set is held out ({no_held_out}); "
                    f"{watcher._held_out_fix()}")
                continue
            # (trial 26d: capturing labels does not help where the objective has no classes)
            hint = (f" (if the model is a classifier: for an objective without classes, {_NO_CLASSES}, the XGBoost "
                    f"integration leaves {rule} out and captures no labels for it; leave it out of --config then)"
                    if rule in classes and not damaged else "")
            scaler = scaler_skipped() if list(missing) == ["gradients"] and not damaged else None
            if scaler is not None:  # (trial 30g F2: "capture it in the training's config" where the config does)
                say(f"{unfed_message(rule, missing, have)}: {scaler}")
                continue
            say(f"{unfed_message(rule, missing, have)}{fix}{hint}")
        for rule, why in ({} if before_first else watcher.not_applicable()).items():
            say(f"rule {rule!r} does not apply to this run, not judged: {why}")
        for message in [] if before_first else watcher.unstored() + watcher.unmatched():
            say(message)
        for rule, why in ({} if before_first else watcher.rules_unjudged()).items():
            say(f"rule {rule!r} judged nothing: {why}")
        unjudged = watcher.unjudged()
        if watcher.abandoned:
            gone = (f"worker{'s' if len(watcher.abandoned) > 1 else ''} {', '.join(map(str, watcher.abandoned))} "
                    f"ended without closing the run (killed, out of memory, a crash)")
            if args.once:
                say(f"{gone}: what was written is judged")
            elif wait_resume > 0:
                say(f"{gone}: what was written is judged; no training reopened it within --wait-resume="
                    f"{wait_resume:g} s")
            else:
                # trial 31c #4: a watch started beside a resumed job read the crashed run before the resumed
                # writer reopened it, and exited 3 at once, the resumed training unwatched
                before = " before this watch began" if watcher.gone_at_start else ""
                say(f"{gone}{before}: what was written is judged; a training that resumes it later is not "
                    f"watched: to follow a resumed (restarted) job, give --wait-resume SECONDS (wait that long for "
                    f"a training to reopen the run), or start the watch once the resumed training has reopened it")
        for worker, info in watcher.unknown.items():  # (trial 28f: a copy of a live run read as a crash)
            say(f"{unknown_writer_text(worker, info)}: judged what was written "
                f"{'by then' if watcher.timed_out else 'by now'}")
        if watcher.timed_out and watcher.run is None:
            # trial 22k: a path where no run ever appeared said "judged what was written by then"
            say(f"--timeout={args.timeout:g} s ran out and no run appeared at {args.run!r}: nothing was judged (a "
                "mistyped path, or a training that has not started writing)")
        elif watcher.timed_out:
            say(f"--timeout={args.timeout:g} s ran out before the run ended: judged what was written by then")
        # a gate must not pass a training that did not finish (trial 18a: --once on a run still written,
        # a killed one and a failed one all exited 0, where --timeout on the same live run exited 3)
        unfinished = watcher.timed_out or bool(watcher.abandoned) or bool(watcher.unknown)
        if watcher.run is not None and not unfinished:
            status = watcher.run.status
            if status == "running":
                say("the run has not ended (--once): judged what was written by now")
            elif status == "failed" and not before_first:
                say(f"the training failed ({_stop_reasons_text(watcher.run)}): judged what it wrote")
            unfinished = status in ("running", "failed")
        for worker, (expected, read) in sorted(damaged.items()):
            say(f"worker {worker}'s shard holds {read} of the {expected} step records its end marker counts "
                f"(truncated or damaged after the run ended): {_missing_text(expected - read)} not judged")
        # trial 32b F1: a run that lost most of its records to a full disk exited 0 ("no finding"): the
        # end marker counts only what reached the disk, so the shard was not "damaged"
        unwritten = watcher.write_errors()
        for worker, (error, records) in sorted(unwritten.items()):
            after = f" after the {records} it wrote" if records is not None else ""
            say(f"worker {worker}'s records{after} were lost to its write error ({error}), its training going on: "
                f"not judged")
    except TripwireError as exc:
        print(f"tripwire watch: error: {error_text(exc)}", file=sys.stderr)
        return finish(2, error_text(exc))
    except OSError as exc:  # (trial 27c: a run's findings file that was a directory: a traceback, exit 1)
        print(f"tripwire watch: error: {os_error_text(exc)}", file=sys.stderr)
        return finish(2, os_error_text(exc))
    except KeyboardInterrupt:
        return 130
    except _Terminated:
        # trial 31c #3: what was judged by then is summed up, as at --timeout (the findings made are in
        # the run: each was written as it was found)
        # (trial 42f: "judged what was read by then" where no run had appeared, and nothing was read)
        read = watcher is not None and watcher.run is not None
        say("terminated by SIGTERM (the timeout command, a scheduler, kill) before the watch ended: " +
            ("judged what was read by then" if read else "no run had appeared, nothing judged"))
        return finish(EXIT_SIGTERM)
    if watcher.failed_actions:  # (trial 29j F11: a page that never went out passed as one that did)
        failed = watcher.failed_actions
        several = len({(a["rule"], a["worker"], a["step"], a["mode"]) for a in failed}) > 1
        message = (f"{_count(len(failed), 'action')} failed ({_failed_text(failed)}; each logged above with its "
                   f"error): the finding{'s were' if several else ' was'} printed"
                   f"{' and recorded' if watcher.record else ''}, not acted on as configured")
        print(f"tripwire watch: error: {message}", file=sys.stderr)
        return finish(2, message)
    # the run's findings of the watched rules, made now or recorded before (a second run of a CI
    # gate over the same broken run fails too), and the checks the training recorded itself at
    # severity warning and above (trial 27e: a run whose only finding was loss_output_mismatch
    # exited 0)
    if any(f.kind == "finding" for f in [*findings, *watcher.earlier, *watcher.recorded]) or any(
            c.severity in FAILING_CHECK_SEVERITIES for c in watcher.checks):
        return finish(1)
    stops = watcher.unwatched_stops()
    if stops:
        for f in stops:
            by = "the training" if f.source != WATCH_SOURCE else "a watch"
            say(f"worker {f.worker} was stopped by a finding of rule {f.rule!r} (recorded by {by}), which this watch "
                f"does not run: [{f.severity}] {f.rule} at step {f.step} ({f.mode}); give --config with {f.rule!r} "
                f"to judge it again")
        return finish(1)
    raised = sorted({f.rule for f in findings if f.kind == "error"})
    if raised:
        say(f"{', '.join(map(repr, raised))} raised: not judged")
    unjudged = [r for r in unjudged if r not in raised]
    why = []
    if unjudged:  # (a CI gate must not pass a run that no rule could read)
        why.append(f"{'rule' if len(unjudged) == 1 else 'rules'} {', '.join(map(repr, unjudged))} judged nothing")
    if damaged:
        lost = sum(expected - read for expected, read in damaged.values())
        why.append(f"{lost} step record{'s' if lost != 1 else ''} of damaged shards")
    if unwritten:
        which = ", ".join(map(str, sorted(unwritten)))
        why.append(f"the records worker{'s' if len(unwritten) > 1 else ''} {which} could not write")
    if why and not before_first:  # (a training that failed before its first record: said above, once)
        say(f"no finding, but not everything was judged: {' and '.join(why)} (said above)")
    return finish(3 if raised or unjudged or unfinished or damaged or unwritten else 0)


def _summary(run: str, watcher: Watcher | None, rc: int, error: str | None, notes: list[str], *,
             brief: bool = False) -> dict[str, Any]:
    """``tripwire watch --json``'s last line: what the watch judged and why it exits with ``rc``
    (every key in docs/cli.md). Parts a watch that failed (``error``) did not reach are empty, and
    so are, with ``brief`` (for :func:`summary_line`), ``unjudged``, ``not_applicable``, ``unfed``
    and ``damaged``, which read the run again."""
    opened = watcher is not None and watcher.run is not None
    new = [f for f in watcher.findings if f.kind == "finding"] if watcher is not None else []
    earlier = list(watcher.earlier) if watcher is not None else []
    recorded = list(watcher.recorded) if watcher is not None else []
    records: dict[str, int] = {}
    if watcher is not None:
        for (mode, _), n in watcher._done.items():
            records[mode] = records.get(mode, 0) + n
    ok = error is None and opened

    def part(get: Callable[[], Any], empty: Any, *, heavy: bool = True) -> Any:
        return get() if ok and not (brief and heavy) else empty

    def read(get: Callable[[], Any], empty: Any) -> Any:
        # what the run read says, after an error too (trial 28f: a watch whose finding could not be
        # recorded summed up "new: 1" with "status": null and "rules": [])
        if not opened:
            return empty
        try:
            return get()
        except (TripwireError, OSError):  # (the error itself, or the run gone since)
            return empty

    def rules() -> list[str]:
        assert watcher is not None
        if ok:
            return [r.name for r in watcher._first_worker_rules()]
        # after an error, the rules this watch built (it judged with them), none built anew
        built = watcher._rules.get(watcher.run.workers[0] if watcher.run and watcher.run.workers else 0, [])
        return [r.name for r in built]

    assert watcher is not None or not ok
    return {
        "type": "summary",
        "run": run,
        "exit_code": rc,
        "error": error,
        "status": read(lambda: watcher.run.status, None),  # type: ignore[union-attr]
        "rules": read(rules, []),
        "records": {m: records[m] for m in MODES if records.get(m)},
        "findings": len(new) + len(earlier) + len(recorded),
        "new": len(new),
        "recorded_before": len(earlier),
        "recorded_during": len(recorded),
        "checks": len(watcher.checks) if watcher is not None else 0,
        "failing_checks": (sum(c.severity in FAILING_CHECK_SEVERITIES for c in watcher.checks)
                           if watcher is not None else 0),
        "rule_errors": sorted({f.rule for f in watcher.findings if f.kind == "error"}) if watcher is not None else [],
        # (trial 42f: a worker that a finding of a rule not watched stopped)
        "unwatched_stops": read(lambda: [{"worker": f.worker, "rule": f.rule, "step": f.step, "mode": f.mode,
                                          "severity": f.severity}
                                         for f in watcher.unwatched_stops()], []),  # type: ignore[union-attr]
        "failed_actions": [dict(a) for a in watcher.failed_actions] if watcher is not None else [],
        "unjudged": part(lambda: watcher.unjudged(), []),  # type: ignore[union-attr]
        "not_applicable": part(lambda: watcher.not_applicable(), {}),  # type: ignore[union-attr]
        "unfed": part(lambda: watcher.unfed(), {}),  # type: ignore[union-attr]
        "damaged": part(lambda: [{"worker": w, "expected": e, "read": r}  # type: ignore[union-attr]
                                 for w, (e, r) in sorted(watcher.run.damaged.items())], []),
        # (read for the text line too: it names them; trial 32b F1)
        "write_errors": part(lambda: [{"worker": w, "records": n, "error": e}  # type: ignore[union-attr]
                                      for w, (e, n) in sorted(watcher.write_errors().items())], [], heavy=False),
        "abandoned": list(watcher.abandoned) if watcher is not None else [],
        "unknown": part(lambda: [{"worker": w, **info} for w, info in  # type: ignore[union-attr]
                                 sorted(watcher.run.unknown_workers().items())]
                        if watcher.run.status == "running" else [], []),  # type: ignore[union-attr]
        "timed_out": bool(watcher is not None and watcher.timed_out),
        "stop_requested": (watcher.stop_requested.to_dict() if watcher is not None
                           and watcher.stop_requested is not None else None),
        "stop_reasons": read(lambda: {str(w): r for w, r in  # type: ignore[union-attr]
                                      watcher.run.stop_reasons.items()}, {}),
        "failed_before_first_record": bool(ok and watcher.failed_before_first_record()),  # type: ignore[union-attr]
        "notes": list(notes),
    }


def _stop_reasons_text(run: Run | None) -> str:
    """Why a failed run's workers ended, as their end markers say (``Run.stop_reasons``): ``worker 0:
    IndexError: Target 10 is out of bounds.`` (``; `` between workers), else ``the run's status is
    failed`` (a marker with no reason: a run written before trial 27g, a failure with no exception)."""
    reasons = run.stop_reasons if run is not None else {}
    return "; ".join(f"worker {w}: {r}" for w, r in reasons.items()) or "the run's status is failed"


def _missing_text(n: int) -> str:
    """``the 1 record missing was`` / ``the 3 records missing were`` (trial 31c #6: "the 1 records
    missing")."""
    return f"the {n} record missing was" if n == 1 else f"the {n} records missing were"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _failed_text(failed: list[dict[str, Any]], most: int = 3) -> str:
    """``'broken_action' for loss_ema_spike at step 21 (train)``: the failed actions, the first
    ``most`` of them, for the summary line and stderr."""
    said = [f"{a['action']!r} for {a['rule']} at step {a['step']} ({a['mode']})" for a in failed[:most]]
    return "; ".join(said) + (f"; {len(failed) - most} more" if len(failed) > most else "")


def summary_line(summary: Mapping[str, Any]) -> str:
    """``tripwire watch``'s last line on stdout in text (trial 27c: a healthy run printed nothing, and
    a CI log did not show that the watch ran): the run and its status, the rules watched and the
    records judged, the findings and checks, and the exit status; the text of the ``--json``
    summary (:func:`_summary`), whose keys docs/cli.md lists::

        tripwire watch: 'runs/a' (complete), 2 rules watched over 30 train and 1 eval records: no finding; exit status 0
    """
    rc = summary["exit_code"]
    if summary["status"] is None:  # (no run was read: --timeout ran out, or SIGTERM came, before one appeared)
        why = "terminated by SIGTERM" if rc == EXIT_SIGTERM else "--timeout ran out"
        return (f"tripwire watch: no run at {summary['run']!r} ({why} before one appeared): nothing judged; exit "
                f"status {rc}")
    records = summary["records"]
    over = " and ".join(f"{n} {mode}" for mode, n in records.items())
    parts = [f"{summary['findings']} finding{'' if summary['findings'] == 1 else 's'}" if summary["findings"]
             else "no finding"]
    if summary["findings"]:
        how = [f"{summary[k]} {k.replace('_', ' ')}" for k in ("new", "recorded_before", "recorded_during")
               if summary[k]]
        parts[0] += f" ({', '.join(how)})"
    if summary.get("unwatched_stops"):
        stops = summary["unwatched_stops"]
        parts.append(f"stopped by {_count(len(stops), 'finding')} of a rule not watched (" + ", ".join(
            f"{s['rule']} at step {s['step']} ({s['mode']}), worker {s['worker']}" for s in stops) + ")")
    if summary["checks"]:
        failing = summary["failing_checks"]
        parts.append(f"{_count(summary['checks'], 'check')} the training recorded ("
                     f"{failing or 'none'} of severity warning or above)")
    if rc == 3:
        unwritten = [w["worker"] for w in summary.get("write_errors") or []]
        lost = (f"worker{'s' if len(unwritten) > 1 else ''} {', '.join(map(str, unwritten))} could not write all of "
                f"{'their' if len(unwritten) > 1 else 'its'} records; " if unwritten else "")
        ended = {"failed": "failed", "running": "ended without closing the run"}.get(summary["status"], "ended")
        parts.append(f"nothing judged (the training {ended} before its first record)"
                     if summary.get("failed_before_first_record") else f"not everything judged ({lost}stderr says why)")
    elif rc == EXIT_SIGTERM:
        parts.append("terminated by SIGTERM before the watch ended: judged what was read by then")
    return (f"tripwire watch: {summary['run']!r} ({summary['status']}), {_count(len(summary['rules']), 'rule')} "
            f"watched over {over + ' records' if over else 'no records'}: {'; '.join(parts)}; exit status {rc}")


def register(subparsers: Any) -> None:
    """Add ``tripwire watch`` to the CLI."""
    from ._cli import EXIT_BAD_INPUT, exit_codes, typed

    p = subparsers.add_parser(
        "watch",
        help="evaluate rules over a run while it is written (out of process)",
        description=(
            "Evaluate rules over a stored run while the training writes it; findings go to "
            "RUN/findings/watch-00000.jsonl (with --no-record nothing is written into RUN). Findings the run "
            "already holds (by the training or an earlier watch) are printed as recorded before and never made or "
            "acted on again; so are the checks the training's integration recorded itself (findings no rule "
            "made). The last line on stdout sums up what "
            "was judged and the exit status (with --json, a summary object)."
        ),
        epilog=exit_codes(
            "0 the run has no finding of the rules watched", "1 it has (made by this watch or recorded before), or "
            "the training recorded a check of severity warning or above (a finding no rule made: Keras's "
            "loss_output_mismatch ...; printed as 'a check, not a rule')",
            f"{EXIT_BAD_INPUT}: a --config that lists no rules included, nothing would be watched; a --config is "
            "checked before the watch waits for the run; a finding that could not be recorded in RUN (a read-only "
            "run: the finding is printed first; --no-record judges without writing); an action that failed for a "
            "finding (a notify, a module:attribute action that raised: the finding is printed and recorded, the "
            "summary's failed_actions names it)",
            "3 no finding but not all judged (a watched rule raised or had nothing to read, a rule parameter matched "
            "no loss or metric of the run, a shard holds fewer records than its end marker counts, or the training "
            "did not finish: --timeout ran out or --once came before the run ended, a worker was killed or may "
            "still be written where this machine cannot see its writer (a copy of a live run, another machine's), "
            "or the run's status is failed, a training that failed before its first record included: nothing "
            "judged; or --timeout ran out before any run appeared at RUN: nothing judged; a rule that cannot apply "
            "to the run, a class rule on an XGBoost regression, is said and does not count)",
            "130 Ctrl-C (no summary)",
            f"{EXIT_SIGTERM} SIGTERM (the timeout command, a scheduler, kill; after the summary line of what was "
            f"judged by then)"),
    )
    p.add_argument("run", help="the run directory")
    p.add_argument("--config", default=None, help="YAML config whose rules/actions to use (default: the run's own rules, "
                                                  "else the default set); it must list rules")
    p.add_argument("--interval", type=typed(float, _ACCEPTED_INTERVAL), default=5.0,
                   help="seconds between polls, > 0 (default 5)")
    p.add_argument("--once", action="store_true", help="evaluate what is there now, then exit")
    p.add_argument("--stop", action="store_true",
                   help="ask the training to stop at the first finding of a watched rule made while the watch runs, "
                        "by this watch or recorded by the training meanwhile, the first made (not at one recorded "
                        "before the watch, nor at a check the training recorded)")
    p.add_argument("--timeout", type=typed(float, _ACCEPTED_TIMEOUT), default=None,
                   help="give up after this many seconds, >= 0 (default: wait for the end of the run); a wait "
                        "between polls never goes past it")
    p.add_argument("--wait-resume", type=typed(float, _ACCEPTED_WAIT_RESUME), default=0.0, metavar="SECONDS",
                   help="where every worker still writing ended without closing the run (killed, a crash), wait up to "
                        "SECONDS for a training to reopen it (a resume, a restarted job) and follow it, before "
                        "ending with exit status 3 (default 0: end as soon as that is seen); not with --once")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object a line on stdout: one per finding, then a summary (its keys: "
                        "docs/cli.md)")
    p.add_argument("--no-record", action="store_true",
                   help="write nothing into RUN: findings are printed, not appended to its findings, and no stop "
                        "request is written (judge a read-only copy of a run); the config's other actions still "
                        "fire (notify, module:attribute); not with --stop")
    p.set_defaults(func=_handle)


__all__ = ["FAILING_CHECK_SEVERITIES", "ORIGINS", "FindingNotRecordedError", "HistoryAsOf", "Watcher", "append_finding",
           "finding_line", "register", "summary_line", "watch"]

"""The read-only view of captured values that rules evaluate, in-process and over a stored run.

:class:`History` holds scalar reductions as columnar chunks (one per step record) and groups them
into per-series arrays lazily, so ingesting a record is O(1) Python work and loading a stored run
of millions of scalars is vectorised.
"""

from __future__ import annotations

import bisect
import itertools
import math
import numbers
import operator
import re
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ._config import BASIC_REDUCTIONS, BUILTIN_COLLECTIONS, MODES, PARAMETRIC_REDUCTIONS, is_valid_reduction, parse_reduction
from ._errors import ConfigError, TensorNotFoundError
from ._format import ArrayRef, read_array
from ._validate import did_you_mean

ArrayLike = np.ndarray | ArrayRef

_SMALL = 64
"""Records of at most this many values are looked at with Python's arithmetic, not numpy's: a save
step comes after the training step has taken the caches, where a numpy reduction costs more than
Python's loop over a few values."""


class _Column:
    """An append-only numpy column, read as a read-only view of the values so far, made without a
    copy (trial 24e: each read of a growing series concatenated the whole series again, so that a
    save step cost more the longer the run).

    Python values (a list, a tuple, a range) wait in a Python list, the tail, and join the numpy
    buffer at the next read (:meth:`view`) or once the tail holds ``_TAIL`` of them: the training
    thread adds a few values at every save step, and a list append costs a fraction of a numpy
    write (the columns of records that nothing reads during training stay small too). A numpy
    array is written into the buffer at once (the tail first). The buffer grows by a quarter, so at
    most a fifth of it is unused."""

    _TAIL = 64

    __slots__ = ("_data", "_done", "_tail", "_last", "n", "ascending", "track")

    def __init__(self, dtype: Any, track: bool = False) -> None:
        self._data = np.empty(8, dtype=dtype)
        self._done = 0  # (the values written into _data; the tail's come after them)
        self._tail: list[Any] = []
        self._last: Any = None  # (the value added last: what a step added next is compared with)
        self.n = 0  # every value, the tail's too
        self.track = track  # (a column of steps: whether they ascend, so that a reader may bisect them)
        self.ascending = True  # every value >= the one before (kept where ``track``)

    def last(self) -> Any:
        """The value added last, as it was given (the column holds one)."""
        return self._last

    def append(self, value: Any) -> None:
        """Add one Python number."""
        if self.track and self.ascending and self.n and value < self._last:
            self.ascending = False
        self._tail.append(value)
        self._last = value
        self.n += 1
        if len(self._tail) >= self._TAIL:
            self._settle()

    def extend(self, values: Sequence[Any] | np.ndarray) -> None:
        k = len(values)
        if not k:
            return
        if self.track and self.ascending:
            self.ascending = bool((self.n == 0 or values[0] >= self._last) and (
                np.all(values[1:] >= values[:-1]) if isinstance(values, np.ndarray)
                else all(map(operator.le, values, values[1:]))))
        self._last = values[-1]
        self.n += k
        if isinstance(values, np.ndarray):
            self._settle()
            self._write(values)
        else:
            self._tail.extend(values)
            if len(self._tail) >= self._TAIL:
                self._settle()

    def view(self) -> np.ndarray:
        self._settle()
        out = self._data[: self._done]
        out.flags.writeable = False  # (a reader that wrote into it would change the history)
        return out

    def _settle(self) -> None:
        """Write the tail into the buffer."""
        if self._tail:
            tail, self._tail = self._tail, []
            self._write(tail)

    def _write(self, values: Sequence[Any] | np.ndarray) -> None:
        """Write ``values`` into the buffer after the values there (the tail is empty)."""
        done, need = self._done, self._done + len(values)
        if need > len(self._data):
            grown = np.empty(max(need, len(self._data) + len(self._data) // 4 + 8), dtype=self._data.dtype)
            grown[:done] = self._data[:done]
            self._data = grown
        self._data[done:need] = values
        self._done = need


class _Records:
    """Every scalar record in write order, as columns (:class:`_Column`) by name (``records["step"]``):
    its step, mode index, worker, layout and place (see ``History._rec``).

    The records of one call (one layout, one mode and worker, consecutive places) are noted as one
    block, a tuple (the training thread notes one or two blocks at every save step), and the blocks
    join the columns, all at once, when a column is read or ``_BLOCKS`` of them wait."""

    _BLOCKS = 256

    def __init__(self) -> None:
        self._columns = {"step": _Column(np.int64), "mode": _Column(np.int8), "worker": _Column(np.int32),
                         "layout": _Column(np.int32), "pos": _Column(np.int64)}
        # (steps, mode index, worker, layout, the first record's place): one record per step
        self._blocks: list[tuple[Sequence[int], int, int, int, int]] = []

    def add(self, steps: Sequence[int], mode_id: int, worker: int, layout: int, pos: int) -> None:
        self._blocks.append((steps, mode_id, worker, layout, pos))
        if len(self._blocks) >= self._BLOCKS:
            self._settle()

    def __getitem__(self, name: str) -> _Column:
        if self._blocks:
            self._settle()
        return self._columns[name]

    def _settle(self) -> None:
        """Write the blocks into the columns."""
        blocks, self._blocks = self._blocks, []
        steps, modes, workers, layouts, firsts = zip(*blocks)
        counts = np.fromiter(map(len, steps), dtype=np.int64, count=len(blocks))
        total = int(counts.sum())
        cols = self._columns
        cols["step"].extend(np.fromiter(itertools.chain.from_iterable(steps), dtype=np.int64, count=total))
        cols["mode"].extend(np.repeat(modes, counts))
        cols["worker"].extend(np.repeat(workers, counts))
        cols["layout"].extend(np.repeat(layouts, counts))
        # each record's place: its block's first place, plus its index in its block
        starts = np.cumsum(counts) - counts  # (each block's first record, counted over the blocks)
        cols["pos"].extend(np.arange(total) + np.repeat(np.asarray(firsts, dtype=np.int64) - starts, counts))


class History:
    """Captured values by tensor, reduction, mode, step and worker.

    Scalars: every reduction (``l2``, ``mean``, ...) and every raw tensor of one element (reduction
    ``"raw"``). Arrays: raw tensors and histograms, kept as lazy references for stored runs and as
    the last ``keep_arrays`` values per tensor in-process (``None``: all).

    ``planned_steps``: the planned length of training in train steps when the framework knows it
    (set through :meth:`Session.set_planned_steps`), else ``None``; rules scale their windows by it.

    ``every_step``: ``{collection: train save interval}`` of the collections whose values are kept
    at every train step (``every_step``, the training loss by default; set by the Session, empty
    for a stored run). Rules that were written for one value per save read such series in save
    intervals (:func:`tripwire.rules._loss.value_interval`).

    ``every_step_ranges``: ``{collection: (start_step, end_step, steps)}``, the train save range of
    each of those collections (a train step inside it has a record, the loss of that step): what
    :meth:`train_steps` knows the train steps without a record by. A collection of ``every_step``
    not in it (a run written before trial 27d) counts as keeping every train step.
    """

    def __init__(self, keep_arrays: int | None = None) -> None:
        self._keep_arrays = keep_arrays
        self._key_index: dict[tuple[str, str], int] = {}
        # each key by what its reduction's names share (same_value_key: ``abs_l2`` under ``l2``,
        # ``fraction_gt:0.5`` under ``fraction_gt:0.50``): what _key_id finds another name by
        self._same_keys: dict[tuple[str, Any], int] = {}
        self._keys: list[tuple[str, str]] = []
        # by tensor: its scalar reductions (in write order) and the kinds of its arrays, so that a
        # lookup does not scan every key (trial 28i: 25,000 feature-importance tensors, and a rule
        # that asked each tensor's reductions at every save step made training quadratic in them)
        self._reductions_of: dict[str, list[str]] = {}
        self._array_kinds_of: dict[str, set[str]] = {}
        self._mode_index = {m: i for i, m in enumerate(MODES)}
        # pending blocks not yet grouped into series: (key_ids, values [steps x keys], steps, mode_id,
        # worker, layout). A reader of one series takes that series' values out of them (_catch_up),
        # the others stay until a reader of everything, or too many blocks, groups them all (_flush):
        # a rule reads a few of the thousands of series a save step writes (36p)
        self._pending: list[tuple[np.ndarray, np.ndarray, Sequence[int], int, int, int]] = []
        self._blocks_done = 0  # the blocks grouped before the first pending one
        # per series key read since then: the blocks (counted as _blocks_done counts) it holds
        self._cursor: dict[tuple[int, int, int], int] = {}
        # per layout: each key id's places in its values (one, but where a record names a key twice)
        self._places: list[dict[int, tuple[int, ...]]] = []
        # every scalar record in write order, as columns (scalar_columns, the dataframe): its step,
        # mode index, worker and layout (an index into _layouts, the key ids of its values); the
        # values themselves are the series' (a tuple and an array per record held about 160 bytes
        # of every step of a long run, trial 24e); each call's records are noted as one block, which
        # joins the columns when one is read (:class:`_Records`)
        self._rec = _Records()
        # (pos: the record's place among the records of its mode and worker, :meth:`wall_times`' index:
        # what a view as of a record tells superseded records by; see :func:`live_records`)
        self._layouts: list[np.ndarray] = []
        self._layout_no: dict[bytes, int] = {}
        # per layout: the places of its ``nonfinite_count`` values (what :meth:`_note_nonfinite` reads)
        self._count_places: list[np.ndarray] = []
        # per (mode, worker): the records that hold a value that is not finite or a ``nonfinite_count``
        # above 0, in write order: their steps, the key ids of those values, whether the steps ascend
        # (:meth:`nonfinite_tensors`)
        self._nonfinite: dict[tuple[str, int], tuple[list[int], list[tuple[int, ...]], list[bool]]] = {}
        # per (key id, mode index, worker): the series' steps and values
        self._series: dict[tuple[int, int, int], tuple[_Column, _Column]] = {}
        # sorted unique steps of the (mode, worker) whose steps came out of order (a run appended to
        # by a second training, a resume past a crash): what steps_between bisects for them
        self._sorted_steps: dict[tuple[str, int], list[int]] = {}
        # finite_series: per (tensor, reduction, mode, worker), the values read so far and, once a
        # non-finite one came, the finite ones' columns (None while every value was finite)
        self._finite: dict[tuple[str, str, str, int], tuple[int, _Column | None, _Column | None]] = {}
        # wall_times' columns: every record's step and wall time, per (mode, worker)
        self._wall: dict[tuple[str, int], tuple[_Column, _Column]] = {}
        # beside them, each record's global step (the writing session's count of the steps of every
        # mode; -1 where the caller gave none), and per worker the modes of its records in write order
        # (an index into MODES; len(MODES) for another mode): what train_steps reads
        self._gsteps: dict[tuple[str, int], _Column] = {}
        self._order: dict[int, _Column] = {}
        self._after: dict[int, tuple[int, dict[str, np.ndarray]]] = {}  # train_steps' answers, per worker
        self._collections: dict[str, set[str]] = defaultdict(set)
        self._tensor_collections: dict[str, set[str]] = defaultdict(set)
        self._arrays: dict[tuple[str, str, str, int], OrderedDict[int, ArrayLike]] = defaultdict(OrderedDict)
        self._workers: set[int] = set()
        self._sig_cache: dict[tuple[tuple[str, tuple[str, ...]], ...], tuple[np.ndarray, int]] = {}
        self.planned_steps: int | None = None
        self.every_step: dict[str, int] = {}
        self.every_step_ranges: dict[str, tuple[int, int | None, tuple[int, ...]]] = {}
        #: names of the collections of the run's config (None: not known here; a stored run reads
        #: them from its ``run.json``): :meth:`tensor_names` lists one of them, or a built-in
        #: collection, that holds no tensor yet as ``[]`` and raises for any other name
        self.configured_collections: set[str] | None = None

    def __repr__(self) -> str:
        """``History(tensors=3, workers=[0], steps={'train': 60, 'eval': 6})``: what it holds, the
        number of tensors, the workers and the steps of each mode with a record (any worker's; trial
        30f F6: the default ``<tripwire._history.History at 0x...>`` said nothing in a notebook)."""
        steps = {m: n for m in MODES if (n := len(self.steps(m)))}
        return f"{type(self).__name__}(tensors={len(self.tensor_names())}, workers={self.workers}, steps={steps})"

    # ------------------------------------------------------------------------------------ ingest
    def _layout(self, scalars: Iterable[tuple[str, Sequence[str]]]) -> tuple[np.ndarray, int]:
        """``(key ids, layout)`` of a record's values, ``scalars`` its ``(tensor, reductions)`` pairs in
        order: the key of each value, new keys noted, and the layout's number (an index into
        ``_layouts``, new layouts noted), which :meth:`scalar_columns` reads."""
        pairs = tuple(scalars)
        try:  # (pairs of a name and a tuple, as a session gives them: the cache's key as they are)
            got = self._sig_cache.get(pairs)
        except TypeError:  # (reductions in a list: unhashable, made tuples below)
            got = None
        if got is not None:
            return got
        sig = tuple((t, tuple(r)) for t, r in pairs)
        got = self._sig_cache.get(sig)
        if got is None:
            out = []
            for tensor, reds in sig:
                for red in reds:
                    key = (tensor, red)
                    kid = self._key_index.get(key)
                    if kid is None:
                        kid = self._key_index[key] = len(self._keys)
                        self._keys.append(key)
                        self._reductions_of.setdefault(tensor, []).append(red)
                        self._same_keys.setdefault((tensor, same_value_key(red)), kid)
                    out.append(kid)
            ids = np.asarray(out, dtype=np.int64)
            raw = ids.tobytes()
            layout = self._layout_no.get(raw)
            if layout is None:
                layout = self._layout_no[raw] = len(self._layouts)
                self._layouts.append(ids)
                self._count_places.append(np.asarray(
                    [i for i, kid in enumerate(out) if self._keys[kid][1] == "nonfinite_count"], dtype=np.int64))
            got = (ids, layout)
            if len(self._sig_cache) < 4096:
                self._sig_cache[sig] = got
        return got

    def add_step(
        self,
        mode: str,
        step: int,
        worker: int,
        wall_time: float,
        scalars: list[tuple[str, tuple[str, ...]]],
        values: np.ndarray,
        arrays: Iterable[tuple[str, str, ArrayLike]] = (),
        declare: dict[str, list[str]] | None = None,
        global_step: int = -1,
    ) -> None:
        """Ingest one step record (already decoded). ``global_step``: the record's (the writing
        session's count of the steps of every mode, which :meth:`train_steps` reads; -1: not known).
        A stored :class:`~tripwire.Run` refuses it (a Run is read-only; it ingests its shards through
        ``_add_step``, this method under a private name).

        Called at every save step on the training thread: it appends Python values to the columns
        (:class:`_Column`), and the values join the series when a reader asks (:meth:`_flush`)."""
        self._workers.add(worker)
        step = int(step)
        saved, walls = self._walls(mode, worker)  # (the steps of its records, as written)
        self._note_order(mode, worker, (int(global_step),))
        pos = saved.n
        if self._sorted_steps and (mode, worker) in self._sorted_steps:
            srt = self._sorted_steps[(mode, worker)]
            if step > srt[-1]:
                srt.append(step)
            else:
                i = bisect.bisect_left(srt, step)
                if srt[i] != step:
                    srt.insert(i, step)
        elif saved.n and step < saved.last():  # out of order from now on: keep a sorted copy
            self._sorted_steps[(mode, worker)] = sorted(set(saved.view().tolist()) | {step})
        saved.append(step)
        walls.append(float(wall_time))
        if declare:
            self._declare_collections(declare)
        if scalars:
            ids, layout = self._layout(scalars)
            vals = np.asarray(values, dtype=np.float64).reshape(1, -1)
            mode_id = self._mode_index.get(mode, len(MODES))
            self._note_nonfinite(mode, worker, (step,), ids, vals, layout)
            self._pending.append((ids, vals, (step,), mode_id, worker, layout))
            self._rec.add((step,), mode_id, worker, layout, pos)
        for tensor, kind, arr in arrays:
            store = self._arrays[(tensor, kind, mode, worker)]
            self._array_kinds_of.setdefault(tensor, set()).add(kind)
            store[step] = arr
            if self._keep_arrays is not None:
                while len(store) > self._keep_arrays:
                    store.popitem(last=False)

    _add_step = add_step

    def add_steps(self, mode: str, steps: Sequence[int], worker: int, wall_times: Sequence[float],
                  scalars: list[tuple[str, tuple[str, ...]]], rows: np.ndarray,
                  global_steps: Sequence[int] | None = None) -> None:
        """Ingest the steps of one ``steps`` record (one layout, a row of values each, no arrays):
        as :meth:`add_step` once per step, without its per-step work (a run that keeps the loss of
        every step holds a million such steps). ``global_steps``: the record's, one per step (None:
        not known). A stored :class:`~tripwire.Run` refuses it, as :meth:`add_step`."""
        key = (mode, worker)
        saved, walls = self._walls(mode, worker)
        steps = list(map(int, steps))
        at = [-1] * len(steps) if global_steps is None else list(map(int, global_steps))
        in_order = all(map(operator.lt, steps, steps[1:])) and not (saved.n and steps and steps[0] <= saved.last())
        if not in_order or key in self._sorted_steps:
            for step, wall, row, g in zip(steps, wall_times, rows, at):
                self._add_step(mode, step, worker, wall, scalars, row, global_step=g)
            return
        self._workers.add(worker)
        pos = saved.n
        self._note_order(mode, worker, at)
        saved.extend(steps)
        walls.extend(list(map(float, wall_times)))
        if scalars:
            ids, layout = self._layout(scalars)
            mode_id = self._mode_index.get(mode, len(MODES))
            values = np.asarray(rows, dtype=np.float64).reshape(len(steps), -1)
            self._note_nonfinite(mode, worker, steps, ids, values, layout)
            self._pending.append((ids, values, steps, mode_id, worker, layout))
            self._rec.add(steps, mode_id, worker, layout, pos)

    _add_steps = add_steps

    def _note_nonfinite(self, mode: str, worker: int, steps: Sequence[int], ids: np.ndarray, values: np.ndarray,
                        layout: int) -> None:
        """Note the records in ``values`` (a row a step, of ``layout``, key ids ``ids``) that hold a
        value that is not finite or a ``nonfinite_count`` above 0: one pass over the record's values,
        a few microseconds a save step, so that a rule need not read every series to rule out a NaN."""
        places = self._count_places[layout]
        if values.size <= _SMALL:  # (Python's sum: numpy's reduction costs 16 us at a save step, cold)
            total = sum(values.ravel().tolist())  # (finite values may sum to inf: looked at below)
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                total = values.sum()
        if math.isfinite(total) and not (len(places) and values[:, places].any()):
            return  # (every value finite, no count above 0: the usual record, told by one sum)
        bad = ~np.isfinite(values)
        if len(places):
            bad[:, places] |= values[:, places] > 0
        rows = np.flatnonzero(bad.any(axis=1))
        if not len(rows):
            return
        got = self._nonfinite.get((mode, worker))
        if got is None:
            got = self._nonfinite[(mode, worker)] = ([], [], [True])
        noted, kids, ascending = got
        for r in rows.tolist():
            step = int(steps[r])
            if noted and step < noted[-1]:
                ascending[0] = False
            noted.append(step)
            kids.append(tuple(ids[bad[r]].tolist()))

    def nonfinite_tensors(self, mode: str, worker: int, after: int, upto: int) -> set[str]:
        """The tensors with a scalar value that is not finite, or a ``nonfinite_count`` above 0, in a
        record of ``mode`` by ``worker`` at a step ``s`` with ``after < s <= upto``: no series of any
        other tensor holds a NaN, an infinity or a positive count at those steps (``exploding_tensor``
        rules out a save step's tensors so, without reading their series; whole arrays are not
        looked at)."""
        got = self._nonfinite.get((mode, worker))
        if got is None or upto <= after:
            return set()
        noted, kids, ascending = got
        if ascending[0]:
            places: Iterable[int] = range(bisect.bisect_right(noted, after), bisect.bisect_right(noted, upto))
        else:
            places = [i for i, s in enumerate(noted) if after < s <= upto]
        return {self._keys[k][0] for i in places for k in kids[i]}

    def _declare_collections(self, declare: Mapping[str, Sequence[str]] | None) -> None:
        """Note the collections of tensors a record declares (a record not kept in the history, one
        that a resume superseded, still names them: see ``Session._replay_checkpointed``)."""
        for tensor, cols in (declare or {}).items():
            for c in cols:
                self._collections[c].add(tensor)
                self._tensor_collections[tensor].add(c)

    #: A series' catch-up (:meth:`_catch_up`) goes through at most this many pending blocks; behind
    #: more, every series is grouped at once (:meth:`_flush`).
    _CATCH_UP = 64

    def _catch_up(self, key: tuple[int, int, int]) -> None:
        """Bring the series of ``key`` (key id, mode index, worker) up to date with the pending
        blocks, leaving the other series' values there (a rule that reads a save step's gradient
        norms costs what it reads, not the thousands of values the record holds; 36p: 0.9 ms a save
        step for 3,900 values). A series behind more than :attr:`_CATCH_UP` blocks: :meth:`_flush`."""
        pending = self._pending
        if not pending:
            return
        end = self._blocks_done + len(pending)
        start = self._cursor.get(key, self._blocks_done)
        if start >= end:
            return
        if end - start > self._CATCH_UP:
            self._flush()
            return
        kid, mode_id, worker = key
        cols = self._series.get(key)
        for ids, vals, bsteps, mid, w, layout in pending[start - self._blocks_done:]:
            if mid != mode_id or w != worker:
                continue
            places = self._layout_places(layout).get(kid)
            if places is None:
                continue
            if cols is None:
                cols = self._column(key)
            for j in places:  # (one place, but where a record names a key twice)
                if len(bsteps) == 1:
                    cols[0].append(bsteps[0])
                    cols[1].append(vals.item(0, j))
                else:
                    cols[0].extend(bsteps)
                    cols[1].extend(vals[:, j])
        self._cursor[key] = end

    def _layout_places(self, layout: int) -> dict[int, tuple[int, ...]]:
        """Each key id's places in the values of ``layout``."""
        while len(self._places) <= layout:
            places: dict[int, tuple[int, ...]] = {}
            for j, kid in enumerate(self._layouts[len(self._places)].tolist()):
                places[kid] = places.get(kid, ()) + (j,)
            self._places.append(places)
        return self._places[layout]

    def _flush(self) -> None:
        """Group every pending value into its series (a series caught up already takes only the
        blocks after those it holds)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        base, cursor = self._blocks_done, self._cursor
        self._blocks_done += len(pending)
        self._cursor = {}
        n_modes = len(MODES) + 1
        if len(pending) <= 4:  # (a step or a few, as a session adds them: per block and key)
            for b, (ids, vals, bsteps, mode_id, worker, _) in enumerate(pending, base):
                if len(bsteps) == 1:
                    # one step (a save step's record): a Python number per column, to its tail, not a
                    # numpy slice written into its buffer (36p: thousands of columns a step, ~2 us each)
                    step = bsteps[0]
                    for kid, value in zip(ids.tolist(), vals[0].tolist()):
                        key = (kid, mode_id, worker)
                        if cursor and cursor.get(key, base) > b:
                            continue  # (caught up already)
                        steps_col, values_col = self._column(key)
                        steps_col.append(step)
                        values_col.append(value)
                    continue
                for j, kid in enumerate(ids.tolist()):
                    key = (kid, mode_id, worker)
                    if cursor and cursor.get(key, base) > b:
                        continue
                    steps_col, values_col = self._column(key)
                    steps_col.extend(bsteps)
                    values_col.extend(vals[:, j])
            return
        # (a stored run read: many blocks, grouped a part at a time: the grouping's arrays take some
        # ten times the values they group, 900 MB at once for a 90 MB run, session 37)
        part: list[tuple[np.ndarray, np.ndarray, Sequence[int], int, int, int]] = []
        size, first = 0, base
        for i, block in enumerate(pending):
            part.append(block)
            size += block[1].size
            pending[i] = None  # type: ignore[call-overload]  # (freed once grouped)
            if size >= self._GROUP_VALUES:
                self._group(part, first, cursor, n_modes)
                part, size, first = [], 0, base + i + 1
        if part:
            self._group(part, first, cursor, n_modes)

    #: :meth:`_flush` groups this many values at a time, at most (and one block more).
    _GROUP_VALUES = 1 << 20

    def _group(self, pending: list[tuple[np.ndarray, np.ndarray, Sequence[int], int, int, int]], first: int,
               cursor: dict[tuple[int, int, int], int], n_modes: int) -> None:
        """Append the values of ``pending`` (blocks in write order, the first of them block number
        ``first``) to their series, in one grouping, but those of the blocks a series caught up with
        already (``cursor``: per series, the blocks it holds)."""
        sizes = [b[1].size for b in pending]
        ids = np.concatenate([np.tile(b[0], len(b[2])) for b in pending])
        vals = np.concatenate([b[1].reshape(-1) for b in pending])
        steps = np.concatenate([np.repeat(np.asarray(b[2], dtype=np.int64), len(b[0])) for b in pending])
        modes = np.repeat(np.fromiter((b[3] for b in pending), dtype=np.int64, count=len(pending)), sizes)
        workers = np.repeat(np.fromiter((b[4] for b in pending), dtype=np.int64, count=len(pending)), sizes)
        max_worker = int(workers.max()) + 1
        group = (ids * n_modes + modes) * max_worker + workers
        del ids, modes, workers
        held = sorted(((k * n_modes + m) * max_worker + w, c) for (k, m, w), c in cursor.items()
                      if w < max_worker and c > first)
        if held:  # (values a caught-up series holds already: their blocks are before its cursor)
            codes = np.asarray([h[0] for h in held], dtype=np.int64)
            upto = np.asarray([h[1] for h in held], dtype=np.int64)
            blocks = np.repeat(np.arange(first, first + len(pending), dtype=np.int64), sizes)
            at = np.minimum(np.searchsorted(codes, group), len(codes) - 1)
            keep = (codes[at] != group) | (blocks >= upto[at])
            group, vals, steps = group[keep], vals[keep], steps[keep]
            if not len(group):
                return
        order = np.argsort(group, kind="stable")
        group = group[order]
        bounds = np.flatnonzero(np.diff(group)) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [len(group)]))
        steps, vals = steps[order], vals[order]
        del order
        for s, e in zip(starts.tolist(), ends.tolist()):
            g = int(group[s])
            worker = g % max_worker
            rest = g // max_worker
            steps_col, values_col = self._column((rest // n_modes, rest % n_modes, worker))
            steps_col.extend(steps[s:e])
            values_col.extend(vals[s:e])

    def _column(self, key: tuple[int, int, int]) -> tuple[_Column, _Column]:
        cols = self._series.get(key)
        if cols is None:
            cols = self._series[key] = (_Column(np.int64, track=True), _Column(np.float64))
        return cols

    def _walls(self, mode: str, worker: int) -> tuple[_Column, _Column]:
        cols = self._wall.get((mode, worker))
        if cols is None:
            cols = self._wall[(mode, worker)] = (_Column(np.int64, track=True), _Column(np.float64))
        return cols

    def global_steps(self, mode: str = "train", worker: int = 0) -> np.ndarray:
        """The global step of each record of ``mode`` by ``worker``, in write order (as
        :meth:`wall_times` lists the records; -1 where a record has none: a shard written before they
        were). Within one writing session they only increase: where one does not, a later session (a
        resume, a second training) began."""
        col = self._gsteps.get((mode, worker))
        if col is None:
            if mode not in MODES:  # (trial 43a: global_steps("loss") read as no records)
                _bad_mode(mode)
            self._check_worker(worker)  # (trial 43f: a worker the run does not have, too)
            return np.zeros(0, dtype=np.int64)
        return col.view()

    def _note_order(self, mode: str, worker: int, global_steps: Sequence[int]) -> None:
        """Note records of ``mode`` by ``worker`` with their global steps, in write order (called
        before their steps join :meth:`_walls`' columns)."""
        col = self._gsteps.get((mode, worker))
        if col is None:
            col = self._gsteps[(mode, worker)] = _Column(np.int64)
        col.extend(global_steps)
        order = self._order.get(worker)
        if order is None:
            order = self._order[worker] = _Column(np.int8)
        order.extend((self._mode_index.get(mode, len(MODES)),) * len(global_steps))

    # ------------------------------------------------------------------------------------- query
    @property
    def workers(self) -> list[int]:
        return sorted(self._workers)

    def _default_worker(self) -> int:
        """The worker a reader reads where ``worker`` is left at None (the default of every reader but
        :meth:`steps`, whose None means any worker): rank 0 when the history has it, else its lowest
        worker (0 while it has none).

        trial 22d: a run that rank 0 did not write (XGBoost's ``ranks=[1]``, a DDP job whose
        ``writer.ranks`` is ``[2]``) raised for ``run.series(name)`` and ``run.tensor(name).steps()``,
        whose default was worker 0; an explicit ``worker=`` is read as given."""
        have = self._worker_ranks()
        return 0 if not have or 0 in have else min(have)

    def _resolve_worker(self, worker: int | None) -> int:
        """``worker`` as the readers read it: None is :meth:`_default_worker` (a worker given is read as
        given: one with no value reads as empty; a stored Run's public readers check it first, see
        ``Run._reader_worker``)."""
        return self._default_worker() if worker is None else worker

    def _check_worker(self, worker: Any) -> None:
        """A worker given to a reader that this history cannot have: not an integer (a stored Run
        checks it against its workers, ``Run._check_worker``)."""
        if not _is_int(worker):
            raise ConfigError(f"worker: got {worker!r}; accepted: an integer (a worker's rank)")

    def _worker_ranks(self) -> set[int]:
        """The workers :meth:`_default_worker` picks among (a stored run adds the ranks with a shard)."""
        return self._workers

    def modes(self) -> list[str]:
        return [m for m in MODES if any(k[0] == m and cols[0].n for k, cols in self._wall.items())]

    def steps(self, mode: str = "train", worker: int | None = None) -> list[int]:
        """Sorted steps with any record in ``mode`` (by ``worker``, or by any worker when None): with
        the every-step training loss (the default), every train step. The steps a tensor was saved at
        are ``tensor(name).steps()`` (its scalars) and :meth:`array_steps` (its arrays). An unknown
        mode is a ValueError (Lightning's validation is ``eval``)."""
        if mode not in MODES:
            _bad_mode(mode)
        held = [cols[0].view() for (m, w), cols in self._wall.items() if m == mode and (worker is None or w == worker)]
        if not held:
            return []
        return np.unique(np.concatenate(held) if len(held) > 1 else held[0]).tolist()

    def steps_between(self, mode: str, after: int | None, upto: int, worker: int | None = None) -> list[int]:
        """Steps saved in ``mode`` by ``worker`` with ``after < step <= upto`` (``after=None``: ``upto``
        alone, if saved), ascending, each once, whatever order they were written in (a run that
        holds a second training's steps after the first's, or a resume's after a crash's).

        A bisection, not a scan of the whole run (rules call it at every save step): over the steps
        as written while they ascend, over a sorted copy kept from the first step written out of
        order on. ``worker=None``: as :meth:`series`."""
        key = (mode, self._resolve_worker(worker))
        srt = self._sorted_steps.get(key) if self._sorted_steps else None
        if srt is not None:
            hi = bisect.bisect_right(srt, upto)
            if after is None:
                return [upto] if hi and srt[hi - 1] == upto else []
            lo = bisect.bisect_right(srt, after, 0, hi)
            return sorted(set(srt[lo:hi]))
        cols = self._wall.get(key)
        if cols is None:
            if mode not in MODES:
                _bad_mode(mode)
            if worker is not None:
                self._check_worker(worker)
            return []
        saved = cols[0].view()
        hi = int(np.searchsorted(saved, upto, side="right"))
        if after is None:
            return [upto] if hi and saved[hi - 1] == upto else []
        lo = int(np.searchsorted(saved[:hi], after, side="right"))
        return np.unique(saved[lo:hi]).tolist()

    def wall_times(self, mode: str = "train", worker: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, wall_time)`` of every record of ``mode`` by ``worker``, in write order (read-only
        arrays, views of columns that grow as records come: a watch asks at every record it judges).
        ``worker=None``: as :meth:`series`."""
        cols = self._wall.get((mode, self._resolve_worker(worker)))
        if cols is None:
            if mode not in MODES:  # (trial 43a: wall_times("loss"), a tensor's name, read as no records)
                _bad_mode(mode)
            if worker is not None:
                self._check_worker(worker)
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        return cols[0].view(), cols[1].view()

    def train_steps(self, mode: str = "eval", steps: Iterable[int] | None = None,
                    worker: int | None = None) -> np.ndarray:
        """The train step each step of ``mode`` came after: for each of ``steps`` (default: every
        step of ``mode`` by ``worker``, sorted), the last train step begun before that step's record
        (of a step written twice, its last record), or -1 where none was (a validation before
        training); a step ``mode`` has no record of is -1 too. Eval, test and predict steps count that
        mode's batches, not training steps (trial 22c: ``val_loss`` at eval steps 3-6 while training
        was at steps 12-24); to plot a validation series against the training's steps::

            steps, values = run.series("val_loss")
            plt.plot(run.train_steps("eval", steps), values)

        Train steps that saved nothing have no record; they are counted with the records' global
        steps (docs/format.md: every step of every mode counts one): of the steps begun between the
        last train record before it and the record, those that are not the records of other modes
        between them, nor the steps of its own mode that its step number counts since that mode's
        record before (a validation's earlier batches), are train steps, one train step apart (as far
        as the train record after it allows). So a validation after train step 24 is placed at 24
        where train records stop at step 20 (``every_step: false``, an ``end_step``; trial 27d: it was
        placed at the last train step recorded, 20). Exact where the steps of a mode count its
        steps, as every integration's do; a hand-written loop that numbers its eval steps otherwise
        (by the train step) may be placed earlier, never before that last train record. The steps of
        every other mode between are left out the same way (trial 41b: an evaluation that saved every
        other batch put the test after it 2 train steps late), except a mode's unsaved steps after its
        last record there (an evaluation's last batches that saved nothing), which no record counts:
        those are taken for train steps, as far as the train record after allows. Records
        without global steps (none a tripwire writer makes): the last train record written before.

        ``worker=None``: rank 0 when the run has it, else its lowest worker (as :meth:`series`)."""
        if mode not in MODES:
            _bad_mode(mode)
        own_steps, own_wall = self.wall_times(mode, worker)
        wanted = np.unique(own_steps) if steps is None else _steps_list(steps)
        if mode == "train":
            known = set(own_steps.tolist())
            return np.asarray([s if s in known else -1 for s in wanted.tolist()], dtype=np.int64)
        after = self._after_train(self._resolve_worker(worker)).get(mode)
        if after is None:  # (records without global steps: by wall time, the last train record written before)
            wall_of = dict(zip(own_steps.tolist(), own_wall.tolist()))  # (a step written twice: its last record)
            return self._train_step_at(np.asarray([wall_of.get(s, np.nan) for s in wanted.tolist()],
                                                  dtype=np.float64), worker)
        at_of = dict(zip(own_steps.tolist(), after.tolist()))  # (a step written twice: its last record)
        return np.asarray([at_of.get(s, -1) for s in wanted.tolist()], dtype=np.int64)

    def _records_in_order(self, worker: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
        """``(global steps, steps, mode indices, places)`` of ``worker``'s records of every mode in write
        order (``places``: per mode, where its records are there, in :meth:`wall_times`' order); None
        where a record holds no global step (a shard written before they were)."""
        order = self._order.get(worker)
        if order is None or not order.n:
            return None
        kinds = order.view().astype(np.int64)
        n = len(kinds)
        g = np.full(n, -1, dtype=np.int64)
        step = np.zeros(n, dtype=np.int64)
        places: dict[str, np.ndarray] = {}
        for mode in MODES:
            at = np.flatnonzero(kinds == self._mode_index[mode])
            if len(at):
                places[mode] = at
                step[at] = self._wall[(mode, worker)][0].view()
                g[at] = self._gsteps[(mode, worker)].view()
        mine = kinds < len(MODES)  # (a record of another mode, which no tripwire writer makes: left out)
        if bool(np.any(g[mine] < 0)):
            return None
        keep = np.flatnonzero(mine)
        index = np.full(n, -1, dtype=np.int64)
        index[keep] = np.arange(len(keep))
        return g[keep], step[keep], kinds[keep], {m: index[at] for m, at in places.items()}

    def _after_train(self, worker: int) -> dict[str, np.ndarray]:
        """Per mode other than train, for each record of ``worker`` (in :meth:`wall_times`' order) the
        train step it came after, as :meth:`train_steps` describes; ``{}`` where a record has no
        global step. Computed once for the records so far (vectorised: a run of a million records)."""
        order = self._order.get(worker)
        n = 0 if order is None else order.n
        cached = self._after.get(worker)
        if cached is not None and cached[0] == n:
            return cached[1]
        out: dict[str, np.ndarray] = {}
        self._after[worker] = (n, out)
        found = self._records_in_order(worker) if n else None
        if found is None:
            return out
        g, step, kinds, places = found
        # the writing sessions (attempts): a resume from a checkpoint, or a later training appended into
        # the run, starts with a global step below the one written before
        attempt = np.concatenate(([0], np.cumsum(g[1:] < g[:-1]))) if len(g) else np.zeros(0, dtype=np.int64)
        train = places.get("train", np.zeros(0, dtype=np.int64))
        # how many train steps one step begun moves on (1; 2 under Lightning's manual optimization with
        # two optimizers): the smallest rise between train records one global step apart
        rise = np.diff(step[train])
        adjacent = (np.diff(g[train]) == 1) & (rise > 0) & (np.diff(attempt[train]) == 0)
        stride = int(rise[adjacent].min()) if bool(np.any(adjacent)) else 1
        # each record's steps of its own mode that its step number counts since its record before
        # (unsaved eval batches), where they fit: computed for every mode first, since the records
        # between a train record and a later record include other modes' (trial 41b: a test after an
        # evaluation that saved every other batch was placed 2 train steps after the last one begun)
        lefts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        placed_all = np.zeros(len(g), dtype=np.int64)
        for mode, at in places.items():
            if mode == "train":
                continue
            j = np.searchsorted(train, at) - 1  # the last train record written before each
            left = train[np.clip(j, 0, None)] if len(train) else np.zeros(len(at), dtype=np.int64)
            prev = np.concatenate(([-1], at[:-1]))
            has_prev = (prev >= 0) & (attempt[np.clip(prev, 0, None)] == attempt[at])
            prev_c = np.clip(prev, 0, None)
            missing = np.clip(np.where(has_prev, step[at] - step[prev_c] - 1, step[at]), 0, None)
            lower = np.where(has_prev & (prev_c > left), prev_c, left)
            free = np.clip((g[at] - g[lower] - 1) - (at - lower - 1), 0, None)
            has_left = (j >= 0) & (attempt[left] == attempt[at]) & (g[left] < g[at])
            lefts[mode] = (j, left, at, has_left)
            placed_all[at] = np.minimum(missing, np.where(has_prev | has_left, free, 0))
        counted = np.cumsum(placed_all)
        for mode, (j, left, at, has_left) in lefts.items():
            right = train[np.clip(j + 1, None, len(train) - 1)] if len(train) else left
            has_right = (j + 1 < len(train)) & (attempt[right] == attempt[at]) & (g[right] > g[at])
            # the steps begun between the train record before and this record, less the records between
            # (all of other modes: the train record before is the last one)
            between = (g[at] - g[left] - 1) - (at - left - 1)
            # less the steps of other modes (and of this one) that the records since the train record
            # count between their records (placed above; a train record places none)
            since = counted[at] - counted[left]
            k = between - since
            hi = between.copy()
            # the train record after it bounds them: the train steps begun between the two train records
            # are (Tb - Ta) / stride - 1, of which as many as fit in the steps begun after this record
            inside = (step[right] - step[left]) // stride - 1
            after_it = (g[right] - g[at] - 1) - (right - at - 1)
            hi = np.where(has_right, np.minimum(hi, inside), hi)
            lo = np.where(has_right, np.maximum(0, inside - after_it), 0)
            k = np.maximum(np.minimum(k, hi), np.minimum(lo, np.maximum(hi, 0)))
            # the next train step inside the range of an every-step collection would have a record
            # (written before this one): none was begun between (a validation's batches, then its
            # summary record at the last batch's step, are this mode's)
            k = np.where(self._recorded_train(step[left] + stride, worker), 0, np.clip(k, 0, None))
            got = np.where(has_left, step[left] + stride * k, -1)
            # none before it in its attempt: the train record after it, less the train steps begun before
            # that (the steps between that are not records; none where that one would have a record)
            before_right = step[right] - stride * (1 + np.clip(after_it, 0, None))
            before_right = np.where(self._recorded_train(step[right] - stride, worker), step[right] - stride,
                                    before_right)
            got = np.where(~has_left & has_right, np.maximum(before_right, -1), got)
            out[mode] = got.astype(np.int64)
        return out

    def _recorded_train(self, steps: np.ndarray, worker: int) -> np.ndarray:
        """Whether each train step of ``steps`` has a record of ``worker`` when begun: it is in the train
        save range of a collection of ``every_step`` that holds a train value of that worker (the
        training loss kept at every step)."""
        out = np.zeros(len(steps), dtype=bool)
        self._flush()
        train = self._mode_index["train"]
        for name in self.every_step:
            kids = (self._key_index.get((t, "raw")) for t in self._collections.get(name, ()))
            if not any(kid is not None and (kid, train, worker) in self._series for kid in kids):
                continue
            start, end, listed = self.every_step_ranges.get(name, (0, None, ()))
            inside = steps >= start
            if end is not None:
                inside &= steps < end
            out |= inside | np.isin(steps, np.asarray(listed, dtype=np.int64))
        return out

    def _train_step_at(self, walls: np.ndarray, worker: int | None = None) -> np.ndarray:
        """For each wall time, the last train step written by ``worker`` at or before it (after a
        resume that went back to a checkpoint: the resumed training's, not the highest); -1 before
        the first train record, for a NaN wall time, and when the worker has no train record."""
        t_steps, t_wall = self.wall_times("train", worker)
        walls = np.asarray(walls, dtype=np.float64)
        if not len(t_steps):
            return np.full(len(walls), -1, dtype=np.int64)
        order = np.argsort(t_wall, kind="stable")
        at = np.searchsorted(t_wall[order], np.nan_to_num(walls, nan=-np.inf), side="right") - 1
        return np.where((at < 0) | np.isnan(walls), -1, t_steps[order][np.clip(at, 0, None)]).astype(np.int64)

    def collections(self) -> dict[str, list[str]]:
        return {c: sorted(t) for c, t in sorted(self._collections.items())}

    def tensor_names(self, collection: str | None = None, regex: str | None = None, *, mode: str | None = None,
                     step: int | None = None, worker: int | None = None) -> list[str]:
        """Names of captured tensors, optionally of one collection and matching ``regex`` (re.search).

        ``mode``: only the tensors with a value (a scalar reduction or an array) in that mode;
        ``step``: only those with one at that step of ``mode``, which it needs (each mode numbers its
        own steps): smdebug's ``trial.tensor_names(step=, mode=)`` is ``tensor_names(step=5,
        mode="train")`` (trial 31e: ``mode=`` and ``step=`` were a bare TypeError). ``worker``: whose
        values ``mode`` and ``step`` look at, or without a mode whose values in any mode (None: any
        worker's, as :meth:`steps` and ``tensor_names()`` without a mode list them: a tensor that
        only rank 1 logged is listed, and read with ``worker=1``; session 41, from trial 38j).

        A collection the run knows of that holds no tensor yet (a validation metric before the first
        validation) has none: ``[]``, so that a rule can list its collection at every step. The
        collections a run knows of: every built-in one, and those of its config where the history
        knows them (:attr:`configured_collections`; a stored run: its ``run.json`` config's), in the
        training and in the stored run alike (trial 21d: ``gradients`` raised where the docs promise
        ``[]``). Any other name is a TensorNotFoundError naming the collections with tensors and the
        config's own."""
        if collection is not None and not isinstance(collection, str):
            smdebug = (f"; smdebug's trial.tensor_names(step) is tensor_names(step={collection!r}, mode='train') "
                       f"here: collection is the first argument" if _is_int(collection) else "")
            raise ConfigError(f"collection: got {collection!r} ({type(collection).__name__}); accepted: a collection "
                              f"name or None{smdebug}")
        if step is not None:
            step = _step_arg(step)
            if mode is None:
                raise ConfigError(
                    f"mode: got None with step={step}; accepted: one of {', '.join(MODES)}: each mode numbers its own "
                    f"steps (eval step {step} is not train step {step}): tensor_names(step={step}, mode='train')")
        if mode is not None and mode not in MODES:
            _bad_mode(mode)
        if collection is not None:
            if collection in self._collections:
                names = set(self._collections[collection])
            else:
                known = self._known_collections()
                # (trial 21b: 'metrics' before the first validation raised, and a rule that listed it
                # was disabled at step 0)
                if collection not in known:
                    own = sorted(known - set(BUILTIN_COLLECTIONS) - set(self._collections))
                    raise TensorNotFoundError(
                        f"collection {collection!r} not in this run{did_you_mean(collection, known)}; "
                        f"available: {', '.join(sorted(self._collections)) or 'none'}"
                        + (f" (and, with no tensor yet, the config's {', '.join(own)})" if own else "")
                        + "; accepted too: a built-in collection (no tensor yet: [])"
                    )
                names = set()
        else:
            names = set(self._tensor_collections) | set(self._reductions_of) | set(self._array_kinds_of)
        if regex is not None:
            pat = compile_regex(regex, "regex")
            names = {n for n in names if pat.search(n)}
        if mode is not None:
            ats = sorted(self._worker_ranks()) if worker is None else [worker]
            names = {n for n in names if any(self._has_value(n, mode, step, at) for at in ats)}
        elif worker is not None:  # (trial 41j: a worker given without a mode was not looked at)
            names = {n for n in names if any(self._has_value(n, m, None, worker) for m in MODES)}
        return sorted(names)

    def _has_value(self, tensor: str, mode: str, step: int | None, worker: int) -> bool:
        """Whether ``tensor`` has a value (a scalar reduction, a raw array or a histogram) in ``mode``
        from ``worker``, at ``step`` (None: at any step)."""
        mi = self._mode_index[mode]
        for r in self._reductions_of.get(tensor, ()):
            key = (self._key_index[(tensor, r)], mi, worker)
            self._catch_up(key)
            cols = self._series.get(key)
            if cols is not None and cols[0].n and (step is None or bool(np.any(cols[0].view() == step))):
                return True
        for kind in ("raw", "hist_counts"):
            store = self._arrays.get((tensor, kind, mode, worker))
            if store and (step is None or step in store):
                return True
        return False

    def _known_collections(self) -> set[str]:
        """The collections this run knows of, with or without tensors (see :meth:`tensor_names`)."""
        configured: set[str] | None = self.configured_collections
        if configured is None:  # a stored Run (Run.config): the collections of its run.json config
            config = getattr(self, "config", None)
            cols = config.get("collections") if isinstance(config, dict) else None
            configured = {str(c) for c in cols} if isinstance(cols, (dict, list)) else set()
        return set(self._collections) | set(self.every_step) | set(BUILTIN_COLLECTIONS) | set(configured)

    def tensor_collections(self, tensor: str) -> list[str]:
        return sorted(self._tensor_collections.get(tensor, ()))

    def has_tensor(self, tensor: str) -> bool:
        return tensor in self._tensor_collections or tensor in self._reductions_of or tensor in self._array_kinds_of

    def reductions(self, tensor: str) -> list[str]:
        """Scalar reductions stored for ``tensor``, what :meth:`series` reads (``raw`` for
        one-element tensors); whole arrays and histograms: :meth:`array_kinds`."""
        return sorted(self._reductions_of.get(tensor, ()))

    def array_kinds(self, tensor: str) -> list[str]:
        """What is stored of ``tensor`` as arrays: ``raw`` (whole tensors, :meth:`array`) and
        ``histogram`` (:meth:`histogram`)."""
        kinds = self._array_kinds_of.get(tensor, set())
        return [label for kind, label in (("raw", "raw"), ("hist_counts", "histogram")) if kind in kinds]

    def _check_tensor(self, tensor: str) -> None:
        if not self.has_tensor(tensor):
            names = self.tensor_names()
            raise TensorNotFoundError(
                f"tensor {tensor!r} not in this run{did_you_mean(tensor, names)}; "
                f"available: {', '.join(names[:50]) or 'none'}{' ...' if len(names) > 50 else ''}"
            )

    def _key_id(self, tensor: str, reduction: str) -> int | None:
        """The key of the series of ``reduction`` of ``tensor``; where that name is not stored, the
        one of the reduction it is another name of (``abs_l2`` of a tensor that stored ``l2``: the
        same value, docs/config.md; trial 25d: smdebug's ``reduction_value(step, "l2", abs=True)``
        read as ``value("abs_l2", step)`` was "did you mean 'abs_max'?"); None where neither is."""
        kid = self._key_index.get((tensor, reduction))
        if kid is None and isinstance(reduction, str):
            # (another name of the same value: same_value_key; a threshold written another way,
            # fraction_gt:1e-3 of a run that stored fraction_gt:0.001, trial 36k)
            kid = self._same_keys.get((tensor, same_value_key(reduction)))
        return kid

    def series(
        self, tensor: str, reduction: str = "raw", mode: str | None = None, worker: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(steps int64[n], values float64[n])`` of one scalar series, in write order.

        A series with no value in this mode or worker is empty; a tensor the run does not hold, or
        a reduction never stored for it, raises TensorNotFoundError (naming what there is), an
        unknown mode ValueError. ``mode=None`` (the default of :meth:`series`, :meth:`latest` and
        :meth:`value`): the series' own mode, ``train`` where it has train values (or none at all),
        else the only mode it has values in (``latest("val_loss")`` reads eval; trial 35c: it was
        None in a rule, the default being train); values in several modes but train are a
        TensorNotFoundError naming them. ``worker=None`` (the default of every reader but
        :meth:`steps`): rank 0 when the run has it, else its lowest worker (:meth:`_default_worker`;
        trial 22d)."""
        worker = self._resolve_worker(worker)
        if mode is None:
            mode = self._own_mode(tensor, reduction, worker)
        mi = self._mode_index.get(mode)
        if mi is None:
            _bad_mode(mode)
        kid = self._key_id(tensor, reduction)
        if kid is None:
            self._check_tensor(tensor)
            have = self.reductions(tensor)
            arrays = self.array_kinds(tensor)
            hint = ""
            if reduction in arrays:
                hint = (f"; its {reduction} values are arrays: "
                        f"run.{'histogram' if reduction == 'histogram' else 'array'}({tensor!r}, step)")
            raise TensorNotFoundError(
                f"tensor {tensor!r} has no reduction {reduction!r}{did_you_mean(str(reduction), have)}; "
                f"stored: {', '.join(have) or 'none'}{' (arrays: ' + ', '.join(arrays) + ')' if arrays else ''}{hint}")
        key = (kid, mi, worker)
        self._catch_up(key)
        cols = self._series.get(key)
        if cols is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        return cols[0].view(), cols[1].view()

    def finite_series(self, tensor: str, reduction: str = "raw", mode: str | None = None,
                      worker: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`series` without its NaN and infinite values, kept up as values come (each value is
        looked at once: a rule that reads it at every save step costs the same at step 100 and at
        step 100,000; trial 24e). Read-only arrays; raises as :meth:`series` does (``mode=None``: as there)."""
        if mode is None:
            mode = self._own_mode(tensor, reduction, self._resolve_worker(worker))
        steps, values = self.series(tensor, reduction, mode, worker)
        key = (tensor, reduction, mode, self._resolve_worker(worker))
        done, fsteps, fvalues = self._finite.get(key, (0, None, None))
        n = len(values)
        if n < done:  # (not this history's series any more: read it again)
            done, fsteps, fvalues = 0, None, None
        if n > done:
            new = values[done:]
            keep = np.isfinite(new)
            if fsteps is None and not keep.all():  # the first non-finite value: the finite ones apart
                fsteps, fvalues = _Column(np.int64), _Column(np.float64)
                head = np.isfinite(values[:done])
                fsteps.extend(steps[:done][head])
                fvalues.extend(values[:done][head])
            if fsteps is not None and fvalues is not None:
                fsteps.extend(steps[done:][keep])
                fvalues.extend(new[keep])
            self._finite[key] = (n, fsteps, fvalues)
        if fsteps is None or fvalues is None:
            return steps, values
        return fsteps.view(), fvalues.view()

    def latest(self, tensor: str, reduction: str = "raw", mode: str | None = None,
               worker: int | None = None) -> tuple[int, float] | None:
        """``(step, value)`` of the last value, or None while there is none: also for a tensor not
        captured (yet), say a validation metric before the first validation, so that a rule can
        read it at every step (:meth:`series` raises for a tensor the run does not have).
        ``mode=None`` and ``worker=None``: as :meth:`series`."""
        if mode is None:
            mode = self._own_mode(tensor, reduction, self._resolve_worker(worker))
        try:
            steps, values = self.series(tensor, reduction, mode, worker)
        except TensorNotFoundError as exc:
            self._check_reading(tensor, reduction, exc)
            return None
        if len(steps) == 0:
            return None
        return int(steps[-1]), float(values[-1])

    def value(self, tensor: str, reduction: str, step: int, mode: str | None = None,
              worker: int | None = None) -> float | None:
        """The value at ``step``, or None (no value there, or a tensor not captured (yet)).

        A step saved more than once (a run that a second training appended to, or a resume past a
        crash: :meth:`series` holds both values, in write order) gives the value written last.
        ``mode=None`` and ``worker=None``: as :meth:`series`. A step that is no integer is a ConfigError."""
        if type(step) is not int:
            step = _step_arg(step)
        if mode is None:
            mode = self._own_mode(tensor, reduction, self._resolve_worker(worker))
        try:
            steps, values = self.series(tensor, reduction, mode, worker)
        except TensorNotFoundError as exc:
            self._check_reading(tensor, reduction, exc)
            return None
        cols = self._series.get((self._key_id(tensor, reduction), self._mode_index[mode], self._resolve_worker(worker)))
        if cols is not None and cols[0].ascending:  # (a bisection: trial 24e, a scan cost more the longer the run)
            i = int(np.searchsorted(steps, step, side="right")) - 1
            return float(values[i]) if i >= 0 and steps[i] == step else None
        idx = np.flatnonzero(steps == step)
        return float(values[idx[-1]]) if len(idx) else None

    def values_at(self, tensors: Sequence[str], reduction: str, step: int, mode: str,
                  worker: int | None = None) -> list[float | None]:
        """:meth:`value` of each of ``tensors`` at ``step`` of ``mode``, in one call. A series whose
        last value is at ``step`` (a save step just recorded, as a rule reads it) gives that value
        without a view of the series (36p: the gradient rules read every gradient's norm at every
        save step, three reads each)."""
        if type(step) is not int:
            step = _step_arg(step)
        mi = self._mode_index.get(mode)
        if mi is None:
            _bad_mode(mode)
        worker = self._resolve_worker(worker)
        out: list[float | None] = []
        for tensor in tensors:
            kid = self._key_id(tensor, reduction)
            cols = None
            if kid is not None:
                self._catch_up((kid, mi, worker))
                cols = self._series.get((kid, mi, worker))
            if cols is not None and cols[0].n and cols[0].last() == step:
                out.append(float(cols[1].last()))
            else:
                out.append(self.value(tensor, reduction, step, mode, worker))
        return out

    def _own_mode(self, tensor: str, reduction: Any, worker: int) -> str:
        """The mode a scalar read with ``mode=None`` reads (see :meth:`series`): ``train`` where the
        series has train values or none at all (a tensor not captured yet, a reduction not stored:
        the read then says so as with ``mode="train"``), else its only mode; several but train are a
        TensorNotFoundError naming them. ``worker``: resolved."""
        kid = self._key_id(tensor, reduction) if isinstance(reduction, str) else None
        if kid is None:
            return "train"
        for i in self._mode_index.values():
            self._catch_up((kid, i, worker))
        return pick_mode([m for m, i in self._mode_index.items()
                          if (cols := self._series.get((kid, i, worker))) is not None and cols[0].n],
                         f"{tensor!r} ({reduction})")

    def _check_reading(self, tensor: str, reduction: Any, exc: TensorNotFoundError) -> None:
        """Where :meth:`latest` and :meth:`value` found no series: their None stands for "no value (yet)"
        only for a name that some run could store (a reduction, ``raw``; ``histogram``, whose values
        are arrays); any other name raises as :meth:`series` does, naming what is stored (trial 24f:
        ``latest("loss", "raww")`` was None, and a rule reading it never fired). Only this path pays
        for the check: a series that exists is returned at once."""
        if reduction in _READABLE:
            return
        if isinstance(reduction, str) and (reduction in ("raw", "histogram") or is_valid_reduction(reduction)):
            if len(_READABLE) < 4096:
                _READABLE.add(reduction)
            return
        if self.has_tensor(tensor):
            raise exc  # (series's error: the reductions stored for it, with a "did you mean")
        names = ("raw", *BASIC_REDUCTIONS)
        raise TensorNotFoundError(
            f"reduction: got {reduction!r}{did_you_mean(str(reduction), names)}; no reduction has that name "
            f"(accepted: {', '.join(names)}, {', '.join(p + ':THRESHOLD' for p in PARAMETRIC_REDUCTIONS)}); "
            f"tensor {tensor!r} holds no value yet") from None

    def array_steps(self, tensor: str, kind: str = "raw", mode: str = "train", worker: int | None = None) -> list[int]:
        """Sorted steps with a stored array of ``kind``: a name :meth:`array_kinds` lists (``raw``,
        ``histogram``) or ``hist_counts``/``hist_edges`` (the two arrays of a histogram); empty
        when ``tensor`` has none of that kind there. An unknown kind is a ValueError
        (:class:`~tripwire.ConfigError`) naming the kinds stored. ``worker=None``: as :meth:`series`."""
        key = self._array_kind(tensor, kind)
        worker = self._resolve_worker(worker)
        return sorted(self._arrays.get((tensor, key, mode, worker), {}))

    def array_steps_between(self, tensor: str, after: int, upto: int, kind: str = "raw", mode: str = "train",
                            worker: int | None = None) -> list[int]:
        """:meth:`array_steps` with ``after < step <= upto`` (a rule that looks at the steps since its
        last evaluation; no sorted copy of every step held)."""
        key = self._array_kind(tensor, kind)
        store = self._arrays.get((tensor, key, mode, self._resolve_worker(worker)))
        return sorted(s for s in store if after < s <= upto) if store and upto > after else []

    def ascending(self, tensor: str, reduction: str = "raw", mode: str = "train", worker: int | None = None) -> bool:
        """Whether the steps of one series never went back (a second training appended, a resume
        past a crash: they did), so that a reader may bisect :meth:`series`' steps; True for a
        series that holds no value."""
        key = (self._key_id(tensor, reduction), self._mode_index.get(mode, -1), self._resolve_worker(worker))
        if key[0] is not None:
            self._catch_up(key)  # type: ignore[arg-type]
        cols = self._series.get(key)  # type: ignore[arg-type]
        return cols is None or bool(cols[0].ascending)

    def _array_kind(self, tensor: str, kind: Any, histogram_ok: bool = True) -> str:
        if kind in ARRAY_KINDS and (histogram_ok or kind != "histogram"):
            return "hist_counts" if kind == "histogram" else str(kind)
        stored = self.array_kinds(tensor)
        accepted = [k for k in ARRAY_KINDS if histogram_ok or k != "histogram"]
        hint = f" (a histogram: histogram({tensor!r}, step))" if kind == "histogram" else did_you_mean(str(kind), accepted)
        raise ConfigError(f"kind: got {kind!r}{hint}; accepted: {', '.join(accepted)}; "
                          f"stored for {tensor!r}: {', '.join(stored) or 'no arrays'}")

    def array(self, tensor: str, step: int, kind: str = "raw", mode: str = "train",
              worker: int | None = None) -> np.ndarray:
        """A stored array (``kind``: ``raw``, ``hist_counts``, ``hist_edges``; a histogram's pair:
        :meth:`histogram`). One-element raw tensors are scalars: they come back as 0-d arrays. A
        step saved more than once gives the array written last (as :meth:`value`). ``worker=None``:
        as :meth:`series`."""
        kind = self._array_kind(tensor, kind, histogram_ok=False)
        worker = self._resolve_worker(worker)
        store = self._arrays.get((tensor, kind, mode, worker))
        if store is not None and step in store:
            item = store[step]
            return read_array(item) if isinstance(item, ArrayRef) else item
        if kind == "raw":
            v = self.value(tensor, "raw", step, mode, worker)
            if v is not None:
                return np.asarray(v)
        self._check_tensor(tensor)
        have = self.array_steps(tensor, kind, mode, worker)
        if not have and kind == "raw" and "raw" in self.reductions(tensor):  # one-element: raw scalars
            have = self.series(tensor, "raw", mode, worker)[0].tolist()
        what = "histogram" if kind.startswith("hist_") else f"{kind} value"
        # (trial 19a: "it has none in mode 'train'" read as if the tensor had no values there at all)
        reductions = [r for r in self.reductions(tensor) if r != "raw"]
        stored = (f"; of it the run stores the reductions {', '.join(reductions)} (one at a step: "
                  f"run.tensor({tensor!r}).value({reductions[0]!r}, {step}))" if reductions else "")
        where = (f"steps with one: {have[:20]}{' ...' if len(have) > 20 else ''}" if have else
                 f"none at any step of that mode{stored}; arrays stored of it: "
                 f"{', '.join(self.array_kinds(tensor)) or 'none'}")
        raise TensorNotFoundError(f"tensor {tensor!r} has no {what} at step {step} in mode {mode!r} "
                                  f"(worker {worker}); {where}")

    def histogram(self, tensor: str, step: int, mode: str = "train",
                  worker: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(counts, edges)`` of the histogram at ``step``. ``worker=None``: as :meth:`series`."""
        return (
            self.array(tensor, step, "hist_counts", mode, worker),
            self.array(tensor, step, "hist_edges", mode, worker),
        )

    # --------------------------------------------------------------------------------- dataframe
    def scalar_columns(self) -> dict[str, Any]:
        """All scalar records as numpy columns (codes into ``tensors``/``reductions``/``modes``)."""
        self._flush()
        rec = self._rec
        layout = rec["layout"].view()
        lens = np.asarray([len(ids) for ids in self._layouts], dtype=np.int64)[layout]
        mode = np.repeat(rec["mode"].view().astype(np.int64), lens)
        worker = np.repeat(rec["worker"].view().astype(np.int64), lens)
        starts = np.cumsum(lens) - lens  # where each record's values begin
        key = np.empty(int(lens.sum()), dtype=np.int64)
        for no, ids in enumerate(self._layouts):  # (a few layouts: one pass each)
            records = np.flatnonzero(layout == no)
            if len(records):
                key[(starts[records][:, None] + np.arange(len(ids))).ravel()] = np.tile(ids, len(records))
        # the values: each series holds its own in write order, which the records' order keeps
        value = np.full(len(key), np.nan)
        if len(key):
            n_modes, n_workers = len(MODES) + 1, int(worker.max()) + 1
            group = (key * n_modes + mode) * n_workers + worker
            order = np.argsort(group, kind="stable")
            sorted_group = group[order]
            bounds = np.flatnonzero(np.diff(sorted_group)) + 1
            for s, e in zip(np.concatenate(([0], bounds)).tolist(), np.concatenate((bounds, [len(group)])).tolist()):
                g = int(sorted_group[s])
                rest = g // n_workers
                cols = self._series.get((rest // n_modes, rest % n_modes, g % n_workers))
                if cols is not None and cols[1].n == e - s:
                    value[order[s:e]] = cols[1].view()
        return {"step": np.repeat(rec["step"].view(), lens), "mode": mode, "worker": worker, "key": key,
                "value": value, "keys": list(self._keys)}

    def scalar_keys(self) -> list[tuple[str, str]]:
        """``(tensor, reduction)`` of every scalar series, in the order they were first written."""
        return list(self._keys)

    def dataframe(self) -> Any:
        """A long pandas table: ``step, mode, worker, tensor, reduction, value`` (needs pandas).

        ``mode`` is categorical over the modes ``train, eval, test, predict`` (each listed whether or
        not the run has records of it)."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - exercised in the wheel test env
            from ._errors import missing_extra

            raise missing_extra("pandas", "pandas", exc) from exc
        cols = self.scalar_columns()
        keys = cols["keys"]
        tensor_names = sorted({t for t, _ in keys})
        red_names = sorted({r for _, r in keys})
        t_index = {t: i for i, t in enumerate(tensor_names)}
        r_index = {r: i for i, r in enumerate(red_names)}
        key_t = np.fromiter((t_index[t] for t, _ in keys), dtype=np.int64, count=len(keys))
        key_r = np.fromiter((r_index[r] for _, r in keys), dtype=np.int64, count=len(keys))
        k = cols["key"]
        # the documented modes only (trial 20a: a fifth category "other", which no record tripwire writes
        # can have, showed as a phantom row of value_counts()); a record of a mode this version does not
        # know (a shard written by other software) has no mode here: NaN, as it is in no series either
        mode_codes = np.where(cols["mode"] < len(MODES), cols["mode"], -1)
        return pd.DataFrame(
            {
                "step": cols["step"],
                "mode": pd.Categorical.from_codes(mode_codes, categories=list(MODES)),
                "worker": cols["worker"],
                "tensor": pd.Categorical.from_codes(key_t[k] if len(k) else k, categories=tensor_names),
                "reduction": pd.Categorical.from_codes(key_r[k] if len(k) else k, categories=red_names),
                "value": cols["value"],
            }
        )


SeriesFn = Callable[[str, str, str, int], tuple[np.ndarray, np.ndarray]]


def live_records(steps: np.ndarray | Sequence[int], attempts: np.ndarray | Sequence[int] | None = None) -> np.ndarray:
    """Which records of one mode and worker, given their steps in write order, the training that
    wrote last holds (a bool array): ``False`` for a record that a later record wrote over, one at
    its step or before it that came after the run had gone past it (a resume from a checkpoint older
    than the run's last records, a second training appended into the same ``out_dir``: the
    resumed training re-ran that step, or never ran it). A step written twice in a row (an epoch
    summary at the last batch's step) is no going back: both are kept.

    ``attempts`` (optional, one per record, ascending): which writing session wrote each record, where
    the caller knows (the records' global steps going back); then a record at the step another
    attempt wrote right after it is written over too (a training that died right after its record at
    the step the next one resumed at). What stays ascends in write order (each step once, or the
    records one attempt wrote of it in a row): what a resumed session's rules read. What a reader
    calls superseded is :func:`gone_back_over`'s, where the records hold global steps."""
    s = np.asarray(steps, dtype=np.int64).reshape(-1)
    n = len(s)
    if n < 2 or bool(np.all(s[1:] >= s[:-1])) and (attempts is None or bool(np.all(np.diff(attempts) == 0))):
        return np.ones(n, dtype=bool)
    # each record's run of the same step written in a row (by one attempt): the run's last record
    cut = s[1:] != s[:-1]
    if attempts is not None:
        a = np.asarray(attempts, dtype=np.int64).reshape(-1)
        cut |= a[1:] != a[:-1]
    ends = np.append(np.flatnonzero(cut), n - 1)
    last = ends[np.searchsorted(ends, np.arange(n))]
    # the lowest step written after each record: a record is kept while every later one is above it
    after = np.empty(n, dtype=np.int64)
    after[-1] = np.iinfo(np.int64).max
    after[:-1] = np.minimum.accumulate(s[::-1])[::-1][1:]
    return after[last] > s

def gone_back_over(global_steps: np.ndarray) -> np.ndarray:
    """For one worker's records of every mode in write order, their global steps: which a later
    writing session went back over (a bool array). A session begins where the global steps go back
    (a resume from a checkpoint, a later training appended into the run), and goes back over every
    earlier record from the global step it began at on, whatever that record's mode and step (trial
    42l: a second training longer than the first left the first's validation records live, their
    global steps below the second's validation's but not below where it began). One session's own
    steps going back (a loop restarting its step count every epoch) supersede none of its records
    (trials 42d, 42h: two of three epochs' losses read superseded, in one session, and after a
    resume from the second epoch)."""
    g = np.asarray(global_steps, dtype=np.int64).reshape(-1)
    if not len(g):
        return np.zeros(0, dtype=bool)
    begins = np.r_[True, g[1:] <= g[:-1]]
    firsts = g[begins]  # each session's first global step, in write order
    later = np.append(np.minimum.accumulate(firsts[::-1])[::-1][1:], np.iinfo(np.int64).max)
    return g >= later[np.cumsum(begins) - 1]


_READABLE: set[str] = set()
"""Reduction names :meth:`History._check_reading` found valid (it is asked at every step a rule reads
a value not captured yet)."""

def same_value_key(reduction: str) -> Any:
    """What the names of one stored value share: ``abs_l2`` and ``l2`` (``abs_l1``, ``l1``: see
    ``tripwire._config._ALIASES``; a read of one where the run stored the other gives that one), and one
    threshold however written (``fraction_gt:0.5``, ``fraction_gt:0.50``, ``fraction_gt:5e-1``), as
    :meth:`History.series` finds them."""
    if reduction in ("abs_l1", "abs_l2"):
        return reduction[4:]
    if ":" in reduction:
        base, threshold = parse_reduction(reduction)
        if threshold is not None:
            return (base, threshold)
    return reduction


def holds_reduction(have: Iterable[str], reduction: str) -> bool:
    """Whether the stored reductions ``have`` hold ``reduction``'s values under one of its names
    (:func:`same_value_key`: a reader, a replay's requirement check and ``tripwire plot`` find them
    so; trial 37a: a threshold written another way was "not stored" there)."""
    key = same_value_key(reduction)
    return any(r == reduction or same_value_key(r) == key for r in have)


def _is_int(value: Any) -> bool:
    """An integer, numpy's too, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _step_arg(step: Any) -> int:
    """A reader's ``step``: an integer (numpy's too), else a ConfigError naming it (trial 24f:
    ``value(..., step=3.5)`` was None)."""
    if isinstance(step, numbers.Integral) and not isinstance(step, bool):
        return int(step)
    raise ConfigError(f"step: got {step!r} ({type(step).__name__}); accepted: an integer (the step, counted in its mode)")


def _steps_list(steps: Any) -> np.ndarray:
    """:meth:`History.train_steps`'s ``steps``: integers, as a list, a tuple, a range or an array
    (``run.series(...)[0]``), else a ConfigError naming the value (trial 24f: ``train_steps("eval", 0)``
    was a bare TypeError, ``"0"`` was read character by character, 3.7 was read as 3)."""
    accepted = ("accepted: None (every step of the mode) or a list of integers, e.g. the steps of "
                "run.series(name)[0]")
    if isinstance(steps, np.ndarray) and steps.dtype.kind in "iu":
        return steps.astype(np.int64).reshape(-1) if steps.ndim <= 1 else _too_deep(steps, accepted)
    if isinstance(steps, (str, bytes, Mapping)) or not isinstance(steps, Iterable):
        raise ConfigError(f"steps: got {steps!r:.60} ({type(steps).__name__}); {accepted}")
    out = []
    for i, s in enumerate(steps):
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise ConfigError(f"steps[{i}]: got {s!r} ({type(s).__name__}); {accepted}")
        out.append(int(s))
    return np.asarray(out, dtype=np.int64)


def _too_deep(steps: np.ndarray, accepted: str) -> np.ndarray:
    raise ConfigError(f"steps: got an array of shape {steps.shape}; {accepted} (one dimension)")


ARRAY_KINDS: tuple[str, ...] = ("raw", "histogram", "hist_counts", "hist_edges")
"""Kinds :meth:`History.array_steps` accepts (``histogram``: the steps of ``hist_counts``)."""


def compile_regex(pattern: Any, key: str) -> re.Pattern[str]:
    """``re.compile(pattern)``, or a ConfigError naming ``key``, the pattern and what is wrong."""
    if not isinstance(pattern, str):
        raise ConfigError(f"{key}: got {pattern!r} ({type(pattern).__name__}); accepted: a regular expression (a string)")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{key}: invalid regular expression {pattern!r} ({exc}); "
                          f"accepted: a Python regular expression, matched with re.search") from None


def _bad_mode(mode: Any) -> None:
    """A mode that is none of :data:`MODES`: a ConfigError (a ValueError) naming it, pointing
    ``validation`` at ``eval`` (the readers', and a session's ``begin_step``, trial 21f)."""
    extra = " (validation is mode 'eval')" if str(mode).lower().startswith("val") else ""
    # (trial 31e: smdebug's TRAIN, modes.TRAIN's name, got no "did you mean")
    lower = str(mode).lower().rpartition(".")[2]
    meant = f"; did you mean {lower!r}?" if lower in MODES else did_you_mean(str(mode), MODES)
    raise ConfigError(f"mode: got {mode!r}; accepted: {', '.join(MODES)}{meant}{extra}")


def pick_mode(have: Sequence[str], what: str) -> str:
    """The mode a read without one takes, of the modes ``have`` in which ``what`` has values:
    ``train`` where it has train values or none, else its only mode; several but train are a
    TensorNotFoundError naming them."""
    if not have or "train" in have:
        return "train"
    if len(have) == 1:
        return have[0]
    raise TensorNotFoundError(f"{what} has values in modes {', '.join(have)} (not train): pass mode=, one of them")

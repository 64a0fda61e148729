"""Reading a stored run: ``tripwire.open_run(path) -> Run``.

The reader follows a run that is still being written (``refresh()`` reads the records appended
since the last read) and reads every complete record after a crash (a torn tail is ignored).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np

from ._config import MODES, is_valid_reduction, url_refusal
from ._errors import ConfigError, CorruptRunError, RunNotFoundError, RunReplacedError, TensorNotFoundError
from ._finding import Finding, html_table, short_text
from ._format import (
    CONTROL_DIR,
    FINDINGS_DIR,
    FORMAT_VERSION,
    RUN_FILE,
    WORKERS_DIR,
    decoded_steps,
    iter_records,
    shard_name,
    worker_meta_name,
)
from ._history import ArrayLike, History, holds_reduction, pick_mode
from ._validate import MissingArgumentError, did_you_mean

logger = logging.getLogger("tripwire")


def check_run_path(path: str | os.PathLike[str]) -> None:
    """Refuse a URL where a run directory is meant (``s3://...``): runs are read from local
    directories only (RunNotFoundError naming the value; see :func:`tripwire._config.url_refusal`);
    and an empty path, which ``Path`` reads as the current directory."""
    if isinstance(path, (str, os.PathLike)) and os.fspath(path) == "":
        # (trial 33f L2: Path("") is ".", read as the current directory: "no tripwire run at '.'")
        raise RunNotFoundError("path: got '' (an empty path, not read as the current directory); accepted: a run "
                               "directory ('.' for the current one)")
    why = url_refusal(path)
    if why is not None:
        raise RunNotFoundError(f"no tripwire run at {str(path)!r}: {why}; accepted: a local run directory")


def _trainings(value: Any) -> list[dict[str, Any]]:
    """A worker meta file's ``trainings`` (see :attr:`Run.trainings`), its entries checked: ``[]``
    where it is absent (a run written before trial 25e: replayed as one training) or not a list of
    two or more of them; an entry that is not one is left out."""
    if not isinstance(value, list) or len(value) < 2:
        return []
    out = []
    for t in value:
        if not isinstance(t, dict) or not isinstance(t.get("steps"), dict):
            continue
        try:
            steps = {str(m): int(v) for m, v in t["steps"].items()}
            began = None if t.get("began") is None else float(t["began"])
        except (TypeError, ValueError):
            continue
        planned = t.get("planned_steps")
        entry = {"steps": steps, "began": began, "continued": t.get("continued") is True,
                 "planned_steps": planned if isinstance(planned, int) and not isinstance(planned, bool)
                 and planned >= 1 else None, "fresh": t.get("fresh") is True}
        # a training of its own in the out_dir (trial 26i): when its writer started, its command line, its config
        if isinstance(t.get("started"), (int, float)) and not isinstance(t.get("started"), bool):
            entry["started"] = float(t["started"])
        if isinstance(t.get("argv"), list):
            entry["argv"] = [str(a) for a in t["argv"]]
        if isinstance(t.get("config"), dict):
            entry["config"] = t["config"]
        host, pid = _host_pid(t)
        if pid is not None:  # (its process, where the entry names it)
            entry["pid"], entry["host"] = pid, host
        out.append(entry)
    return out if len(out) >= 2 else []


def _host_pid(data: Any) -> tuple[str | None, int | None]:
    """The ``host`` and ``pid`` a mapping (a writer's ``environment``, a ``trainings`` entry) names;
    None for each it does not (or not as a non-empty string, a positive integer)."""
    if not isinstance(data, dict):
        return None, None
    host, pid = data.get("host"), data.get("pid")
    return (host if isinstance(host, str) and host else None,
            pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None)


def _global_steps(value: Any, n: int) -> list[int]:
    """A record header's global steps (``global_step``, or a ``steps`` record's ``global_steps``) as
    ``n`` integers; -1 for each where the header holds none that can be read (a reader of the run
    then places other modes' steps by wall time: :meth:`History.train_steps`)."""
    if isinstance(value, list) and len(value) == n and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        return list(value)
    return [-1] * n


def _every_step_range(value: Any) -> tuple[int, int | None, tuple[int, ...]] | None:
    """An entry of a worker meta file's ``every_step_ranges`` (``{start_step, end_step, steps}``) as
    :attr:`History.every_step_ranges` holds it; None for one that cannot be read."""
    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    if not isinstance(value, dict):
        return None
    start, end, steps = value.get("start_step"), value.get("end_step"), value.get("steps", [])
    if not whole(start) or not (end is None or whole(end)) or not isinstance(steps, list) or not all(map(whole, steps)):
        return None
    return start, end, tuple(steps)


def _load_json(path: Path) -> Any:
    """A JSON metadata file, or CorruptRunError naming it and where its text stops making sense."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRunError(f"{path}: damaged, not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptRunError(f"{path}: damaged, not valid JSON (line {exc.lineno} column {exc.colno}: "
                              f"{exc.msg})") from None


@dataclass(frozen=True)
class TensorView:
    """One tensor of a run: its values and reductions by step, mode and worker.

    ``mode=None`` (the default of every method) is ``train`` when the tensor has values there, else
    the one mode that has them (a ``val_loss`` is read in ``eval`` without saying so); a tensor
    with values in several modes other than ``train`` needs ``mode=``.

    ``worker=None`` (the default of every method) is rank 0 when the run has it, else the run's
    lowest worker (a run that only rank 1 wrote is read without saying so; trial 22d); a worker
    given that the run does not have is a ConfigError naming its workers. A tensor that worker holds
    no value of (in the mode read: ``mode`` where given, else any) while other workers do (a DDP
    rank's own metric) is a :class:`~tripwire.TensorNotFoundError` with ``worker=None``, naming the
    workers that hold it and how to read them (``worker=1``), never an empty read (trial 31b F1);
    with ``worker`` given, a worker with no value of it reads as empty."""

    run: Run
    name: str

    @property
    def collections(self) -> list[str]:
        return self.run.tensor_collections(self.name)

    def reductions(self) -> list[str]:
        """The scalar reductions stored for this tensor (what :meth:`series` reads; ``raw`` for a
        one-element tensor). Whole arrays and histograms: :meth:`array_kinds`."""
        return self.run.reductions(self.name)

    def array_kinds(self) -> list[str]:
        """What is stored of this tensor as arrays: ``raw`` (whole tensors, :meth:`value` with a step)
        and ``histogram`` (:meth:`histogram`); trial 35g: ``reductions()`` left them out, unsaid."""
        return self.run.array_kinds(self.name)

    def modes(self, worker: int | None = None) -> list[str]:
        """The modes in which this tensor has a value (any reduction or array) from ``worker``
        (None: rank 0, or the run's lowest worker where it has no rank 0). Known as of the last
        :meth:`Run.refresh` (kept per tensor and worker until the next one: what ``mode=None`` is
        read by at every call)."""
        worker = self.run._tensor_reader(self.name, worker)
        return list(self.run._modes_of(self.name, worker))

    def _steps_in(self, mode: str, worker: int, reduction: str | None = None) -> list[int]:
        if reduction is not None:
            return sorted(set(self.run.series(self.name, reduction, mode, worker)[0].tolist()))
        out = set(self.run.array_steps(self.name, "raw", mode, worker))
        out |= set(self.run.array_steps(self.name, "hist_counts", mode, worker))
        for r in self.reductions():
            out |= set(self.run.series(self.name, r, mode, worker)[0].tolist())
        return sorted(out)

    def _other_modes(self, step: int, worker: int, mode: str) -> str:
        """For a step a read with ``mode=None`` found nothing at in ``mode`` (the tensor's own, train
        where it has train values): the other modes of the tensor that have a value at ``step``, as
        a hint to append (trial 29f F8: ``tensor('labels').value(7)`` read train, and the error did
        not say that eval, the mode of the finding that named step 7, has it); "" where none has."""
        others = [m for m in self.run._modes_of(self.name, worker) if m != mode and step in self._steps_in(m, worker)]
        if not others:
            return ""
        return (f"; mode=None read mode {mode!r}, and {' and '.join(map(repr, others))} "
                f"{'has' if len(others) == 1 else 'have'} a value at step {step}: pass mode={others[0]!r}")

    def _hinted(self, exc: TensorNotFoundError, step: Any, given: str | None, mode: str,
                worker: int) -> TensorNotFoundError:
        """``exc`` with :meth:`_other_modes`'s hint where the mode was not given; where it was, and the
        tensor has no value in that mode at all, the modes it has values in (trial 40b F4:
        ``value("raw", 10, mode="train")`` of an XGBoost validation metric said "steps with one: []",
        never that its values are in mode eval); else ``exc``."""
        hint = ""
        if given is None and isinstance(step, int):
            hint = self._other_modes(step, worker, mode)
        elif given is not None and not self._steps_in(mode, worker):
            others = [m for m in self.run._modes_of(self.name, worker) if m != mode]
            if others:
                hint = (f"; it has no value in mode {mode!r} at all: its values are in mode "
                        f"{' and '.join(map(repr, others))} (pass mode={others[0]!r})")
        return TensorNotFoundError(f"{exc}{hint}") if hint else exc

    def _mode(self, mode: str | None, worker: int) -> str:
        if mode is not None:
            return mode
        return pick_mode(self.run._modes_of(self.name, worker), f"tensor {self.name!r}")

    def steps(self, mode: str | None = None, worker: int | None = None, reduction: str | None = None) -> list[int]:
        """Steps with a value of ``reduction`` (any stored value when None) from ``worker`` (None: rank
        0, or the run's lowest worker where it has no rank 0)."""
        worker = self.run._tensor_reader(self.name, worker, mode)
        return self._steps_in(self._mode(mode, worker), worker, reduction)

    @overload
    def value(self, step: int, mode: str | None = None, worker: int | None = None) -> np.ndarray: ...

    @overload
    def value(self, reduction: str, step: int, mode: str | None = None, worker: int | None = None) -> float: ...

    def value(self, *args: Any, **kwargs: Any) -> Any:
        """``value(step, mode=None, worker=None)``: the raw tensor at ``step`` (saved with the ``raw``
        reduction). Written as :meth:`Run.value` without the tensor, ``value(reduction, step,
        mode=None, worker=None)``: :meth:`reduction`, that reduction's value at ``step`` (a float).
        ``worker=None``: rank 0, or the run's lowest worker where it has no rank 0."""
        if ((args and isinstance(args[0], str)) or "reduction" in kwargs) and len(args) < 2 and "step" not in kwargs:
            # (trial 33f M6: value("raw") was Python's "TensorView.reduction() missing 1 required
            # positional argument: 'step'", naming a method the user did not call)
            self._no_step(args, kwargs)
        if (args and isinstance(args[0], str)) or "reduction" in kwargs:
            return self.reduction(*args, **kwargs)
        if not args and "step" not in kwargs:
            self._no_step(args, kwargs)
        if len(args) >= 2 and isinstance(args[1], str) and _reduction_name(args[1]):
            # (trial 31e: smdebug's reduction_value(step, name) order, value(0, "l2"), was "mode: got 'l2'")
            raise ConfigError(f"value({args[0]!r}, {args[1]!r}): the order is (reduction, step): "
                              f"tensor.value({args[1]!r}, {args[0]!r}) (smdebug's reduction_value(step, name) puts the "
                              f"step first); tensor.value(step) alone reads the raw tensor")
        return self._raw(*args, **kwargs)

    def _no_step(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """:meth:`value`'s error for a call without a step: what was given and the accepted forms."""
        given = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
        red = args[0] if args and isinstance(args[0], str) else kwargs.get("reduction")
        hint = ("; the raw value is read by step alone: tensor.value(step)" if red == "raw"
                else f"; tensor.value({red!r}, step)" if isinstance(red, str) else "")
        raise MissingArgumentError(
            f"tensor {self.name!r}: value({given}): no step given; accepted: value(step) (the raw array at step) or "
            f"value(reduction, step) (that reduction's value at step, a float){hint}")

    def _raw(self, step: int, mode: str | None = None, worker: int | None = None) -> np.ndarray:
        worker = self.run._tensor_reader(self.name, worker, mode)
        read = self._mode(mode, worker)
        try:
            return self.run.array(self.name, step, "raw", read, worker)
        except TensorNotFoundError as exc:
            raise self._hinted(exc, step, mode, read, worker) from None

    def reduction(self, reduction: str, step: int, mode: str | None = None, worker: int | None = None) -> float:
        """The value of ``reduction`` at ``step`` (a float) from ``worker`` (None: rank 0, or the run's
        lowest worker where it has no rank 0); TensorNotFoundError where there is none."""
        worker = self.run._tensor_reader(self.name, worker, mode)
        given, mode = mode, self._mode(mode, worker)
        v = self.run.value(self.name, reduction, step, mode, worker)
        if v is None:
            have = self.reductions()
            kind = {"raw": "raw", "histogram": "hist_counts"}.get(reduction)
            if reduction not in have and kind is not None and any(
                    self.run.array_steps(self.name, kind, m, worker) for m in MODES):
                # (trial 18b: "has no reduction 'raw'" read as "the raw weights were not stored")
                how = "tensor.value(step) (an array)" if reduction == "raw" else "tensor.histogram(step) (counts, edges)"
                raise TensorNotFoundError(
                    f"tensor {self.name!r} holds {'raw arrays' if reduction == 'raw' else 'histograms'}, not a "
                    f"{reduction!r} scalar: read one with {how}; its scalar reductions: {', '.join(have) or 'none'}")
            if not holds_reduction(have, reduction):  # (abs_l2 reads l2: trial 25d; a threshold however written)
                raise TensorNotFoundError(
                    f"tensor {self.name!r} has no reduction {reduction!r}{did_you_mean(reduction, have)}; available: "
                    f"{', '.join(have) or 'none'}{self.run._kept_hint(self.name, reduction)}"
                )
            raise self._hinted(TensorNotFoundError(
                f"tensor {self.name!r} has no {reduction!r} at step {step} in mode {mode!r} (worker {worker}); "
                f"steps with one: {self.steps(mode, worker, reduction)[:20]}"
            ), step, given, mode, worker)
        return v

    def reduction_values(self, step: int, mode: str | None = None, worker: int | None = None) -> dict[str, float]:
        """Every scalar reduction of this tensor at ``step``, ``{reduction: value}`` in the order of
        :meth:`reductions` (smdebug's ``tensor.reduction_values(step)``), from ``worker`` (None:
        rank 0, or the run's lowest worker where it has no rank 0); a reduction with no value at that
        step is left out. A one-element tensor's value is ``raw``; whole arrays and histograms are
        not scalars: :meth:`value` (``value(step)``) and :meth:`histogram` read them. A step at which
        no reduction of the tensor has a value is TensorNotFoundError naming the steps that have
        one; a step that is no integer is a ConfigError."""
        worker = self.run._tensor_reader(self.name, worker, mode)
        given, mode = mode, self._mode(mode, worker)
        reductions = self.reductions()
        if not reductions:
            raise TensorNotFoundError(
                f"tensor {self.name!r} has no scalar reductions, only arrays "
                f"({', '.join(self.run.array_kinds(self.name)) or 'none'}): read them with tensor.value(step) (the "
                f"raw array) or tensor.histogram(step) (counts, edges)")
        out: dict[str, float] = {}
        for r in reductions:
            v = self.run.value(self.name, r, step, mode, worker)
            if v is not None:
                out[r] = v
        if not out:
            have = sorted(set().union(*(self.run.series(self.name, r, mode, worker)[0].tolist() for r in reductions)))
            raise self._hinted(TensorNotFoundError(
                f"tensor {self.name!r} has no reduction value at step {step} in mode {mode!r} (worker {worker}); "
                f"steps with one: {have[:20]}{' ...' if len(have) > 20 else ''}"), step, given, mode, worker)
        return out

    def dataframe(self, mode: str | None = None, worker: int | None = None) -> Any:
        """This tensor's scalar reductions as a pandas DataFrame (needs pandas, as
        :meth:`Run.dataframe`): one row a step (the index, ``step``, ascending), one column a
        reduction (in the order of :meth:`reductions`), of ``mode`` (None: the tensor's own, as
        every reader here) and ``worker`` (None: rank 0, or the run's lowest worker where it has no
        rank 0); NaN where a reduction has no value at a step. A step saved more than once (a run
        that a second training appended to, a resume past a crash) holds the value written last,
        as :meth:`value` reads it. Whole arrays and histograms are left out, as in
        :meth:`Run.dataframe` (:meth:`value`, :meth:`histogram`). The whole run, every tensor, mode
        and worker, in one long table: :meth:`Run.dataframe`."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - exercised in the wheel test env
            from ._errors import missing_extra

            raise missing_extra("pandas", "pandas", exc) from exc
        worker = self.run._tensor_reader(self.name, worker, mode)
        mode = self._mode(mode, worker)
        columns = {}
        for r in self.reductions():
            steps, values = self.run.series(self.name, r, mode, worker)
            column = pd.Series(values, index=pd.Index(steps, dtype=np.int64, name="step"), dtype=np.float64)
            if not column.index.is_unique:
                column = column[~column.index.duplicated(keep="last")]
            columns[r] = column
        if not columns:
            return pd.DataFrame(index=pd.Index([], dtype=np.int64, name="step"),
                                columns=pd.Index([], dtype=object, name="reduction"), dtype=np.float64)
        frame = pd.concat(columns, axis=1).sort_index()
        frame.columns.name = "reduction"
        frame.index.name = "step"
        return frame

    def series(self, reduction: str = "raw", mode: str | None = None,
               worker: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one reduction (see :meth:`Run.series`; ``worker=None``: rank 0, or the
        run's lowest worker where it has no rank 0)."""
        worker = self.run._tensor_reader(self.name, worker, mode)
        return self.run.series(self.name, reduction, self._mode(mode, worker), worker)

    def histogram(self, step: int, mode: str | None = None, worker: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(counts, edges)`` at ``step`` (``worker=None``: as :meth:`series`)."""
        worker = self.run._tensor_reader(self.name, worker, mode)
        read = self._mode(mode, worker)
        try:
            return self.run.histogram(self.name, step, read, worker)
        except TensorNotFoundError as exc:
            raise self._hinted(exc, step, mode, read, worker) from None

    def workers(self) -> list[int]:
        """The workers that hold a value of this tensor, in any mode (trial 41h: every worker of the
        run was listed, rank 0 too where only rank 1 logged it, and ``steps()`` then said that worker 0
        holds none)."""
        return [w for w in self.run.workers if self.run._modes_of(self.name, w)]

    def __repr__(self) -> str:
        """``TensorView('loss', run='runs/k1')``: the tensor's name and its run's directory."""
        return f"TensorView({self.name!r}, run={str(self.run.path)!r})"

    def _repr_html_(self) -> str:
        """A small table for a notebook: the tensor's name and run, its collections, its scalar
        reductions and array kinds, and, per mode it has values in (of rank 0, or the run's lowest
        worker), its steps and the latest value of its headline reduction; every value escaped."""
        worker = self.run._reader_worker(None)
        if not self.run._modes_of(self.name, worker):  # (a tensor only other workers logged: theirs, named)
            worker = next((w for w in self.run.workers if self.run._modes_of(self.name, w)), worker)
        reductions = self.reductions()
        head = headline_reduction(reductions)
        rows: list[tuple[str, Any]] = [("tensor", self.name), ("run", str(self.run.path)),
                                       ("collections", ", ".join(self.collections) or "none"),
                                       ("reductions", ", ".join(reductions) or "none")]
        kinds = self.run.array_kinds(self.name)
        if kinds:
            rows.append(("arrays", ", ".join(kinds)))
        for mode in self.run._modes_of(self.name, worker):
            steps = self._steps_in(mode, worker)
            said = f"{len(steps)} step{'s' if len(steps) != 1 else ''}" + (
                f" ({steps[0] if len(steps) == 1 else f'{steps[0]} to {steps[-1]}'})" if steps else "")
            if head is not None:
                got, values = self.run.series(self.name, head, mode, worker)
                if len(values):
                    said += f"; {head} at step {int(got[-1])}: {float(values[-1]):.6g}"
            rows.append((f"{mode} (worker {worker})", said))
        return html_table(rows, caption="tripwire tensor")

    def __getattr__(self, name: str) -> Any:
        raise _no_attribute(self, name, _SMDEBUG_TENSOR)


#: smdebug's reader names (``trial.tensor(name)``'s, then the trial's) and what tripwire calls them
#: (trial 20b: an smdebug user's ``.values(mode)`` got a bare AttributeError).
_SMDEBUG_TENSOR = {
    "values": "tensor.series(reduction='raw', mode=None) gives (steps, values) of a scalar; "
              "tensor.value(step) one raw array",
    "value_at": "tensor.value(step)",
    "reduction_value": "tensor.value(reduction, step, mode=None) (or tensor.reduction(reduction, step))",
    "shape": "tensor.value(step).shape",
    "has_reduction_value": "reduction in tensor.reductions()",
}
_SMDEBUG_RUN = {
    "collection": "run.tensor_names(collection=name) for its tensors; run.collections() for their names",
    "mode_steps": "run.steps(mode)",
    "global_steps": "run.steps(mode) (tripwire's steps are per mode)",
    "wait_for_steps": "run.refresh() to read what was written since; tripwire watch RUN to follow a run",
    "loaded_all_steps": "run.is_complete",
    "last_complete_step": "run.steps(mode)[-1]",
    "has_passed_step": "step in run.steps(mode) (the steps written so far; run.refresh() reads what was written since)",
}

#: a Run's methods that write a history (those of :class:`History` a session fills), never suggested
#: to a reader (trial 31e: has_passed_step got "did you mean 'add_step'?")
_WRITING = frozenset({"add_step", "add_steps"})


def _reduction_name(name: str) -> bool:
    """Whether ``name`` names a reduction (``l2``, ``abs_mean``, ``fraction_gt:0.5``, ``raw``,
    ``histogram``), not a mode."""
    return name not in MODES and (name in ("raw", "histogram") or is_valid_reduction(name))


def _no_attribute(obj: Any, name: str, smdebug: dict[str, str]) -> AttributeError:
    """The AttributeError for an unknown public attribute of a reader object: smdebug's name for
    it, or a did-you-mean over the object's own names."""
    cls = type(obj).__name__
    if name.startswith("_"):
        return AttributeError(f"{cls!r} object has no attribute {name!r}")
    public = sorted(n for n in dir(type(obj)) if not n.startswith("_") and n not in _WRITING)
    if name in smdebug:
        return AttributeError(f"{cls!r} object has no attribute {name!r} (smdebug's name); in tripwire: "
                              f"{smdebug[name]} (docs/config.md, 'Coming from smdebug')")
    return AttributeError(f"{cls!r} object has no attribute {name!r}{did_you_mean(name, public)}; available: "
                          f"{', '.join(public)}")


def _probe_lock(shard: Path) -> str:
    """Whether a process holds ``shard``'s lock, as this machine sees it: ``held`` (a training
    writes it), ``free``, or ``unknown`` (no ``flock`` here, Windows; the file cannot be opened; a
    file system that does not lock)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return "unknown"
    try:
        with open(shard, "rb") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)  # (released when f closes)
    except BlockingIOError:
        return "held"
    except OSError:
        return "unknown"
    return "free"


def _is_copy(shard: Path, recorded: tuple[int, int] | None) -> bool:
    """Whether ``shard`` is another file than the one its writer opened (a copy of the run): its
    device and inode differ from those the worker meta file ``recorded`` (``_writer_of``). False
    where unknown (a run written before session 28, a shard gone)."""
    if recorded is None:
        return False
    try:
        st = shard.stat()
    except OSError:
        return False
    return (int(st.st_dev), int(st.st_ino)) != recorded


def _writer_of(meta: Path) -> tuple[str | None, int | None, float | None, tuple[int, int] | None]:
    """The writer a worker meta file names: its ``environment``'s ``host`` and ``pid``, ``started``
    (when the writer opened the shard, wall time) and the ``(device, inode)`` of the shard it opened
    (``shard``); None for each it does not hold (a meta file missing, damaged, or being replaced
    right now; a run written before session 28 has no ``shard``)."""
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None, None, None
    if not isinstance(data, dict):
        return None, None, None, None
    env = data.get("environment") if isinstance(data.get("environment"), dict) else {}
    host = env.get("host") if isinstance(env.get("host"), str) and env.get("host") else None
    pid = env.get("pid")
    pid = pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None
    started = data.get("started")
    started = float(started) if isinstance(started, (int, float)) and not isinstance(started, bool) else None
    shard = data.get("shard") if isinstance(data.get("shard"), dict) else {}
    ident = (shard.get("device"), shard.get("inode"))
    ident = ident if all(isinstance(v, int) and not isinstance(v, bool) for v in ident) else None
    return host, pid, started, ident


#: how much later than its writer's ``started`` a process of the writer's pid may seem to have
#: begun and still be read as that writer (a wall clock set since, the kernel's boot time in whole
#: seconds): one that began later is another program that took the pid
_PID_REUSE_MARGIN_S = 60.0


def _process_start(pid: int) -> float | None:
    """When process ``pid`` began (wall time, from Linux's ``/proc``); None where not known."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            ticks = int(fh.read().decode("ascii", "replace").rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith(b"btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _same_process_alive(pid: int, started: float | None) -> bool:
    """Whether process ``pid`` of this machine runs and is the writer that opened a shard at
    ``started`` (wall time; None: not known): False where there is no such process, where it is a
    zombie (killed, not reaped: it holds nothing), or where it began well after ``started`` (see
    :data:`_PID_REUSE_MARGIN_S`: another program took the pid). On Windows, where ``os.kill`` ends a
    process, nothing is asked: True (not known to be gone)."""
    if os.name == "nt":  # pragma: no cover - Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (another user's process: it exists)
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            if fh.read().decode("ascii", "replace").rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except (OSError, IndexError):
        pass
    begun = _process_start(pid)
    return not (started is not None and begun is not None and begun > started + _PID_REUSE_MARGIN_S)


def _own_writer_open(worker: int, started: float | None) -> bool:
    """Whether a session of this process has a writer open for ``worker`` that started at
    ``started`` (it writes the run of which the files read are a copy)."""
    from ._session import _OPEN

    for session in list(_OPEN):
        writer = getattr(session, "writer", None)
        if writer is None or writer.closed or writer.rank != worker:
            continue
        if started is None or abs(writer.started - started) < 1e-6:
            return True
    return False


def _ago(seconds: float) -> str:
    """``seconds`` (>= 0) in words: ``12 s``, ``5 min``, ``3.5 h``, ``2.0 days``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def unknown_writer_text(worker: int, info: dict[str, Any], now: float | None = None) -> str:
    """What is known of a worker of :meth:`Run.unknown_workers` (``info``, its entry), in one clause
    without ``;`` (``tripwire inspect`` and ``tripwire watch`` say it): no end marker, its writer
    (pid and host) and why it may still be running, and how long ago (``now``: wall time, default
    the time now) its last record was written::

        worker 0 has no end marker, its writer (pid 4242 on host gpu-7, another machine) may still be
        running (a copy of a run still being written, or a run written on another machine), and its last
        record was written 12 s ago (wall time)
    """
    host, pid, why = info.get("host"), info.get("pid"), info.get("why")
    if why == "other_host":
        who = (f"its writer (pid {pid} on host {host}, another machine) may still be running (a copy of a run still "
               f"being written, or a run written on another machine)")
    elif why == "alive":
        who = (f"its writer (pid {pid} on host {host}, this machine) still runs but holds no lock on these files (a "
               f"copy of a run still being written, or a run on a shared file system whose locks this machine cannot "
               f"see)")
    elif why == "this_process":
        who = f"its writer is this process (pid {pid}), which writes the run elsewhere (these files are a copy of it)"
    elif why == "copy":
        who = (f"these files are a copy of the run its writer (pid {pid} on host {host}, this machine) wrote, taken "
               f"before it ended: the writer is gone, and whether it closed the original is not in the copy (copy the "
               f"run again)")
    else:
        who = ("its writer is not known (its worker meta file is missing or damaged, as in a partial copy), so it may "
               "still be running")
    last = info.get("last_write")
    if last is None:
        when = ", and no record of it was read"
    else:
        delta = (time.time() if now is None else now) - float(last)
        when = (f", and its last record was written {_ago(delta)} ago (wall time)" if delta >= 0 else
                f", and its last record's wall time is {_ago(-delta)} ahead of this machine's clock")
    return f"worker {worker} has no end marker, {who}{when}"


def headline_reduction(reductions: Sequence[str]) -> str | None:
    """The reduction that stands for a tensor where one is shown (``tripwire inspect``, ``plot``):
    ``raw`` for a scalar, else ``l2``, else the first of ``reductions``; None when there is none."""
    for preferred in ("raw", "l2"):
        if preferred in reductions:
            return preferred
    return reductions[0] if reductions else None


class Run(History):
    """A stored run. Use :func:`open_run`.

    Damage that leaves what was written readable does not stop the reader: a findings line that is
    not valid JSON is skipped, an end marker that is not is read as absent (the worker still
    running, or crashed), a worker meta file that is not is ignored, and a shard that holds fewer
    records than its worker's end marker counts (truncated or emptied after the run ended) is read
    as far as it goes and named in :attr:`damaged`. Each such thing is logged once as a WARNING
    on the ``tripwire`` logger and kept in :attr:`warnings`. A damaged ``run.json`` (the run's
    identity and config) or a damaged shard record followed by more data is CorruptRunError."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        check_run_path(path)
        super().__init__(keep_arrays=None)
        self.path = Path(path)
        run_file = self.path / RUN_FILE
        if not run_file.is_file():
            if not self.path.exists():
                raise RunNotFoundError(f"no tripwire run at {str(self.path)!r}: the directory does not exist")
            if not self.path.is_dir():
                journal = ""
                with contextlib.suppress(OSError), open(self.path, "rb") as f:
                    if f.read(len(SQLITE_HEADER)) == SQLITE_HEADER:  # (a tuning journal: tripwire report reads either)
                        journal = "; this file is a SQLite database, a tuning journal? read it with tripwire tune-report"
                raise RunNotFoundError(f"no tripwire run at {str(self.path)!r}: it is a file; a run is a directory "
                                       f"(the out_dir a training wrote){journal}")
            inside = sorted(p.parent.name for p in self.path.glob(f"*/{RUN_FILE}"))
            held = (f"; it holds runs: {', '.join(inside[:10])}{' ...' if len(inside) > 10 else ''} (open one of them)"
                    if inside else "")
            raise RunNotFoundError(f"no tripwire run at {str(self.path)!r}: {RUN_FILE} is missing{held}")
        self._run_stat = _stat_key(run_file)
        self.info: dict[str, Any] = _load_json(run_file)
        if not isinstance(self.info, dict):
            raise CorruptRunError(f"{run_file}: damaged, holds {type(self.info).__name__} where a JSON object belongs")
        for key in ("format", "format_version"):  # (trial 41d: a run.json of {} was read as a run, "framework: ?")
            if key not in self.info:
                raise CorruptRunError(f"{run_file}: damaged, no {key!r} key (it holds {sorted(self.info) or 'no key'}); "
                                      f"accepted: the run.json a tripwire writer made, with 'format': 'tripwire-run' "
                                      f"and 'format_version'")
        kind, version = self.info["format"], self.info["format_version"]
        if kind != "tripwire-run":  # (trial 22k: another format's run.json was read as this one, silently)
            raise CorruptRunError(f"{run_file}: format {kind!r}; accepted: 'tripwire-run' (not a run tripwire wrote)")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise CorruptRunError(f"{run_file}: format_version {version!r}; accepted: an integer >= 1 (this reader knows 1 "
                                  f"to {FORMAT_VERSION}; a newer one is read with a WARNING)")
        self.warnings: list[str] = []
        if version > FORMAT_VERSION:
            self._warn(f"{run_file}: format version {version}, written by a newer tripwire; this reader knows versions "
                       f"1 to {FORMAT_VERSION} and may misread what is new there (upgrade tripwire to read it)")
        self._offsets: dict[Path, int] = {}
        self._shard_layouts: dict[Path, dict[int, list[Any]]] = {}  # per shard: its scalar layouts read so far (iter_records)
        self._finding_offsets: dict[Path, int] = {}
        self._finding_lines: dict[Path, int] = {}
        self._findings: list[Finding] = []
        self._records_read: dict[int, int] = {}
        self._shard_ranks: set[int] = set()
        self._damaged: dict[int, tuple[int, int]] = {}
        # {worker: (findings its end marker counts, findings the run holds of it, whether that is every
        # worker's: see _check_findings)} where it holds fewer
        self._findings_lost: dict[int, tuple[int, int, bool]] = {}
        #: what the reader found damaged and read past (each also logged once as a WARNING; set above)
        #: ``{rule: {parameter: name}}`` an integration pointed at its own names in the training
        #: (``Session.bind_inputs``; XGBoost's loss rules read ``train-logloss``), from the first
        #: worker meta file that holds them; ``tripwire watch`` applies them to parameters left at default
        self.rule_inputs: dict[str, dict[str, str]] = {}
        #: the tuning trial this run trained, from the first worker meta file that holds it: its
        #: ``number``, ``attempt``, ``params`` and the ``metric`` reported (None: not a trial)
        self.trial: dict[str, Any] | None = None
        #: ``{worker: [training, ...]}``: where each training through a worker's session began, when
        #: a later one did (a second Keras ``fit``, MXNet ``est.fit``; the worker meta file's
        #: ``trainings``), or a later session that wrote into the same ``out_dir`` without resuming
        #: (the same script run twice; trial 26i): each a dict of ``steps`` (``{mode: its first
        #: step}``), ``began`` (wall time; None for the first), ``continued`` (the same model's fit,
        #: continuing the one before), ``planned_steps`` and ``fresh`` (True: a training of its own,
        #: whose session's rules judged its records alone), and, where the run holds them, ``started``
        #: (when its writer opened), ``argv`` (its command line), ``config`` (its config; run.json's
        #: is the first training's) and ``pid`` and ``host`` (the process that wrote it, where the
        #: entry holds them); ``tripwire watch`` arms its rules again there (trial 25e). A worker
        #: with one training is absent. Which process wrote each: :meth:`training_processes`.
        self.trainings: dict[int, list[dict[str, Any]]] = {}
        # {worker: (host, pid, started)} of the writer its meta file names, for a worker with trainings
        self._meta_writers: dict[int, tuple[str | None, int | None, float | None]] = {}
        #: ``{rule: why}``: the rules the training's integration switched off, with why
        #: (``Session.switch_off``: XGBoost's class rules for an objective without classes), from every
        #: worker meta file (``switched_off``); ``tripwire watch`` does not judge them. ``None``: no
        #: meta file holds the key (a run written before trial 26h: not known)
        self.switched_off: dict[str, str] | None = None
        # {(tensor, worker): the modes it has values in}: what a read with mode=None picks its mode
        # by, kept until the next refresh (trial 29b: found again at every call, from a set of every
        # step of every reduction in each mode, it cost 4 ms a read on a 5,000-step run)
        self._modes_cache: dict[tuple[str, int], tuple[str, ...]] = {}
        self.refresh()

    def __repr__(self) -> str:
        """``Run('runs/k1', status='failed', workers=[0])``: the directory, :attr:`status` (read now)
        and the workers (:meth:`known_workers`, as ``tripwire inspect`` lists them: a worker that
        failed before its first record too; trial 42i: ``workers=[]`` where inspect said ``[0]``;
        trial 30f F5: ``complete=True``, :attr:`is_complete`, read as the end status of a failed or
        stopped run)."""
        return f"Run({str(self.path)!r}, status={self.status!r}, workers={self.known_workers()})"

    def _repr_html_(self) -> str:
        """A small table for a notebook (Jupyter calls it to display a run): the directory and run id,
        :attr:`status` and :attr:`stop_reasons`, the framework and world size, the workers, the steps
        of each mode, the tensors and the findings by rule; every value escaped. Read now (the steps
        and findings as of the last :meth:`refresh`)."""
        rows: list[tuple[str, Any]] = [("run", str(self.path) + (f" (run_id {self.run_id})" if self.run_id else ""))]
        status = self.status
        reasons = self.stop_reasons
        rows.append(("status", status + "".join(f"\nworker {w}: {short_text(r, 160)}" for w, r in reasons.items())))
        world = self.world_size
        rows.append(("framework", str(self.info.get("framework", "python")) + (f", world size {world}" if world > 1 else "")))
        rows.append(("workers", ", ".join(map(str, self.workers)) or "none read"))
        steps = []
        for mode in MODES:
            held = self.steps(mode)
            if held:
                steps.append(f"{mode}: {len(held)} step{'s' if len(held) != 1 else ''} "
                             f"({held[0] if len(held) == 1 else f'{held[0]} to {held[-1]}'})")
        rows.append(("steps", "\n".join(steps) or "none"))
        rows.append(("tensors", len(self.tensor_names())))
        findings = self.findings
        by_rule: dict[str, int] = {}
        for f in findings:
            by_rule[f.rule] = by_rule.get(f.rule, 0) + 1
        rows.append(("findings", f"{len(findings)}" + (": " + ", ".join(f"{r} ({n})" for r, n in by_rule.items())
                                                       if by_rule else "")))
        return html_table(rows, caption="tripwire run")

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            # ("tripwire: " as every line tripwire logs, trial 36h; run.warnings keep the message alone)
            logger.warning("tripwire: %s", message, extra={"tripwire_reader": True})

    @property
    def run_id(self) -> str | None:
        """The run's id (``run.json``), new for each run written into a directory."""
        rid = self.info.get("run_id")
        return None if rid is None else str(rid)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.info.get("config", {}))

    @property
    def environment(self) -> dict[str, Any]:
        return dict(self.info.get("environment", {}))

    @property
    def world_size(self) -> int:
        return int(self.info.get("world_size", 1))

    @property
    def damaged(self) -> dict[int, tuple[int, int]]:
        """``{worker: (records its end marker counts, records read)}`` for each worker whose shard
        holds fewer step records than its end marker says it wrote (truncated, emptied or removed
        after the run ended); empty for an intact run. :attr:`status` stays the end status; what
        was read is intact (every record has its checksum). As of the last :meth:`refresh`."""
        return dict(self._damaged)

    def refresh(self) -> int:
        """Read what was appended since the last read; return the number of new step records.

        RunReplacedError when the directory now holds another run (its run id changed, or a
        file the reader had read shrank): open it again."""
        self._check_same_run()
        self._modes_cache.clear()  # (new records may add a mode to a tensor: see _modes_of)
        new = 0
        workers = self.path / WORKERS_DIR
        if workers.is_dir():
            ended = self._read_markers()  # before the shards: an end marker follows its shard's last record
            for shard in sorted(workers.glob("worker-*.twr")):
                worker = int(shard.stem.split("-")[1])
                self._shard_ranks.add(worker)
                new += self._read_shard(shard, worker)
            self._read_meta(workers)
            self._check_counts(ended)
        else:
            ended = {}
        findings = self.path / FINDINGS_DIR
        if findings.is_dir():
            for fpath in sorted(findings.glob("*.jsonl")):
                self._read_findings(fpath)
        self._check_findings(ended)  # (after the findings: a marker is written after its worker's last finding)
        return new

    def _check_same_run(self) -> None:
        run_file = self.path / RUN_FILE
        key = _stat_key(run_file)
        if key == self._run_stat:
            return
        if key is None:
            raise RunNotFoundError(f"no tripwire run at {str(self.path)!r} any more: {RUN_FILE} is missing "
                                   f"(the directory was removed or is being replaced); open it again once a run is there")
        try:
            info = _load_json(run_file)
        except (OSError, CorruptRunError):
            info = {}
        new_id = info.get("run_id") if isinstance(info, dict) else None
        if new_id != self.run_id:
            raise self._replaced(f"run id {self.run_id} -> {new_id}")
        self._run_stat = key  # rewritten with the same identity (copied back, touched)

    def _replaced(self, what: str) -> RunReplacedError:
        return RunReplacedError(f"the run at {str(self.path)!r} was replaced ({what}): what this reader read is "
                                f"not that run any more; open it again (tripwire.open_run)")

    def _check_counts(self, ended: dict[int, dict[str, Any]]) -> None:
        """Compare each ended worker's record count (its end marker's ``records``: the step records
        of all its writing sessions, a ``steps`` record counting as its steps; of the last one in
        markers written before that count was kept) with the step records read from its shard."""
        damaged = {}
        for rank, marker in sorted(ended.items()):
            expected = marker.get("records")
            if isinstance(expected, bool) or not isinstance(expected, int):
                continue
            read = self._records_read.get(rank, 0)
            if read < expected:
                damaged[rank] = (expected, read)
                shard = self.path / WORKERS_DIR / shard_name(rank)
                where = f"read from {shard}" if shard.exists() else f"read ({shard} is missing)"
                self._warn(f"worker {rank}: its end marker says {expected} records, {read} {'was' if read == 1 else 'were'} {where}: "
                           f"the shard was truncated or damaged after the run ended (the records read are intact)")
        self._damaged = damaged

    def _check_findings(self, ended: dict[int, dict[str, Any]]) -> None:
        """Compare each ended worker's finding count (its end marker's ``findings``: what its last
        writing session found, its rules' errors and the findings of the stop requests it honoured
        included) with the findings the run holds of that worker (``Finding.worker``, every findings
        file). Where the run holds fewer, a warning names the worker and both counts, and why where the
        marker says it (``write_error``: the disk filled, and the writer dropped the findings that came
        after; trial 32b F1: ``run.findings`` was ``[]`` and ``tripwire inspect`` said "findings: none"
        under the finding that stopped the run). Where the run holds findings of other workers too,
        those count as well (a session keeps another rank's finding whose stop it honoured, which that
        rank's session writes): only a loss beyond them is said. Kept in :attr:`_findings_lost`."""
        lost: dict[int, tuple[int, int, bool]] = {}
        by_worker: dict[int, int] | None = None
        for rank, marker in sorted(ended.items()):
            counted = marker.get("findings")
            if isinstance(counted, bool) or not isinstance(counted, int) or counted <= 0:
                continue
            if by_worker is None:  # (once a refresh, where a marker counts findings)
                by_worker = {}
                for f in self._findings:
                    by_worker[f.worker] = by_worker.get(f.worker, 0) + 1
            held, every = by_worker.get(rank, 0), False
            if held < counted and len(by_worker) > (rank in by_worker):  # (other workers' findings: see above)
                held, every = len(self._findings), True
            if held >= counted:
                continue
            lost[rank] = (counted, held, every)
            fpath = self.path / FINDINGS_DIR / f"in-process-{rank:05d}.jsonl"
            where = f"{fpath}{'' if fpath.exists() else ' is missing'}"
            error = marker.get("write_error")
            why = (f"{counted - held} lost to the write error its end marker names ({error}), after which the "
                   f"writer dropped what came" if error else
                   "a findings file was truncated, damaged or removed after the run ended (the findings read are "
                   "intact)")
            self._warn(f"worker {rank}: its end marker counts {counted} finding{'s' if counted != 1 else ''} (rule "
                       f"errors included), the run holds {held} {'of all its workers' if every else 'of that worker'} "
                       f"({where}): {why}; the training's log, "
                       f"and the end marker's stop_reason where a finding stopped it, say what was found")
        for rank, marker in sorted(ended.items()):
            # the lines its findings file held when its last training closed the run, every training's
            # (trial 41d: half a resumed run's findings file cut away lost the first training's finding
            # without a word: the marker's "findings" counts the last training's)
            held_file = marker.get("findings_file")
            if rank in lost or not isinstance(held_file, dict):
                continue
            name, lines = held_file.get("name"), held_file.get("lines")
            if (not isinstance(name, str) or "/" in name or "\\" in name or isinstance(lines, bool)
                    or not isinstance(lines, int)):
                continue
            fpath = self.path / FINDINGS_DIR / name
            read = self._finding_lines.get(fpath, 0)
            if read >= lines:
                continue
            lost[rank] = (lines, read, False)
            where = f"{fpath}{'' if fpath.exists() else ' is missing'}"
            self._warn(f"worker {rank}: its findings file held {lines} finding{'s' if lines != 1 else ''} (every "
                       f"training's) when its training ended the run, {read} {'is' if read == 1 else 'are'} read "
                       f"({where}): the file was truncated, damaged or removed after the run ended (the findings "
                       f"read are intact); the trainings' logs say what was found")
        self._findings_lost = lost

    def _read_markers(self) -> dict[int, dict[str, Any]]:
        """The end markers that can be read, by rank; a damaged one is named in a warning and read
        as absent (that worker's status is unknown: running, or crashed)."""
        out: dict[int, dict[str, Any]] = {}
        workers = self.path / WORKERS_DIR
        if not workers.is_dir():
            return out
        for marker in sorted(workers.glob("worker-*.end.json")):
            try:
                rank = int(marker.name.split("-")[1].split(".")[0])
            except ValueError:
                continue
            try:
                data = _load_json(marker)
            except FileNotFoundError:
                continue  # removed by a resumed writer just now
            except (OSError, CorruptRunError) as exc:
                self._warn(f"{exc}; read as absent: worker {rank}'s end status is unknown (running, or crashed)")
                continue
            if not isinstance(data, dict):
                self._warn(f"{marker}: damaged, holds {type(data).__name__} where a JSON object belongs; read as "
                           f"absent: worker {rank}'s end status is unknown (running, or crashed)")
                continue
            if data.get("write_error"):  # the disk or the directory failed while the training went on
                self._warn(f"worker {rank} could not write all of its records ({data['write_error']}): this run holds "
                           f"the {data.get('records', '?')} step records it wrote before; its training went on")
            out[rank] = data
        return out

    def _read_meta(self, workers: Path) -> None:
        """What the writing sessions knew, from the worker meta files (read once per refresh; a file
        being replaced right now keeps what was read before): ``planned_steps``, the planned
        training length (rules scale windows by it; the largest of the workers'); ``every_step``,
        ``{collection: train save interval}`` of the collections kept at every step (rules read
        such series in save intervals; see ``History.every_step``); :attr:`rule_inputs`;
        :attr:`switched_off`."""
        metas = []
        for path in sorted(workers.glob("worker-*[0-9].json")):
            try:
                meta = _load_json(path)
            except CorruptRunError as exc:  # (written by renaming a whole file: damage, not a write in progress)
                self._warn(f"{exc}; ignored (that worker's planned_steps and rule_inputs are unknown)")
                continue
            except OSError:
                continue  # being replaced right now: what was read before stays
            if isinstance(meta, dict):
                metas.append(meta)
                trainings = _trainings(meta.get("trainings"))
                if trainings:
                    try:
                        worker = int(path.stem.split("-")[1])
                    except (IndexError, ValueError):
                        continue
                    self.trainings[worker] = trainings
                    started = meta.get("started")
                    self._meta_writers[worker] = (
                        *_host_pid(meta.get("environment")),
                        float(started) if isinstance(started, (int, float)) and not isinstance(started, bool) else None)
        planned = [v for v in (m.get("planned_steps") for m in metas) if isinstance(v, int) and v >= 1]
        if planned:
            self.planned_steps = max(planned)
        every = next((v for v in (m.get("every_step") for m in metas) if isinstance(v, dict)), None)
        if every is not None:
            self.every_step = {str(k): int(v) for k, v in every.items() if isinstance(v, int) and v >= 1}
        ranges = next((v for v in (m.get("every_step_ranges") for m in metas) if isinstance(v, dict)), None)
        if ranges is not None:
            self.every_step_ranges = {str(k): r for k, r in ((k, _every_step_range(v)) for k, v in ranges.items())
                                      if r is not None}
        trial = next((v for v in (m.get("trial") for m in metas) if isinstance(v, dict)), None)
        if trial is not None:
            self.trial = trial
        offs = [v for v in (m.get("switched_off") for m in metas) if isinstance(v, dict)]
        if offs:
            self.switched_off = {str(r): str(why) for off in offs for r, why in off.items()}
        bound = next((v for v in (m.get("rule_inputs") for m in metas) if isinstance(v, dict)), None)
        if bound is not None:
            self.rule_inputs = {str(r): {str(k): str(v) for k, v in p.items()} for r, p in bound.items()
                                if isinstance(p, dict)}

    def _read_shard(self, shard: Path, worker: int) -> int:
        start = self._offsets.get(shard, 0)
        size = shard.stat().st_size
        if size < start:  # (a resumed writer truncates only a torn tail, past what was read)
            raise self._replaced(f"{shard} shrank from {start} bytes read to {size}: truncated, or another run's")
        if size == start:
            return 0
        n = 0
        spath = str(shard)
        with open(shard, "rb") as f:
            for rec in iter_records(f, spath, start, size, self._shard_layouts.setdefault(shard, {})):
                h = rec.header
                if h.get("type") == "steps":  # many steps of one layout: ingested together
                    steps = h["steps"]
                    scalars = [(t, tuple(r)) for t, r in h["scalars"]]
                    self._add_steps(h["mode"], steps, worker, h["wall_times"], scalars,
                                    rec.scalars.reshape(len(steps), -1), _global_steps(h.get("global_steps"), len(steps)))
                    n += len(steps)
                else:
                    at = _global_steps([h.get("global_step")], 1)[0]
                    for mode, step, wall, layout, values, arrays, declare in decoded_steps(rec, spath):
                        self._add_step(mode, step, worker, wall, layout, values, arrays, declare, global_step=at)
                        n += 1
                self._offsets[shard] = rec.end_offset
        self._records_read[worker] = self._records_read.get(worker, 0) + n
        return n

    def _read_findings(self, fpath: Path) -> None:
        """Append the complete new lines of a findings file; a line that is not a finding (damaged:
        half a line, then the next one) is skipped with a warning naming the file and line."""
        start = self._finding_offsets.get(fpath, 0)
        with open(fpath, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < start:
                raise self._replaced(f"{fpath} shrank from {start} bytes read to {size}")
            f.seek(start)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a partial last line is still being written
        lineno = self._finding_lines.get(fpath, 0)
        for line in data[:end].split(b"\n")[:-1]:
            lineno += 1
            if not line.strip():
                continue
            try:
                self._findings.append(Finding.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                why = (f"not valid JSON (column {exc.colno}: {exc.msg})" if isinstance(exc, json.JSONDecodeError)
                       else f"not a finding ({type(exc).__name__}: {exc})")
                self._warn(f"{fpath}: line {lineno} is damaged, {why}; skipped (the other findings are read)")
        self._finding_lines[fpath] = lineno
        self._finding_offsets[fpath] = start + end

    def training_processes(self, worker: int) -> list[tuple[str | None, int] | None]:
        """``(host, pid)`` of the process that wrote each of ``worker``'s :attr:`trainings`, in their
        order, None for one the run does not say (``[]`` for a worker with one training): the entry's
        own ``pid`` and ``host`` where it holds them; else the training whose writer opened when the
        worker meta file's did (its ``began`` that file's ``started``) is that file's writer's (its
        ``environment``: the latest session's), the first is run.json's writer's where that names
        this worker's rank (run.json's ``environment`` is the first training's), and a later fit
        through one session (an entry without ``argv``: a second Keras ``fit``) is the process of the
        training before it. What ``tripwire inspect`` tells a second training of the same process (a
        second callback in one notebook kernel) from a later process's by (trial 30f F3). As of the
        last :meth:`refresh`."""
        trainings = self.trainings.get(worker, [])
        host, pid, started = self._meta_writers.get(worker, (None, None, None))
        env = self.info.get("environment")
        first_host, first_pid = _host_pid(env) if isinstance(env, dict) and env.get("rank", 0) == worker else (None, None)
        out: list[tuple[str | None, int] | None] = []
        for k, t in enumerate(trainings):
            if "pid" in t:
                out.append((t.get("host"), t["pid"]))
            elif (pid is not None and started is not None and isinstance(t.get("began"), float)
                  and abs(t["began"] - started) < 1e-6):
                out.append((host, pid))
            elif k == 0 and first_pid is not None:
                out.append((first_host, first_pid))
            elif k > 0 and not t.get("argv"):
                out.append(out[-1])
            else:
                out.append(None)
        return out

    @property
    def findings(self) -> list[Finding]:
        """Every finding written to the run (in-process and by ``tripwire watch``)."""
        return sorted(self._findings, key=lambda f: (f.wall_time, f.step))

    @property
    def end_markers(self) -> dict[int, dict[str, Any]]:
        """``{worker: end marker}`` of the workers that ended (read now; a damaged marker is left
        out, with a warning)."""
        return self._read_markers()

    @property
    def is_complete(self) -> bool:
        """True when every writing worker left its end-of-run marker (a damaged one counts as
        absent)."""
        shards = self._shard_workers()
        markers = set(self._read_markers())
        if not (shards or markers):
            return False
        return shards <= markers

    def _shard_workers(self) -> set[int]:
        """The workers that wrote a shard (read now)."""
        return {int(p.stem.split("-")[1]) for p in (self.path / WORKERS_DIR).glob("worker-*.twr")}

    def abandoned_workers(self) -> list[int]:
        """Workers whose training is known to have ended without closing the run (killed, out of
        memory, a crash): no end marker, no process holds their shard (a writing training holds a
        lock on it: ``flock``, which the system releases when a process dies), and their writer,
        as the worker meta file names it (``environment``: ``host``, ``pid``), ran on this machine
        and is gone (no such process, a zombie, a pid another program took since, or this process,
        which writes it no more). A worker whose writer cannot be seen from here (another machine;
        a process that still runs but holds no lock on these files: a copy of a run still written)
        is not one: see :meth:`unknown_workers`. Read now."""
        return sorted(w for w, (state, _) in self._writer_states().items() if state == "ended")

    def unknown_workers(self) -> dict[int, dict[str, Any]]:
        """Workers without an end marker whose writer may still run, though no process on this
        machine holds their shard: a copy of a run still written (``cp -r``, rsync, a sync from
        object storage), a run written on another machine, or on a shared file system whose locks
        this machine cannot see. Neither running nor crashed is known; the run's status stays
        ``running``. ``{worker: {"host", "pid", "last_write", "why"}}``: the writer's host and pid
        (the worker meta file's; None where it is missing or damaged), the wall time of its last
        record read (None: none read yet), and ``why`` it is
        unknown: ``other_host`` (the writer ran on another machine), ``alive`` (its pid still runs
        here, the process that wrote it: this is a copy, or the locks are not seen),
        ``this_process`` (this process writes the run elsewhere: a copy), ``copy`` (the writer ran
        here and is gone, and this shard is another file than the one it wrote: a copy taken while
        it ran, whose original may have been closed since), ``no_writer`` (the meta file names no
        writer). Read now (see :meth:`abandoned_workers` for the workers known to
        have ended)."""
        return {w: info for w, (state, info) in self._writer_states().items() if state == "unknown"}

    def missing_workers(self) -> list[int]:
        """The workers of the run's world size that its config's ``writer.ranks`` says write a shard
        (``all``: every rank) and that wrote nothing to it: no shard, no end marker. Such a rank never
        made its session (it failed before, or has not started yet), was given another ``out_dir`` (a
        per-rank timestamp splits one job in several runs), or was made with ``write=False``: what
        the run holds is read as it is (:attr:`status` is that of the workers that wrote), and
        ``tripwire inspect`` names them under its headline (trial 30b F6: a world size 2 run that held
        worker 1's shard alone read ``complete`` with no word of worker 0). ``[]`` for a run of one
        worker, and for an XGBoost run, whose callback picks the ranks that write itself (its
        ``ranks=``: rank 0 alone by default), which the run does not record. Read now."""
        world = self.world_size
        if world < 2 or self.info.get("framework") == "xgboost":
            return []
        writer = self.config.get("writer")
        ranks = writer.get("ranks", "all") if isinstance(writer, dict) else "all"
        if ranks == "all":
            expected = set(range(world))
        elif isinstance(ranks, (list, tuple)):
            expected = {r for r in ranks if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < world}
        else:
            return []  # (a config this reader does not know how to read: nothing said of it)
        return sorted(expected - self._shard_workers() - set(self._read_markers()))

    def _writer_states(self) -> dict[int, tuple[str, dict[str, Any]]]:
        """Each worker that has a shard and no end marker, and what is known of its writer:
        ``writing`` (a process holds its shard's lock), ``ended`` (known gone: see
        :meth:`abandoned_workers`) or ``unknown`` (see :meth:`unknown_workers`), with the
        writer's ``host``, ``pid``, ``last_write`` and ``why``."""
        out: dict[int, tuple[str, dict[str, Any]]] = {}
        ended = self._read_markers()
        here = socket.gethostname()
        for shard in sorted((self.path / WORKERS_DIR).glob("worker-*.twr")):
            worker = int(shard.stem.split("-")[1])
            if worker in ended:
                continue
            lock = _probe_lock(shard)
            if lock == "held":
                out[worker] = ("writing", {})
                continue
            host, pid, started, ident = _writer_of(self.path / WORKERS_DIR / worker_meta_name(worker))
            if worker in self._read_markers():  # (a training that closed the run just now has its marker)
                continue
            last = self._last_write(worker)
            info: dict[str, Any] = {"host": host, "pid": pid, "last_write": last}
            if host is None or pid is None:
                state, why = "unknown", "no_writer"
            elif host != here:
                state, why = "unknown", "other_host"
            elif pid == os.getpid():
                # this process holds no lock on it (the probe above: flock locks of two opens of a
                # file exclude each other in one process too); a writer of this process that is
                # open, with this worker and start, writes another copy of the run
                state, why = ("unknown", "this_process") if _own_writer_open(worker, started) else ("ended", "gone")
            else:
                alive = _same_process_alive(pid, started)
                state, why = ("unknown", "alive") if alive else ("ended", "gone")
            if state == "ended" and _is_copy(shard, ident):
                # (a copy taken while the training ran, read after its writer ended: whether the
                # writer closed the original is not in the copy; fix28f_a's note)
                state, why = "unknown", "copy"
            info["why"] = why
            out[worker] = (state, info)
        return out

    def _last_write(self, worker: int) -> float | None:
        """The wall time of ``worker``'s last record read (any mode); None where it has none."""
        last = None
        for mode in MODES:
            walls = self.wall_times(mode, worker)[1] if worker in self._workers else ()
            if len(walls):
                last = max(float(np.max(walls)), last if last is not None else float("-inf"))
        return last

    @property
    def status(self) -> str:
        """``running`` (or crashed), or the end status: ``complete``, ``stopped``, ``failed``.
        A shard damaged after the end keeps its end status: see :attr:`damaged`. ``running`` means a
        worker has no end marker yet: its training still writes the run, or ended without closing it
        (killed, a crash); :meth:`abandoned_workers` names those known to be gone (every worker
        without a marker among them: nothing writes the run any more; ``tripwire inspect`` then says
        ``running (but no process writes it any more: see below)``), :meth:`unknown_workers` those
        whose writer this machine cannot see."""
        markers = self._read_markers()
        shards = self._shard_workers()
        # (a shard removed after its worker ended keeps that worker's end status: trial 18f read
        # "running"; the loss is in damaged)
        if not (shards or markers) or not shards <= set(markers):
            return "running"
        statuses = {m.get("status", "complete") for m in markers.values()}
        for s in ("failed", "stopped"):
            if s in statuses:
                return s
        return "complete"

    @property
    def stop_reasons(self) -> dict[int, str]:
        """``{worker: why its training stopped or failed}``, as each end marker's ``stop_reason`` says
        it (what ``tripwire inspect`` prints as ``worker 0 failed: ...``): a stopped run's finding,
        the tuner's reason, or the stop of another callback (Lightning's or Keras's ``EarlyStopping``:
        ``trainer.should_stop was set outside tripwire ...``, ``model.stop_training was set outside
        tripwire ...``); a failed run's exception, its type and the first line of its message
        (``IndexError: Target 10 is out of bounds.``: a training that raised; trial 27g F5), or the
        signal (``SIGTERM: ...``). A worker whose marker holds none (a complete run, a failure with
        no exception at hand, a run written before trial 27g for a failure) or that has no marker
        yet is left out. Read now."""
        return {w: str(m["stop_reason"]) for w, m in sorted(self._read_markers().items()) if m.get("stop_reason")}

    def tensor(self, name: str) -> TensorView:
        self._check_tensor(name)
        return TensorView(self, name)

    # ------------------------------------------------------------- a worker the run does not have
    def _worker_ranks(self) -> set[int]:
        """The run's workers: those that wrote a record, and the ranks with a shard (one that has
        written nothing yet)."""
        return self._workers | self._shard_ranks

    def _reader_worker(self, worker: int | None) -> int:
        """``worker``, checked (:meth:`_check_worker`); None: rank 0 when the run has it, else the run's
        lowest worker (trial 22d: a run written by rank 1 alone, XGBoost's ``ranks=[1]``, raised
        "worker: got 0" at ``run.series(name)``)."""
        worker = self._resolve_worker(worker)
        if worker not in self._workers:
            self._check_worker(worker)
        return worker

    def _tensor_reader(self, tensor: str, worker: int | None, mode: str | None = None) -> int:
        """The worker a read of ``tensor`` reads (:meth:`_reader_worker`). With ``worker=None`` a
        :class:`TensorNotFoundError` where that worker (rank 0, else the run's lowest) holds no value
        of ``tensor`` (in ``mode``, where given; else in any mode) and other workers do: it names
        them and how to read them (``worker=1``), instead of an empty series (trial 31b F1: a NaN
        that only rank 1 logged, named by its finding, read as empty in ``run.series(name)``,
        ``run.tensor(name).steps()`` and inspect's last value). A worker given reads as before: one
        with no value of the tensor there reads as empty."""
        read = self._reader_worker(worker)
        if worker is not None or not self.has_tensor(tensor):
            return read

        def holds(w: int) -> bool:
            have = self._modes_of(tensor, w)
            return mode in have if mode is not None else bool(have)

        if holds(read):
            return read
        others = [w for w in sorted(self._workers) if w != read and holds(w)]
        if not others:
            return read
        names = f"worker{'s' if len(others) > 1 else ''} {', '.join(map(str, others))}"
        where = f" in mode {mode!r}" if mode is not None else ""
        raise TensorNotFoundError(
            f"tensor {tensor!r} has no value{where} from worker {read}, which worker=None reads (rank 0, else the "
            f"run's lowest worker); {names} {'hold' if len(others) > 1 else 'holds'} it: pass worker={others[0]} "
            f"(run.series({tensor!r}, worker={others[0]}), run.tensor({tensor!r}).steps(worker={others[0]})); a tensor "
            f"that only some workers logged, a DDP rank's own, is read per worker")

    def train_steps(self, mode: str = "eval", steps: Iterable[int] | None = None,
                    worker: int | None = None) -> np.ndarray:
        """As :meth:`History.train_steps`; with ``worker=None``, where the worker it reads (rank 0,
        else the run's lowest) recorded no step of ``mode`` and other workers did, a ConfigError
        naming them (trial 41j: ``run.train_steps('test', run.steps('test'))`` of a mode only rank 1
        recorded was ``[-1, -1]``, "before training"), as the other readers name the worker to read."""
        if worker is None and mode in MODES and mode != "train":
            read = self._reader_worker(None)
            if not len(self.wall_times(mode, read)[0]):
                others = [w for w in sorted(self._workers) if w != read and len(self.wall_times(mode, w)[0])]
                if others:
                    raise ConfigError(
                        f"train_steps({mode!r}): worker {read}, which worker=None reads (rank 0, else the run's lowest "
                        f"worker), recorded no {mode} step; worker{'s' if len(others) > 1 else ''} "
                        f"{', '.join(map(str, others))} did: pass worker={others[0]} "
                        f"(run.train_steps({mode!r}, worker={others[0]}))")
        return super().train_steps(mode, steps, worker)

    def known_workers(self) -> list[int]:
        """Every worker the run knows of: those with records (:attr:`workers`), with a shard, or with
        an end marker (a worker that ended before its first record: a DDP rank closed at once).
        ``tripwire inspect`` lists these; a reader given one of them with no record reads empty."""
        return sorted(self._workers | self._shard_ranks | set(self.end_markers))

    def _check_worker(self, worker: Any) -> None:
        """ConfigError for a worker the run does not know of (:meth:`known_workers`; a worker that has
        no value of some tensor or mode reads as empty)."""
        have = set(self.known_workers())
        if have and worker not in have:
            raise ConfigError(f"worker: got {worker!r}; accepted: one of the run's workers "
                              f"({', '.join(map(str, sorted(have)))})")

    def _modes_of(self, tensor: str, worker: int) -> tuple[str, ...]:
        """The modes in which ``tensor`` has a value (a scalar reduction or an array: raw, histogram)
        from ``worker`` (resolved), in :data:`MODES` order. Kept per tensor and worker until the next
        :meth:`refresh` (which reads any new records), so that a read with ``mode=None`` costs the
        same at step 100 and at step 100,000 (trial 29b); each mode is answered by whether a series
        or an array store holds anything, not by the steps themselves."""
        key = (tensor, worker)
        have = self._modes_cache.get(key)
        if have is None:
            reductions = self.reductions(tensor)
            have = tuple(m for m in MODES if any(self._arrays.get((tensor, kind, m, worker))
                                                 for kind in ("raw", "hist_counts"))
                         or any(len(History.series(self, tensor, r, m, worker)[0]) for r in reductions))
            self._modes_cache[key] = have
        return have

    def _tensor_mode(self, tensor: str, mode: str | None, worker: int) -> str:
        """``mode``; for None, the tensor's own, as :class:`TensorView` picks it: ``train`` where it
        has train values (or the run has no such tensor), else its only mode; a tensor with values
        in several modes but train is a TensorNotFoundError naming them."""
        if mode is not None:
            return mode
        if not self.has_tensor(tensor):
            return "train"
        return TensorView(self, tensor)._mode(None, worker)

    def series(self, tensor: str, reduction: str = "raw", mode: str | None = None,
               worker: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`History.series`; ``mode=None``: the tensor's own mode (``train``, or the only
        mode it has values in: ``run.series("val_loss")`` reads eval; see :meth:`_tensor_mode`).
        ``worker=None``: rank 0 when the run has it, else its lowest worker (a run that rank 0 did
        not write: XGBoost's ``ranks=[1]``, a DDP job's ``writer.ranks: [2]``). A worker given that
        the run does not have is a ValueError (:class:`~tripwire.ConfigError`) naming its workers;
        with ``worker=None``, a tensor that worker holds no value of while others do is a
        :class:`~tripwire.TensorNotFoundError` naming them (:meth:`_tensor_reader`)."""
        worker = self._tensor_reader(tensor, worker, mode)
        try:
            return super().series(tensor, reduction, self._tensor_mode(tensor, mode, worker), worker)
        except TensorNotFoundError as exc:
            hint = self._kept_hint(tensor, reduction) if self.has_tensor(tensor) else ""
            if hint:
                raise TensorNotFoundError(f"{exc}{hint}") from None
            raise

    def _kept_hint(self, tensor: str, reduction: Any) -> str:
        """Why ``tensor`` has no ``reduction`` stored, from the run's config, as a hint to append to the
        error that says so ("" where the config does not tell): a collection of it that the config does
        not list was added by the rules, which keep only the reductions they read (trial 31e: with
        ``rules: [all_zero]`` the gradients held zero_fraction alone, and ``value("l2", s)`` did not say
        why), one it lists does not keep that reduction."""
        if not isinstance(reduction, str) or not _reduction_name(reduction) or reduction in self.reductions(tensor):
            return ""
        config = self.config if isinstance(self.config, dict) else {}
        listed = config.get("collections")
        cols = dict(listed) if isinstance(listed, dict) else {str(c): None for c in listed} \
            if isinstance(listed, list) else {}
        mine = self.tensor_collections(tensor)
        added = [c for c in mine if c not in cols]
        rules = [r.get("name") if isinstance(r, dict) else r for r in config.get("rules") or ()]
        rules = [str(r) for r in rules if r]
        if added and rules:
            c = added[0]
            return (f"; the run's config does not list collection {c!r}: its rules ({', '.join(rules)}) added it, "
                    f"keeping only the reductions they read; to keep {reduction!r} too, list the collection with its "
                    f"reductions in the config (collections: {{{c}: {{reductions: [{reduction}, ...]}}}}, beside the "
                    f"others: a collections mapping is the whole set), or give include_collections=[{c!r}] for its "
                    f"built-in defaults; the rules add theirs to either")
        lacking = []
        for c in mine:
            spec = cols.get(c)
            kept = spec.get("reductions") if isinstance(spec, dict) else None
            if isinstance(kept, list) and not holds_reduction(map(str, kept), reduction):
                lacking.append((c, ", ".join(map(str, kept)) or "no reduction"))
        if len(lacking) == 1:
            (c, kept), = lacking
            return f"; the run's config keeps {kept} of collection {c!r}: add {reduction!r} to collections.{c}.reductions to keep it"
        if lacking:
            # (trial 35a: a tensor in two collections was pointed at the first by name, whose schedule
            # did not save the step read): each collection keeps its reductions at its own steps
            keeps = " and ".join(f"{kept} of collection {c!r}" for c, kept in lacking)
            where = " or ".join(f"collections.{c}.reductions" for c, _ in lacking)
            return (f"; the run's config keeps {keeps}: add {reduction!r} to the reductions of the collection whose "
                    f"steps you read ({where}; each collection keeps its reductions at the steps of its own save)")
        return ""

    def tensor_names(self, collection: str | None = None, regex: str | None = None, *, mode: str | None = None,
                     step: int | None = None, worker: int | None = None) -> list[str]:
        """As :meth:`History.tensor_names`; a worker given that the run does not have is a ValueError
        (:class:`~tripwire.ConfigError`) naming its workers."""
        if worker is not None:
            worker = self._reader_worker(worker)
        return super().tensor_names(collection, regex, mode=mode, step=step, worker=worker)

    def value(self, tensor: str, reduction: str, step: int, mode: str | None = None,
              worker: int | None = None) -> float | None:
        """As :meth:`History.value`; ``mode=None``: the tensor's own mode, ``worker=None``: rank 0 or
        the lowest worker (both as :meth:`series`). The order is (tensor, reduction, step): a step
        given before a reduction's name is a ConfigError that says so (smdebug's order)."""
        if isinstance(step, str) and _reduction_name(step) and not isinstance(reduction, str):
            raise ConfigError(f"value({tensor!r}, {reduction!r}, {step!r}): the order is (tensor, reduction, step): "
                              f"run.value({tensor!r}, {step!r}, {reduction!r}) (smdebug's reduction_value(step, name) "
                              f"puts the step first)")
        worker = self._tensor_reader(tensor, worker, mode)
        if not self.has_tensor(tensor):
            self._check_held(tensor)
        return super().value(tensor, reduction, step, self._tensor_mode(tensor, mode, worker), worker)

    def latest(self, tensor: str, reduction: str = "raw", mode: str | None = None,
               worker: int | None = None) -> tuple[int, float] | None:
        """As :meth:`History.latest`; ``mode=None``: the tensor's own mode, ``worker=None``: rank 0 or
        the lowest worker (both as :meth:`series`).

        A tensor the run does not hold is a :class:`~tripwire.TensorNotFoundError`, as :meth:`series`
        and :meth:`tensor` raise, with a "did you mean" (trial 32a F1: ``run.latest`` and ``run.value``
        of a misspelled name were None, even in a complete run); a tensor the run holds has None
        where it has no value (at that step, in that mode). On a run still written (status
        ``running``) a tensor not captured yet (a validation metric before the first validation) is
        not held either: ``run.has_tensor(name)`` says whether it is, ``run.refresh()`` reads the
        records written since. Rules keep their None for a tensor not captured yet: a session's
        rules read its :class:`History`, ``tripwire watch``'s a view over the run that reads through
        :meth:`History.latest` and :meth:`History.value`, not these."""
        worker = self._tensor_reader(tensor, worker, mode)
        if not self.has_tensor(tensor):
            self._check_held(tensor)
        return super().latest(tensor, reduction, self._tensor_mode(tensor, mode, worker), worker)

    def _check_held(self, tensor: str) -> None:
        """:meth:`value`'s and :meth:`latest`'s TensorNotFoundError for a tensor the run does not hold
        (:meth:`_check_tensor`'s), saying on a run still written that such a tensor may come."""
        try:
            self._check_tensor(tensor)
        except TensorNotFoundError as exc:
            if self.status != "running":
                raise
            raise TensorNotFoundError(
                f"{exc}; the run is still being written (status 'running'): a tensor it holds no value of yet "
                f"(a validation metric before the first validation) is not in it until then: run.has_tensor(name) "
                f"says whether it is, run.refresh() reads the records written since") from None

    def add_step(self, mode: str, step: int, worker: int, wall_time: float,
                 scalars: list[tuple[str, tuple[str, ...]]], values: np.ndarray,
                 arrays: Iterable[tuple[str, str, ArrayLike]] = (), declare: dict[str, list[str]] | None = None,
                 global_step: int = -1) -> None:
        """Refused: a Run is read-only (a TypeError saying so; trial 32a F7: :meth:`History.add_step`,
        inherited, changed what the reader returned). A :class:`History` takes records."""
        raise TypeError(self._read_only("add_step"))

    def add_steps(self, mode: str, steps: Sequence[int], worker: int, wall_times: Sequence[float],
                  scalars: list[tuple[str, tuple[str, ...]]], rows: np.ndarray,
                  global_steps: Sequence[int] | None = None) -> None:
        """Refused, as :meth:`add_step`."""
        raise TypeError(self._read_only("add_steps"))

    def _read_only(self, name: str) -> str:
        return (f"Run.{name}: a Run is read-only (a stored run, read from {str(self.path)!r}); accepted: its readers "
                f"(run.refresh() reads the records its training wrote since); to add records in memory, use a "
                f"tripwire.History (History().{name}(...)), which a training's Session fills")


    def steps(self, mode: str = "train", worker: int | None = None) -> list[int]:
        """As :meth:`History.steps` (``worker=None``: the steps of any worker); a worker the run does
        not have is a ValueError naming its workers. ``mode=None`` is a ConfigError that says why:
        steps are numbered per mode (smdebug's ``trial.steps()`` counts every mode's together)."""
        if mode is None:  # (trial 29b: "mode: got None" alone, to an smdebug user's trial.steps())
            raise ConfigError(
                "mode: got None; accepted: one of train, eval, test, predict (default: train). Each mode numbers "
                "its own steps (eval step 3 is the third validation batch, not train step 3), so the steps of "
                "all modes together mean nothing: run.steps('eval') gives eval's, run.modes() the modes the run "
                "has, and run.train_steps('eval') the train step each eval step came after")
        if worker is not None:
            worker = self._reader_worker(worker)
        return super().steps(mode, worker)

    def array_steps(self, tensor: str, kind: str = "raw", mode: str | None = None,
                    worker: int | None = None) -> list[int]:
        """As :meth:`History.array_steps` (``mode=None``: the tensor's own mode, ``worker=None``: rank 0
        or the lowest worker, both as :meth:`series`); a worker the run does not have is a
        ValueError naming its workers."""
        worker = self._tensor_reader(tensor, worker, mode)
        return super().array_steps(tensor, kind, self._tensor_mode(tensor, mode, worker), worker)

    def array(self, tensor: str, step: int, kind: str = "raw", mode: str | None = None,
              worker: int | None = None) -> np.ndarray:
        """As :meth:`History.array` (``mode=None``: the tensor's own mode, ``worker=None``: rank 0 or
        the lowest worker, both as :meth:`series`); a worker the run does not have is a ValueError
        naming its workers."""
        worker = self._tensor_reader(tensor, worker, mode)
        return super().array(tensor, step, kind, self._tensor_mode(tensor, mode, worker), worker)

    def histogram(self, tensor: str, step: int, mode: str | None = None,
                  worker: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`History.histogram`; ``mode=None``: the tensor's own mode, ``worker=None``: rank 0
        or the lowest worker (both as :meth:`series`)."""
        worker = self._tensor_reader(tensor, worker, mode)
        return super().histogram(tensor, step, self._tensor_mode(tensor, mode, worker), worker)

    def dataframe(self) -> Any:
        """The whole run in one long pandas table (needs pandas): one row a scalar value, columns
        ``step, mode, worker, tensor, reduction, value, superseded``, in write order (as
        :meth:`History.dataframe`, ``mode``, ``tensor`` and ``reduction`` categorical).

        ``superseded`` (bool) is True for a value of a record that a later writing session went back
        over: a resume from a checkpoint older than the run's last records, or a later training
        appended into the same ``out_dir``, wrote that step again (or never ran it again): the record
        of the training that wrote last is the one :meth:`value` and ``TensorView.dataframe()`` read
        (``tripwire._history.live_records``, attempts told by the records' global steps going back,
        as ``tripwire watch`` and a resumed session's rules tell them). ``df[~df.superseded]`` holds
        each step once per tensor, reduction, mode and worker (a step written twice in a row by one
        training, an epoch summary at its last batch's step, keeps both), so that a ``pivot_table``
        or ``groupby("step").mean()`` does not average a stale value with the current one (trial 31c
        #2). A step the crash interrupted may hold only some of its tensors in the superseded record:
        a tensor it lacks holds that step once, in the resumed record, which is not superseded."""
        frame = super().dataframe()
        frame["superseded"] = self._superseded_rows()
        return frame

    def _record_tensors(self, mode: str, worker: int, places: Iterable[int]) -> set[str]:
        """The tensors with scalar values in the records of ``mode`` by ``worker`` at ``places``
        (their indices in write order, as :meth:`wall_times` lists them): what ``tripwire inspect``
        compares a step's records of two writing sessions by."""
        rec = self._rec
        mine = np.flatnonzero((rec["mode"].view() == self._mode_index.get(mode, -1))
                              & (rec["worker"].view() == worker))
        wanted = np.isin(rec["pos"].view()[mine], np.fromiter(places, dtype=np.int64))
        out: set[str] = set()
        for layout in np.unique(rec["layout"].view()[mine[wanted]]).tolist():
            out.update(self._keys[k][0] for k in self._layouts[layout].tolist())
        return out

    def _superseded_rows(self) -> np.ndarray:
        """:meth:`dataframe`'s ``superseded`` column: per scalar value, in :meth:`scalar_columns`'
        order (each record's values in turn, records in write order), whether a later writing session
        went back over its record."""
        from ._history import gone_back_over, live_records

        rec = self._rec
        layout = rec["layout"].view()
        lens = np.asarray([len(ids) for ids in self._layouts], dtype=np.int64)[layout]
        modes, workers, places = rec["mode"].view(), rec["worker"].view(), rec["pos"].view()
        over = np.zeros(len(layout), dtype=bool)
        ordered = {w: self._records_in_order(w) for w in {w for _, w in self._wall}}
        for (mode, worker), _ in list(self._wall.items()):
            steps = self.wall_times(mode, worker)[0]
            found = ordered.get(worker)
            if found is not None and mode in found[3]:
                # (a later writing session goes back over a record of any mode from the global step it
                # began at on: trial 42l, the sessions told apart per mode missed a second training's)
                dead = gone_back_over(found[0])[found[3][mode]]
            elif len(steps) >= 2:
                dead = ~live_records(steps)  # (records without global steps: as their steps say)
            else:
                continue
            if not dead.any():
                continue
            mine = np.flatnonzero((modes == self._mode_index.get(mode, -1)) & (workers == worker))
            over[mine] = dead[places[mine]]
        return np.repeat(over, lens)

    def stop_requests(self) -> list[dict[str, Any]]:
        """Stop requests written by ``tripwire watch`` (see :func:`request_stop`)."""
        return read_stop_requests(self.path)

    def __getattr__(self, name: str) -> Any:
        raise _no_attribute(self, name, _SMDEBUG_RUN)


def open_run(path: str | os.PathLike[str]) -> Run:
    """Open a stored run (a local directory; a URL such as ``s3://...`` is RunNotFoundError) for
    reading. CorruptRunError names a damaged file; damage that leaves the rest readable is a
    warning (see :class:`Run`)."""
    if path is None or not isinstance(path, (str, os.PathLike)):
        raise RunNotFoundError(
            f"open_run: path={path!r}; accepted: a run directory (a str or path). A callback's out_dir is None "
            f"before its training began, and in the process that launched Lightning's ddp_spawn (the run was "
            f"claimed in the spawned ones): give the callback out_dir= to know it everywhere")
    return Run(path)


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first bytes of a SQLite file (a tuning journal): how ``tripwire report`` and :func:`open_run`
tell a journal from another file."""


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    """What changes when a file is replaced (renamed over, or removed and written again)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


ANY_RULE = "*"
"""The key of :attr:`Run.rule_inputs` (and of what an integration binds) under which the names an
integration chose for each default are, for any rule (one only ``tripwire watch --config`` has)."""


REQUEST_STOP_SOURCE = "request_stop"
"""The ``source`` of a finding that a session wrote for a stop asked with :func:`request_stop`
(where the finding kept the default ``in-process``)."""

CHECK_SOURCE = "check"
"""The ``source`` of a finding that no rule made, recorded with ``Session.record_finding``: an
integration's own check (Keras's ``loss_output_mismatch``, XGBoost's ``eval_is_train``,
Lightning's ``distributed_stop``), where the finding kept the default ``in-process``. ``tripwire
watch`` tells the checks of a run by it (trial 27c2: they looked exactly like rule findings and were
told by their names; a run written before the mark still is)."""


def append_finding_line(path: Path, finding: Finding) -> None:
    """Append one finding as a JSON line to the findings file ``path`` of a run (its folder made if
    needed; one write, fsynced): where no run writer of this process writes it (``tripwire watch``,
    a rank that ``writer.ranks`` leaves out)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(finding.to_dict(), allow_nan=True) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(line)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def request_stop(run_dir: str | os.PathLike[str], finding: Finding, *, recorded: bool = False) -> None:
    """Ask the in-process session of a running training to stop: it stops at the first step after it
    reads the request, and it looks for one at most once a second (so after up to a second of
    training; docs/format.md). A DDP fit (Lightning) takes it at the next point where its ranks agree
    on a stop, a train save step or a validation end: up to a save interval later (docs/lightning.md).

    The session that honours the request writes ``finding`` to the run's findings (once: the
    session of the finding's ``worker``, else of the lowest worker running; ``source``
    ``request_stop`` where the finding kept the default ``in-process``), so that
    ``open_run(...).findings`` and ``tripwire inspect`` hold what stopped the training.
    ``recorded=True``: the finding is in the run's findings already (``tripwire watch`` wrote it to
    its own file, or a training recorded it): it is not written again.

    The request (``control/stop.json``) says when it was made (``requested``, wall time), the run
    (``run_id``) and the worker sessions running then (``sessions``: ``{worker: start time}``, from
    the worker meta files): it applies only to those. A session that started (or reopened) after it
    was made (a resumed fit, a second training into the same ``out_dir``) ignores it, with an INFO
    line, instead of stopping at its first step for an earlier training's finding. A directory that
    holds no run (no ``run.json``: a mistyped path) is a :class:`~tripwire.RunNotFoundError`."""
    from ._writer import atomic_write_json

    if not isinstance(recorded, bool):
        raise ConfigError(f"recorded: got {recorded!r}; accepted: True (the finding is in the run already) or False")
    run_dir = Path(run_dir)
    if not (run_dir / RUN_FILE).is_file():
        # (trial 43a: a mistyped path made a directory there and a request no training reads, without a word)
        if run_dir.is_file():  # (trial 43f: a run's run.json given, or another file)
            parent = f" (its folder {str(run_dir.parent)!r} is a run)" if (run_dir.parent / RUN_FILE).is_file() else ""
            why = f"it is a file{parent}"
        else:
            why = "the directory does not exist" if not run_dir.exists() else f"{RUN_FILE} is missing"
        raise RunNotFoundError(f"request_stop: no tripwire run at {str(run_dir)!r}: {why}; accepted: the directory "
                               f"of a run (a training's out_dir, where its {RUN_FILE} is)")
    request: dict[str, Any] = {"finding": finding.to_dict(), "requested": time.time()}
    try:
        run_id = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8")).get("run_id")
    except (OSError, ValueError, AttributeError):
        run_id = None
    if run_id is not None:
        request["run_id"] = str(run_id)
    sessions: dict[str, float] = {}
    ended = {p.name.split(".")[0] for p in (run_dir / WORKERS_DIR).glob("worker-*.end.json")}
    for meta in sorted((run_dir / WORKERS_DIR).glob("worker-*[0-9].json")):
        if meta.stem in ended:
            continue  # (that worker's training ended: no session of it to stop)
        try:
            started = json.loads(meta.read_text(encoding="utf-8")).get("started")
            worker = int(meta.stem.split("-")[1])
        except (OSError, ValueError, AttributeError, IndexError):
            continue
        if isinstance(started, (int, float)):
            sessions[str(worker)] = float(started)
    if sessions:
        request["sessions"] = sessions
    if not recorded:
        # trial 20a: a stop asked by hand left its finding in the session only (open_run(...).findings
        # was empty under "worker 0 stopped: ..."): the session of this worker writes it, once
        ranks = sorted(int(w) for w in sessions)
        request["record_by"] = int(finding.worker) if not ranks or int(finding.worker) in ranks else ranks[0]
    control = run_dir / CONTROL_DIR
    control.mkdir(parents=True, exist_ok=True)
    atomic_write_json(control / "stop.json", request)


def read_stop_requests(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The stop request of a run (``[]``: none): ``finding``, ``requested`` (when it was made; a
    file written before requests held the time: its modification time), and, where known,
    ``run_id``, ``sessions`` and ``record_by`` (the worker whose session writes the finding to the
    run; absent: the finding is in the run already; see :func:`request_stop`). A damaged file is
    CorruptRunError."""
    path = Path(run_dir) / CONTROL_DIR / "stop.json"
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return []
    try:
        data = _load_json(path)
    except FileNotFoundError:  # (removed just now)
        return []
    if not isinstance(data, dict):
        raise CorruptRunError(f"{path}: damaged, holds {type(data).__name__} where a JSON object belongs")
    if not isinstance(data.get("requested"), (int, float)):
        data["requested"] = mtime
    return [data]

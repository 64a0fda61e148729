"""Plotting a stored run: ``tripwire.plot(run, tensors)`` and ``tripwire plot RUN TENSOR ...``.

One matplotlib Axes: x the step, y one scalar reduction of each tensor, one line per tensor and
worker, the run's findings as dotted vertical lines. matplotlib is the ``plot`` extra
(``pip install 'tripwire[plot]'``), imported on the first call only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from ._config import MODES, url_refusal
from ._errors import ConfigError, TensorNotFoundError, TripwireError, missing_extra
from ._format import RUN_FILE
from ._history import holds_reduction
from ._run import Run, headline_reduction, open_run
from ._validate import did_you_mean

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Characters that make a tensor name that is not in the run look like a regular expression.
_REGEX_CHARS = frozenset("*+?[]()|^$\\{}")
#: Series with at most this many points are drawn with a marker on each value (one eval value is
#: otherwise invisible).
_MARKER_MAX_POINTS = 100
_FINDING_GID = "tripwire-finding"
#: The y scales :func:`plot` takes (``--yscale``), matplotlib's names for them (``ax.set_yscale``).
YSCALES = ("linear", "log", "symlog")


@dataclass(frozen=True)
class _Line:
    tensor: str
    reduction: str
    mode: str
    worker: int
    steps: np.ndarray
    values: np.ndarray


def _matplotlib() -> ModuleType:
    try:
        import matplotlib
        import matplotlib.figure  # noqa: F401  (what plot() and the CLI draw on)
    except ImportError as exc:
        raise missing_extra("matplotlib", "plot", exc) from exc
    return matplotlib


def default_reduction(run: Run, tensor: str) -> str:
    """The reduction :func:`plot` draws when none is given: ``raw`` for a scalar (losses, metrics,
    learning rates), else ``l2`` when stored, else the first stored one (alphabetical)."""
    red = headline_reduction(run.reductions(tensor))
    if red is not None:
        return red
    arrays = run.array_kinds(tensor)
    raise TensorNotFoundError(
        f"tensor {tensor!r} has no scalar reduction to plot; stored: none"
        f"{' (arrays: ' + ', '.join(arrays) + '; read them with run.array / run.histogram)' if arrays else ''}; "
        f"save a reduction for its collection (reductions: [l2])"
    )


def _select(run: Run, tensors: str | re.Pattern[str] | Sequence[str]) -> list[str]:
    """Tensor names, in the order given: a name, a list of names, or a compiled regex (every
    tensor it ``search``es, sorted)."""
    if isinstance(tensors, re.Pattern):
        names = [n for n in run.tensor_names() if tensors.search(n)]
        if not names:
            have = run.tensor_names()
            raise TensorNotFoundError(
                f"tensors: no tensor matches the regex {tensors.pattern!r}; "
                f"available: {', '.join(have[:50]) or 'none'}{' ...' if len(have) > 50 else ''}"
            )
        return names
    if isinstance(tensors, str):
        tensors = [tensors]
    if not isinstance(tensors, Sequence) or not tensors or not all(isinstance(t, str) for t in tensors):
        raise ConfigError(
            f"tensors: got {tensors!r}; accepted: a tensor name, a non-empty list of names, "
            f"or a compiled regex (re.compile(...))"
        )
    out: list[str] = []
    for name in tensors:
        if name in out:
            continue
        try:
            run.tensor(name)
        except TensorNotFoundError as exc:
            if _REGEX_CHARS & set(name):
                raise TensorNotFoundError(
                    f"{exc}; names are matched exactly: to select tensors by regular expression pass "
                    f"re.compile({name!r})"
                ) from None
            raise
        out.append(name)
    return out


def _workers(run: Run, worker: int | None) -> list[int]:
    have = run.workers
    if worker is None:
        return have
    known = run.known_workers()
    if isinstance(worker, bool) or not isinstance(worker, (int, np.integer)) or int(worker) not in known:
        raise ConfigError(
            f"worker: got {worker!r}; accepted: one of the run's workers "
            f"({', '.join(map(str, known)) or 'none'}) or None (all)"
        )
    if int(worker) not in have:  # (trial 41h: a rank closed before its first record was "not one of the run's workers")
        raise ConfigError(f"worker: got {worker!r}, which has written no step record (a training still starting, or "
                          f"one that ended before its first): nothing to plot; the run's workers with records: "
                          f"{', '.join(map(str, have)) or 'none'}")
    return [int(worker)]


def _last_per_step(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One point per step, in step order: the value written last at each (what ``run.value`` gives).

    A run that a second training appended to (the same out_dir twice), or a resume past a crash,
    holds some steps twice; its series in write order drew a segment back from the last step to the
    first, and mixed stale values with new ones in one line (trial 20a)."""
    if len(steps) < 2 or bool(np.all(steps[1:] > steps[:-1])):
        return steps, values
    unique, first_in_reverse = np.unique(steps[::-1], return_index=True)  # (sorted; the last written)
    return unique, values[::-1][first_in_reverse]


def _lines(run: Run, names: list[str], reduction: str | None, mode: str | None, workers: list[int]) -> list[_Line]:
    """The series to draw, read (and so validated) before anything is drawn."""
    if reduction is not None and not isinstance(reduction, str):
        raise ConfigError(f"reduction: got {reduction!r}; accepted: a reduction name (l2, mean, raw, ...) or None")
    if mode is not None and mode not in MODES:
        raise ConfigError(f"mode: got {mode!r}; accepted: {', '.join(MODES)} or None (each tensor's own)"
                          f"{did_you_mean(str(mode), MODES)}")
    out: list[_Line] = []
    for name in names:
        red = reduction if reduction is not None else default_reduction(run, name)
        have = run.reductions(name)
        if not holds_reduction(have, red):  # (abs_l2 reads l2; a threshold however written: trial 37a)
            arrays = run.array_kinds(name)
            raise TensorNotFoundError(
                f"tensor {name!r} has no reduction {red!r}{did_you_mean(red, have)}; "
                f"stored: {', '.join(have) or 'none'}"
                f"{' (arrays, not plottable: ' + ', '.join(arrays) + ')' if arrays else ''}"
            )
        view = run.tensor(name)
        found = 0
        for w in workers:
            m = view._mode(mode, w)  # train when it has values there, else its one mode
            steps, values = _last_per_step(*run.series(name, red, m, w))
            if len(steps):
                out.append(_Line(name, red, m, w, steps, values))
                found += 1
        if not found:
            modes = sorted({m for w in workers for m in view.modes(w)}, key=MODES.index)
            # (trial 43a: a tensor only rank 1 wrote, plotted for worker 0, read "modes with values: none")
            others = [w for w in run.workers if w not in workers and view.modes(w)]
            elsewhere = (f"; {'worker' if len(others) == 1 else 'workers'} {', '.join(map(str, others))} "
                         f"{'holds' if len(others) == 1 else 'hold'} it: pass worker={others[0]}" if others else "")
            raise TensorNotFoundError(
                f"tensor {name!r} has no {red!r} values in mode {mode or 'train'!r} "
                f"({'worker' if len(workers) == 1 else 'workers'} {', '.join(map(str, workers))}); modes with values: "
                f"{', '.join(modes) or 'none'}{elsewhere}"
            )
    return out


def plot(
    run: Run | str | os.PathLike[str],
    tensors: str | re.Pattern[str] | Sequence[str],
    reduction: str | None = None,
    *,
    mode: str | None = None,
    worker: int | None = None,
    ax: Axes | None = None,
    findings: bool = True,
    label: str | None = None,
    yscale: str = "linear",
) -> Axes:
    """Plot tensors of a stored run against the step; return the matplotlib Axes.

    ``run``: a :class:`Run` or the run's directory. ``tensors``: a tensor name or a list of names
    (matched exactly), or a compiled regex (``re.compile("weight")``: every tensor it searches,
    sorted). ``reduction``: one for every tensor; default per tensor ``raw`` for a scalar (losses,
    metrics, learning rates), else ``l2`` when stored, else the first stored one. ``mode``: default
    each tensor's own (``train`` when it has values there, else its one mode, as
    :class:`TensorView`). ``worker``: default every worker, one line each. ``ax``: draw into this
    Axes (default a new ``pyplot`` figure). ``findings``: draw the run's findings of the plotted
    modes as dotted vertical lines labelled with the rule name, once per rule and step in an Axes
    (a run drawn into it again does not draw them twice), each label beside its line where it
    overlaps no other (findings at one step or at nearby steps, of this run or of other runs drawn
    into ``ax``: left of its line, else right, then further out). ``label``: put before each line's label and each
    finding's (``"healthy: loss"``, ``"healthy: exploding_gradient"``), to tell runs drawn into
    one ``ax`` apart (default none).
    ``yscale``: the y axis's scale, matplotlib's ``linear`` (default), ``log`` (a series growing by
    orders of magnitude, a diverging loss, reads as a line, not a spike) or ``symlog`` (log away
    from 0, linear within matplotlib's ``linthresh``, 2: values <= 0 too). ``log`` with a finite
    value <= 0 to draw raises a ``ConfigError`` naming the tensor, the value and its step (and
    ``symlog``): matplotlib would draw such a point clipped to the axis's bottom edge, without a word.

    A line is labelled with the tensor name, plus in parentheses its reduction when the lines'
    reductions differ (not ``raw``), its mode when not ``train``, ``worker N`` when several workers
    are plotted, and where its series holds values that are not finite (NaN, inf), which are not
    drawn: ``NaN/inf from step 2500`` (to its end), ``NaN/inf at 3 steps from step 40``; each range of
    such steps is shaded grey and an ``x`` in the line's colour marks its first step, at the last
    finite value before it. The y label is the reduction (``value`` for raw values and mixed
    reductions).
    Every series is read before anything is drawn: an unknown tensor, reduction, mode or worker
    raises (``TensorNotFoundError``, ``ConfigError``) naming what there is, leaving ``ax`` untouched;
    an ``ax`` that is no matplotlib Axes (nor None) is a ``ConfigError`` naming it.
    """
    _matplotlib()
    if not isinstance(run, Run):
        run = open_run(run)
    if not isinstance(findings, bool):
        raise ConfigError(f"findings: got {findings!r}; accepted: True or False")
    if label is not None and not isinstance(label, str):
        raise ConfigError(f"label: got {label!r}; accepted: a string or None")
    if not isinstance(yscale, str) or yscale not in YSCALES:
        raise ConfigError(f"yscale: got {yscale!r}; accepted: {', '.join(YSCALES)}"
                          f"{did_you_mean(str(yscale), YSCALES)}")
    if ax is not None:
        from matplotlib.axes import Axes

        if not isinstance(ax, Axes):  # (trial 33f L1: ax=5 was "'int' object has no attribute 'plot'")
            raise ConfigError(f"ax: got {ax!r} ({type(ax).__name__}); accepted: a matplotlib Axes "
                              f"(fig.add_subplot(), plt.subplots()[1]) or None (a new pyplot figure)")
    lines = _lines(run, _select(run, tensors), reduction, mode, _workers(run, worker))
    if yscale == "log":
        _check_positive(lines)
    modes = {ln.mode for ln in lines}
    # what an earlier call drew into ``ax`` sets its x axis (trial 36h: val_loss drawn after loss into one
    # Axes sat at its own eval steps, 0..3, beside a train line over train steps 0..39)
    prior = _X_AXIS.get(ax) if ax is not None else None
    if prior is not None and prior not in ("train", "train+") and modes != {prior}:
        raise ConfigError(
            f"ax: it holds {prior} values drawn alone, at their own {prior} steps ({prior} batches), where "
            f"{', '.join(sorted(modes))} values cannot be drawn on the same x axis; draw them in one call "
            f"(plot(run, [...]): modes other than train at the train step they followed) or into another Axes")
    from matplotlib.ticker import MaxNLocator

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots()
    mixed = len({ln.reduction for ln in lines}) > 1
    several = len({ln.worker for ln in lines}) > 1
    # eval/test/predict steps count that mode's batches: beside train lines (of this call, or drawn
    # into ax before) they are drawn at the train step they followed (History.train_steps), not at
    # their own count
    at_train = ("train" in modes and len(modes) > 1) or (prior in ("train", "train+") and modes != {"train"})
    for ln in lines:
        extra = [ln.reduction] if mixed and ln.reduction != "raw" else []
        extra += [ln.mode] if ln.mode != "train" else []
        extra += [f"worker {ln.worker}"] if several else []
        x, y = ln.steps, ln.values
        if at_train and ln.mode != "train":
            x = _train_steps_before(run, ln.mode, ln.worker, ln.steps)
            order = np.argsort(x, kind="stable")  # (x increasing also where a later training evaluated elsewhere)
            x, y = x[order], y[order]
        bad = ~np.isfinite(y)
        if bad.any():  # (trial 31c #5: a series that went NaN just ended, nothing said where or why)
            extra.append(_nonfinite_text(x, bad))
        # (a name of over 80 characters, cut in its middle: trial 41h, a 311-character name's legend covered the
        # axis and the layout collapsed)
        shown = ln.tensor if len(ln.tensor) <= 80 else f"{ln.tensor[:38]}...{ln.tensor[-39:]}"
        name = shown + (f" ({', '.join(extra)})" if extra else "")
        name = f"{label}: {name}" if label else name
        drawn = ax.plot(x, y, label=name, marker="o" if len(ln.steps) <= _MARKER_MAX_POINTS else None,
                        markersize=3)[0]
        if bad.any():
            _mark_nonfinite(ax, x, y, bad, drawn.get_color())
    if findings:
        _draw_findings(run, ax, modes, at_train, label)
    axis = "train+" if at_train or prior == "train+" else "train" if modes == {"train"} else next(iter(modes))
    _X_AXIS[ax] = axis
    ax.set_xlabel("train step (other modes at the train step they followed)" if axis == "train+"
                  else "step" if axis == "train" else f"{axis} step ({axis} batches)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are integers
    ax.set_ylabel("value" if mixed or lines[0].reduction == "raw" else lines[0].reduction)
    if yscale != "linear":
        ax.set_yscale(yscale)
    ax.legend(loc="best", fontsize="small")
    return ax


#: The gid of what marks a series' values that are not finite (:func:`_mark_nonfinite`).
_NONFINITE_GID = "tripwire-nonfinite"


def _nonfinite_runs(x: np.ndarray, bad: np.ndarray) -> list[tuple[float, float]]:
    """``(first x, last x)`` of each run of consecutive values that are not finite (``bad``), in order."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], bad.astype(np.int8), [0]))))
    return [(float(x[a]), float(x[b - 1])) for a, b in zip(edges[::2].tolist(), edges[1::2].tolist())]


def _step_text(x: float) -> str:
    return f"{x:g}" if x != int(x) else str(int(x))


def _nonfinite_text(x: np.ndarray, bad: np.ndarray) -> str:
    """What a line's label adds where its series holds values that are not finite (NaN, inf):
    ``NaN/inf from step 2500`` (every value from there on), else ``NaN/inf at 3 steps from step
    2500``, ``NaN/inf at step 7`` (one)."""
    first = _step_text(float(x[np.argmax(bad)]))
    n = int(bad.sum())
    if bool(bad[int(np.argmax(bad)):].all()) and n > 1:
        return f"NaN/inf from step {first}"
    return f"NaN/inf at step {first}" if n == 1 else f"NaN/inf at {n} steps from step {first}"


#: the step ranges shaded as not finite in each Axes (:func:`_mark_nonfinite`), each shaded once
_SPANS: weakref.WeakKeyDictionary[Any, dict[tuple[float, float], Any]] = weakref.WeakKeyDictionary()


def _mark_nonfinite(ax: Axes, x: np.ndarray, y: np.ndarray, bad: np.ndarray, color: str) -> None:
    """Show where a drawn series is not finite (NaN, inf: matplotlib draws no point there, and the
    line just ends or breaks): each run of such values shaded grey, from its first step to its last
    (half a step either side of one alone; a range several lines share, once), and an ``x`` in the
    line's colour at its first step, at the value before it (the last finite one; the first after it
    where none came before): the step where the series turned non-finite (trial 31c #5)."""
    finite = np.flatnonzero(~bad)
    spans = _SPANS.setdefault(ax, {})
    for start, end in _nonfinite_runs(x, bad):
        lo, hi = (start - 0.5, end + 0.5) if start == end else (start, end)
        if (lo, hi) not in spans or spans[(lo, hi)] not in ax.patches:
            # (once per range in an Axes: the lines that went NaN together, gradients and loss, share it)
            spans[(lo, hi)] = ax.axvspan(lo, hi, color="0.5", alpha=0.15, linewidth=0, gid=_NONFINITE_GID,
                                         label="_nonfinite")
        at = int(np.flatnonzero(x == start)[0]) if np.any(x == start) else int(np.argmax(bad))
        before = finite[finite < at]
        after = finite[finite > at]
        near = before[-1] if len(before) else after[0] if len(after) else None
        if near is None:  # (no finite value at all: nothing to put the mark at)
            continue
        ax.scatter([start], [float(y[near])], marker="x", s=49, linewidths=1.5, color=color, zorder=3,
                   gid=_NONFINITE_GID, label="_nonfinite")


def _check_positive(lines: list[_Line]) -> None:
    """Refuse a log y scale for series that hold a finite value <= 0 (trial 26d asked for a log
    scale; matplotlib would clip such points to the axis's bottom edge, silently): the first one named."""
    for ln in lines:
        bad = np.flatnonzero(np.isfinite(ln.values) & (ln.values <= 0))
        if len(bad):
            where = ", ".join([ln.reduction, *([ln.mode] if ln.mode != "train" else []), f"worker {ln.worker}"])
            raise ConfigError(
                f"yscale: got 'log', but {ln.tensor!r} ({where}) has {len(bad)} value(s) <= 0, the first "
                f"{float(ln.values[bad[0]]):g} at step {int(ln.steps[bad[0]])}, which a log scale cannot draw; "
                f"accepted for such values: 'symlog' (log away from 0, linear near it) or 'linear'")


def _train_steps_before(run: Run, mode: str, worker: int, steps: np.ndarray) -> np.ndarray:
    """For each step of ``mode``, the train step it came after (:meth:`History.train_steps`; the
    first train step for one before any), as floats for the x axis."""
    return _at_first(run, worker, run.train_steps(mode, steps, worker))


def _train_step_at(run: Run, worker: int, walls: np.ndarray) -> np.ndarray:
    return _at_first(run, worker, run._train_step_at(walls, worker))


def _at_first(run: Run, worker: int, at: np.ndarray) -> np.ndarray:
    """``at`` as floats, -1 (before the first train record) drawn at the first train step; NaN
    where the worker has no train record."""
    train_steps, train_walls = run.wall_times("train", worker)
    if not len(train_steps):
        return np.full(len(at), np.nan)
    first = float(train_steps[int(np.argmin(train_walls))])
    return np.where(at < 0, first, at).astype(np.float64)


#: The findings' labels drawn into each Axes, by (run directory, label, rule, x): a run drawn into
#: one Axes again (another tensor, another scale) does not draw its findings twice, while the label
#: drawn is still there (an Axes cleared with ``ax.cla()`` draws them again).
#: What each Axes' x axis holds after a call drew into it: ``train`` (train steps), ``train+`` (train
#: steps, other modes at the train step they followed) or a mode drawn alone at its own steps.
_X_AXIS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_DRAWN: weakref.WeakKeyDictionary[Any, dict[tuple[str, str | None, str, float], Any]] = weakref.WeakKeyDictionary()


def _draw_findings(run: Run, ax: Axes, modes: set[str], at_train: bool = False, label: str | None = None) -> None:
    """Each finding of ``modes`` as a dotted vertical line at its step with the rule's name
    (``label: rule`` with a ``label``), once per rule and step. Each label is put beside its line
    where it overlaps no label already in ``ax`` (of this run, or of others drawn into it before):
    against the line's left, else its right, then one label's height further out on either side in
    turn (:func:`_place_label`). Trial 25d: two rules at one step were drawn on top of each other;
    trial 28f: two runs' same rule at one step; trial 31c #5: findings at nearby steps (2500 and 2520
    of 2695) were staggered only at one step, and overlapped."""
    drawn = _DRAWN.setdefault(ax, {})
    where = os.path.realpath(run.path)
    todo: list[tuple[tuple[str, str | None, str, float], float, str]] = []
    for f in run.findings:
        if f.kind != "finding" or f.mode not in modes:
            continue
        x = float(f.step)
        if at_train and f.mode != "train":
            # the train step the session stored with the finding (trial 27d); by wall time where none
            after = f.details.get("train_step")
            if isinstance(after, int) and not isinstance(after, bool) and after >= 0:
                x = float(after)
            else:
                x = float(_train_step_at(run, int(f.worker), np.asarray([f.wall_time]))[0])
        key = (where, label, f.rule, x)
        if np.isnan(x) or (key in drawn and drawn[key] in ax.texts) or any(k == key for k, _, _ in todo):
            continue
        name = f"{label}: {f.rule}" if label else f.rule
        ax.axvline(x, linestyle=":", color="0.35", linewidth=1, gid=_FINDING_GID, label=f"_finding {name}")
        todo.append((key, x, name))
    if not todo:
        return
    # (the lines first: they may widen the x axis; the labels are placed at its scale)
    per_inch = _x_per_inch(ax)
    for key, x, name in sorted(todo, key=lambda d: d[1]):  # (by step: the first on its line's left, the next right)
        drawn[key] = _place_label(ax, x, name, per_inch)


def _x_per_inch(ax: Axes) -> float:
    """Data units of x per inch of the Axes as it is now (its x limits and width; a figure laid out
    later, or data drawn into it after, change it a little)."""
    lo, hi = ax.get_xlim()
    width = ax.get_position().width * ax.figure.get_figwidth()
    return abs(hi - lo) / width if width > 0 and hi != lo else 1.0


def _label_span(k: int, size: float) -> tuple[str, float, float, float]:
    """The ``k``-th place of a finding's label beside its line, a label ``size`` points high:
    ``(ha, offset, lo, hi)``, the offset of its anchor from the line and the x extent of the rotated
    label about the line, in inches: the line's left (k 0), its right 1 point clear (1), then one
    label's height further out each pair, left and right in turn."""
    height = 1.3 * size / 72.0
    if k == 0:
        return "right", 0.0, -height, 0.0
    away = (1.0 + (k // 2) * 1.3 * size) / 72.0
    if k % 2:
        return "left", away, away, away + height
    return "right", -away, -away - height, -away


def _place_label(ax: Axes, x: float, name: str, per_inch: float) -> Any:
    """Draw a finding's label at its line ``x`` in the first place (:func:`_label_span`) that
    overlaps none of the findings' labels already in ``ax`` at the scale ``per_inch`` (data units of
    x per inch); return the text."""
    from matplotlib.transforms import ScaledTranslation

    text = ax.text(x, 0.98, f" {name}", transform=ax.get_xaxis_transform(), rotation=90, va="top",
                   ha="right", fontsize="small", color="0.35", gid=_FINDING_GID)
    size = text.get_fontsize()
    taken = []
    for t in ax.texts:
        span = getattr(t, "_tripwire_span", None)
        if t is not text and t.get_gid() == _FINDING_GID and span is not None:
            at = t.get_position()[0] / per_inch
            taken.append((at + span[0], at + span[1]))
    here = x / per_inch
    k = 0
    while True:
        ha, offset, lo, hi = _label_span(k, size)
        if not any(here + lo < b - 1e-9 and a < here + hi - 1e-9 for a, b in taken):
            break
        k += 1
    text.set_horizontalalignment(ha)
    if offset:
        text.set_transform(ax.get_xaxis_transform() + ScaledTranslation(offset, 0, ax.figure.dpi_scale_trans))
    text._tripwire_span = (lo, hi)  # type: ignore[attr-defined]
    return text


# -------------------------------------------------------------------------------------- CLI
_STEM_MAX = 200  # bytes of a default file name's stem (file systems allow 255 bytes a name)


def default_out(run_dir: str | os.PathLike[str], tensor: str) -> Path:
    """``RUN/plots/<tensor, every character but letters, digits, '.', '-' and '_' replaced by '_'>.png``
    (a --regex such as ``gradients/.*weight`` made a file name with a ``*``: trial 18a); a name of
    over 200 bytes is cut there and ends with 8 hex digits of a hash of the whole name (trial 41h: a
    311-character tensor name was "File name too long", exit 2)."""
    stem = re.sub(r"[^\w.-]", "_", tensor).strip(".")
    if len(stem.encode("utf-8")) > _STEM_MAX:
        digest = hashlib.blake2b(tensor.encode("utf-8"), digest_size=4).hexdigest()
        stem = stem.encode("utf-8")[:_STEM_MAX - 9].decode("utf-8", "ignore") + "-" + digest
    return Path(run_dir) / "plots" / (stem + ".png")


_ACCEPTED_OUT = ("accepted: an image path whose existing parent is a directory you can write to (missing parent "
                 "directories are created)")


def _out_flag(out: Path, given: bool) -> str:
    return "--out" if given else f"--out (default {str(out)!r})"


def _check_out(out: Path, given: bool) -> None:
    """Refuse an image path that cannot be written because of what exists on it: the path itself a
    directory, or an ancestor a file (trial 22k: ``[Errno 17] File exists: 'bad/afile.txt'``, naming
    neither --out nor what it accepts). Missing parent directories are created when it is written."""
    if out.is_dir():
        raise ConfigError(f"{_out_flag(out, given)}: got {str(out)!r}, which is a directory; {_ACCEPTED_OUT}")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"{_out_flag(out, given)}: got {str(out)!r}, but {str(parent)!r} is a file, not a "
                                  f"directory; {_ACCEPTED_OUT}")
            return


def _check_run_first(run: str) -> None:
    """Raise what :func:`open_run` raises for a RUN that is no run (missing, a file, a remote URL, a
    directory without ``run.json``) before ``--out`` is checked: the default ``--out`` lies inside RUN,
    and a RUN that was a file was reported as a bad ``--out (default ...)``, a flag not given (trial
    27c). A RUN holding ``run.json`` is not read here (``--out`` is still checked before it is)."""
    if not (Path(run) / RUN_FILE).is_file():
        open_run(run)  # (raises RunNotFoundError naming what RUN is)


def _title(path: Path) -> str:
    """The run directory's name as the figure's title: the name of the absolute path, so that RUN
    ``.`` or ``..`` is titled with the directory's own name (trial 27c: ``Path('.').name`` is '', no
    title); the whole path for a root directory, which has no name."""
    absolute = Path(os.path.abspath(path))
    return absolute.name or str(absolute)


def _check_worker(run: Run, worker: int | None) -> None:
    """``--worker`` in the CLI's words: the Python API's ``None (all)`` is no value a shell user can
    pass (trial 27c); leaving the flag out is."""
    known = run.known_workers()  # (trial 41h: a rank that closed before its first record, which inspect lists)
    if worker is not None and worker not in known:
        raise ConfigError(f"--worker: got {worker}; accepted: one of the run's workers "
                          f"({', '.join(map(str, known)) or 'none'}), or leave --worker out (every worker, "
                          f"one line each)")


def _handle(args: argparse.Namespace) -> int:
    from ._cli import error_text, os_error_text

    try:
        _matplotlib()
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        _check_run_first(args.run)
        fig = Figure(figsize=(9, 5), layout="constrained")
        FigureCanvasAgg(fig)  # Agg: no display needed, no pyplot state
        if args.out is not None:  # (trial 28f: s3://b/x.png was written to a local ./s3:/b/x.png, exit 0)
            remote = url_refusal(args.out, "write the image locally and copy it")
            if remote is not None:
                raise ConfigError(f"--out: got {args.out!r}; accepted: a local image path ({remote})")
        out = Path(args.out) if args.out is not None else default_out(args.run, args.tensors[0])
        kinds = fig.canvas.get_supported_filetypes()
        if args.out is not None and str(args.out).endswith(("/", os.sep)):  # (trial 24h: 'outdir/' was quoted 'outdir')
            raise ConfigError(f"--out: got {args.out!r}, which names a directory; {_ACCEPTED_OUT}")
        if out.suffix.lstrip(".").lower() not in kinds:
            _check_out(out, args.out is not None)  # (a directory is named so: trial 24d, "not a .png path")
            raise ConfigError(f"--out: got {str(out)!r}; accepted: a path ending in .png "
                              f"(or {', '.join('.' + k for k in sorted(kinds) if k != 'png')})")
        _check_out(out, args.out is not None)  # (before the run is read and drawn)
        tensors: Any = args.tensors
        if args.regex:
            for t in args.tensors:  # each apart: the error's position is in the user's own pattern
                try:
                    re.compile(t)
                except re.error as exc:
                    raise ConfigError(f"--regex: got {t!r}; accepted: a regular expression ({exc})") from None
            tensors = re.compile(args.tensors[0] if len(args.tensors) == 1 else
                                 "|".join(f"(?:{t})" for t in args.tensors))
        run = open_run(args.run)
        _check_worker(run, args.worker)
        try:
            ax = plot(run, tensors, args.reduction, mode=args.mode, worker=args.worker, ax=fig.add_subplot(),
                      yscale=args.yscale)
        except ConfigError as exc:
            if str(exc).startswith("yscale: "):  # (the option's own name)
                raise ConfigError(f"--{exc}") from None
            raise
        except TensorNotFoundError as exc:
            text = str(exc)
            if "by regular expression pass re.compile(" in text:
                text = text[:text.index("pass re.compile(")] + "add --regex"
            text = text.replace("pass mode=, one of them", "pass --mode, one of them")  # (trial 36h: the option)
            if args.regex:  # the user's patterns, not the one they were joined into (trial 22k: '(?:nomatch)')
                text = text.replace(f"the regex {tensors.pattern!r}",
                                    f"the regex {' or '.join(repr(t) for t in args.tensors)} (--regex, re.search)")
            raise TensorNotFoundError(text) from None
        ax.set_title(_title(run.path), fontsize="medium")
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(out)
        except OSError as exc:
            raise ConfigError(f"{_out_flag(out, args.out is not None)}: cannot write {str(out)!r} "
                              f"({exc.strerror or exc}); {_ACCEPTED_OUT}") from None
    except TripwireError as exc:  # (one line, as every verb: trial 27c)
        print(f"tripwire plot: error: {error_text(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # (a run file that cannot be read: a directory in its place, no permission)
        print(f"tripwire plot: error: {os_error_text(exc)}", file=sys.stderr)
        return 2
    print(out)
    return 0


def register(subparsers: Any) -> None:
    """Add ``tripwire plot`` to the CLI."""
    from ._cli import EXIT_BAD_INPUT, exit_codes, typed

    p = subparsers.add_parser(
        "plot",
        help="plot tensors of a stored run against the step (PNG; needs tripwire[plot])",
        description=(
            "Plot one scalar reduction of each TENSOR (exact names) against the step, one line per "
            "tensor and worker, the run's findings as dotted vertical lines; write the image and print "
            "its path (missing parent directories of --out are created)."
        ),
        epilog=exit_codes("0 written", EXIT_BAD_INPUT),
    )
    p.add_argument("run", help="the run directory")
    p.add_argument("tensors", nargs="+", metavar="TENSOR", help="tensor names (see tripwire inspect RUN --tensors)")
    p.add_argument("--regex", action="store_true",
                   help="each TENSOR is a regular expression: every tensor it searches (sorted)")
    p.add_argument("--reduction", default=None,
                   help="the reduction to plot (default per tensor: raw for scalars, else l2, else the first stored)")
    p.add_argument("--mode", default=None, choices=MODES, help="the mode (default: each tensor's own, train first)")
    p.add_argument("--worker", type=typed(int, "a worker number of the run, an integer >= 0"), default=None,
                   help="only this worker (default: every worker, one line each)")
    p.add_argument("--yscale", default="linear", choices=YSCALES,
                   help="the y axis's scale, as matplotlib names it (default linear; log: a series growing by orders "
                        "of magnitude; symlog: log that takes values <= 0 too, linear near 0)")
    p.add_argument("--out", default=None,
                   help="the image file (default RUN/plots/<first TENSOR, characters other than letters, digits, '.', '-' "
                        "and '_' replaced by '_'>.png; .svg, .pdf work too; missing directories are created)")
    p.set_defaults(func=_handle)


__all__ = ["YSCALES", "default_out", "default_reduction", "plot", "register"]

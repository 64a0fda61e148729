"""Similar across runs: this run's values differ from another (reference) run's at the same steps.

Condition: ``|a_s - b_s| > atol + rtol * |b_s|`` for a tensor matching ``tensors`` (full match) and its
``reduction``, at a step ``s`` stored by both runs in the same mode and worker (``a``: this run, ``b``:
the run at ``other``) with ``e_prev < s <= e`` (``e``: the step evaluated, ``e_prev``: the one before,
per mode and worker; at the first evaluation every step up to ``e``, from ``start_step`` on), reported at
the first such ``s``.
Steps between evaluations hold the training loss kept at every step: runs whose losses differ at
step 1 are reported at step 1 when the save step 5 is evaluated, as ``tripwire watch`` reports it
replaying the run step by step. With ``every`` above 1, the steps after the last evaluation are
compared when the training ends (the session's ``close()`` or ``new_training()``, ``tripwire watch``
at the end of a finished run): one more evaluation at the last step of each mode, whatever
``every``. Use it to check that a change (a refactor, a new framework version, another machine) did
not alter training, or that a seeded run is reproducible.

What it cannot compare is said, never passed over: a step of this run that the reference run does
not hold (a run longer than the reference, a tensor or a worker the reference lacks) in a WARNING,
once per tensor, at the first evaluation that meets one; and where the rule compared nothing at all
(``tensors`` matches no tensor of this run, a misspelled ``lss``, with a "did you mean"; the tensors it
matches are none of the reference run's; the two runs share no step of them), a WARNING when the
session closes, and ``tripwire watch`` exits 3 for it ("had nothing to read"), as for a loss rule's
``loss`` that matches nothing.

Defaults: ``other`` (required: the directory of a stored run), ``tensors="loss"``, ``reduction="raw"``,
``rtol=1e-5``, ``atol=1e-8``, mode ``train``.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import ConfigError, TensorNotFoundError
from .._format import RUN_FILE
from .._history import History
from .._validate import check_float, check_str, did_you_mean
from .._config import is_valid_reduction
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_regex, fmt, fmt_apart, fmt_vs, matching_tensors, names_in
from ._registry import register_rule

logger = logging.getLogger("tripwire")


@register_rule
class SimilarAcrossRuns(BuiltinRule):
    """Values that differ from a reference run (see the module docstring)."""

    name = "similar_across_runs"
    summary = "this run's values differ from a reference run's at the same steps"
    default_modes = ("train",)
    #: each evaluation compares every step since the one before: a session's end and ``tripwire
    #: watch`` evaluate it at the last step where ``every`` left steps after its last evaluation
    looks_back = True

    def __init__(self, other: str | os.PathLike[str] | None = None, tensors: str = "loss", reduction: str = "raw",
                 rtol: float = 1e-5, atol: float = 1e-8, **common: Any) -> None:
        super().__init__(**common)
        if isinstance(other, os.PathLike):
            other = os.fspath(other)
        if other is None:
            raise ConfigError(f"{self.name}.other: got None; accepted: the directory of a stored tripwire run (a "
                              "required parameter: the reference run to compare with)")
        self.other = check_str(other, f"{self.name}.other")
        if not (Path(self.other) / RUN_FILE).is_file():
            raise ConfigError(
                f"{self.name}.other: got {self.other!r}, which is not a tripwire run ({RUN_FILE} missing); "
                "accepted: the directory of a stored tripwire run"
            )
        self.tensors = check_regex(tensors, f"{self.name}.tensors")
        self.reduction = check_str(reduction, f"{self.name}.reduction")
        if self.reduction != "raw" and not is_valid_reduction(self.reduction):
            raise ConfigError(f"{self.name}.reduction: got {self.reduction!r}; accepted: raw or a reduction name (l2, mean, ...)")
        self.rtol = check_float(rtol, f"{self.name}.rtol", minimum=0.0)
        self.atol = check_float(atol, f"{self.name}.atol", minimum=0.0)
        self._other: Any = None
        self._checked: dict[str, int] = {}  # "mode/worker" -> the last step evaluated
        # the tensors whose steps the reference lacks, said in a WARNING (once each; trial 32e F3)
        self._said_missing: set[str] = set()

    def requirements(self) -> list[Requirement]:
        if self.reduction == "raw":
            return [Requirement("losses", reductions=("raw",), modes=self.modes)]
        return []

    def _reference(self) -> Any:
        from .._run import open_run

        if self._other is None:
            self._other = open_run(self.other)
        else:
            self._other.refresh()
        return self._other

    def check(self, history: History, step: int, mode: str) -> Any:
        names = matching_tensors(history, self.tensors)
        if not names:
            return NO_DATA
        ref = self._reference()
        seen = False
        first: tuple[int, str, int, float, float] | None = None  # (step, tensor, worker, a, b)
        for worker in self.workers(history):
            key = f"{mode}/{worker}"
            # every step since the last evaluation, not the evaluated step alone (trial 21b: the loss
            # kept at every step differed at step 1, the save steps 0 and 5 agreed: no finding in the
            # training, where tripwire watch found step 1); the first evaluation reads every step so far
            last: float | None = self._checked.get(key, -math.inf)
            if last is not None and last >= step:
                last = None  # a step counter that went back (a new fit): this step alone
            elif last is not None:  # not into the warm-up (trial 23m, as exploding_tensor)
                last = max(last, self.look_back_floor(mode))
            self._checked[key] = step
            for n in names:
                shared = worker in ref.workers and ref.has_tensor(n)
                try:
                    mine = _window(*history.series(n, self.reduction, mode, worker), last, step)
                except TensorNotFoundError:
                    if shared:  # (a reduction this run did not store: the rule's error, as always)
                        raise
                    continue
                if not mine:
                    continue
                theirs = _window(*ref.series(n, self.reduction, mode, worker), last, step) if shared else {}
                if len(theirs) < len(mine):
                    self._say_missing(ref, n, mode, worker, sorted(set(mine) - set(theirs)))
                common = sorted(set(mine) & set(theirs))
                if not common:
                    continue
                seen = True
                a = np.array([mine[s] for s in common])
                b = np.array([theirs[s] for s in common])
                with np.errstate(invalid="ignore"):
                    same = (a == b) | (np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= self.atol + self.rtol * np.abs(b))
                bad = np.flatnonzero(~same)
                if len(bad) and (first is None or common[bad[0]] < first[0]):
                    i = int(bad[0])
                    first = (common[i], n, worker, float(a[i]), float(b[i]))
        if first is not None:
            s, n, worker, a_s, b_s = first
            shown_a, shown_b = fmt_apart(a_s, b_s)  # (trial 23m: "is 1 ..., the reference run has 1")
            diff, tol = abs(a_s - b_s), self.atol + self.rtol * abs(b_s)
            return self.finding(
                s, mode,
                f"{n} ({self.reduction}) is {shown_a} at step {s}, the reference run {self.other} has {shown_b} "
                f"(difference {fmt_vs(diff, tol)[0]}, tolerance {fmt(self.atol)} + {fmt(self.rtol)} x |reference| = "
                f"{fmt_vs(tol, diff)[0]}). "
                "The runs diverged: check seeds, data order, nondeterministic kernels, and what changed "
                "between them (code, versions, hardware).",
                tensors=[n], value=a_s, reference=b_s, worker=worker,
            )
        return None if seen else NO_DATA

    def _say_missing(self, ref: Any, tensor: str, mode: str, worker: int, steps: list[int]) -> None:
        """Say once per tensor, in a WARNING, that the reference run lacks ``steps`` of ``tensor``
        that this run holds (in ``mode``, by ``worker``): they are not compared (trial 32e F3: a run
        of 40 steps against a reference of 30 passed with steps 30 to 39 never compared, in silence)."""
        if tensor in self._said_missing:
            return
        self._said_missing.add(tensor)
        if worker not in ref.workers:
            held = f"it holds no record of worker {worker} (its workers: {', '.join(map(str, ref.workers)) or 'none'})"
        elif not ref.has_tensor(tensor):
            held = f"it holds no tensor {tensor!r}"
        else:
            try:
                at = ref.series(tensor, self.reduction, mode, worker)[0]
            except TensorNotFoundError:
                at = np.zeros(0, dtype=np.int64)
            held = (f"it holds {tensor} ({self.reduction}, {mode}) at {_steps_text(at.tolist())}" if len(at)
                    else f"it holds no {mode} value of {tensor} ({self.reduction})")
        logger.warning(
            "tripwire: rule %r: the reference run %s holds no value of %s (%s, %s, worker %d) at %s of this run (%s): "
            "a step of this run that the reference run lacks is not compared (said once for %s)",
            self.name, self.other, tensor, self.reduction, mode, worker, _steps_text(steps), held, tensor)

    def nothing_read(self, history: History) -> str | None:
        """Why the rule compared nothing in ``history`` (the session says it when it closes, and
        ``tripwire watch`` exits 3 for it), None where it compared a step: ``tensors`` matches no
        tensor of this run (a misspelled name: a "did you mean" among its tensors), the tensors it
        matches are none of the reference run's, or the two runs hold them at no common step (in
        the rule's modes, from ``start_step`` on). Trial 32e F3: ``tensors: lss`` compared nothing
        between runs that differed at every step, and the session and ``tripwire watch`` passed them
        in silence. None too where this run holds no tensor at all, or (``reduction`` raw) no
        ``losses`` collection: said elsewhere ("had nothing to read")."""
        held = history.tensor_names()
        if not held:
            return None
        head = f"rule {self.name!r}: tensors={self.tensors!r}"
        names = matching_tensors(history, self.tensors)
        if not names and self.reduction == "raw" and not names_in(history, "losses"):
            return None  # (no losses collection at all: the session's "had nothing to read" says it)
        if not names:
            return (f"{head} matches no tensor of this run{did_you_mean(self.tensors, held)} (captured: "
                    f"{_names_text(held)}); the rule compared nothing")
        try:
            ref = self._reference()
        except (OSError, ValueError) as exc:  # (a reference run removed since the rule was built)
            return f"{head}: the reference run {self.other} could not be read ({exc}); the rule compared nothing"
        shared = [n for n in names if ref.has_tensor(n)]
        if not shared:
            return (f"{head} matches {_names_text(names)} of this run, which the reference run {self.other} does not "
                    f"hold (it holds: {_names_text(ref.tensor_names())}); the rule compared nothing")
        workers = [w for w in self.workers(history) if w in ref.workers]
        if not workers:
            return (f"{head}: the reference run {self.other} holds no record of worker "
                    f"{', '.join(map(str, self.workers(history)))} (its workers: "
                    f"{', '.join(map(str, ref.workers)) or 'none'}); the rule compared nothing")
        mine_at: list[int] = []
        theirs_at: list[int] = []
        for worker in workers:
            for mode in self.modes:
                for n in shared:
                    try:
                        mine = history.series(n, self.reduction, mode, worker)[0]
                        theirs = ref.series(n, self.reduction, mode, worker)[0]
                    except TensorNotFoundError:
                        continue
                    mine = mine[mine >= self.start_step]
                    if len(np.intersect1d(mine, theirs)):
                        return None
                    mine_at += mine.tolist()
                    theirs_at += theirs.tolist()
        if not mine_at:
            return None  # (this run holds no value of them to compare: the session's other notes say why)
        return (f"{head}: this run holds {_names_text(shared)} ({self.reduction}, {', '.join(self.modes)}) at "
                f"{_steps_text(sorted(set(mine_at)))}, the reference run {self.other} at "
                f"{_steps_text(sorted(set(theirs_at))) if theirs_at else 'none'}: no step of both, so the rule "
                f"compared nothing")

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "checked": dict(self._checked)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._checked = {str(k): int(v) for k, v in state.get("checked", {}).items()}


def _window(steps: np.ndarray, values: np.ndarray, after: float | None, upto: int) -> dict[int, float]:
    """``{step: value}`` of a series' steps with ``after < step <= upto`` (``after=None``: ``upto``
    alone); a step written twice (a resume past a crash) has the value written last."""
    if not len(steps):
        return {}
    keep = (steps == upto) if after is None else (steps > after) & (steps <= upto)
    return dict(zip(steps[keep].tolist(), values[keep].tolist()))


def _names_text(names: list[str], most: int = 5) -> str:
    """``names`` for a message: the first ``most``, then how many more."""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _steps_text(steps: list[int]) -> str:
    """Ascending ``steps`` for a message: ``step 30``, ``steps 30 to 39`` (consecutive), else the
    first and last with how many (``12 steps from 30 to 95``)."""
    if not steps:
        return "no step"
    if len(steps) == 1:
        return f"step {steps[0]}"
    if steps[-1] - steps[0] == len(steps) - 1:
        return f"steps {steps[0]} to {steps[-1]}"
    return f"{len(steps)} steps from {steps[0]} to {steps[-1]}"

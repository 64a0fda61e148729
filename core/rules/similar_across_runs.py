"""Similar across runs: this run's values differ from another (reference) run's at the same steps.

Condition: ``|a_s - b_s| > atol + rtol * |b_s|`` for a tensor matching ``tensors`` (full match) and its
``reduction``, at a step ``s`` stored by both runs in the same mode and worker (``a``: this run, ``b``:
the run at ``other``) with ``e_prev < s <= e`` (``e``: the step evaluated, ``e_prev``: the one before,
per mode and worker; at the first evaluation every step up to ``e``, from ``start_step`` on), reported at
the first such ``s``.
Steps between evaluations hold the training loss kept at every step: runs whose losses differ at
step 1 are reported at step 1 when the save step 5 is evaluated, as ``tripwire watch`` reports it
replaying the run step by step. Use it to check that a change (a refactor, a new framework version, another
machine) did not alter training, or that a seeded run is reproducible.

Defaults: ``other`` (required: the directory of a stored run), ``tensors="loss"``, ``reduction="raw"``,
``rtol=1e-5``, ``atol=1e-8``, mode ``train``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import ConfigError
from .._format import RUN_FILE
from .._history import History
from .._validate import check_float, check_str
from .._config import is_valid_reduction
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_regex, fmt, fmt_apart, matching_tensors
from ._registry import register_rule


@register_rule
class SimilarAcrossRuns(BuiltinRule):
    """Values that differ from a reference run (see the module docstring)."""

    name = "similar_across_runs"
    summary = "this run's values differ from a reference run's at the same steps"
    default_modes = ("train",)

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
            if worker not in ref.workers:
                continue
            for n in names:
                if not ref.has_tensor(n):
                    continue
                mine = _window(*history.series(n, self.reduction, mode, worker), last, step)
                if not mine:
                    continue
                theirs = _window(*ref.series(n, self.reduction, mode, worker), last, step)
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
            return self.finding(
                s, mode,
                f"{n} ({self.reduction}) is {shown_a} at step {s}, the reference run {self.other} has {shown_b} "
                f"(difference {fmt(abs(a_s - b_s))}, tolerance {fmt(self.atol)} + {fmt(self.rtol)} x |reference|). "
                "The runs diverged: check seeds, data order, nondeterministic kernels, and what changed "
                "between them (code, versions, hardware).",
                tensors=[n], value=a_s, reference=b_s, worker=worker,
            )
        return None if seen else NO_DATA

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

"""Similar across runs: this run's values differ from another (reference) run's at the same steps.

Condition: ``|a_s - b_s| > atol + rtol * |b_s|`` for a tensor matching ``tensors`` (full match) and its
``reduction``, at a step ``s`` stored by both runs in the same mode and worker (``a``: this run, ``b``:
the run at ``other``). Use it to check that a change (a refactor, a new framework version, another
machine) did not alter training, or that a seeded run is reproducible.

Defaults: ``other`` (required: the directory of a stored run), ``tensors="loss"``, ``reduction="raw"``,
``rtol=1e-5``, ``atol=1e-8``, mode ``train``.
"""

from __future__ import annotations

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
from ._common import NO_DATA, BuiltinRule, check_regex, fmt, matching_tensors
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
            raise ConfigError(f"{self.name}.other: got None; accepted: the directory of a stored tripwire run")
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
        for worker in self.workers(history):
            for n in names:
                steps, values = history.series(n, self.reduction, mode, worker)
                if not len(steps) or steps[-1] != step:
                    continue
                if not ref.has_tensor(n) or worker not in ref.workers:
                    continue
                rsteps, rvalues = ref.series(n, self.reduction, mode, worker)
                idx = np.flatnonzero(rsteps == step)
                if not len(idx):
                    continue
                seen = True
                a, b = float(values[-1]), float(rvalues[idx[-1]])
                if (np.isnan(a) and np.isnan(b)) or a == b:
                    continue
                if not abs(a - b) <= self.atol + self.rtol * abs(b):
                    return self.finding(
                        step, mode,
                        f"{n} ({self.reduction}) is {fmt(a)} at step {step}, the reference run {self.other} has {fmt(b)} "
                        f"(difference {fmt(abs(a - b))}, tolerance {fmt(self.atol)} + {fmt(self.rtol)} x |reference|). "
                        "The runs diverged: check seeds, data order, nondeterministic kernels, and what changed "
                        "between them (code, versions, hardware).",
                        tensors=[n], value=a, reference=b, worker=worker,
                    )
        return None if seen else NO_DATA

"""Exploding tensor: a NaN or an infinity appeared in a captured tensor.

Condition: ``nonfinite_count(t) > 0`` (scalars: ``not isfinite(t)``; a tensor stored without its
``nonfinite_count``: a non-finite statistic, its ``l2`` norm for one, or a non-finite element of it
where it is stored whole, as predictions are) for a tensor ``t`` of ``collections``
captured at a step ``s`` with ``e_prev < s <= e`` (``e``: the step evaluated, ``e_prev``: the one before,
per mode and worker; at the first evaluation every step up to ``e``; never a step before ``start_step``:
the warm-up is not looked back into), reported at the first such ``s``. With ``only_nan=True`` only NaN
counts: a NaN element of a tensor stored whole, else ``isnan(abs_mean(t))`` (captured for the
collections named in ``collections``; where it was not stored, the first stored of ``abs_max``, ``max``,
``min``, ``l2``, ``l1``, ``abs_sum``), which only a NaN element makes NaN: a tensor holding ``+inf``
and ``-inf`` but no NaN does not count. Where a tensor has only ``mean``, ``sum``, ``std`` or ``variance``
stored, a NaN of those counts, which infinities alone give too, and the message says so. Steps between evaluations hold the training loss kept at every step:
a loss that turned NaN at step 23 is reported at step 23 when the save step 25 is evaluated, as
``tripwire watch`` reports it replaying the run step by step.

Defaults: ``collections=None`` (every captured collection but ``optimizer`` and ``hyperparameters``;
requires only ``losses``),
``only_nan=False``, modes ``train`` and ``eval``, severity ``critical``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._finding import Finding
from .._history import History
from .._validate import check_bool
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_collections, names_in, scalar_kind, value_at
from ._registry import register_rule


#: Without ``nonfinite_count``, the reductions read (first found first): a NaN value makes each of them
#: NaN (gradients kept for ``vanishing_gradient`` hold only their ``l2`` norm: MXNet's relu turns NaN
#: inputs into 0, the loss stays finite, and a NaN gradient norm at step 0 was the only sign).
_VALUE_REDUCTIONS = ("raw", "mean", "l2", "l1", "sum", "std", "variance", "min", "max", "abs_mean", "abs_max", "abs_sum")
#: Reductions that are NaN only where an element is NaN (an infinity makes them infinite), read
#: with ``only_nan`` first (trial 23m).
_NAN_ONLY = ("abs_mean", "abs_max", "max", "min", "l2", "l1", "abs_sum")
#: Reductions that are NaN for infinities alone (+inf beside -inf; std and variance: any inf), read
#: with ``only_nan`` only when none of the others was stored.
_INF_MAKES_NAN = ("mean", "sum", "std", "variance")
#: Not scanned unless named: derived values (an update ratio of a zero-initialised tensor is +inf).
_DERIVED = ("optimizer", "hyperparameters")


def _nonfinite(array: np.ndarray, only_nan: bool) -> int:
    """How many elements of a stored array are NaN (``only_nan``) or non-finite (0 for integers)."""
    a = np.asarray(array)
    if a.dtype.kind not in "fc":
        return 0
    return int(np.count_nonzero(np.isnan(a) if only_nan else ~np.isfinite(a)))


@register_rule
class ExplodingTensor(BuiltinRule):
    """NaN/Inf in any captured tensor (see the module docstring)."""

    name = "exploding_tensor"
    summary = "a NaN or an infinity appeared in a captured tensor (loss, gradients, weights, ...)"
    default_modes = ("train", "eval")
    reads_any = True  # each of its collections is judged on its own
    default_severity = "critical"

    def __init__(self, collections: Sequence[str] | None = None, only_nan: bool = False, **common: Any) -> None:
        super().__init__(**common)
        self.collections = check_collections(collections, f"{self.name}.collections", allow_none=True)
        self.only_nan = check_bool(only_nan, f"{self.name}.only_nan")
        self._checked: dict[str, int] = {}  # "mode/worker" -> the last step examined

    def requirements(self) -> list[Requirement]:
        cols = self.collections or ("losses",)
        out = []
        for c in cols:
            if c in ("labels", "predictions"):
                continue
            # (only_nan: abs_mean, NaN only where an element is NaN; a mean is NaN for +inf beside -inf too)
            reds = ("raw",) if scalar_kind(c) else ("nonfinite_count", "mean") + (("abs_mean",) if self.only_nan else ())
            out.append(Requirement(c, reductions=reds, modes=tuple(m for m in self.modes) or ("train",)))
        return out

    def check(self, history: History, step: int, mode: str) -> Any:
        seen_any = False
        for worker in self.workers(history):
            key = f"{mode}/{worker}"
            # the first evaluation reads every step so far: a loop whose first step is no save step
            # (steps from 1) keeps losses before it, and a NaN there went unjudged, even at close()
            last = self._checked.get(key, -1)
            if last >= step:
                last = None  # a step counter that went back (a new fit): this step alone
            else:  # not into the warm-up (trial 23m: a NaN at step 3 was reported with start_step 5)
                last = max(last, self.look_back_floor(mode))
            self._checked[key] = step
            for s in history.steps_between(mode, last, step, worker) or [step]:
                found = self._check_step(history, s, mode, worker)
                if isinstance(found, Finding):
                    return found
                seen_any = seen_any or found
        return None if seen_any else NO_DATA

    def _check_step(self, history: History, step: int, mode: str, worker: int) -> Finding | bool:
        """A finding for the first non-finite tensor at ``step``, else whether anything was seen."""
        cols = self.collections or tuple(c for c in history.collections() if c not in _DERIVED)
        seen_any = False
        for col in cols:
            for name in names_in(history, col):
                reds = history.reductions(name)
                if "nonfinite_count" in reds:
                    n = value_at(history, name, "nonfinite_count", step, mode, worker)
                    if n is None:
                        continue
                    seen_any = True
                    if self.only_nan:  # a NaN element (trial 23m: a mean is NaN for +inf beside -inf too)
                        red = next((r for r in _NAN_ONLY + _INF_MAKES_NAN if r in reds), None)
                        v = value_at(history, name, red, step, mode, worker) if red is not None and n > 0 else None
                        if v is not None and math.isnan(v):
                            what = ("NaN" if red in _NAN_ONLY else f"NaN, or both +inf and -inf (a {red} of nan)" if red in ("mean", "sum")
                                    else f"NaN, or an infinite value (a {red} of nan)")  # (trial 23r: std of one +inf)
                            return self._found(step, mode, name, f"{what} ({int(n)} non-finite values in all)", worker)
                    elif n > 0:
                        return self._found(step, mode, name, f"{int(n)} non-finite values", worker)
                else:  # a scalar's value, or what the tensor's statistics say (a NaN anywhere makes them NaN)
                    stored = [r for r in _VALUE_REDUCTIONS if r in reds]
                    if self.only_nan:  # the statistics that only a NaN element makes NaN, where stored
                        stored = [r for r in stored if r not in _INF_MAKES_NAN] or stored
                    for red in stored:
                        v = value_at(history, name, red, step, mode, worker)
                        if v is None:
                            continue
                        seen_any = True
                        if math.isnan(v) or (not self.only_nan and math.isinf(v)):
                            what = (f"the value {v}" if red == "raw" else f"a mean of {v}" if red == "mean"
                                    else f"a non-finite {red} statistic ({v}): NaN or infinite values")
                            if self.only_nan and red in _INF_MAKES_NAN:  # (trial 23r: a std is nan for one +inf)
                                what = (f"a {red} of nan: NaN, or both +inf and -inf" if red in ("mean", "sum")
                                        else f"a {red} of nan: NaN, or an infinite value")
                            elif self.only_nan and red != "raw":
                                what = f"NaN (its {red} is nan)"
                            return self._found(step, mode, name, what, worker)
                    if step in history.array_steps(name, "raw", mode, worker):  # stored whole (trial 19a)
                        seen_any = True
                        bad = _nonfinite(history.array(name, step, "raw", mode, worker), self.only_nan)
                        if bad:
                            return self._found(step, mode, name, f"{bad} {'NaN' if self.only_nan else 'non-finite'} "
                                                                 f"values", worker)
        return seen_any

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "checked": dict(self._checked)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._checked = {str(k): int(v) for k, v in state.get("checked", {}).items()}

    def _found(self, step: int, mode: str, name: str, what: str, worker: int) -> Finding:
        return self.finding(
            step, mode,
            f"{name} holds {what} at step {step} ({mode}). Usual causes: a learning rate far too high, "
            "log(0) or division by zero in the loss, NaN in the input data, or overflow in float16; "
            "lower the learning rate, clip gradients, add an epsilon to log/divisions, check the inputs.",
            tensors=[name], worker=worker,
        )

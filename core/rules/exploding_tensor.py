"""Exploding tensor: a NaN or an infinity appeared in a captured tensor.

Condition: ``nonfinite_count(t) > 0`` (scalars: ``not isfinite(t)``; a tensor stored without its
``nonfinite_count``: a non-finite statistic, its ``l2`` norm for one, or a non-finite element of it
where it is stored whole, as predictions are) for a tensor ``t`` of ``collections``
captured at a step ``s`` with ``e_prev < s <= e`` (``e``: the step evaluated, ``e_prev``: the one before,
per mode and worker; at the first evaluation every step up to ``e``; never a step before ``start_step``:
the warm-up is not looked back into), reported at the first such ``s``, naming the first such tensor
there in the order inputs, labels, losses, metrics, predictions, activations, gradients, weights,
biases (the others after, by name), and within a collection in the order its tensors were captured
(network order for parameters): a NaN label before the loss it made NaN, the loss before its
gradients, the first layer's gradient before the next's. With ``only_nan=True`` only NaN
counts: a NaN element of a tensor stored whole, else ``isnan(abs_mean(t))`` (captured for the
collections named in ``collections``; where it was not stored, the first stored of ``abs_max``, ``max``,
``min``, ``l2``, ``l1``, ``abs_sum``), which only a NaN element makes NaN: a tensor holding ``+inf``
and ``-inf`` but no NaN does not count. Where a tensor has only ``mean``, ``sum``, ``std`` or ``variance``
stored, a NaN of those counts, which infinities alone give too, and the message says so. Steps between evaluations hold the training loss kept at every step:
a loss that turned NaN at step 23 is reported at step 23 when the save step 25 is evaluated, as
``tripwire watch`` reports it replaying the run step by step. With ``every`` above 1, the steps after
the last evaluation are judged when the training ends (the session's ``close()`` or
``new_training()``, ``tripwire watch`` at the end of a finished run): one more evaluation at the last
step of each mode, whatever ``every``, which reports a NaN there at the step it appeared at.

Defaults: ``collections=None`` (every captured collection but ``optimizer``, ``hyperparameters``,
``feature_importance`` and ``trees``; requires only ``losses``),
``only_nan=False``, modes ``train`` and ``eval``, severity ``critical``.
"""

from __future__ import annotations

import bisect
import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._finding import Finding
from .._errors import TensorNotFoundError
from .._history import History
from .._validate import check_bool
from ._base import Requirement
from ._common import NO_DATA, BuiltinRule, check_collections, in_capture_order, names_in, scalar_kind, value_at
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
#: Not scanned unless named: derived values (an update ratio of a zero-initialised tensor is +inf), and
#: a booster's statistics of its trees (a NaN there comes from a NaN metric or gradient, judged
#: before it; trial 28i: 25,000 importance tensors of a 5,000-feature model, scanned at every save
#: step, made boosting 100x slower).
_DERIVED = ("optimizer", "hyperparameters", "feature_importance", "trees")


#: At one step, the tensor named is the first not finite in this order of collections (then the
#: others, by name): the data, the loss, the forward pass, the backward pass, the parameters, so that
#: a NaN label is named before the loss it made NaN, and the loss before the gradients it made NaN
#: (trial 26j: NaN labels from a save step on were named as gradients/h/bias).
_CAUSAL_ORDER = ("inputs", "labels", "losses", "metrics", "predictions", "activation_inputs", "activations",
                 "relu_outputs", "gradients", "weights", "biases")


def _in_causal_order(collections: Any) -> tuple[str, ...]:
    """``collections`` in :data:`_CAUSAL_ORDER`, the others after them by name."""
    rank = {c: i for i, c in enumerate(_CAUSAL_ORDER)}
    return tuple(sorted(collections, key=lambda c: (rank.get(c, len(rank)), c)))


def _window(history: History, name: str, reduction: str, after: int, upto: int, mode: str,
            worker: int) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of ``name``'s ``reduction`` at the steps ``after < s <= upto``, ascending,
    one value a step (the one written last, as :meth:`History.value` reads it)."""
    try:
        st, va = history.series(name, reduction, mode, worker)
    except TensorNotFoundError:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    if not len(st) or upto <= after:
        return st[:0], va[:0]
    if history.ascending(name, reduction, mode, worker):
        lo, hi = int(np.searchsorted(st, after, side="right")), int(np.searchsorted(st, upto, side="right"))
        st, va = st[lo:hi], va[lo:hi]
    else:  # (steps that went back: the value written last at each step)
        keep = (st > after) & (st <= upto)
        st, va = st[keep], va[keep]
        order = np.argsort(st, kind="stable")
        st, va = st[order], va[order]
    if len(st) > 1 and not bool(np.all(st[1:] > st[:-1])):  # (a step written twice: its last value)
        last = np.append(st[1:] != st[:-1], True)
        st, va = st[last], va[last]
    return st, va


def _held(history: History) -> History:
    """The history that holds every value ``history`` shows: a replay's view (``tripwire watch``:
    ``HistoryAsOf``, which shows its history's series cut to the record replayed) names it as
    ``held``; any other history is its own."""
    return history.held if isinstance(getattr(type(history), "held", None), property) else history  # type: ignore[attr-defined]


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
    #: each evaluation judges every step since the one before: a session's end and ``tripwire watch``
    #: evaluate it at the last step where ``every`` left steps after its last evaluation
    looks_back = True

    def __init__(self, collections: Sequence[str] | None = None, only_nan: bool = False, **common: Any) -> None:
        super().__init__(**common)
        self.collections = check_collections(collections, f"{self.name}.collections", allow_none=True)
        self.only_nan = check_bool(only_nan, f"{self.name}.only_nan")
        self._checked: dict[str, int] = {}  # "mode/worker" -> the last step examined
        # per (tensor, reduction, mode, worker) of the history that holds the values (see _held): the
        # records of that mode and worker when it was read, the values looked at and the sorted steps
        # of those that are not finite (a nonfinite_count: > 0). A tensor with none of them in a
        # window holds no finding there, and its series is not read at each evaluation (trial 29b: a
        # replay read every tensor's series at every record, 1.8 ms a record over 50 tensors);
        # derived from the values alone, so no state to save
        self._bad: dict[tuple[str, str, str, int], tuple[int, int, list[int]]] = {}
        self._bad_in: weakref.ref[History] | None = None  # the history _bad was read from

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

    def reads_every_collection_but(self) -> frozenset[str] | None:
        """Every captured collection but :data:`_DERIVED` where ``collections`` is None (the default)."""
        return frozenset(_DERIVED) if self.collections is None else None

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
            found = self._check_window(history, step - 1 if last is None else last, step, mode, worker)
            if isinstance(found, Finding):
                return found
            seen_any = seen_any or found
        return None if seen_any else NO_DATA

    def _check_window(self, history: History, after: int, upto: int, mode: str, worker: int) -> Finding | bool:
        """A finding for the first step ``s`` with ``after < s <= upto`` at which a tensor is not finite
        (at that step, the first such tensor in collection order, then in capture order), else whether anything was
        seen. Each tensor's values in the window are read as one slice of its series (trial 26i: a
        step at a time, the kept losses' steps included, it looked at every tensor of the run at each
        of them, and took 92% of a 50,000-step replay); a series whose steps went back (a resume
        past a crash) is read a step at a time, each step's value the one written last."""
        cols = self.collections or _in_causal_order(c for c in history.collections() if c not in _DERIVED)
        seen_any = False
        # (step, collection's place, tensor's place in capture order, tensor, what): within a collection
        # the tensor captured first (network order; trial 37b: a NaN of every gradient was named on
        # gradients/blocks.0.fc.bias, the first by name, not the first layer's gradient)
        best: tuple[int, int, int, str, str] | None = None
        held = _held(history)
        if self._bad_in is None or self._bad_in() is not held:
            self._bad, self._bad_in = {}, weakref.ref(held)
        records = len(held.wall_times(mode, worker)[0])  # (a series grows only with a record of its mode and worker)
        # the tensors with a NaN, an infinity or a positive count in the window, as the history noted
        # them when their records came: no other tensor's series is read (36p: 300 tensors a save step)
        flagged = held.nonfinite_tensors(mode, worker, after, upto)
        for ci, col in enumerate(cols):
            names = names_in(history, col)
            place: dict[str, int] | None = None  # (capture order, made once a tensor of it is found)
            for name in names:
                # (once something was seen, a tensor with no bad value in the window can add nothing)
                if seen_any and name not in flagged and "raw" not in history.array_kinds(name):
                    continue
                if seen_any and self._all_finite(history, held, records, name, after,
                                                 upto if best is None else best[0], mode, worker):
                    continue
                got = self._first_bad(history, name, after, upto if best is None else best[0], mode, worker)
                if got is None:
                    continue
                seen_any = True
                if got is not True:
                    if place is None:
                        place = {n: i for i, n in enumerate(in_capture_order(history, names))}
                    found = (got[0], ci, place[name], name, got[1])
                    if best is None or found[:3] < best[:3]:
                        best = found
        if best is not None:
            return self._found(best[0], mode, best[3], best[4], worker)
        return seen_any

    def _all_finite(self, history: History, held: History, records: int, name: str, after: int, upto: int,
                    mode: str, worker: int) -> bool:
        """Whether :meth:`_first_bad` would find nothing wrong with ``name`` in ``(after, upto]``,
        known without reading its series as ``history`` shows them: ``held`` (see :func:`_held`;
        ``records``: its records of ``mode`` by ``worker``) holds no value of the reductions it
        reads (a ``nonfinite_count`` above 0; a non-finite value) at a step there. False where not
        known so: a tensor stored whole (its arrays are read)."""
        if upto <= after:
            return True
        if "raw" in history.array_kinds(name):
            return False
        reds = history.reductions(name)
        if "nonfinite_count" in reds:
            read = ["nonfinite_count"]
        else:
            read = [r for r in _VALUE_REDUCTIONS if r in reds]
            if self.only_nan:
                read = [r for r in read if r not in _INF_MAKES_NAN] or read
        for red in read:
            bad = self._bad_steps(held, records, name, red, mode, worker)
            i = bisect.bisect_right(bad, after)
            if i < len(bad) and bad[i] <= upto:
                return False
        return True

    def _bad_steps(self, held: History, records: int, name: str, reduction: str, mode: str,
                   worker: int) -> list[int]:
        """The sorted steps at which ``held``'s series of ``reduction`` of ``name`` holds a value that
        is not finite (``nonfinite_count``: above 0), kept up as values come (each looked at once;
        the series is read again only once ``records``, the records of ``mode`` by ``worker``, grew)."""
        key = (name, reduction, mode, worker)
        seen, done, bad = self._bad.get(key, (-1, 0, []))
        if seen == records:
            return bad
        steps, values = held.series(name, reduction, mode, worker)
        n = len(values)
        if n < done:  # (not the series read before: read it again)
            done, bad = 0, []
        if n > done:
            new = values[done:]
            wrong = new > 0 if reduction == "nonfinite_count" else ~np.isfinite(new)
            if wrong.any():
                bad = sorted(bad + steps[done:][wrong].tolist())
        self._bad[key] = (records, n, bad)
        return bad

    def _first_bad(self, history: History, name: str, after: int, upto: int, mode: str,
                   worker: int) -> tuple[int, str] | bool | None:
        """``(step, what)`` of the first step in ``(after, upto]`` at which ``name`` is not finite,
        True where it has values there and all are finite, None where it has none there."""
        reds = history.reductions(name)
        seen = False
        if "nonfinite_count" in reds:
            st, counts = _window(history, name, "nonfinite_count", after, upto, mode, worker)
            seen = len(st) > 0
            for s, n in zip(st[counts > 0].tolist(), counts[counts > 0].tolist()):
                if not self.only_nan:
                    return s, f"{int(n)} non-finite values"
                # a NaN element (trial 23m: a mean is NaN for +inf beside -inf too)
                red = next((r for r in _NAN_ONLY + _INF_MAKES_NAN if r in reds), None)
                v = value_at(history, name, red, s, mode, worker) if red is not None else None
                if v is not None and math.isnan(v):
                    what = ("NaN" if red in _NAN_ONLY else f"NaN, or both +inf and -inf (a {red} of nan)" if red in ("mean", "sum")
                            else f"NaN, or an infinite value (a {red} of nan)")  # (trial 23r: std of one +inf)
                    return s, f"{what} ({int(n)} non-finite values in all)"
            return seen or None
        # a scalar's value, or what the tensor's statistics say (a NaN anywhere makes them NaN)
        stored = [r for r in _VALUE_REDUCTIONS if r in reds]
        if self.only_nan:  # the statistics that only a NaN element makes NaN, where stored
            stored = [r for r in stored if r not in _INF_MAKES_NAN] or stored
        first: tuple[int, str] | None = None  # (step, reduction): the first in ``stored`` order at the first step
        for red in stored:
            st, values = _window(history, name, red, after, upto if first is None else first[0], mode, worker)
            seen = seen or len(st) > 0
            bad = np.isnan(values) if self.only_nan else ~np.isfinite(values)
            if bad.any():
                s = int(st[int(np.argmax(bad))])
                if first is None or s < first[0]:
                    first = (s, red)
        if first is not None:
            s, red = first
            v = value_at(history, name, red, s, mode, worker)
            what = (f"the value {v}" if red == "raw" else f"a mean of {v}" if red == "mean"
                    else f"a non-finite {red} statistic ({v}): NaN or infinite values")
            if self.only_nan and red in _INF_MAKES_NAN:  # (trial 23r: a std is nan for one +inf)
                what = (f"a {red} of nan: NaN, or both +inf and -inf" if red in ("mean", "sum")
                        else f"a {red} of nan: NaN, or an infinite value")
            elif self.only_nan and red != "raw":
                what = f"NaN (its {red} is nan)"
            upto = s - 1  # (a whole tensor's NaN at an earlier step comes first; at this one, the statistic's)
        for s in history.array_steps_between(name, after, upto, "raw", mode, worker):  # stored whole (trial 19a)
            seen = True
            bad_n = _nonfinite(history.array(name, s, "raw", mode, worker), self.only_nan)
            if bad_n:
                return s, f"{bad_n} {'NaN' if self.only_nan else 'non-finite'} values"
        if first is not None:
            return first[0], what
        return seen or None

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "checked": dict(self._checked)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._checked = {str(k): int(v) for k, v in state.get("checked", {}).items()}

    def _found(self, step: int, mode: str, name: str, what: str, worker: int) -> Finding:
        return self.finding(
            step, mode,
            f"{name} holds {what} at step {step} ({mode}). Usual causes: a learning rate far too high, "
            "log(0) or division by zero in the loss, NaN in the input data or the labels, or overflow in float16; "
            "lower the learning rate, clip gradients, add an epsilon to log/divisions, check the inputs and labels.",
            tensors=[name], worker=worker,
        )

"""Reduction backends: compute reductions where the tensor lives.

An integration hands tensors to the session in its framework's type; the session asks the
integration's backend for reductions of *all tensors due at a step in one call*, so a backend can
batch them (stack the per-tensor results on the device, then one copy to the host). Core ships the
numpy backend; integrations ship theirs (torch, mxnet).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ._config import parse_reduction


@runtime_checkable
class ReductionBackend(Protocol):
    """What the session needs from a framework. All methods receive framework tensors."""

    name: str

    def reduce(self, tensors: Sequence[Any], reductions: Sequence[str]) -> np.ndarray:
        """Return a float64 host array of shape ``(len(tensors), len(reductions))``."""

    def histogram(
        self, tensor: Any, bins: int, value_range: tuple[float, float] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(counts int64[bins], edges float64[bins + 1])`` over finite values."""

    def to_numpy(self, tensor: Any) -> np.ndarray:
        """Return the tensor as a host numpy array (a dtype numpy knows, e.g. bf16 -> float32)."""


EMPTY_ZERO: frozenset[str] = frozenset(("sum", "l1", "l2", "abs_sum"))
"""Reductions of an empty tensor that are 0, as numpy's (every other one but ``numel`` and
``nonfinite_count`` is NaN there)."""


VALUE_ITSELF = frozenset(("sum", "mean", "min", "max"))
"""Reductions that give a one-element tensor's value itself."""


def _reduce_one(x: np.ndarray, name: str) -> float:
    base, thr = parse_reduction(name)
    n = x.size
    if base == "numel":
        return float(n)
    if base == "nonfinite_count":
        return float(n - np.count_nonzero(np.isfinite(x))) if x.dtype.kind in "fc" else 0.0
    if n == 0:
        return 0.0 if base in EMPTY_ZERO else float("nan")
    if base == "zero_fraction":
        return float(n - np.count_nonzero(x)) / n
    if base == "positive_fraction":
        return float(np.count_nonzero(x > 0)) / n
    if thr is not None:
        if base == "fraction_gt":
            return float(np.count_nonzero(x > thr)) / n
        if base == "fraction_lt":
            return float(np.count_nonzero(x < thr)) / n
        return float(np.count_nonzero(np.abs(x) > thr)) / n  # fraction_abs_gt
    xf = x.astype(np.float64, copy=False)
    if base.startswith("abs_"):
        xf = np.abs(xf)
        base = base[4:]
    if base == "min":
        return float(xf.min())
    if base == "max":
        return float(xf.max())
    if base == "mean":
        return float(xf.mean())
    if base == "std":
        return float(xf.std())
    if base == "variance":
        return float(xf.var())
    if base == "sum":
        return float(xf.sum())
    if base == "l1":
        return float(np.abs(xf).sum())
    if base == "l2":
        return float(np.sqrt(np.dot(xf.ravel(), xf.ravel())))
    raise ValueError(f"reduction: unknown reduction {name!r}")


def finite_range(x: np.ndarray) -> tuple[float, float]:
    """The histogram range of ``x`` (its finite values): ``widened(min, max)`` as float64, ``(0, 1)``
    when it has none."""
    finite = x[np.isfinite(x)] if x.dtype.kind in "fc" else x
    if finite.size == 0:
        return (0.0, 1.0)
    lo, hi = float(finite.min()), float(finite.max())
    return widened(lo, hi)


_DBL_MAX = float(np.finfo(np.float64).max)


def widened(lo: float, hi: float) -> tuple[float, float]:
    """A histogram's range for values from ``lo`` to ``hi``: ``(lo, hi)`` itself where they differ;
    for constant values ``v`` numpy's ``(v - 0.5, v + 0.5)``, and where that is still one number
    (``|v|`` above about 1e15, where 0.5 is below float64's spacing) ``v`` widened by a millionth of
    itself, kept within float64's finite range (trial 23u: a float32 tensor of 3e38 everywhere
    raised in the training step; numpy refuses it: "Too many bins"). A constant tensor's values then
    all fall in one middle bin: ``bins // 2`` for an odd number of bins; for an even one ``v`` is
    the middle edge (up to its rounding), in bin ``bins // 2`` or the one below (at float64's
    largest magnitude, where the range cannot reach beyond ``v``, the first or the last bin)."""
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
        if lo == hi:
            lo, hi = max(lo - abs(lo) * 1e-6, -_DBL_MAX), min(hi + abs(hi) * 1e-6, _DBL_MAX)
    return lo, hi


def histogram_edges(lo: float, hi: float, bins: int) -> np.ndarray:
    """The ``bins + 1`` float64 edges of a histogram over ``[lo, hi]``: ``numpy.linspace(lo, hi,
    bins + 1)`` in float64, the edges ``numpy.histogram(x, bins, range=(lo, hi))`` uses with a
    float64 range whatever ``x``'s dtype (trial 30a F4: numpy's default, edges in a float32 array's
    own dtype, gave bins up to 1.6x wider than others, and two equal edges, for values near 1 or
    1e4 whose spread is a few float32 steps). Where ``hi - lo`` overflows float64 (a range from
    about -1e308 to 1e308, where numpy's edges are NaN) they are half the range's, doubled (exact).
    A range narrower than ``bins`` float64 steps gives some equal edges, as numpy's (which raises
    "Too many bins" there): see :func:`bin_counts` for how values are counted then."""
    first, last = np.float64(lo), np.float64(hi)
    with np.errstate(over="ignore"):
        span = last - first
    if np.isfinite(span):
        return np.linspace(first, last, bins + 1)
    return np.linspace(first / 2, last / 2, bins + 1) * 2


def numpy_binnable(edges: np.ndarray) -> bool:
    """Whether ``numpy.histogram`` itself bins with these float64 edges (strictly increasing, over a
    span ``edges[-1] - edges[0]`` that is finite): its arithmetic (the index from the scaled value,
    corrected by one either way against the edges), which the device backends reproduce in float64.
    Otherwise (some equal edges, or a span that overflows) :func:`bin_counts`'s rule is used."""
    with np.errstate(over="ignore"):
        return bool(np.isfinite(edges[-1] - edges[0]) and np.all(edges[1:] > edges[:-1]))


def bin_counts(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """int64 counts of the real values ``x`` in the bins of ``edges`` (float64, non-decreasing), as
    ``numpy.histogram(x, bins, range=(edges[0], edges[-1]))`` counts them: a value ``v`` with
    ``edges[0] <= v <= edges[-1]`` (compared in float64) is in bin ``i`` where ``edges[i] <= v <
    edges[i + 1]``, the last bin closed (``i`` is the number of ``edges[1:-1]`` at or below ``v``,
    so where some edges are equal the zero-width bins between them count nothing, but the last bin,
    closed, holds the values equal to ``edges[-1]``); other values (NaN, Inf, outside the range) are
    not counted. Where :func:`numpy_binnable` holds, ``numpy.histogram`` itself (of the values as
    float64)."""
    # (float64 values: numpy 1.x bins a float32 array in float32 even over a float64 range)
    xf = np.asarray(x).ravel().astype(np.float64, copy=False)
    if numpy_binnable(edges):
        return np.histogram(xf, len(edges) - 1, range=(edges[0], edges[-1]))[0].astype(np.int64)
    inside = xf[(xf >= edges[0]) & (xf <= edges[-1])]
    idx = np.searchsorted(edges[1:-1], inside, side="right")
    return np.bincount(idx, minlength=len(edges) - 1).astype(np.int64)


def bin_thresholds(edges: np.ndarray, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """``edges`` (float64) as thresholds in ``dtype`` (float16, float32 or float64) that bin every
    value of ``dtype`` exactly as the float64 edges do, without float64 arithmetic: ``(inner,
    bounds)``, where ``inner[i]`` is the least ``dtype`` value at or above ``edges[i + 1]`` (for a
    value ``v`` of that dtype, ``v >= inner[i]`` exactly when ``v >= edges[i + 1]``) and ``bounds``
    the least value at or above ``edges[0]`` and the greatest at or below ``edges[-1]`` (both
    finite, so NaN and Inf fall outside). An edge beyond the dtype's range becomes its largest
    finite value or Inf, as the comparison needs. For float64 the edges themselves."""
    dt = np.dtype(dtype)
    if dt == np.float64:
        return edges[1:-1].copy(), edges[[0, -1]].copy()
    if dt.kind != "f":
        raise TypeError(f"bin_thresholds: dtype {dt} is not a float dtype; accepted: float16, float32, float64")

    def toward(e: np.ndarray, up: bool) -> np.ndarray:
        with np.errstate(over="ignore"):
            r = e.astype(dt)
        wrong = r < e if up else r > e
        return np.where(wrong, np.nextafter(r, np.array(np.inf if up else -np.inf, dtype=dt)), r).astype(dt)

    bounds = np.array([toward(edges[:1], True)[0], toward(edges[-1:], False)[0]], dtype=dt)
    return toward(edges[1:-1], True), bounds


class NumpyBackend:
    """Reductions for numpy arrays, Python scalars and anything ``np.asarray`` accepts."""

    name = "numpy"

    def to_numpy(self, tensor: Any) -> np.ndarray:
        arr = np.asarray(tensor)
        if arr.dtype == object:
            raise TypeError(f"cannot capture an object array (got {type(tensor).__name__})")
        return arr

    def reduce(self, tensors: Sequence[Any], reductions: Sequence[str]) -> np.ndarray:
        if reductions and all(type(t) in (float, int) for t in tensors) and VALUE_ITSELF.issuperset(reductions):
            # Python numbers (a Keras log's loss and metrics, at every save step): each reduction is
            # the value itself, as the general path below gives it
            out = np.repeat(np.array(tensors, dtype=np.float64).reshape(-1, 1), len(reductions), axis=1)
            for j, r in enumerate(reductions):
                if r in ("sum", "mean"):
                    out[:, j] += 0.0  # (-0.0 + 0.0: numpy's sum and mean of -0.0 are 0.0)
            return out
        out = np.empty((len(tensors), len(reductions)), dtype=np.float64)
        # NaN and Inf are results here (a diverging tensor's std is NaN): no numpy warning about them
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            for i, t in enumerate(tensors):
                x = self.to_numpy(t)
                if x.dtype == bool:
                    x = x.astype(np.uint8)
                for j, r in enumerate(reductions):
                    out[i, j] = _reduce_one(x, r)
        return out

    def histogram(
        self, tensor: Any, bins: int, value_range: tuple[float, float] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(counts, edges)`` of the finite values: ``edges`` float64 (:func:`histogram_edges` over
        ``value_range``, or over the finite minimum and maximum, :func:`widened` where they are
        equal), ``counts`` int64 as ``numpy.histogram(x, bins, range=(lo, hi))`` with a float64
        ``lo``/``hi`` counts them, whatever ``x``'s dtype (:func:`bin_counts`)."""
        x = self.to_numpy(tensor).ravel()
        if x.dtype.kind in "fc":
            x = x[np.isfinite(x)]
        elif x.dtype.kind == "b":  # (numpy would warn that it converts them: trial 19a)
            x = x.astype(np.uint8)
        edges = histogram_edges(*(value_range or finite_range(x)), bins)
        return bin_counts(x, edges), edges

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
    finite = x[np.isfinite(x)] if x.dtype.kind in "fc" else x
    if finite.size == 0:
        return (0.0, 1.0)
    lo, hi = float(finite.min()), float(finite.max())
    return widened(lo, hi)


def widened(lo: float, hi: float) -> tuple[float, float]:
    """A histogram's range for values from ``lo`` to ``hi``: numpy's ``(v - 0.5, v + 0.5)`` for
    constant values, and where that is still one number (``|v|`` above about 1e15, where 0.5 is
    below float64's spacing) ``v`` widened by a millionth of itself (trial 23u: a float32 tensor of
    3e38 everywhere raised in the training step; numpy refuses it: "Too many bins")."""
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
        if lo == hi:
            lo, hi = lo - abs(lo) * 1e-6, hi + abs(hi) * 1e-6
    return lo, hi


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
        x = self.to_numpy(tensor).ravel()
        if x.dtype.kind in "fc":
            x = x[np.isfinite(x)]
        elif x.dtype.kind == "b":  # (numpy would warn that it converts them: trial 19a)
            x = x.astype(np.uint8)
        rng = value_range or finite_range(x)
        try:
            counts, edges = np.histogram(x, bins=bins, range=rng)
        except (IndexError, ValueError):
            if x.dtype.kind != "f" or x.dtype == np.float64:
                raise
            # (trial 23u: float16 values at +-65504, float32 near +-3e38: numpy's own bin arithmetic in
            # the array's dtype overflows, an IndexError that ended the training step) in float64
            counts, edges = np.histogram(x.astype(np.float64), bins=bins, range=rng)
        return counts.astype(np.int64), edges.astype(np.float64)

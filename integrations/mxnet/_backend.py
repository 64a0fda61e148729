"""Reductions of MXNet NDArrays with ``mx.nd`` operators on the array's own context.

The numpy reference (``tripwire._reductions.NumpyBackend``) defines every value; this backend
reproduces it on the device:

- every tensor costs a few operators whatever the reductions: float64 sums of ``x``, ``x*x`` and
  ``|x|``, min/max and counts; the reductions (mean, l2, variance as E[x^2] - E[x]^2 ...) follow
  on the host, matching the reference to float64 rounding (the one-pass variance loses digits only
  when |mean| exceeds the standard deviation by many orders of magnitude);
- comparisons (``zero_fraction``, ``positive_fraction``, ``fraction_gt:T`` ...) count in float64
  against the threshold rounded to the tensor's dtype first, which is exactly numpy's float32 (or
  float16) comparison of an array with a Python float;
- histograms replay numpy's bin-index arithmetic (same dtype, same edges, the same one-ulp edge
  corrections), then count the indices on the device.

All scalar results of one :meth:`MXNetBackend.reduce` call are concatenated per context and copied
to the host once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._config import parse_reduction
from ._compat import import_mxnet

mx = import_mxnet()
nd = mx.nd


def _as_nd(tensor: Any) -> Any:
    """Accept ``mx.nd.NDArray`` and ``mx.np.ndarray``; anything else is a TypeError."""
    if isinstance(tensor, nd.NDArray):
        to_nd = getattr(tensor, "as_nd_ndarray", None)
        return to_nd() if to_nd is not None and type(tensor) is not nd.NDArray else tensor
    raise TypeError(f"MXNetBackend: expected an mxnet NDArray, got {type(tensor).__name__}")


def _flat(x: Any) -> Any:
    """A 1-D copy made by the reshape operator: ``NDArray.reshape`` makes a view, which MXNet cannot
    read back for arrays in oneDNN (MKLDNN) layout, e.g. convolution weights and outputs."""
    return nd.reshape(x, shape=(-1,))


def _np_dtype(x: Any) -> np.dtype:
    try:
        return np.dtype(x.dtype)
    except TypeError:  # bfloat16 and other dtypes numpy lacks
        return np.dtype(np.float32)


def _cast_threshold(thr: float, dtype: np.dtype) -> float:
    """The threshold as numpy compares it with an array of ``dtype`` (float arrays compare in
    their own precision, integer arrays in float64)."""
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            return float(dtype.type(thr))
    return float(thr)


class MXNetBackend:
    """:class:`tripwire.ReductionBackend` for MXNet NDArrays (``mx.nd`` operators, per context)."""

    name = "mxnet"

    # ----------------------------------------------------------------------------- host copies
    def to_numpy(self, tensor: Any) -> np.ndarray:
        x = _as_nd(tensor)
        try:
            np.dtype(x.dtype)
        except TypeError:
            x = x.astype("float32")
        return x.asnumpy()

    def numel(self, tensor: Any) -> int:
        return int(_as_nd(tensor).size)

    # ------------------------------------------------------------------------------ reductions
    def reduce(self, tensors: Sequence[Any], reductions: Sequence[str]) -> np.ndarray:
        out = np.full((len(tensors), len(reductions)), np.nan, dtype=np.float64)
        parsed = [parse_reduction(r) for r in reductions]
        for base, _ in parsed:
            if base not in _KNOWN:
                raise ValueError(f"reduction: unknown reduction {base!r}")
        # per context: the device scalars of every tensor, fetched with one host copy
        pending: dict[Any, list[Any]] = {}
        plans: list[tuple[int, Any, int, dict[str, int]] | None] = []
        for i, t in enumerate(tensors):
            x = _as_nd(t)
            n = int(x.size)
            dtype = _np_dtype(x)
            if n == 0:
                plans.append(None)
                continue
            bucket = pending.setdefault(x.context, [])
            slots: dict[str, int] = {}
            for key, value in _quantities(x, dtype, parsed).items():
                slots[key] = len(bucket)
                bucket.append(value)
            plans.append((n, x.context, i, slots))
        host = {ctx: nd.concat(*vals, dim=0).asnumpy().astype(np.float64) if vals else np.zeros(0)
                for ctx, vals in pending.items()}
        for i, t in enumerate(tensors):
            plan = plans[i]
            dtype = _np_dtype(_as_nd(t))
            if plan is None:
                for j, (base, _) in enumerate(parsed):
                    out[i, j] = 0.0 if base in ("numel", "nonfinite_count") else np.nan
                continue
            n, ctx, _, slots = plan
            q = {k: float(host[ctx][s]) for k, s in slots.items()}
            for j, (base, thr) in enumerate(parsed):
                out[i, j] = _finish(base, thr, q, n, dtype)
        return out

    # ------------------------------------------------------------------------------ histograms
    def histogram(
        self, tensor: Any, bins: int, value_range: tuple[float, float] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        x = _flat(_as_nd(tensor))
        dtype = _np_dtype(x)
        if dtype.kind in "fc" and x.dtype != dtype.type:
            x = x.astype(dtype.name)
        if value_range is None:
            value_range = self._finite_range(x, dtype)
        # numpy's edges for this dtype and range (the same call numpy's histogram makes)
        edges = np.histogram_bin_edges(np.empty(0, dtype=dtype), bins=bins, range=value_range)
        first, last = float(value_range[0]), float(value_range[1])
        if first == last:
            first, last = first - 0.5, last + 0.5
        edge_dtype = edges.dtype
        xd = x.astype(edge_dtype.name, copy=False)
        e_nd = nd.array(edges, ctx=x.context, dtype=edge_dtype.name)
        lo, hi = _cast_threshold(first, edge_dtype), _cast_threshold(last, edge_dtype)
        keep = (xd >= lo) * (xd <= hi)  # NaN fails both
        # numpy: f = ((x - first) / (last - first)) * bins, in the edge dtype
        f = ((xd - first) / (last - first)) * bins
        f = nd.where(keep, f, nd.zeros_like(f))
        idx = f.astype("int64")
        idx = idx - (idx == bins).astype("int64")
        idx = idx - (xd < nd.take(e_nd, idx, mode="clip")).astype("int64")
        up = (xd >= nd.take(e_nd, idx + 1, mode="clip")) * (idx != bins - 1).astype(edge_dtype.name)
        idx = idx + up.astype("int64")
        idx = nd.where(keep, idx.astype("float64"), nd.full(idx.shape, -1.0, ctx=x.context, dtype="float64"))
        counts, _ = nd.histogram(idx, bins=bins, range=(0.0, float(bins)))
        return counts.asnumpy().astype(np.int64), edges.astype(np.float64)

    @staticmethod
    def _finite_range(x: Any, dtype: np.dtype) -> tuple[float, float]:
        x64 = x.astype("float64", copy=False)
        if dtype.kind in "fc":
            fin = nd.contrib.isfinite(x64)
            inf = nd.full(x64.shape, np.inf, ctx=x.context, dtype="float64")
            lo_hi = nd.concat(nd.min(nd.where(fin, x64, inf)).reshape((1,)),
                              nd.max(nd.where(fin, x64, -inf)).reshape((1,)), dim=0).asnumpy()
        else:
            lo_hi = nd.concat(nd.min(x64).reshape((1,)), nd.max(x64).reshape((1,)), dim=0).asnumpy()
        lo, hi = float(lo_hi[0]), float(lo_hi[1])
        if not (np.isfinite(lo) and np.isfinite(hi)):
            return (0.0, 1.0)
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        return lo, hi


_KNOWN = {
    "min", "max", "mean", "std", "variance", "sum", "l1", "l2", "abs_min", "abs_max", "abs_mean", "abs_std",
    "abs_variance", "abs_sum", "zero_fraction", "positive_fraction", "nonfinite_count", "numel",
    "fraction_gt", "fraction_lt", "fraction_abs_gt",
}
_NEEDS: dict[str, tuple[str, ...]] = {
    "min": ("min",), "max": ("max",), "abs_max": ("min", "max"), "abs_min": ("abs_min",),
    "sum": ("sum",), "mean": ("sum",), "variance": ("sum", "sumsq"), "std": ("sum", "sumsq"),
    "l2": ("sumsq",), "l1": ("abs_sum",), "abs_sum": ("abs_sum",), "abs_mean": ("abs_sum",),
    "abs_variance": ("abs_sum", "sumsq"), "abs_std": ("abs_sum", "sumsq"),
    "zero_fraction": ("zeros",), "positive_fraction": ("positive",), "nonfinite_count": ("finite",),
}
_DBL_MAX = float(np.finfo(np.float64).max)


def _quantities(x: Any, dtype: np.dtype, parsed: Sequence[tuple[str, float | None]]) -> dict[str, Any]:
    """The device scalars (one-element float64 arrays) the reductions are computed from: sums of
    x, x*x and |x|, min/max, and counts. Every tensor costs a handful of operators, whatever
    the number of reductions."""
    keys: dict[str, float | None] = {}
    for base, thr in parsed:
        if thr is not None:
            keys[f"{base}:{thr!r}"] = _cast_threshold(thr, dtype)
        elif base == "nonfinite_count" and dtype.kind not in "fc":
            continue
        else:
            for k in _NEEDS.get(base, ()):
                keys[k] = None
    if not keys:
        return {}
    x64 = _flat(x).astype("float64", copy=False)
    abs_: list[Any] = []

    def absx() -> Any:
        if not abs_:
            abs_.append(nd.abs(x64))
        return abs_[0]

    out: dict[str, Any] = {}
    for key, thr in keys.items():
        if key == "sum":
            out[key] = nd.sum(x64)
        elif key == "sumsq":
            out[key] = nd.dot(x64, x64)
        elif key == "abs_sum":
            out[key] = nd.sum(absx())
        elif key == "min":
            out[key] = nd.min(x64)
        elif key == "max":
            out[key] = nd.max(x64)
        elif key == "abs_min":
            out[key] = nd.min(absx())
        elif key == "zeros":
            out[key] = nd.sum(x64 == 0)
        elif key == "positive":
            out[key] = nd.sum(x64 > 0)
        elif key == "finite":
            out[key] = nd.sum(absx() <= _DBL_MAX)  # NaN and +-inf fail
        elif key.startswith("fraction_gt:"):
            out[key] = nd.sum(x64 > thr)
        elif key.startswith("fraction_lt:"):
            out[key] = nd.sum(x64 < thr)
        else:  # fraction_abs_gt
            out[key] = nd.sum(absx() > thr)
    return out


def _finish(base: str, thr: float | None, q: dict[str, float], n: int, dtype: np.dtype) -> float:
    """One reduction from the host copies of the quantities (numpy reference semantics)."""
    if base == "numel":
        return float(n)
    if base == "nonfinite_count":
        return float(n) - q["finite"] if dtype.kind in "fc" else 0.0
    if thr is not None:
        return q[f"{base}:{thr!r}"] / n
    if base in ("min", "max", "abs_min", "sum", "l1", "abs_sum"):
        return q["abs_sum" if base == "l1" else base]
    if base == "abs_max":
        lo, hi = q["min"], q["max"]
        return float("nan") if np.isnan(lo) or np.isnan(hi) else max(abs(lo), abs(hi))
    if base == "mean":
        return q["sum"] / n
    if base == "abs_mean":
        return q["abs_sum"] / n
    if base == "l2":
        return float(np.sqrt(q["sumsq"]))
    if base == "zero_fraction":
        return q["zeros"] / n
    if base == "positive_fraction":
        return q["positive"] / n
    first = q["abs_sum" if base.startswith("abs_") else "sum"] / n
    with np.errstate(invalid="ignore", over="ignore"):
        var = q["sumsq"] / n - first * first  # float64 sums of x and x*x (one pass)
    var = max(var, 0.0) if not np.isnan(var) else var
    return var if base.endswith("variance") else float(np.sqrt(var))


__all__ = ["MXNetBackend"]

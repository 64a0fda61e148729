"""Reductions of MXNet NDArrays with ``mx.nd`` operators on the array's own context.

The numpy reference (``tripwire._reductions.NumpyBackend``) defines every value; this backend
reproduces it on the device:

- the tensors of one context and dtype are packed into one float64 matrix of 256-element rows
  (zero padding after each tensor), and float64 sums of ``x``, ``x*x`` and ``|x|``, min/max and
  counts are computed per row for all of them at once: a step costs a constant number of operators
  (each MXNet operator costs tens of microseconds of overhead), not a few per tensor; each
  tensor's rows are combined on the host, where the reductions (mean, l2, variance as
  E[x^2] - E[x]^2 ...) follow, matching the reference to float64 rounding (a tensor whose mean is
  large against its spread, where the one-pass variance would lose digits, gets two passes);
- comparisons (``zero_fraction``, ``positive_fraction``, ``fraction_gt:T`` ...) count in float64
  against the threshold rounded to the tensor's dtype first, which is exactly numpy's float32 (or
  float16) comparison of an array with a Python float;
- histograms have numpy's float64 edges over the range, and replay ``numpy.histogram``'s bin-index
  arithmetic with a float64 range (in float64, with the same one-ulp edge corrections), then count
  the indices on the device;
- sparse arrays (``row_sparse``, e.g. the gradient of ``gluon.nn.Embedding(..., sparse_grad=True)``,
  and ``csr``) reduce as their dense equivalent, where every element not stored is 0 (``numel``,
  ``mean``, ``zero_fraction``, min/max, histogram counts ... all count them): only the stored
  values are packed and reduced on the device, and the zeros left out are added on the host
  (counts, min/max and the two-pass variance corrected for them). Nothing is made dense, and this
  happens only when a tensor is reduced, which is on save steps.

All per-row results of one :meth:`MXNetBackend.reduce_groups` call (every group of a step) are
concatenated per context and copied to the host once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._config import parse_reduction
from ..._reductions import EMPTY_ZERO, bin_counts, histogram_edges, numpy_binnable, widened
from ._compat import import_mxnet

mx = import_mxnet()
nd = mx.nd


_SPARSE = nd.sparse.BaseSparseNDArray


def _as_nd(tensor: Any) -> Any:
    """Accept ``mx.nd.NDArray`` (sparse ones as they are) and ``mx.np.ndarray``; anything else is a
    TypeError."""
    if isinstance(tensor, nd.NDArray):
        if type(tensor) is nd.NDArray or isinstance(tensor, _SPARSE):
            return tensor
        to_nd = getattr(tensor, "as_nd_ndarray", None)
        return to_nd() if to_nd is not None else tensor
    raise TypeError(f"MXNetBackend: expected an mxnet NDArray, got {type(tensor).__name__}")


def _dense_size(x: Any) -> int:
    """The number of elements of ``x`` (of its dense equivalent for a sparse array, whose ``size``
    MXNet does not implement)."""
    return int(np.prod(x.shape, dtype=np.int64)) if isinstance(x, _SPARSE) else int(x.size)


def _stored(x: Any) -> tuple[Any, int]:
    """``(values, n)``: the dense array that holds ``x``'s values and the element count of ``x``.
    A dense array is its own values; a sparse array's are its stored values (``x.data``: the rows
    of a ``row_sparse`` array, the non-zeros of a ``csr`` one), and its other ``n - values.size``
    elements are zeros (a sparse array that stores nothing: one stored zero, the rest left out)."""
    if not isinstance(x, _SPARSE):
        return x, int(x.size)
    n = _dense_size(x)
    values = x.data
    if n and int(values.size) == 0:
        values = nd.zeros((1,), ctx=x.context, dtype=x.dtype)
    return values, n


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

    def __init__(self) -> None:
        self._zero_cache: dict[Any, Any] = {}
        self._mask_cache: dict[Any, Any] = {}
        self._full_cache: dict[Any, Any] = {}

    # ----------------------------------------------------------------------------- host copies
    def to_numpy(self, tensor: Any) -> np.ndarray:
        x = _as_nd(tensor)
        try:
            np.dtype(x.dtype)
        except TypeError:
            x = x.astype("float32")
        return x.asnumpy()

    def numel(self, tensor: Any) -> int:
        return _dense_size(_as_nd(tensor))

    # ------------------------------------------------------------------------------ reductions
    def reduce(self, tensors: Sequence[Any], reductions: Sequence[str]) -> np.ndarray:
        return self.reduce_groups([(tensors, reductions)])[0]

    def reduce_groups(self, groups: Sequence[tuple[Sequence[Any], Sequence[str]]]) -> list[np.ndarray]:
        """Every ``(tensors, reductions)`` group of a step in one call: one float64 array per group,
        shaped ``(len(tensors), len(reductions))``. Tensors of one context and dtype are packed
        into one float64 matrix of ``_WIDTH``-element rows (each row belongs to one tensor, zero
        padding after each), every quantity is computed per row for all of them at once, and all
        rows' quantities go to the host in one copy per context, where each tensor's rows are
        combined (``numpy.ufunc.reduceat``): a constant number of operators per step, not a few per
        tensor (an MXNet operator costs tens of microseconds of Python and engine overhead). A sparse
        array packs its stored values only; the zeros it leaves out are added on the host."""
        parsed_groups = []
        for _, reductions in groups:
            parsed = [parse_reduction(r) for r in reductions]
            for base, _ in parsed:
                if base not in _KNOWN:
                    raise ValueError(f"reduction: unknown reduction {base!r}")
            parsed_groups.append(parsed)
        # unique tensors (one may come in several groups) with the union of their quantities
        # (keyed by the tensors given, alive for this call: a sparse array's values are a new object)
        unique: dict[int, int] = {}
        arrays: list[Any] = []  # the values packed (a sparse array's stored values)
        counts: list[int] = []  # the elements of each tensor (of its dense equivalent)
        keys: list[dict[str, float | None]] = []
        where: list[list[int | None]] = []
        for (tensors, _), parsed in zip(groups, parsed_groups):
            rows: list[int | None] = []
            for t in tensors:
                u = unique.get(id(t))
                if u is None:
                    x, n = _stored(_as_nd(t))
                    if n == 0:
                        rows.append(None)
                        continue
                    u = unique[id(t)] = len(arrays)
                    arrays.append(x)
                    counts.append(n)
                    keys.append({})
                keys[u].update(_quantity_keys(_np_dtype(arrays[u]), parsed))
                rows.append(u)
            where.append(rows)
        left_out = np.asarray([n - int(x.size) for x, n in zip(arrays, counts)], dtype=np.float64)  # sparse zeros
        buckets: dict[tuple[Any, str], list[int]] = {}
        for u, x in enumerate(arrays):
            buckets.setdefault((x.context, _np_dtype(x).name), []).append(u)
        quantities: list[dict[str, float]] = [{} for _ in arrays]
        per_ctx: dict[Any, list[tuple[list[int], dict[str, Any], np.ndarray, np.ndarray]]] = {}
        for (ctx, _), members in buckets.items():
            needed: dict[str, float | None] = {}
            for u in members:
                needed.update(keys[u])
            per_ctx.setdefault(ctx, []).append((members, *self._rows([arrays[u] for u in members], needed)))
        for ctx, items in per_ctx.items():
            values = [v for _, rows_out, _, _ in items for v in rows_out.values()]
            host = (nd.concat(*values, dim=0) if len(values) > 1 else values[0]).asnumpy().astype(np.float64)
            offset = 0
            for members, rows_out, pads, bounds in items:
                total = int(bounds[-1])
                for key in rows_out:
                    per_row = host[offset:offset + total]
                    offset += total
                    how = np.minimum if key in ("min", "abs_min") else np.maximum if key == "max" else np.add
                    per_tensor = how.reduceat(per_row, bounds[:-1])
                    absent = left_out[members]
                    if key in ("zeros", "finite") or key.startswith(_PAD_COMPARED):
                        # the padding (zeros) counted: take it out; the zeros a sparse array left out: add them
                        per_tensor = per_tensor + (absent - pads) * _pad_counts(key, members, keys)
                    elif key in ("min", "max", "abs_min") and absent.any():  # (np.minimum keeps a NaN)
                        per_tensor = np.where(absent > 0, how(per_tensor, 0.0), per_tensor)
                    for u, v in zip(members, per_tensor.tolist()):
                        quantities[u][key] = v
        for u, x in enumerate(arrays):  # (rare) variances the one-pass formula cannot give accurately
            _exact_variances(x, quantities[u], counts[u])
        outs = []
        for (tensors, _), parsed, rows in zip(groups, parsed_groups, where):
            out = np.full((len(tensors), len(parsed)), np.nan, dtype=np.float64)
            for i, u in enumerate(rows):
                if u is None:
                    for j, (base, _) in enumerate(parsed):
                        out[i, j] = 0.0 if base in ("numel", "nonfinite_count") or base in EMPTY_ZERO else np.nan
                    continue
                n, dtype, q = counts[u], _np_dtype(arrays[u]), quantities[u]
                for j, (base, thr) in enumerate(parsed):
                    out[i, j] = _finish(base, thr, q, n, dtype)
            outs.append(out)
        return outs

    def _rows(self, arrays: list[Any], needed: dict[str, float | None]) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
        """The per-row quantities of arrays of one context and dtype, packed (see
        :meth:`reduce_groups`); returns ``{key: per-row values}``, each array's padding, and the
        row bounds (array ``i`` owns rows ``bounds[i]`` to ``bounds[i + 1]``)."""
        ctx = arrays[0].context
        sizes = [int(x.size) for x in arrays]
        pads = np.asarray([-n % _WIDTH for n in sizes], dtype=np.float64)
        pieces: list[Any] = []
        for x, pad in zip(arrays, pads.astype(np.int64).tolist()):
            pieces.append(_flat(x))
            if pad:
                pieces.append(self._zeros(pad, x.dtype, ctx))
        packed = nd.concat(*pieces, dim=0) if len(pieces) > 1 else pieces[0]
        x64 = packed.astype("float64", copy=False).reshape((-1, _WIDTH))
        mask = self._pad_mask(tuple(sizes), ctx) if pads.any() else None
        abs_: list[Any] = []

        def absx() -> Any:
            if not abs_:
                abs_.append(nd.abs(x64))
            return abs_[0]

        def masked(v: Any, fill: float) -> Any:  # padding replaced by fill (no effect on min/max)
            return v if mask is None else nd.where(mask, self._full(v.shape, fill, ctx), v)

        out: dict[str, Any] = {}
        for key, thr in needed.items():
            if key == "sum":
                out[key] = nd.sum(x64, axis=1)
            elif key == "sumsq":
                out[key] = nd.sum(nd.square(x64), axis=1)
            elif key == "abs_sum":
                out[key] = nd.sum(absx(), axis=1)
            elif key == "min":
                out[key] = nd.min(masked(x64, np.inf), axis=1)
            elif key == "max":
                out[key] = nd.max(masked(x64, -np.inf), axis=1)
            elif key == "abs_min":
                out[key] = nd.min(masked(absx(), np.inf), axis=1)
            elif key == "zeros":
                out[key] = nd.sum(x64 == 0, axis=1)
            elif key == "positive":
                out[key] = nd.sum(x64 > 0, axis=1)
            elif key == "finite":
                out[key] = nd.sum(absx() <= _DBL_MAX, axis=1)  # NaN and +-inf fail
            elif key.startswith("fraction_gt:"):
                out[key] = nd.sum(nd.broadcast_greater(x64, self._exact(thr, ctx)), axis=1)
            elif key.startswith("fraction_lt:"):
                out[key] = nd.sum(nd.broadcast_lesser(x64, self._exact(thr, ctx)), axis=1)
            else:  # fraction_abs_gt
                out[key] = nd.sum(nd.broadcast_greater(absx(), self._exact(thr, ctx)), axis=1)
        return out, pads, np.concatenate(([0], np.cumsum(-(-np.asarray(sizes, dtype=np.int64) // _WIDTH))))

    def _zeros(self, n: int, dtype: Any, ctx: Any) -> Any:
        key = (n, np.dtype(dtype).name if not isinstance(dtype, str) else dtype, ctx)
        z = self._zero_cache.get(key)
        if z is None:
            if len(self._zero_cache) > 4096:
                self._zero_cache.clear()
            z = self._zero_cache[key] = nd.zeros((n,), ctx=ctx, dtype=dtype)
        return z

    def _exact(self, value: float, ctx: Any) -> Any:
        """``value`` as a ``(1, 1)`` float64 array on ``ctx``, copied bit for bit (cached). A threshold
        is compared through it, not as an operator's scalar: MXNet passes a scalar to its operators as
        text and parses it back inexactly (a float32 value given as the threshold came back one unit in
        the last place off in 163 of 2,000 draws, so ``fraction_gt:T`` miscounted values equal to T)."""
        key = ("exact", value, ctx)
        f = self._full_cache.get(key)
        if f is None:
            if len(self._full_cache) > 64:
                self._full_cache.clear()
            f = self._full_cache[key] = nd.array(np.array([[value]], dtype=np.float64), ctx=ctx, dtype="float64")
        return f

    def _full(self, shape: tuple[int, ...], fill: float, ctx: Any) -> Any:
        """A float64 array of ``fill`` (cached: the same shapes come every step; never written)."""
        key = (shape, fill, ctx)
        f = self._full_cache.get(key)
        if f is None:
            if len(self._full_cache) > 64:
                self._full_cache.clear()
            f = self._full_cache[key] = nd.full(shape, fill, ctx=ctx, dtype="float64")
        return f

    def _pad_mask(self, sizes: tuple[int, ...], ctx: Any) -> Any:
        """1.0 at the padding positions of the packed ``(rows, _WIDTH)`` matrix (cached per layout)."""
        key = (sizes, ctx)
        m = self._mask_cache.get(key)
        if m is None:
            if len(self._mask_cache) > 64:
                self._mask_cache.clear()
            flags = np.concatenate([np.r_[np.zeros(n), np.ones(-n % _WIDTH)] for n in sizes])
            m = self._mask_cache[key] = nd.array(flags.reshape(-1, _WIDTH), ctx=ctx, dtype="float64")
        return m

    # ------------------------------------------------------------------------------ histograms
    def histogram(
        self, tensor: Any, bins: int, value_range: tuple[float, float] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`tripwire.NumpyBackend.histogram` on the array's context, with the same counts and
        edges: float64 edges (``histogram_edges`` over ``value_range``, or over the finite minimum
        and maximum, ``widened`` where they are equal), and each value's bin found by
        ``numpy.histogram(x, bins, range=(lo, hi))``'s arithmetic with a float64 ``lo``/``hi``, in
        float64 (the index from the scaled value, corrected by one either way against the edges;
        trial 30a F4: this arithmetic in float32, with float32-rounded edges, miscounted). Where
        numpy would not bin (equal edges: ``numpy_binnable``) the values are binned on the host
        (``bin_counts``). A sparse array's zeros left out are counted on the host."""
        values, n = _stored(_as_nd(tensor))
        absent = n - int(values.size)  # a sparse array's zeros left out: counted on the host
        x = _flat(values) if int(values.size) else values  # (MXNet cannot reshape an empty array)
        dtype = _np_dtype(x)
        if value_range is None:
            lo, hi = self._finite_range(x, dtype)
            if absent:
                lo, hi = min(lo, 0.0), max(hi, 0.0)
            value_range = (0.0, 1.0) if lo > hi else widened(lo, hi)
        edges = histogram_edges(value_range[0], value_range[1], bins)
        if int(x.size) == 0:
            host = np.zeros(bins, dtype=np.int64)
        elif not numpy_binnable(edges):
            host = bin_counts(x.astype("float64").asnumpy(), edges)
        else:
            xd = x.astype("float64")
            # first, last, last - first as arrays: a Python float given to an MXNet operator is
            # parsed from text, off by an ulp for some values (-0.00012797918579057297)
            first, last, span = (nd.array(np.array([v]), ctx=x.context, dtype="float64")
                                 for v in (edges[0], edges[-1], edges[-1] - edges[0]))
            keep = nd.broadcast_greater_equal(xd, first) * nd.broadcast_lesser_equal(xd, last)  # NaN and Inf fail
            xd = nd.where(keep, xd, nd.broadcast_to(first, shape=xd.shape))
            idx = nd.minimum((nd.broadcast_div(nd.broadcast_sub(xd, first), span) * bins).astype("int64"), bins - 1)
            # the edges, then the upper edges of the bins with the last one +Inf (numpy's last bin
            # is closed)
            e = nd.array(np.concatenate((edges, edges[1:-1], [np.inf])), ctx=x.context, dtype="float64")
            idx = idx - (xd < nd.take(e, idx)).astype("int64")
            idx = idx + (xd >= nd.take(e, idx + (bins + 1))).astype("int64")
            idx = nd.where(keep, idx.astype("float64"), self._full(xd.shape, -1.0, x.context))
            counts, _ = nd.histogram(idx, bins=bins, range=(0.0, float(bins)))
            host = counts.asnumpy().astype(np.int64)
        if absent:  # their bin: that of one zero
            host = host + absent * bin_counts(np.zeros(1), edges)
        return host, edges

    @staticmethod
    def _finite_range(x: Any, dtype: np.dtype) -> tuple[float, float]:
        """The least and greatest finite values of ``x`` (``(inf, -inf)`` when it has none)."""
        if int(x.size) == 0:
            return np.inf, -np.inf
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
            return np.inf, -np.inf
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
_WIDTH = 256  # elements per row of the packed matrix


def _quantity_keys(dtype: np.dtype, parsed: Sequence[tuple[str, float | None]]) -> dict[str, float | None]:
    """The quantities the reductions are computed from (sums of x, x*x and |x|, min/max, counts),
    with the threshold of each comparison rounded to the tensor's dtype."""
    keys: dict[str, float | None] = {}
    for base, thr in parsed:
        if thr is not None:
            keys[f"{base}:{thr!r}"] = _cast_threshold(thr, dtype)
        elif base == "nonfinite_count" and dtype.kind not in "fc":
            continue
        else:
            for k in _NEEDS.get(base, ()):
                keys[k] = None
    return keys


# Comparisons that the zero padding may satisfy (zeros and finite values it always adds to)
_PAD_COMPARED = ("fraction_gt:", "fraction_lt:", "fraction_abs_gt:")


def _pad_counts(key: str, members: list[int], keys: list[dict[str, float | None]]) -> np.ndarray:
    """Per tensor: 1.0 when its padding (zeros) counted for ``key``, else 0.0."""
    if key in ("zeros", "finite"):
        return np.ones(len(members))
    base = key.split(":", 1)[0]
    out = np.zeros(len(members))
    for i, u in enumerate(members):
        thr = keys[u].get(key)
        if thr is None:  # not asked of this tensor: its value is not used
            continue
        out[i] = float((0.0 > thr) if base in ("fraction_gt", "fraction_abs_gt") else (0.0 < thr))
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
    exact = q.get("abs_m2" if base.startswith("abs_") else "m2")  # two passes (see _exact_variances)
    if exact is not None:
        var = exact / n
    else:
        first = q["abs_sum" if base.startswith("abs_") else "sum"] / n
        with np.errstate(invalid="ignore", over="ignore"):
            var = q["sumsq"] / n - first * first  # float64 sums of x and x*x (one pass)
        var = max(var, 0.0) if not np.isnan(var) else var
    return var if base.endswith("variance") else float(np.sqrt(var))


_VAR_CONDITION = 25.0
"""``sum(x^2) / (n var)`` above this: the one-pass variance ``sum(x^2)/n - mean^2`` has lost more
than about 25 ulps of float64 to cancellation (a large mean against a small spread), so it is
computed again in two passes, as numpy does (the same bound as the torch backend's)."""


def _exact_variances(x: Any, q: dict[str, float], n: int) -> None:
    """``m2`` (``abs_m2``): the sum of squared deviations of ``x`` (``|x|``) from its mean, in two
    float64 passes on the array's context, where the one-pass formula from ``q``'s sums is not
    accurate (see :data:`_VAR_CONDITION`); nothing otherwise, or where the sums are not finite.
    ``n``: the tensor's elements; where ``x`` holds fewer (a sparse array's stored values), the
    others are zeros, each ``mean ** 2`` from the mean."""
    if "sumsq" not in q:
        return
    for total, key in (("sum", "m2"), ("abs_sum", "abs_m2")):
        if total not in q:
            continue
        sq, s = q["sumsq"], q[total]
        if not (np.isfinite(sq) and np.isfinite(s)) or sq == 0:  # (sq == 0: all zeros, variance 0 exactly)
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            m2 = sq - s * s / n
        if m2 > 0 and sq <= _VAR_CONDITION * m2:
            continue
        v = _flat(x).astype("float64")
        if key == "abs_m2":
            v = nd.abs(v)
        mean = s / n
        d = v - mean
        q[key] = float(nd.sum(d * d).asscalar()) + (n - int(x.size)) * mean * mean


__all__ = ["MXNetBackend"]
